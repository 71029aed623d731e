//! The MCP server of an interlink-p2p session.
//!
//! This crate will hold the rmcp stdio server the agent host starts (`interlink-p2p
//! mcp`): the tools (`whoami`, `discover`, `send_message`, …) over the network handle
//! of `interlink-net`, and the local state files (inbox, cursor, peers.json) the
//! agent-side delivery paths read. It is built by the MCP issue; nothing here yet.
#![deny(missing_docs)]

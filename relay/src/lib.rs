//! The interlink-p2p relay node.
//!
//! This crate will hold `interlink-relay`: a libp2p circuit-relay v2 server, a Kademlia
//! server whose mailbox records live in redb (keep-until-ack, merged with
//! [`interlink_core::mailbox`]), a bootstrap point for tailnets, and a metrics and
//! probe endpoint. It is built by the relay issue; it has no binary until then.
#![deny(missing_docs)]

//! The environment variables more than one crate names, in one list: the home, the
//! session, the node and its test knobs, read by the command line, the MCP server, the
//! relay and the bench, and removed by the test harness
//! (`interlink_testkit::SCRUBBED_ENV`). A variable one crate alone reads is named
//! there: `INTERLINK_RELAY` (`interlink_p2p::config`), `INTERLINK_AGENT_PAIRING`,
//! `INTERLINK_CODEX_BIN` and the Codex test knobs (`interlink_p2p::mcp`),
//! `INTERLINK_HOST_INBOX` (`interlink_mcp::host_inbox`), the relay's key and store
//! files (`interlink_relay::cli`). Code names them through these constants; nothing
//! spells an `INTERLINK_*` name twice.

/// The home directory (identity key, peers, sessions); default
/// `$XDG_CONFIG_HOME/interlink-p2p`, else `%APPDATA%\interlink-p2p` on Windows, else
/// `~/.config/interlink-p2p`.
pub const HOME: &str = "INTERLINK_HOME";
/// Pins the session id (else the agent host's, or a fresh one).
pub const SESSION: &str = "INTERLINK_SESSION";
/// The petname this user suggests to the identities it knocks (else the login name).
pub const NAME: &str = "INTERLINK_NAME";
/// The overlay name.
pub const NETWORK: &str = "INTERLINK_NETWORK";
/// Comma-separated listen multiaddrs (`none`: reachable through relays only).
pub const LISTEN: &str = "INTERLINK_LISTEN";
/// Comma-separated bootstrap multiaddrs (`/p2p/<id>` suffix optional).
pub const BOOTSTRAP: &str = "INTERLINK_BOOTSTRAP";
/// `0` (or `false`, `off`, `no`) turns mDNS off.
pub const MDNS: &str = "INTERLINK_MDNS";
/// `0` turns tailnet discovery (probing the online devices `tailscale status` lists)
/// off.
pub const TAILNET: &str = "INTERLINK_TAILNET";
/// The Tailscale CLI tailnet discovery runs (default: `tailscale` on `PATH`).
pub const TAILSCALE: &str = "INTERLINK_TAILSCALE";
/// The host's well-known port (TCP and QUIC) one agent session of the host holds
/// (default 7385); `0` turns it off.
pub const PORT: &str = "INTERLINK_PORT";
/// `1` turns channel mode on (messages pushed as MCP channel notifications).
pub const CHANNELS: &str = "INTERLINK_CHANNELS";

/// Test only: the live window in milliseconds (default 90 s).
pub const TEST_LIVE_WINDOW_MS: &str = "INTERLINK_TEST_LIVE_WINDOW_MS";
/// Test only: how long a silent session stays away, in milliseconds (default 3 days).
pub const TEST_AWAY_RETENTION_MS: &str = "INTERLINK_TEST_AWAY_RETENTION_MS";
/// Test only: moves this process's clock by this many milliseconds (may be negative).
pub const TEST_CLOCK_OFFSET_MS: &str = "INTERLINK_TEST_CLOCK_OFFSET_MS";
/// Test only: the re-announcement interval in milliseconds (default 30 s).
pub const TEST_HEARTBEAT_MS: &str = "INTERLINK_TEST_HEARTBEAT_MS";

/// Claude Code's session id in the MCP server's environment (not ours; read only).
pub const CLAUDE_SESSION: &str = "CLAUDE_CODE_SESSION_ID";
/// The inbox socket of the Claude Code session that started this process (not ours;
/// read only): Claude Code exports it to its hooks, commands and MCP servers.
pub const CLAUDE_MESSAGING_SOCKET: &str = "CLAUDE_CODE_MESSAGING_SOCKET";
/// The token that proves a connection to [`CLAUDE_MESSAGING_SOCKET`] comes from that
/// session's own child (read only).
pub const CLAUDE_MESSAGING_TOKEN: &str = "CLAUDE_CODE_MESSAGING_TOKEN";

//! Every environment variable interlink-p2p reads, in one list: the session, the node,
//! the agent side, the relay and the test knobs. Code names them through these
//! constants; nothing else spells an `INTERLINK_*` name.

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
/// Comma-separated relay multiaddrs, each ending in `/p2p/<relay id>`.
pub const RELAY: &str = "INTERLINK_RELAY";
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
/// `0` (or `false`, `off`, `no`) keeps messages out of Claude Code's own inbox socket:
/// the session then wakes its agent through the Stop hook (or channels) only.
pub const HOST_INBOX: &str = "INTERLINK_HOST_INBOX";
/// `1` lets the agent accept pair requests and add peers itself (unattended setups):
/// otherwise `accept_pair` and `add_peer` ask the human through MCP elicitation, or
/// change nothing and name the operator's command.
pub const AGENT_PAIRING: &str = "INTERLINK_AGENT_PAIRING";
/// The `codex` executable (else `codex` on `PATH`).
pub const CODEX_BIN: &str = "INTERLINK_CODEX_BIN";
/// The relay's key file.
pub const RELAY_KEY: &str = "INTERLINK_RELAY_KEY";
/// The relay's store file.
pub const RELAY_DB: &str = "INTERLINK_RELAY_DB";

/// Test only: the live window in milliseconds (default 90 s).
pub const TEST_LIVE_WINDOW_MS: &str = "INTERLINK_TEST_LIVE_WINDOW_MS";
/// Test only: how long a silent session stays away, in milliseconds (default 3 days).
pub const TEST_AWAY_RETENTION_MS: &str = "INTERLINK_TEST_AWAY_RETENTION_MS";
/// Test only: moves this process's clock by this many milliseconds (may be negative).
pub const TEST_CLOCK_OFFSET_MS: &str = "INTERLINK_TEST_CLOCK_OFFSET_MS";
/// Test only: the re-announcement interval in milliseconds (default 30 s).
pub const TEST_HEARTBEAT_MS: &str = "INTERLINK_TEST_HEARTBEAT_MS";
/// Test only: how long a `codex queue` run may take, in milliseconds.
pub const TEST_CODEX_TIMEOUT_MS: &str = "INTERLINK_TEST_CODEX_TIMEOUT_MS";
/// Test only: the first wait after a failed Codex hand-over, in milliseconds.
pub const TEST_CODEX_BACKOFF_MS: &str = "INTERLINK_TEST_CODEX_BACKOFF_MS";
/// Test only: how often saved Codex failures are retried, in milliseconds.
pub const TEST_CODEX_RETRY_MS: &str = "INTERLINK_TEST_CODEX_RETRY_MS";
/// Test only: the longest wait between Codex retries, in milliseconds.
pub const TEST_CODEX_RETRY_CAP_MS: &str = "INTERLINK_TEST_CODEX_RETRY_CAP_MS";

/// Claude Code's session id in the MCP server's environment (not ours; read only).
pub const CLAUDE_SESSION: &str = "CLAUDE_CODE_SESSION_ID";
/// The inbox socket of the Claude Code session that started this process (not ours;
/// read only): Claude Code exports it to its hooks, commands and MCP servers.
pub const CLAUDE_MESSAGING_SOCKET: &str = "CLAUDE_CODE_MESSAGING_SOCKET";
/// The token that proves a connection to [`CLAUDE_MESSAGING_SOCKET`] comes from that
/// session's own child (read only).
pub const CLAUDE_MESSAGING_TOKEN: &str = "CLAUDE_CODE_MESSAGING_TOKEN";

/// Variables a developer's shell may set that change what an `interlink-p2p` process
/// does: a harness starting one removes them, so the child gets exactly what its
/// caller passes (an inherited `CLAUDE_CODE_SESSION_ID` would pin every process to one
/// session id).
pub const INHERITED_BY_ACCIDENT: &[&str] = &[
    HOME,
    SESSION,
    CLAUDE_SESSION,
    // A test run from inside a Claude Code session must not post into it.
    CLAUDE_MESSAGING_SOCKET,
    CLAUDE_MESSAGING_TOKEN,
    NETWORK,
    LISTEN,
    BOOTSTRAP,
    MDNS,
    TAILNET,
    TAILSCALE,
    PORT,
    TEST_LIVE_WINDOW_MS,
    TEST_AWAY_RETENTION_MS,
    TEST_HEARTBEAT_MS,
];

/// The user's home directory: `HOME`, else (on Windows, where `HOME` is usually unset)
/// `USERPROFILE`. Claude Code and Codex keep their files under it on every platform.
pub fn user_home(env: impl Fn(&str) -> Option<String>) -> Option<std::path::PathBuf> {
    let nonempty = |k: &str| env(k).filter(|v| !v.trim().is_empty());
    nonempty("HOME")
        .or_else(|| cfg!(windows).then(|| nonempty("USERPROFILE")).flatten())
        .map(std::path::PathBuf::from)
}

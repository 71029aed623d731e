//! What the `interlink-p2p` command line uses of this crate, and nothing else: every
//! other module is private. The commands that run a session (`run`, `send`, `pair`,
//! `invite`, `join`) start it, route and send the way the MCP tools do; `peer` edits
//! the peers the way `add_peer` does; `wait` is the Stop hook; `mcp` serves.

pub use crate::{
    codex::CodexConfig,
    dates::utc,
    host_inbox::{HOST_INBOX, HostInbox, user_home},
    render::USER_SESSION_PREFIX,
    serve::{Options, ServeError, SessionSource, resolve_session, serve_stdio},
};

/// Starting a session node: identity, announcement, swarm, peers-policy follower.
pub mod session {
    pub use crate::session_node::{
        Describe, POLICY_PICKUP, StartError, follow_policy, load_identity, os_rng, session_spec,
        start_node, wait_listening,
    };
}

/// Resolving a message's target and routing it once the roster has seen it.
pub mod route {
    pub use crate::group_route::{Recipient, Routed, SkipReason, Skipped, route_group};
    pub use crate::sender::{
        RouteWaitError, Target, TargetError, Wait, is_seen, resolve_among_peers, route_when_seen,
        seen_sentence, seen_sessions, send_pairing_with, wait_on_roster,
    };
}

/// Editing `peers.json` as the MCP tools do, and this user's own key.
pub mod peers {
    pub use crate::peers::{
        AddError, Added, Peer, RemoveError, RenameError, add, list, own_key, remove, rename,
    };
}

/// The Claude Code Stop hook (`interlink-p2p wait`).
pub mod stop_hook {
    pub use crate::stop_hook::{
        Outcome, WaitError, render_messages, session_from_hook_input, wait,
    };
}

/// A running session's view of its network, kept in `network.json`.
pub mod network_view {
    pub use crate::network_view::{REWRITE_AT_LEAST, keep_written, lines};
}

/// Claims on files, as the commands without a node see them: the project of a
/// directory (asked of git), the board the home's running sessions keep, and who holds
/// a path.
pub mod claims {
    pub use crate::claims::{Seen, boards, claim_line, held_against, seen_from};
    pub use crate::project::{Project, detect as project_of};
}

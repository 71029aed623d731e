//! The one test kit of interlink-p2p, a dev-dependency of the crates' tests (and a
//! dependency of the bench and the relay's store benchmark):
//!
//! - [`ids`]: deterministic identities, session ids and message ids;
//! - [`git`]: repositories for the tests of claims on files;
//! - [`signed`]: signed envelopes, announcements, receipts and acks as a real node makes
//!   them, and the hostile variants a real node never makes (wrong signer, backdated,
//!   future-dated, copied id, oversized, forged signature);
//! - [`invite`]: invite codes altered after signing, or signed against the rules;
//! - [`mailbox`]: mailbox records, normalised as an honest sender puts them or raw;
//! - `node` (feature `node`): complete session nodes on the in-process memory transport,
//!   and bounded waits on their rosters and inboxes;
//! - [`process`]: the child-process harness (the `interlink-process` crate, which the
//!   user-facing `demo` command uses too, so it is a normal library without panics),
//!   and [`scrub_env`], which keeps a developer's environment out of its children.
//!
//! Test-kit code panics with a clear message on bad test input: it runs only in tests
//! and benchmarks, where a panic is the failure report.

// Only tests and benchmarks use this crate: a panic is their failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod git;
pub mod ids;
pub mod invite;
pub mod mailbox;
#[cfg(feature = "node")]
pub mod node;
pub mod signed;

pub use interlink_process as process;
use interlink_store::env::*;
// The builders used most, at the top (`interlink_testkit::message`, ...).
pub use ids::{identity, msg_id, session};

/// `interlink_net::Config::max_process_memory` for nodes an in-process test runs: a
/// test process holds several nodes, and under Wine (the Windows test run) a process
/// counts its whole mapped debug binary as working set (500 MB measured), which would
/// leave every connection denied by a session's 256 MiB cap.
pub const IN_PROCESS_MEMORY: Option<usize> = Some(8 << 30);
pub use mailbox::{raw_record, record};
pub use signed::{ack, forge, knock, message};

/// Variables a developer's shell may set that change what an `interlink-p2p` process
/// does: [`scrub_env`] removes them, so a child gets exactly what its caller passes (an
/// inherited `CLAUDE_CODE_SESSION_ID` would pin every process to one session id).
pub const SCRUBBED_ENV: &[&str] = &[
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

/// Removes every [`SCRUBBED_ENV`] variable from `cmd`'s environment.
pub fn scrub_env(cmd: &mut std::process::Command) -> &mut std::process::Command {
    for var in SCRUBBED_ENV {
        cmd.env_remove(var);
    }
    cmd
}

//! Starting a session node: the identity, what the session announces, the swarm, and
//! the loop that keeps the node's peers policy in step with `peers.json`.
//!
//! Shared by every command that runs a session — `interlink-p2p run` (headless),
//! `interlink-p2p send` (a short-lived sender, which never announces: it sets
//! [`interlink_net::Visibility::Sender`] on the spec) and `interlink-p2p mcp` — so
//! they sign, announce and take messages the same way.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use interlink_core::{
    Identity, SessionId,
    limits::{MAX_CWD_BYTES, MAX_GIT_LABEL_BYTES, MAX_SUMMARY_BYTES},
    wire::{DeliveryMode, HostKind},
};
use interlink_net::{Config, Handle, NetError, Node, Role, SessionSpec};
use interlink_store::keyfile::{self, KeyFileError};
use libp2p::Multiaddr;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::{paths::Home, policy};

/// How long [`wait_listening`] waits for the listeners before giving up.
pub(crate) const LISTEN_DEADLINE: Duration = Duration::from_secs(10);
/// After every configured listener has an address, how long to wait for more
/// addresses of the same listeners (one per interface for `0.0.0.0`).
const LISTEN_SETTLE: Duration = Duration::from_millis(150);
/// How often a running session checks whether `peers.json` changed.
pub(crate) const POLICY_POLL: Duration = Duration::from_millis(500);
/// How long after an edit of `peers.json` every running session of the home has
/// applied it (two polls and a margin). A pairing confirmation is sent only after it:
/// the requester acts on the confirmation at once, and its first message must not
/// reach a session of ours that still refuses it as a stranger.
pub const POLICY_PICKUP: Duration = Duration::from_millis(2 * 500 + 200);

/// The operating system's random number generator, as the core's `CryptoRng`.
pub fn os_rng() -> rand_core::UnwrapErr<getrandom::SysRng> {
    rand_core::UnwrapErr(getrandom::SysRng)
}

/// Loads this user's identity from `home`, creating it on first use.
/// Returns whether it was created.
pub fn load_identity(home: &Home) -> Result<(Identity, bool), KeyFileError> {
    keyfile::load_or_create(&home.identity(), &mut os_rng())
}

/// Something a session would announce breaks an announcement rule, or its node could
/// not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The identity key file could not be loaded or created.
    #[error("loading the identity from {}: {source}", .path.display())]
    Identity {
        /// The key file.
        path: PathBuf,
        /// What is wrong with the key file.
        source: KeyFileError,
    },
    /// The summary is too long or has control characters.
    #[error(
        "the summary is {len} bytes or has control characters; announcements allow at most \
         {MAX_SUMMARY_BYTES} bytes without newlines, tabs or escapes"
    )]
    Summary {
        /// Its length in bytes.
        len: usize,
    },
    /// The working directory cannot be announced.
    #[error(
        "the working directory {0:?} cannot be announced: at most {MAX_CWD_BYTES} bytes \
         without control characters"
    )]
    Cwd(String),
    /// The transport key could not be derived.
    #[error("deriving the transport key: {0}")]
    TransportKey(String),
    /// The node failed to start or stopped.
    #[error(transparent)]
    Net(#[from] NetError),
    /// No listener came up in time.
    #[error("no listen address came up within {LISTEN_DEADLINE:?}")]
    NoListenAddr,
}

/// Checks a summary against the announcement rules.
pub(crate) fn check_summary(summary: &str) -> Result<(), StartError> {
    if summary.len() > MAX_SUMMARY_BYTES || summary.chars().any(char::is_control) {
        return Err(StartError::Summary { len: summary.len() });
    }
    Ok(())
}

/// What a session announces, besides its identity and id.
#[derive(Clone, Debug)]
pub struct Describe {
    /// What the session is doing.
    pub summary: String,
    /// The working directory.
    pub cwd: PathBuf,
    /// The agent host.
    pub host: HostKind,
    /// How delivered messages reach the agent.
    pub delivery: DeliveryMode,
}

/// Loads the identity and checks everything the session announces.
pub fn session_spec(
    home: &Home,
    session: SessionId,
    describe: Describe,
) -> Result<SessionSpec, StartError> {
    let (identity, _) = load_identity(home).map_err(|source| StartError::Identity {
        path: home.identity(),
        source,
    })?;
    check_summary(&describe.summary)?;
    let cwd_text = describe.cwd.to_string_lossy().into_owned();
    if cwd_text.len() > MAX_CWD_BYTES || cwd_text.chars().any(char::is_control) {
        return Err(StartError::Cwd(cwd_text));
    }
    Ok(SessionSpec {
        identity: Arc::new(identity),
        session,
        git_label: git_label(&describe.cwd),
        project: crate::project::detect(&describe.cwd).map(|p| p.id),
        cwd: cwd_text,
        summary: describe.summary,
        host: describe.host,
        delivery: describe.delivery,
        visibility: interlink_net::Visibility::Announced,
    })
}

/// Derives the session's transport key, builds the swarm and spawns a session node on
/// the current tokio runtime.
pub fn start_node(spec: SessionSpec, config: &Config) -> Result<Node, StartError> {
    let key = spec
        .identity
        .transport_keypair(&spec.session)
        .map_err(|e| StartError::TransportKey(e.to_string()))?;
    info!(session = %spec.session, "starting session");
    let swarm = interlink_net::build_swarm(key, config)?;
    Ok(Node::spawn(
        swarm,
        config.clone(),
        Role::Session(Box::new(spec)),
    )?)
}

/// The name of the git root directory containing `dir` (the nearest ancestor with a
/// `.git` entry, a directory or a worktree's file), if any.
pub(crate) fn git_label(dir: &Path) -> Option<String> {
    let root = dir.ancestors().find(|d| d.join(".git").exists())?;
    let name = root.file_name()?.to_string_lossy().into_owned();
    (name.len() <= MAX_GIT_LABEL_BYTES && !name.chars().any(char::is_control)).then_some(name)
}

/// Waits until every configured listener has reported an address, then a little
/// longer for the other interfaces of wildcard listeners. Returns the addresses.
pub async fn wait_listening(
    handle: &Handle,
    wanted: &[Multiaddr],
) -> Result<Vec<Multiaddr>, StartError> {
    let deadline = tokio::time::Instant::now() + LISTEN_DEADLINE;
    loop {
        let have = handle.diagnostics().await?.listen_addrs;
        // Listening nowhere but through relays: wait for the first circuit address.
        let covered = if wanted.is_empty() {
            !have.is_empty()
        } else {
            wanted.iter().all(|w| have.iter().any(|a| same_shape(w, a)))
        };
        if covered {
            tokio::time::sleep(LISTEN_SETTLE).await;
            return Ok(handle.diagnostics().await?.listen_addrs);
        }
        if tokio::time::Instant::now() >= deadline {
            if have.is_empty() {
                return Err(StartError::NoListenAddr);
            }
            // Some listeners (e.g. a relay circuit) may take long; report what we have.
            return Ok(have);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// True when `actual` could be an address of the listener configured as `configured`:
/// the same protocols in the same order (`/ip4/0.0.0.0/tcp/0` → `/ip4/127.0.0.1/tcp/4711`).
fn same_shape(configured: &Multiaddr, actual: &Multiaddr) -> bool {
    configured.len() == actual.len()
        && configured
            .iter()
            .zip(actual.iter())
            .all(|(c, a)| c.tag() == a.tag())
}

/// Keeps the node's peers policy in step with `peers.json` until `cancel` fires or the
/// node stops: the file is checked every [`POLICY_POLL`]; a file that does not parse
/// keeps the policy in force (a half-edited file must neither open the gate nor lock
/// everyone out).
///
/// Create `watcher` *before* reading the policy the node starts with, so an edit made
/// in between is noticed rather than taken as already read.
pub async fn follow_policy(
    mut watcher: policy::Watcher,
    handle: Handle,
    cancel: CancellationToken,
) {
    let mut poll = tokio::time::interval(POLICY_POLL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = poll.tick() => match watcher.poll() {
                None => {}
                Some(Ok(policy)) => {
                    info!(peers = policy.len(), "peers.json changed; policy updated");
                    if handle.set_policy(policy).await.is_err() {
                        return;
                    }
                }
                Some(Err(e)) => warn!("keeping the current peers policy: {e}"),
            },
        }
    }
}

#[cfg(test)]
#[path = "session_node_tests.rs"]
mod tests;

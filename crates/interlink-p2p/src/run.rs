//! `interlink-p2p run`: a headless session (a node that announces itself, no MCP).
//!
//! Its stdout is a small machine-readable contract: once the node listens, each listen
//! address as a full multiaddr ending in `/p2p/<peer id>`, one per line, then `ready`,
//! then nothing more. Logs go to stderr. SIGTERM or SIGINT shuts it down cleanly: the
//! goodbye is published, so peers drop the session at once, and the exit code is 0.
//!
//! The session takes messages from its peers: delivered ones are appended to its inbox
//! (`<home>/sessions/<session id>/inbox.jsonl`), and the peers policy follows
//! `peers.json` while it runs.

use std::{
    io::Write,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use anyhow::{Context as _, bail};
use interlink_core::{
    SessionId,
    limits::{MAX_CWD_BYTES, MAX_GIT_LABEL_BYTES, MAX_SUMMARY_BYTES},
    session,
    wire::{DeliveryMode, HostKind},
};
use interlink_net::{Config, Delivery, Handle, Node, Role, SessionSpec};
use libp2p::{Multiaddr, multiaddr::Protocol};
use tokio::signal::unix::{SignalKind, signal};
use tracing::{info, warn};

use crate::{paths, policy};

/// How long `run` waits for its listeners before giving up.
const LISTEN_DEADLINE: Duration = Duration::from_secs(10);
/// After every configured listener has an address, how long to wait for more
/// addresses of the same listeners (one per interface for `0.0.0.0`).
const LISTEN_SETTLE: Duration = Duration::from_millis(150);
/// How often a running session checks whether `peers.json` changed.
const POLICY_POLL: Duration = Duration::from_secs(1);

/// What the session announces, besides its identity.
#[derive(Clone, Debug)]
pub struct Options {
    /// `--session`; else `INTERLINK_SESSION`, `CLAUDE_CODE_SESSION_ID`, random.
    pub session: Option<String>,
    /// `--summary`.
    pub summary: String,
    /// The working directory announced (the current directory).
    pub cwd: PathBuf,
}

/// Runs a headless session until SIGTERM or SIGINT. Writes the listen addresses and
/// `ready` to `out`.
///
/// The session takes messages: its inbox is `<home>/sessions/<session id>/`, and its
/// peers policy is `<home>/peers.json`, re-read whenever the file changes.
pub async fn run(
    home: &Path,
    mut config: Config,
    options: Options,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    // Handlers first: a SIGTERM that arrives right after `ready` must reach us, not
    // the default action (which would skip the goodbye).
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;

    let (session, source) = session::resolve(
        options.session.as_deref(),
        |k| std::env::var(k).ok(),
        &mut crate::os_rng(),
    )?;
    info!(%session, ?source, "session id");
    // Read the policy before the node exists: a malformed file stops the session
    // rather than letting it run with a policy nobody wrote.
    let mut watcher = policy::Watcher::new(home);
    config.delivery = Delivery {
        inbox_dir: Some(paths::session_dir(home, &session)?),
        policy: policy::load(home)?,
    };
    let spec = session_spec(home, session, options.summary, &options.cwd)?;
    let node = start_node(spec, &config)?;
    let handle = node.handle();

    let addrs = match wait_listening(&handle, &config.listen).await {
        Ok(addrs) => addrs,
        Err(e) => {
            node.shutdown().await;
            return Err(e);
        }
    };
    let peer = handle.peer_id();
    let mut lines = String::new();
    for addr in addrs {
        lines.push_str(&format!("{}\n", addr.with(Protocol::P2p(peer))));
    }
    lines.push_str("ready\n");
    if let Err(e) = out.write_all(lines.as_bytes()).and_then(|()| out.flush()) {
        node.shutdown().await;
        return Err(e).context("writing the listen addresses");
    }

    let mut poll = tokio::time::interval(POLICY_POLL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = term.recv() => { info!("SIGTERM: shutting down"); break; }
            _ = int.recv() => { info!("SIGINT: shutting down"); break; }
            _ = poll.tick() => match watcher.poll() {
                None => {}
                Some(Ok(policy)) => {
                    info!(peers = policy.len(), "peers.json changed; policy updated");
                    if handle.set_policy(policy).await.is_err() {
                        break;
                    }
                }
                // Keep the policy in force: a half-edited file must not open the gate
                // or lock everyone out.
                Some(Err(e)) => warn!("keeping the current peers policy: {e:#}"),
            },
        }
    }
    node.shutdown().await;
    Ok(())
}

/// Derives the session's transport key, builds the swarm and spawns a session node.
pub(crate) fn start_node(spec: SessionSpec, config: &Config) -> anyhow::Result<Node> {
    let key = spec
        .identity
        .transport_keypair(&spec.session)
        .context("deriving the transport key")?;
    info!(session = %spec.session, "starting session");
    let swarm = interlink_net::build_swarm(key, config)?;
    Ok(Node::spawn(
        swarm,
        config.clone(),
        Role::Session(Box::new(spec)),
    )?)
}

/// Loads the identity and checks everything the session announces.
pub(crate) fn session_spec(
    home: &Path,
    session: SessionId,
    summary: String,
    cwd: &Path,
) -> anyhow::Result<SessionSpec> {
    let (identity, _) = crate::load_identity(home)?;
    if summary.len() > MAX_SUMMARY_BYTES {
        bail!(
            "--summary is {} bytes; announcements allow at most {MAX_SUMMARY_BYTES}",
            summary.len()
        );
    }
    if summary.chars().any(char::is_control) {
        bail!("--summary must not contain control characters (newlines, tabs, escapes)");
    }
    let cwd_text = cwd.to_string_lossy().into_owned();
    if cwd_text.len() > MAX_CWD_BYTES || cwd_text.chars().any(char::is_control) {
        bail!(
            "the working directory {cwd_text:?} cannot be announced: at most {MAX_CWD_BYTES} \
             bytes without control characters"
        );
    }
    Ok(SessionSpec {
        identity: Arc::new(identity),
        session,
        git_label: git_label(cwd),
        cwd: cwd_text,
        summary,
        host: HostKind::Other,
        delivery: DeliveryMode::Poll,
    })
}

/// The name of the git root directory containing `dir` (the nearest ancestor with a
/// `.git` entry, a directory or a worktree's file), if any.
pub fn git_label(dir: &Path) -> Option<String> {
    let root = dir.ancestors().find(|d| d.join(".git").exists())?;
    let name = root.file_name()?.to_string_lossy().into_owned();
    (name.len() <= MAX_GIT_LABEL_BYTES && !name.chars().any(char::is_control)).then_some(name)
}

/// Waits until every configured listener has reported an address, then a little
/// longer for the other interfaces of wildcard listeners. Returns the addresses.
pub(crate) async fn wait_listening(
    handle: &Handle,
    wanted: &[Multiaddr],
) -> anyhow::Result<Vec<Multiaddr>> {
    let deadline = tokio::time::Instant::now() + LISTEN_DEADLINE;
    loop {
        let have = handle.diagnostics().await?.listen_addrs;
        let covered = wanted.iter().all(|w| have.iter().any(|a| same_shape(w, a)));
        if covered {
            tokio::time::sleep(LISTEN_SETTLE).await;
            return Ok(handle.diagnostics().await?.listen_addrs);
        }
        if tokio::time::Instant::now() >= deadline {
            if have.is_empty() {
                bail!("no listen address came up within {LISTEN_DEADLINE:?}");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_label_is_the_repository_root_name() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("eden");
        let deep = repo.join("src").join("deep");
        std::fs::create_dir_all(&deep).unwrap();
        assert_eq!(git_label(&deep), None);
        std::fs::create_dir(repo.join(".git")).unwrap();
        assert_eq!(git_label(&deep).as_deref(), Some("eden"));
        assert_eq!(git_label(&repo).as_deref(), Some("eden"));
        // A worktree or submodule has a `.git` file instead.
        let sub = deep.join("vendored");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join(".git"), "gitdir: ../x").unwrap();
        assert_eq!(git_label(&sub).as_deref(), Some("vendored"));
    }

    #[test]
    fn listen_shapes() {
        let p = |s: &str| s.parse::<Multiaddr>().unwrap();
        assert!(same_shape(
            &p("/ip4/0.0.0.0/tcp/0"),
            &p("/ip4/127.0.0.1/tcp/4711")
        ));
        assert!(same_shape(
            &p("/ip4/0.0.0.0/udp/0/quic-v1"),
            &p("/ip4/10.1.2.3/udp/5/quic-v1")
        ));
        assert!(!same_shape(
            &p("/ip4/0.0.0.0/tcp/0"),
            &p("/ip4/10.1.2.3/udp/5/quic-v1")
        ));
        assert!(!same_shape(&p("/ip4/0.0.0.0/tcp/0"), &p("/ip6/::1/tcp/5")));
    }
}

//! `interlink-p2p pair list|accept FP|reject FP`: the operator's decisions on pair
//! requests — the same as the MCP tools `list_pair_requests`, `accept_pair` and
//! `reject_pair`, over the same `pairing.json` ([`interlink_mcp::pairing`]).
//!
//! Accepting pins the requester's key in `peers.json`, then confirms to the session
//! that knocked from a short-lived session of this user (as `send` does), so the
//! requester's side pins this user too.

use std::{io::Write, time::Duration};

use anyhow::Context as _;
use interlink_core::{
    SessionId,
    wire::{DeliveryMode, EnvelopeKind, HostKind, SessionAddr},
};
use interlink_mcp::{
    pairing,
    paths::Home,
    session_node::{Describe, session_spec, start_node, wait_listening},
};
use interlink_net::{Config, Delivery, OutgoingMessage, SendError, SendOutcome};

/// How long the confirming session waits for its mailbox copy to leave before exiting.
const SETTLE: Duration = Duration::from_secs(3);

/// What `pair` does (also its command-line subcommands).
#[derive(Clone, Debug, clap::Subcommand)]
pub enum Action {
    /// List the pair requests waiting for your decision, and the ones you sent.
    List {
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Accept the request of the identity with fingerprint FP: pin its key under the
    /// name it suggests (or one derived from it) and confirm to its session.
    Accept {
        /// Fingerprint (or at least 4 hex digits of it or of the key).
        fingerprint: String,
        /// Longest wait for the requesting session to show on the overlay, in seconds.
        #[arg(long, value_name = "SECS", default_value_t = 5.0)]
        wait: f64,
    },
    /// Reject (discard) the request of the identity with fingerprint FP.
    Reject {
        /// Fingerprint (or at least 4 hex digits of it or of the key).
        fingerprint: String,
    },
}

/// Runs `pair`; `config` is used by `accept` to reach the requester.
/// `name` is the name this user offers in its confirmation ([`pairing::own_name`]).
pub async fn run(
    home: &Home,
    action: Action,
    config: Config,
    name: String,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    match action {
        Action::List { json } => {
            let state = pairing::load(home)?;
            if json {
                writeln!(
                    out,
                    "{}",
                    serde_json::json!({"incoming": state.incoming, "outgoing": state.outgoing})
                )?;
                return Ok(());
            }
            if state.incoming.is_empty() {
                writeln!(out, "no pair requests waiting")?;
            }
            for i in &state.incoming {
                writeln!(
                    out,
                    "{}  suggests {:?}  session {}  key {}",
                    i.fingerprint,
                    i.name.as_deref().unwrap_or("-"),
                    i.session,
                    i.identity_key
                )?;
            }
            for o in &state.outgoing {
                writeln!(out, "sent  {}  session {}", o.identity_key, o.session)?;
            }
        }
        Action::Accept { fingerprint, wait } => {
            let wait = Duration::try_from_secs_f64(wait).context("--wait: seconds")?;
            let accepted = pairing::accept(home, &fingerprint)?;
            let accepted_at = tokio::time::Instant::now();
            writeln!(
                out,
                "paired {} {}",
                accepted.petname,
                accepted.key.fingerprint()
            )?;
            let confirmation = confirm(home, config, &accepted, accepted_at, wait, &name).await;
            match confirmation {
                Ok(status) => writeln!(out, "confirmation {status}")?,
                Err(e) => writeln!(
                    out,
                    "confirmation not sent: {e:#} (its operator can run `interlink-p2p peer add \
                     NAME {}`)",
                    interlink_mcp::peers::own_key(home)
                        .map(|k| k.to_hex())
                        .unwrap_or_default()
                )?,
            }
        }
        Action::Reject { fingerprint } => {
            let r = pairing::reject(home, &fingerprint)?;
            writeln!(out, "rejected {}", r.fingerprint)?;
        }
    }
    Ok(())
}

/// Sends the `pair_accept` from a short-lived session; returns `delivered` or `queued`.
async fn confirm(
    home: &Home,
    mut config: Config,
    accepted: &pairing::Accepted,
    accepted_at: tokio::time::Instant,
    wait: Duration,
    name: &str,
) -> anyhow::Result<&'static str> {
    let session = SessionId::new(&accepted.request.session)?;
    let own = SessionId::new(format!(
        "pair-{:08x}",
        rand_core::Rng::next_u32(&mut crate::os_rng())
    ))?;
    config.delivery = Delivery {
        inbox_dir: None,
        policy: interlink_mcp::policy::load(home)?,
        pins_file: Some(home.pins()),
    };
    let describe = Describe {
        summary: "confirming a pair request".into(),
        cwd: std::env::current_dir().context("reading the current directory")?,
        host: HostKind::Other,
        delivery: DeliveryMode::Poll,
    };
    let spec = session_spec(home, own, describe)?;
    let node = start_node(spec, &config)?;
    let handle = node.handle();
    let result = async {
        wait_listening(&handle, &config.listen).await?;
        // The running sessions of this home admit the new peer before it hears it may
        // write (overlaps the start-up above).
        tokio::time::sleep_until(accepted_at + interlink_mcp::session_node::POLICY_PICKUP).await;
        let deadline = tokio::time::Instant::now() + wait;
        let to = SessionAddr {
            key: accepted.key,
            session,
        };
        loop {
            let msg = OutgoingMessage {
                to: to.clone(),
                kind: EnvelopeKind::PairAccept,
                text: None,
                task_id: None,
                status: None,
                in_reply_to: None,
                name: Some(name.to_owned()),
                group: None,
            };
            match handle.send(msg).await {
                Err(SendError::NotOnRoster(_)) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Ok(SendOutcome::Delivered(_)) => return Ok("delivered"),
                Ok(SendOutcome::Queued { .. }) => {
                    let _ = handle.settle(SETTLE).await;
                    return Ok("queued");
                }
                Err(e) => return Err(anyhow::Error::from(e)),
            }
        }
    }
    .await;
    node.shutdown().await;
    result
}

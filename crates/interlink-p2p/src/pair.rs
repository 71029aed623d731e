//! `interlink-p2p pair list|accept FP|reject FP`: the operator's decisions on pair
//! requests — the same as the MCP tools `list_pair_requests`, `accept_pair` and
//! `reject_pair`, over the same `pairing.json` ([`interlink_store::pairing`]).
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
use interlink_mcp::cli::session::{Describe, session_spec, start_node, wait_listening};
use interlink_net::{Config, Delivery, OutgoingMessage, SendError, SendOutcome};
use interlink_store::{pairing, paths::Home};

use crate::pairing_session::{PAIR_SESSION, PairingSession};

/// How long the confirming session waits for its mailbox copy to leave before exiting.
const SETTLE: Duration = Duration::from_secs(3);

/// What `pair` does (also its command-line subcommands).
#[derive(Clone, Debug, clap::Subcommand)]
pub enum Action {
    /// List the pair requests waiting for your decision, and the ones you sent.
    #[command(
        after_help = "Examples:\n  interlink-p2p pair list\n  interlink-p2p pair list --json"
    )]
    List {
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Accept the request of the identity with fingerprint FP: pin its key under the
    /// name it suggests (or one derived from it) and confirm to its session.
    #[command(
        after_help = "Examples:\n  interlink-p2p pair accept 3f2a-9c41-77b0\n  interlink-p2p pair accept 3f2a --relay /dns4/relay.example.net/tcp/4001/p2p/12D3KooW…"
    )]
    Accept {
        /// Fingerprint (or at least 4 hex digits of it or of the key).
        fingerprint: String,
        /// Longest wait for the requesting session to show on the overlay, in seconds.
        #[arg(long, value_name = "SECS", default_value_t = 5.0)]
        wait: f64,
    },
    /// Reject (discard) the request of the identity with fingerprint FP.
    #[command(after_help = "Examples:\n  interlink-p2p pair reject 3f2a-9c41-77b0")]
    Reject {
        /// Fingerprint (or at least 4 hex digits of it or of the key).
        fingerprint: String,
    },
    /// Ask an identity on the overlay to pair: knock on one of its sessions and wait
    /// for its operator's answer. If it asked you first, this accepts it.
    #[command(
        after_help = "Examples:\n  interlink-p2p pair request 3f2a-9c41-77b0\n  \
                            interlink-p2p pair request 3f2a --name carol --wait 300\n  \
                            interlink-p2p pair request carol   (a peer that lost you: it \
                            confirms again)"
    )]
    Request {
        /// Its fingerprint or key prefix (from `interlink-p2p peers`), or a peer's name
        /// to ask again.
        target: String,
        /// The session to knock [default: chosen by the routing rules]
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// The name to give it here once it accepts [default: the name it suggests]
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
        /// Longest wait for it to show on the overlay, then for its answer, in seconds.
        #[arg(long, value_name = "SECS", default_value_t = 120.0)]
        wait: f64,
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
            let state = pairing::current(home, config.clock.now_ms())?;
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
            let wait = Duration::try_from_secs_f64(wait).map_err(|_| {
                crate::UsageError(format!(
                    "--wait {wait}: expected a non-negative number of seconds"
                ))
            })?;
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
                Err(e) => anyhow::bail!(
                    "{} is a peer here now, but the confirmation was not sent: {e:#}. Until it \
                     arrives their side does not admit you: check `interlink-p2p peers`, then \
                     run `interlink-p2p pair request {}` to ask again (or their operator runs \
                     `interlink-p2p peer add NAME {}`)",
                    accepted.petname,
                    accepted.petname,
                    interlink_mcp::cli::peers::own_key(home)
                        .map(|k| k.to_hex())
                        .unwrap_or_default()
                ),
            }
        }
        Action::Request {
            target,
            session,
            name: petname,
            wait,
        } => {
            let wait = Duration::try_from_secs_f64(wait).map_err(|_| {
                crate::UsageError(format!(
                    "--wait {wait}: expected a non-negative number of seconds"
                ))
            })?;
            let ps = PairingSession::start(
                home,
                config,
                SessionId::new(PAIR_SESSION)?,
                "asking to pair",
            )
            .await?;
            let result = request(home, &ps, &target, session, petname, wait, &name, out).await;
            ps.shutdown().await;
            result?;
        }
        Action::Reject { fingerprint } => {
            let r = pairing::reject(home, &fingerprint)?;
            writeln!(out, "rejected {}", r.fingerprint)?;
        }
    }
    Ok(())
}

/// `pair request`: knocks on `target` from the pairing session and waits for the
/// answer (or accepts at once when `target` asked first).
#[allow(clippy::too_many_arguments)]
async fn request(
    home: &Home,
    ps: &PairingSession,
    target: &str,
    session: Option<String>,
    petname: Option<String>,
    wait: Duration,
    name: &str,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    if let Some(p) = &petname
        && !interlink_core::wire::is_valid_name(p)
    {
        return Err(crate::UsageError(format!(
            "--name {p:?}: use 1-32 characters from A-Z a-z 0-9 . _ -"
        ))
        .into());
    }
    let policy = interlink_store::policy::load(home)?;
    // A peer's name, else a request waiting here (its sender may be gone from the
    // overlay by now), else an identity on the overlay.
    let waiting = pairing::request(home, target)
        .ok()
        .and_then(|i| i.identity_key.parse::<interlink_core::IdentityKey>().ok());
    let key = match (policy.get(target.trim()), waiting) {
        (Some(k), _) => *k,
        (None, Some(k)) => k,
        (None, None) => ps.find_identity(target, wait).await?,
    };
    let asked_first = pairing::current(home, ps.clock.now_ms())?
        .incoming
        .into_iter()
        .find(|i| i.identity_key == key.to_hex());
    if let Some(theirs) = asked_first.filter(|_| !policy.contains(&key)) {
        let accepted = pairing::accept(home, &theirs.fingerprint)?;
        ps.admit_edited_peers().await?;
        let to = SessionAddr {
            key,
            session: SessionId::new(&accepted.request.session)?,
        };
        let status = ps.send(to, EnvelopeKind::PairAccept, name, None).await?;
        writeln!(out, "paired {} {}", accepted.petname, key.fingerprint())?;
        eprintln!("pair: it had asked to pair too; confirmation {status}");
        return Ok(());
    }
    let session = match session {
        Some(s) => SessionId::new(s.trim())?,
        None => ps.live_session(key, None, wait).await?,
    };
    pairing::record_outgoing(home, &key, &session, petname, ps.clock.now_ms())?;
    let to = SessionAddr {
        key,
        session: session.clone(),
    };
    let status = ps.send(to, EnvelopeKind::Knock, name, None).await?;
    writeln!(out, "requested {} {status}", key.fingerprint())?;
    eprintln!(
        "pair: knock {status} to session {session}; waiting up to {wait:?} for its operator \
         (they run `interlink-p2p pair accept {}`)",
        ps.own.key.fingerprint()
    );
    match ps.wait_accept(&key, wait).await? {
        Some(petname) => writeln!(out, "paired {petname} {}", key.fingerprint())?,
        None => eprintln!(
            "pair: no answer yet; the request stays open. Once they accept, run this command \
             again to take their confirmation."
        ),
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
        policy: interlink_store::policy::load(home)?,
        pins_file: Some(home.pins()),
        address_book: Some(home.addresses()),
    };
    let describe = Describe {
        summary: "confirming a pair request".into(),
        cwd: std::env::current_dir().context("reading the current directory")?,
        host: HostKind::Other,
        delivery: DeliveryMode::Poll,
    };
    let spec = session_spec(home, own, describe)?;
    // Gone in seconds: the host's well-known port is for the sessions that stay.
    config.hold_well_known_port = false;
    let node = start_node(spec, &config)?;
    let handle = node.handle();
    let result = async {
        wait_listening(&handle, &config.listen).await?;
        // The running sessions of this home admit the new peer before it hears it may
        // write (overlaps the start-up above).
        tokio::time::sleep_until(accepted_at + interlink_mcp::cli::session::POLICY_PICKUP).await;
        let deadline = tokio::time::Instant::now() + wait;
        let to = SessionAddr {
            key: accepted.key,
            session,
        };
        // An acceptance could be queued at once (it needs no key), but goes live when
        // the requester is on the roster: give it until `wait` to show.
        interlink_mcp::cli::route::wait_on_roster(&handle, &to, deadline).await?;
        loop {
            let msg = OutgoingMessage {
                to: to.clone(),
                kind: EnvelopeKind::PairAccept,
                text: None,
                task_id: None,
                status: None,
                in_reply_to: None,
                also_about: Vec::new(),
                name: Some(name.to_owned()),
                group: None,
                invite: None,
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

/// Decide on pair requests: list them, accept one (pin the key, confirm to the
/// requesting session) or reject one.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  interlink-p2p pair list\n  interlink-p2p pair accept 3f2a-9c41-77b0\n  interlink-p2p pair request 3f2a --name carol\n  interlink-p2p pair reject 3f2a"
)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
    #[command(flatten)]
    net: crate::config::NetArgs,
}

/// `interlink-p2p pair`.
pub fn command(args: Args, ctx: &crate::Ctx) -> anyhow::Result<std::process::ExitCode> {
    let config = args.net.config(&ctx.settings)?;
    let home = ctx.home()?;
    crate::ctx::runtime()?.block_on(run(
        &home,
        args.action,
        config,
        ctx.own_name(),
        &mut std::io::stdout(),
    ))?;
    Ok(std::process::ExitCode::SUCCESS)
}

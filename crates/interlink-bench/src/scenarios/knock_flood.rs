//! `knock-flood`: a real MCP session (`interlink-p2p mcp`, the follow worker and all,
//! stdin held open by the bench as its host) knocked at by 300 fresh identities
//! through 30 bare swarms with fresh transport keys, as fast as the victim answers,
//! while an in-process paired session sends it 1 KiB messages one at a time.
//! Measured: the paired live path's p50/p99 idle and during the flood, the victim's
//! CPU time per knock sent (`/proc/<pid>/stat`, user + system, over the flood), and
//! how many knocks it held and refused. Targets (issue 48): paired p50 within 2x of
//! idle, under 1 ms of victim CPU per knock.
//!
//! Every knock is a well-formed, validly signed knock of a fresh identity (10 per
//! swarm, in turn, each knock with a new id): what a stranger may send a session. Every
//! other identity's knocks carry a random invite secret sealed to the victim (as a
//! joiner's do, but a secret the victim never issued): each costs it an HPKE open.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use futures::StreamExt as _;
use interlink_core::{
    Identity, IdentityKey, MsgId, SessionId,
    identity::SealingKey,
    trust::PeerPolicy,
    wire::{
        DeliverRequest, Envelope, EnvelopeKind, INVITE_SECRET_BYTES, RefusalCode, SessionAddr,
        Signed, VERSION,
    },
};
use interlink_net::{
    Config, Delivery, OutgoingMessage,
    behaviour::{Behaviour, BehaviourEvent},
};
use libp2p::{Multiaddr, PeerId, Swarm, multiaddr::Protocol, request_response, swarm::SwarmEvent};
use serde_bytes::ByteBuf;

use super::{Scenario, mcp::Session};
use crate::{
    Context,
    fleet::{self, Fleet},
    process::{self, clock_ticks_per_second},
    progress,
    report::{Measurement, Row},
    stats,
};

pub(crate) const SCENARIO: Scenario = Scenario {
    name: "knock-flood",
    about: "an MCP session knocked at by 300 fresh identities (30 fresh transport keys) as fast as it answers; victim CPU per knock, knocks held/refused, a paired sender's live p50/p99",
    run: |ctx| Box::pin(run(ctx)),
};

/// Fresh identities knocking, and the swarms (fresh transport keys) they knock through.
const IDENTITIES: usize = 300;
const SWARMS: usize = 30;
/// Knock requests each swarm keeps unanswered.
const IN_FLIGHT: usize = 4;
const FLOOD: Duration = Duration::from_secs(15);
const QUICK_FLOOD: Duration = Duration::from_secs(5);
const BASELINE_SENDS: usize = 200;
const READY: Duration = Duration::from_secs(30);
const TARGET_P50_FACTOR: f64 = 2.0;
const TARGET_CPU_PER_KNOCK_MS: f64 = 1.0;

/// What the victim answered the knocks.
#[derive(Debug, Default, Clone, Copy)]
struct Answers {
    held: usize,
    over_budget: usize,
    other_refusal: usize,
    failed: usize,
    connections: usize,
}

impl Answers {
    fn add(&mut self, o: Answers) {
        self.held += o.held;
        self.over_budget += o.over_budget;
        self.other_refusal += o.other_refusal;
        self.failed += o.failed;
        self.connections += o.connections;
    }

    fn answered(&self) -> usize {
        self.held + self.over_budget + self.other_refusal
    }
}

async fn run(ctx: &Context) -> anyhow::Result<Vec<Row>> {
    let p2p = match &ctx.p2p {
        Ok(p) => p.path.clone(),
        Err(why) => return Ok(vec![Row::skipped("knock flood", why.clone())]),
    };
    let flood = if ctx.quick { QUICK_FLOOD } else { FLOOD };

    // The paired sender, in process, listening on loopback: the victim bootstraps to it.
    let sender = fleet::identities(1).remove(0);
    let home = tempfile::tempdir().context("temporary home")?;
    let victim_key = process::create_identity(&p2p, home.path()).await?;
    process::cli(
        &p2p,
        home.path(),
        &["peer", "add", "sender", &sender.public().to_hex()],
        None,
    )
    .await?;
    let victim_identity: IdentityKey = victim_key.parse()?;
    let victim_session = SessionId::new("victim")?;
    let mut policy = PeerPolicy::new();
    policy.add("victim", victim_identity)?;
    let dir = tempfile::tempdir()?;
    let config = Config {
        listen: vec![fleet::loopback_tcp()],
        mdns: false,
        delivery: Delivery {
            inbox_dir: Some(dir.path().to_owned()),
            policy,
            pins_file: None,
            address_book: None,
        },
        ..Config::default()
    };
    let mut fleet = Fleet::default();
    fleet.push(fleet::spawn_session(
        &sender,
        &SessionId::new("sender")?,
        config,
    )?);
    let handle = fleet.handles().remove(0);
    let boot = fleet::first_listen_addr(&handle, READY).await?;
    let boot = boot.with(Protocol::P2p(handle.peer_id())).to_string();

    // The victim: an MCP session with the bench as its host (stdin kept open).
    let args = [
        "--session",
        "victim",
        "--listen",
        "/ip4/127.0.0.1/tcp/0",
        "--no-mdns",
        "--bootstrap",
        boot.as_str(),
    ];
    let (victim, _) = Session::start(&p2p, home.path(), &args).await?;
    let mut events = handle.events();
    fleet::wait_visible(
        &handle,
        &mut events,
        &victim_key,
        Some(&victim_session),
        READY,
    )
    .await
    .context("the victim never appeared on the sender's roster")?;
    let (victim_peer, addr, sealing) =
        victim_address(&handle, &victim_identity, &victim_session).await?;
    let to = SessionAddr {
        key: victim_identity,
        session: victim_session.clone(),
    };

    let pid = victim.pid;
    let body = "x".repeat(1024);
    for _ in 0..20 {
        handle
            .send(OutgoingMessage::text(to.clone(), body.clone()))
            .await?;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let baseline = fleet::live_latencies(&handle, &to, &body, BASELINE_SENDS).await?;
    let idle_p50 = stats::quantile(&baseline, 0.5).context("no paired send delivered idle")?;
    let mut rows = vec![Row::ok(
        "paired live path, no load",
        stats::summary("latency", &baseline, None),
    )];

    let identities: Arc<Vec<Identity>> = Arc::new(
        (0..IDENTITIES)
            .map(|_| Identity::generate(&mut interlink_testkit::ids::sys_rng()))
            .collect(),
    );
    let ticks = clock_ticks_per_second().await;
    // First the flood alone, so the victim's CPU time is the knocks' (a paired sender
    // at full speed costs it far more than the knocks do); then the flood again, fresh
    // swarms, with the paired sender measuring the live path.
    for (case, paired) in [
        ("knocks alone: the victim's CPU", false),
        ("knocks with a paired sender: its live path", true),
    ] {
        progress(format_args!(
            "knock-flood: {IDENTITIES} identities through {SWARMS} swarms for {flood:?}, {case}"
        ));
        let cpu_before = process::sample(pid)?.cpu_ticks;
        let until = Instant::now() + flood;
        let started = Instant::now();
        let attackers = spawn_attackers(
            &Target {
                peer: victim_peer,
                addr: addr.clone(),
                to: to.clone(),
                sealing,
            },
            &identities,
            until,
        );
        let (mut latency, not_delivered) = if paired {
            fleet::live_until(&handle, &to, &body, until).await
        } else {
            (Vec::new(), 0)
        };
        let answers = tokio::task::spawn_blocking(move || attackers.join())
            .await?
            .map_err(|_| anyhow::anyhow!("an attacker thread panicked"))??;
        let took = started.elapsed();
        let cpu_after = process::sample(pid)?.cpu_ticks;
        let mut m = Vec::new();
        if paired {
            latency.sort();
            m = stats::summary("latency", &latency, None);
            if let Some(p50) = stats::quantile(&latency, 0.5) {
                m.push(
                    Measurement::new(
                        "latency_p50_over_idle",
                        p50.as_secs_f64() / idle_p50.as_secs_f64().max(1e-9),
                        "x",
                    )
                    .at_most(TARGET_P50_FACTOR),
                );
            }
            m.push(Measurement::count("delivered", latency.len()));
            m.push(Measurement::count("not_delivered", not_delivered));
        }
        #[allow(clippy::cast_precision_loss)] // tick and knock counts far below 2^52
        let cpu_ms = cpu_after.saturating_sub(cpu_before) as f64 * 1000.0 / ticks.max(1) as f64;
        let knocks = answers.answered();
        #[allow(clippy::cast_precision_loss)]
        {
            m.push(Measurement::new("victim_cpu", cpu_ms, "ms"));
            let per_knock =
                Measurement::new("victim_cpu_per_knock", cpu_ms / knocks.max(1) as f64, "ms");
            // With the paired sender's messages in it, it is no knock's cost alone.
            m.push(if paired {
                per_knock
            } else {
                per_knock.at_most(TARGET_CPU_PER_KNOCK_MS)
            });
            m.push(Measurement::new(
                "knocks_per_s",
                knocks as f64 / took.as_secs_f64().max(1e-9),
                "1/s",
            ));
        }
        m.push(Measurement::count("knocks_answered", knocks));
        m.push(Measurement::count("knocks_held", answers.held));
        m.push(Measurement::count(
            "knocks_over_budget",
            answers.over_budget,
        ));
        m.push(Measurement::count(
            "knocks_refused_otherwise",
            answers.other_refusal,
        ));
        m.push(Measurement::count("requests_failed", answers.failed));
        m.push(Measurement::count(
            "attacker_connections",
            answers.connections,
        ));
        rows.push(if answers.connections == 0 || knocks == 0 {
            Row::failed(case, "the attackers' knocks never reached the victim", m)
        } else {
            Row::ok(case, m)
        });
    }
    drop(victim);
    fleet.shutdown(Duration::from_secs(3)).await;
    Ok(rows)
}

/// The victim's PeerId, a loopback address and its sealing key, from its announcement.
async fn victim_address(
    handle: &interlink_net::Handle,
    key: &IdentityKey,
    session: &SessionId,
) -> anyhow::Result<(PeerId, Multiaddr, SealingKey)> {
    let roster = handle.roster().await?;
    let a = roster
        .iter()
        .filter(|v| v.key == *key)
        .flat_map(|v| &v.sessions)
        .find(|s| s.addr.session == *session)
        .map(|s| &s.announcement)
        .context("the victim is not on the roster")?;
    let peer = PeerId::from_bytes(&a.peer_id).context("the victim's PeerId")?;
    let addr: Multiaddr = a
        .addrs
        .iter()
        .find(|a| a.contains("127.0.0.1") && a.contains("/tcp/"))
        .context("the victim announced no loopback TCP address")?
        .parse()?;
    Ok((peer, addr, a.sealing.key))
}

/// Starts the attackers on a thread and runtime of their own, as another process
/// would: [`SWARMS`] swarms with fresh transport keys, each knocking as its share of
/// `identities` until `until`.
fn spawn_attackers(
    target: &Target,
    identities: &Arc<Vec<Identity>>,
    until: Instant,
) -> std::thread::JoinHandle<std::io::Result<Answers>> {
    let (target, identities) = (target.clone(), identities.clone());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(async move {
            let per = IDENTITIES / SWARMS;
            let tasks: Vec<_> = (0..SWARMS)
                .map(|i| {
                    let (target, ids) = (target.clone(), identities.clone());
                    tokio::spawn(
                        async move { knock(target, ids, i * per..(i + 1) * per, until).await },
                    )
                })
                .collect();
            let mut answers = Answers::default();
            for t in tasks {
                answers.add(t.await.unwrap_or_default());
            }
            Ok::<_, std::io::Error>(answers)
        })
    })
}

/// Where the attackers knock.
#[derive(Clone)]
struct Target {
    peer: PeerId,
    addr: Multiaddr,
    to: SessionAddr,
    sealing: SealingKey,
}

/// A signed knock from `who` to `to`, with a random invite secret sealed to `sealing`
/// when `with_invite`.
fn knock_envelope(
    who: &Identity,
    to: &SessionAddr,
    sealing: &SealingKey,
    with_invite: bool,
) -> Signed<Envelope> {
    let mut rng = interlink_testkit::ids::sys_rng();
    let mut env = interlink_testkit::signed::envelope(
        who.public(),
        &SessionId::new("out").unwrap_or_else(|_| unreachable!("a valid session id")),
        to,
        MsgId::random(&mut rng),
        interlink_net::Clock::system().now_ms(),
    )
    .kind(EnvelopeKind::Knock)
    .name("knocker")
    .body();
    if with_invite {
        // Random bytes by way of two random ids (the bench has no RNG crate of its own).
        let mut secret = [0u8; INVITE_SECRET_BYTES];
        for chunk in secret.chunks_mut(16) {
            let id = MsgId::random(&mut rng);
            chunk.copy_from_slice(&id.as_bytes()[..chunk.len()]);
        }
        // A failed seal leaves a plain knock: still a knock to count.
        let _ = env.seal_invite(&secret, sealing, &mut rng);
    }
    interlink_testkit::signed::sign(env, who)
}

/// One attacking swarm (a fresh transport key): knocks at the target as the
/// identities `mine` of `ids` in turn, [`IN_FLIGHT`] requests unanswered, until `until`.
async fn knock(
    target: Target,
    ids: Arc<Vec<Identity>>,
    mine: std::ops::Range<usize>,
    until: Instant,
) -> Answers {
    let Target {
        peer: victim,
        addr,
        to,
        sealing,
    } = target;
    let config = super::hostile_load::attacker_config();
    let mut swarm: Swarm<Behaviour> = interlink_testkit::node::raw_swarm(&config);
    let mut answers = Answers::default();
    swarm.add_peer_address(victim, addr.clone());
    if swarm.dial(addr).is_err() {
        answers.failed += 1;
        return answers;
    }
    let mut next = 0usize;
    let mut send = |swarm: &mut Swarm<Behaviour>| {
        let i = mine.start + next % mine.len().max(1);
        next += 1;
        let knock = knock_envelope(&ids[i], &to, &sealing, i % 2 == 1);
        swarm.behaviour_mut().deliver.send_request(
            &victim,
            DeliverRequest {
                v: VERSION,
                envelopes: vec![ByteBuf::from(knock.to_bytes())],
            },
        );
    };
    for _ in 0..IN_FLIGHT {
        send(&mut swarm);
    }
    while Instant::now() < until {
        let left = until.saturating_duration_since(Instant::now());
        let Ok(ev) = tokio::time::timeout(left, swarm.select_next_some()).await else {
            break;
        };
        let done = match ev {
            SwarmEvent::Behaviour(BehaviourEvent::Deliver(request_response::Event::Message {
                message: request_response::Message::Response { response, .. },
                ..
            })) => {
                match response.results.first().and_then(|r| r.refused.as_ref()) {
                    None => answers.held += 1,
                    Some(r) if r.code == RefusalCode::OverBudget => answers.over_budget += 1,
                    Some(r) => {
                        tracing::debug!(%r, "attacker: knock refused");
                        answers.other_refusal += 1;
                    }
                }
                true
            }
            SwarmEvent::Behaviour(BehaviourEvent::Deliver(
                request_response::Event::OutboundFailure { error, .. },
            )) => {
                tracing::debug!(%error, "attacker: knock failed");
                answers.failed += 1;
                true
            }
            SwarmEvent::ConnectionEstablished { .. } => {
                answers.connections += 1;
                false
            }
            _ => false,
        };
        if done && Instant::now() < until {
            send(&mut swarm);
        }
    }
    answers
}

//! `hostile-load`: a session process (`interlink-p2p run`) flooded with mailbox copies
//! by strangers that follow the wire rules — first one peer at full speed, then a
//! Sybil swarm of fresh peers (2, then 16 requests in flight each), then 64 strangers
//! each holding a kept live-delivery stream with a large request item half written,
//! then the same writing items too large for a stream — while a paired session sends
//! it 1 KiB messages one at a time. Measured: the victim's RSS above its idle level, the paired live path's
//! p50/p99 before and during each flood, and what the victim answered the floods.
//! Targets (issue 13): RSS ≤ 64 MiB above idle, paired p99 ≤ 10 ms.
//!
//! Each copy is a well-formed, validly signed record of a fresh mailbox (a random
//! owner), about 1.9 MB of envelopes from the attacker: the costliest thing a stranger
//! can hand a holder, since it is verified, merged and kept.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use futures::StreamExt as _;
use interlink_core::{
    Identity, MsgId, SessionId,
    seal::Sealed,
    trust::PeerPolicy,
    wire::{
        Envelope, EnvelopeKind, MailboxOp, MailboxOutcome, MailboxRequest, SessionAddr, Signed,
        VERSION,
    },
};
use interlink_net::{
    Config, Delivery, OutgoingMessage,
    behaviour::{Behaviour, BehaviourEvent},
};
use libp2p::{Multiaddr, PeerId, Swarm, multiaddr::Protocol, request_response, swarm::SwarmEvent};
use serde_bytes::{ByteArray, ByteBuf};

use super::Scenario;
use crate::{
    Context,
    fleet::{self, Fleet},
    process::{self, Proc},
    progress,
    report::{Measurement, Row},
    stats,
};

pub(crate) const SCENARIO: Scenario = Scenario {
    name: "hostile-load",
    about: "a session process flooded with 1.9 MB mailbox copies by one stranger, then 32 fresh ones (2, then 16 requests in flight each); its RSS above idle and a paired sender's live p99",
    run: |ctx| Box::pin(run(ctx)),
};

const TARGET_RSS_GROWTH_MIB: f64 = 64.0;
const TARGET_P99_MS: f64 = 10.0;
/// Distinct mailbox copies the attackers cycle through.
const RECORDS: usize = 48;
/// Envelopes per copy, and the size of each one's (opaque) sealed body.
const ENVELOPES: usize = 30;
const BODY_BYTES: usize = 60_000;
const SYBILS: usize = 32;
/// The kept-stream places a recipient serves (`live_stream::MAX_INBOUND_STREAMS`).
const STREAM_PLACES: usize = 64;
/// A request item just under what a kept stream takes (128 KiB): the most an attacker
/// makes the victim hold per place.
const HELD_ITEM_BYTES: usize = 127 * 1024;
/// A request item past what a kept stream takes: the victim ends each such stream, and
/// the attacker opens the next at once.
const OVERSIZED_ITEM_BYTES: usize = 2 * 1024 * 1024;
const FLOOD: Duration = Duration::from_secs(15);
const QUICK_FLOOD: Duration = Duration::from_secs(5);
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
const BASELINE_SENDS: usize = 200;
const READY: Duration = Duration::from_secs(20);

/// What the attackers of one case do.
#[derive(Clone, Copy, Debug)]
enum Attack {
    /// Keep `in_flight` mailbox holds of the costliest copies going.
    Holds { in_flight: usize },
    /// Keep a kept live-delivery stream open with a request item of this many bytes
    /// written but for its last byte; open another when the victim ends it.
    StreamPlaces { item_bytes: usize },
}

/// What the victim answered one flood.
#[derive(Debug, Default, Clone, Copy)]
struct Answers {
    held: usize,
    refused: usize,
    failed: usize,
    /// Connections the attackers opened (the first ones, and again after the victim
    /// closed one).
    connections: usize,
}

async fn run(ctx: &Context) -> anyhow::Result<Vec<Row>> {
    let p2p = match &ctx.p2p {
        Ok(p) => p.path.clone(),
        Err(why) => return Ok(vec![Row::skipped("hostile load", why.clone())]),
    };
    let flood = if ctx.quick { QUICK_FLOOD } else { FLOOD };

    // The victim: a real session process, with the in-process sender as its peer.
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
    let args: Vec<String> = [
        "run",
        "--session",
        "victim",
        "--listen",
        "/ip4/127.0.0.1/tcp/0",
        "--no-mdns",
    ]
    .map(String::from)
    .to_vec();
    let mut victim = Proc::spawn(&p2p, &args, &[], home)?;
    let ready = victim.wait_ready(READY).await?;
    let addr: Multiaddr = ready
        .addrs
        .iter()
        .find(|a| a.contains("127.0.0.1"))
        .context("the victim printed no loopback address")?
        .parse()?;
    let Some(Protocol::P2p(victim_peer)) = addr.iter().last() else {
        anyhow::bail!("the victim's address names no peer: {addr}");
    };

    // The paired sender, in process.
    let victim_session = SessionId::new("victim")?;
    let victim_identity: interlink_core::IdentityKey = victim_key.parse()?;
    let mut policy = PeerPolicy::new();
    policy.add("victim", victim_identity)?;
    let dir = tempfile::tempdir()?;
    let config = Config {
        listen: vec![fleet::loopback_tcp()],
        bootstrap: vec![addr.clone()],
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
    let to = SessionAddr {
        key: victim_identity,
        session: victim_session,
    };

    progress("hostile-load: signing the attackers' mailbox copies");
    let records = Arc::new(tokio::task::spawn_blocking(copies).await??);

    let pid = victim.pid();
    let body = "x".repeat(1024);
    for _ in 0..20 {
        handle
            .send(OutgoingMessage::text(to.clone(), body.clone()))
            .await?;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle_kib = process::sample(pid)?.rss_kib;
    let baseline = fleet::live_latencies(&handle, &to, &body, BASELINE_SENDS).await?;
    let mut rows = vec![Row::ok(
        "paired live path, no load",
        [
            stats::summary("latency", &baseline, None),
            vec![Measurement::new(
                "victim_rss_idle",
                kib_to_mib(idle_kib),
                "MiB",
            )],
        ]
        .concat(),
    )];

    for (case, peers, attack) in [
        (
            "one stranger at full speed",
            1,
            Attack::Holds { in_flight: 8 },
        ),
        (
            "Sybil swarm: 32 fresh strangers",
            SYBILS,
            Attack::Holds { in_flight: 2 },
        ),
        // A swarm that keeps more requests open instead of waiting for answers: the
        // late refusals then bound less (libp2p lets a connection open 100 streams).
        (
            "Sybil swarm, 16 in flight each",
            SYBILS,
            Attack::Holds { in_flight: 16 },
        ),
        // Every kept-stream place taken, each with a request item the victim holds
        // while it waits for the last byte (never sent). Measured also from the RSS
        // at its start: the hold floods before it leave the victim's heap grown.
        (
            "64 strangers in every kept-stream place",
            STREAM_PLACES,
            Attack::StreamPlaces {
                item_bytes: HELD_ITEM_BYTES,
            },
        ),
        // The same strangers writing items too large for a stream as fast as the victim
        // ends their streams: what it costs to read and refuse them.
        (
            "64 strangers writing oversized stream items",
            STREAM_PLACES,
            Attack::StreamPlaces {
                item_bytes: OVERSIZED_ITEM_BYTES,
            },
        ),
    ] {
        progress(format_args!("hostile-load: {case} for {flood:?}"));
        let at_start_kib = process::sample(pid).map(|s| s.rss_kib).unwrap_or(idle_kib);
        let until = Instant::now() + flood;
        // The attackers run on a thread and runtime of their own, as another process
        // would: a swarm spinning on refusals and reconnects must compete with the
        // paired sender for CPU, not starve its tasks on a shared runtime.
        let (records_for, addr_for) = (records.clone(), addr.clone());
        let attackers = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async move {
                let tasks: Vec<_> = (0..peers)
                    .map(|i| {
                        let records = records_for.clone();
                        let addr = addr_for.clone();
                        tokio::spawn(async move {
                            match attack {
                                Attack::Holds { in_flight } => {
                                    flood_holds(victim_peer, addr, records, i, in_flight, until)
                                        .await
                                }
                                Attack::StreamPlaces { item_bytes } => {
                                    hold_stream_places(victim_peer, addr, item_bytes, until).await
                                }
                            }
                        })
                    })
                    .collect();
                let mut answers = Answers::default();
                for t in tasks {
                    let a = t.await.unwrap_or_default();
                    answers.held += a.held;
                    answers.refused += a.refused;
                    answers.failed += a.failed;
                    answers.connections += a.connections;
                }
                Ok::<_, std::io::Error>(answers)
            })
        });
        let sampler = tokio::spawn(async move {
            let mut peak = 0u64;
            while Instant::now() < until {
                if let Ok(s) = process::sample(pid) {
                    peak = peak.max(s.rss_kib);
                }
                tokio::time::sleep(SAMPLE_EVERY).await;
            }
            peak
        });
        let (mut latency, not_delivered) = fleet::live_until(&handle, &to, &body, until).await;
        let answers = tokio::task::spawn_blocking(move || attackers.join())
            .await?
            .map_err(|_| anyhow::anyhow!("an attacker thread panicked"))??;
        let peak = sampler.await.unwrap_or(0);
        anyhow::ensure!(
            !victim.has_exited(),
            "the victim died: {}",
            victim.stderr_tail()
        );
        latency.sort();
        let mut m = stats::summary("latency", &latency, None);
        if let Some(p99) = stats::quantile(&latency, 0.99) {
            m.push(Measurement::ms("latency_p99_target", p99).at_most(TARGET_P99_MS));
        }
        m.push(Measurement::count("delivered", latency.len()));
        m.push(Measurement::count("not_delivered", not_delivered));
        m.push(
            Measurement::new(
                "victim_rss_above_idle",
                kib_to_mib(peak.saturating_sub(idle_kib)),
                "MiB",
            )
            .at_most(TARGET_RSS_GROWTH_MIB),
        );
        m.push(Measurement::new("victim_rss_peak", kib_to_mib(peak), "MiB"));
        m.push(Measurement::new(
            "victim_rss_growth_in_case",
            kib_to_mib(peak.saturating_sub(at_start_kib)),
            "MiB",
        ));
        m.push(Measurement::count("copies_held", answers.held));
        m.push(Measurement::count("copies_refused", answers.refused));
        m.push(Measurement::count("requests_failed", answers.failed));
        m.push(Measurement::count(
            "attacker_connections",
            answers.connections,
        ));
        // A flood that never reached the victim measured a quiet victim: say so
        // instead of reporting its numbers as the attack's.
        rows.push(if answers.connections == 0 {
            Row::failed(
                case,
                format!(
                    "the attackers never connected ({} requests failed)",
                    answers.failed
                ),
                m,
            )
        } else {
            Row::ok(case, m)
        });
    }
    fleet.shutdown(Duration::from_secs(3)).await;
    victim.stop().await;
    Ok(rows)
}

#[allow(clippy::cast_precision_loss)] // KiB counts far below 2^52
fn kib_to_mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// [`RECORDS`] mailbox copies of fresh owners, each [`ENVELOPES`] validly signed
/// and admitted envelopes from one attacker identity: (record key, encoded record).
fn copies() -> anyhow::Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let attacker = Identity::from_seed(&[0xa7; 32]);
    let session = SessionId::new("s")?;
    let now = interlink_net::Clock::system().now_ms();
    (0..RECORDS)
        .map(|r| {
            let mut seed = [0x5e; 32];
            seed[..8].copy_from_slice(&(r as u64).to_be_bytes());
            // The attacker makes the owners too, so it can issue itself their passes:
            // the worst case, where every envelope is admitted and kept.
            let owner_identity = Identity::from_seed(&seed);
            let owner = owner_identity.public();
            let envelopes: Vec<Signed<Envelope>> = (0..ENVELOPES)
                .map(|i| {
                    let mut id = [0u8; 16];
                    id[..8].copy_from_slice(&((r * ENVELOPES + i) as u64).to_be_bytes());
                    Signed::sign(
                        Envelope {
                            v: VERSION,
                            sender: attacker.public(),
                            sender_session: SessionId::new("flood")?,
                            recipient: owner,
                            recipient_session: session.clone(),
                            msg_id: MsgId::from_bytes(id),
                            ts: now + i as u64,
                            kind: EnvelopeKind::Message,
                            in_reply_to: None,
                            also_about: Vec::new(),
                            name: None,
                            // Holders never open a body: opaque bytes of the right shape.
                            sealed: Some(Sealed {
                                enc: ByteArray::new([7; 32]),
                                ct: ByteBuf::from(vec![0; BODY_BYTES]),
                            }),
                            pass: Some(interlink_core::wire::MailboxPass::issue(
                                &owner_identity,
                                &attacker.public(),
                            )),
                            reply_pass: None,
                        },
                        &attacker,
                    )
                    .map_err(anyhow::Error::from)
                })
                .collect::<anyhow::Result<_>>()?;
            let (key, record) =
                interlink_testkit::mailbox::record(&owner, &session, &envelopes, &[], now);
            Ok((key.to_vec(), record))
        })
        .collect()
}

/// An attacker's node: it dials out only, and has its own process's memory guard, not
/// the bench's (earlier scenarios left this process past the session budget, and every
/// attacker dial was refused).
pub(super) fn attacker_config() -> Config {
    Config {
        listen: vec![],
        bootstrap: vec![],
        mdns: false,
        max_process_memory: fleet::IN_BENCH_PROCESS_MEMORY,
        ..Config::default()
    }
}

/// One attacker: a bare swarm with a fresh key that dials the victim and keeps
/// `in_flight` holds of the copies going until `until`.
async fn flood_holds(
    victim: PeerId,
    addr: Multiaddr,
    records: Arc<Vec<(Vec<u8>, Vec<u8>)>>,
    offset: usize,
    in_flight: usize,
    until: Instant,
) -> Answers {
    let config = Config {
        // libp2p's default: an attacker's own build does not hold itself to our cap.
        mailbox_streams_per_connection: 100,
        ..attacker_config()
    };
    let mut swarm: Swarm<Behaviour> = interlink_testkit::node::raw_swarm(&config);
    let mut answers = Answers::default();
    // Known, so a request after the victim closed the connection dials it again: a
    // persistent attacker comes back.
    swarm.add_peer_address(victim, addr.clone());
    if swarm.dial(addr).is_err() {
        answers.failed += 1;
        return answers;
    }
    let mut next = offset;
    let send = |swarm: &mut Swarm<Behaviour>, next: &mut usize| {
        let (key, record) = &records[*next % records.len()];
        *next += 1;
        swarm.behaviour_mut().mailbox.send_request(
            &victim,
            MailboxRequest {
                v: VERSION,
                op: MailboxOp::Hold {
                    key: ByteBuf::from(key.clone()),
                    record: ByteBuf::from(record.clone()),
                },
            },
        );
    };
    for _ in 0..in_flight {
        send(&mut swarm, &mut next);
    }
    while Instant::now() < until {
        let left = until.saturating_duration_since(Instant::now());
        let Ok(ev) = tokio::time::timeout(left, swarm.select_next_some()).await else {
            break;
        };
        let done = match ev {
            SwarmEvent::Behaviour(BehaviourEvent::Mailbox(request_response::Event::Message {
                message: request_response::Message::Response { response, .. },
                ..
            })) => {
                match response.outcome {
                    MailboxOutcome::Held { .. } => answers.held += 1,
                    _ => answers.refused += 1,
                }
                true
            }
            SwarmEvent::Behaviour(BehaviourEvent::Mailbox(
                request_response::Event::OutboundFailure { error, .. },
            )) => {
                tracing::debug!(%error, "attacker: hold failed");
                answers.failed += 1;
                true
            }
            SwarmEvent::ConnectionEstablished { .. } => {
                answers.connections += 1;
                false
            }
            SwarmEvent::OutgoingConnectionError { error, .. } => {
                tracing::debug!(%error, "attacker: dial failed");
                false
            }
            SwarmEvent::ConnectionClosed { cause, .. } => {
                tracing::debug!(?cause, "attacker: connection closed");
                false
            }
            _ => false,
        };
        if done && Instant::now() < until {
            send(&mut swarm, &mut next);
        }
    }
    answers
}

/// One attacker: a bare swarm with a fresh key that keeps one kept live-delivery
/// stream to the victim open, each time writing all but the last byte of a request
/// item of `item_bytes`, and opens the next when the victim ends it.
async fn hold_stream_places(
    victim: PeerId,
    addr: Multiaddr,
    item_bytes: usize,
    until: Instant,
) -> Answers {
    let config = attacker_config();
    let mut swarm: Swarm<Behaviour> = interlink_testkit::node::raw_swarm(&config);
    let mut control = swarm.behaviour().streams.new_control();
    let mut answers = Answers::default();
    swarm.add_peer_address(victim, addr.clone());
    if swarm.dial(addr).is_err() {
        answers.failed += 1;
        return answers;
    }
    let Ok(protocol) =
        libp2p::StreamProtocol::try_from_owned(config.network.deliver_stream_protocol())
    else {
        answers.failed += 1;
        return answers;
    };
    // `{v: 10, envelopes: [bytes(item_bytes)]}`, cut one byte short.
    let mut item = vec![0xa2, 0x61, b'v', VERSION, 0x69];
    item.extend_from_slice(b"envelopes");
    item.extend_from_slice(&[0x81, 0x5a]);
    item.extend_from_slice(&u32::try_from(item_bytes).unwrap_or(u32::MAX).to_be_bytes());
    item.resize(item.len() + item_bytes.saturating_sub(1), 0);
    let connections = std::sync::atomic::AtomicUsize::new(0);
    let drive = async {
        loop {
            if let SwarmEvent::ConnectionEstablished { .. } = swarm.select_next_some().await {
                connections.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    };
    let attack = async {
        while Instant::now() < until {
            let Ok(mut stream) = control.open_stream(victim, protocol.clone()).await else {
                answers.failed += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            // Written, the item waits for its last byte until the victim gives up on
            // it (10 s) or refuses it as too large, ending the stream.
            let _ = futures::AsyncWriteExt::write_all(&mut stream, &item).await;
            let mut byte = [0u8; 1];
            let left = until.saturating_duration_since(Instant::now());
            let _ = tokio::time::timeout(left, futures::AsyncReadExt::read(&mut stream, &mut byte))
                .await;
            answers.refused += 1;
        }
    };
    tokio::select! {
        () = drive => {}
        () = attack => {}
    }
    answers.connections = connections.into_inner();
    answers
}

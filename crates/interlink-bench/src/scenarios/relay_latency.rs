//! `relay-latency`: live delivery between two sessions through a relayed circuit vs.
//! directly, in one run. In process, on loopback TCP: a relay node (the relay role of
//! `interlink-net`, with an in-memory mailbox store — no mailbox is touched on the live
//! path) and two pairs of paired sessions: one pair listening on loopback and dialling
//! each other, one pair listening nowhere but on their circuit through the relay. Each
//! send is timed until the sender holds the recipient's signed receipt.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::Context as _;
use interlink_core::{Identity, SessionId, trust::PeerPolicy, wire::SessionAddr};
use interlink_net::{
    Config, Delivery, DurableMailboxes, Handle, HeldCopy, Node, OutgoingMessage, Refusal,
    RelaySpec, Role, SendOutcome,
};
use libp2p::Multiaddr;

use super::Scenario;
use crate::{
    Context,
    fleet::{self, Fleet},
    progress,
    report::{Measurement, Row},
    stats,
};

pub(crate) const SCENARIO: Scenario = Scenario {
    name: "relay-latency",
    about: "send -> receipt through a relay circuit vs. direct, 1 KiB, two pairs of sessions on loopback",
    run: |ctx| Box::pin(run(ctx)),
};

const MESSAGES: usize = 500;
const QUICK_MESSAGES: usize = 100;
const WARM_UP: usize = 20;
const SETUP: Duration = Duration::from_secs(20);

/// Holds what it is given, verifying nothing: the live path never reaches it.
#[derive(Debug, Default)]
struct Unchecked(Mutex<HashMap<[u8; 32], Vec<u8>>>);

impl DurableMailboxes for Unchecked {
    fn hold(&self, key: &[u8; 32], record: &[u8], _now: u64) -> Result<HeldCopy, Refusal> {
        let mut map = self.0.lock().map_err(|_| Refusal {
            label: "io",
            reason: "poisoned".into(),
        })?;
        map.insert(*key, record.to_vec());
        // Not decoded, so it vouches for no message.
        Ok(HeldCopy {
            record: record.to_vec(),
            kept: Vec::new(),
            grew_by: record.len() as u64,
        })
    }

    fn get(&self, key: &[u8; 32]) -> Option<Vec<u8>> {
        self.0.lock().ok()?.get(key).cloned()
    }

    fn keys(&self) -> Vec<[u8; 32]> {
        self.0
            .lock()
            .map(|m| m.keys().copied().collect())
            .unwrap_or_default()
    }
}

async fn run(ctx: &Context) -> anyhow::Result<Vec<Row>> {
    let messages = if ctx.quick { QUICK_MESSAGES } else { MESSAGES };
    let mut fleet = Fleet::default();
    let relay_config = Config {
        listen: vec![fleet::loopback_tcp()],
        mdns: false,
        relay_server: true,
        max_process_memory: fleet::IN_BENCH_PROCESS_MEMORY,
        ..Config::default()
    };
    let key = libp2p::identity::Keypair::generate_ed25519();
    let swarm = interlink_net::build_swarm(key, &relay_config)?;
    let relay = Node::spawn(
        swarm,
        relay_config,
        Role::Relay(RelaySpec {
            store: Arc::new(Unchecked::default()),
        }),
    )?;
    let relay_addr = fleet::first_listen_addr(&relay.handle(), SETUP).await?;
    fleet.push(relay);

    let ids = fleet::identities(2);
    let dirs = [
        tempfile::tempdir()?,
        tempfile::tempdir()?,
        tempfile::tempdir()?,
        tempfile::tempdir()?,
    ];
    let mut rows = Vec::new();
    for (case, relayed) in [("direct", false), ("through the relay", true)] {
        progress(format_args!("relay-latency: {case}, {messages} sends"));
        let base = if relayed { 2 } else { 0 };
        let (sender, to) = pair(
            &mut fleet,
            &ids,
            &dirs[base..base + 2],
            &relay_addr,
            relayed,
            case,
        )
        .await?;
        let samples = measure(&sender, &to, messages).await?;
        let mut m = stats::summary("latency", &samples, None);
        if let Some(p99) = stats::quantile(&samples, 0.99) {
            m.push(Measurement::ms("latency_p99", p99));
        }
        m.push(Measurement::count("delivered", samples.len()));
        rows.push(Row::ok(format!("send -> receipt, 1 KiB, {case}"), m));
    }
    fleet.shutdown(Duration::from_secs(5)).await;
    Ok(rows)
}

/// Starts two paired sessions; returns the sender's handle and the recipient.
async fn pair(
    fleet: &mut Fleet,
    ids: &[Arc<Identity>],
    dirs: &[tempfile::TempDir],
    relay: &Multiaddr,
    relayed: bool,
    case: &str,
) -> anyhow::Result<(Handle, SessionAddr)> {
    let tag = if relayed { "relayed" } else { "direct" };
    let sessions = [
        SessionId::new(format!("{tag}-a"))?,
        SessionId::new(format!("{tag}-b"))?,
    ];
    let mut handles = Vec::new();
    let mut first_addr = None;
    for i in 0..2 {
        let mut policy = PeerPolicy::new();
        policy.add("other", ids[1 - i].public())?;
        let config = Config {
            listen: if relayed {
                Vec::new()
            } else {
                vec![fleet::loopback_tcp()]
            },
            relays: if relayed {
                vec![relay.clone()]
            } else {
                Vec::new()
            },
            bootstrap: if relayed {
                Vec::new()
            } else {
                first_addr.iter().cloned().collect()
            },
            mdns: false,
            delivery: Delivery {
                inbox_dir: Some(dirs[i].path().to_owned()),
                policy,
                pins_file: None,
                address_book: None,
            },
            ..Config::default()
        };
        let node = fleet::spawn_session(&ids[i], &sessions[i], config)?;
        if !relayed {
            first_addr = Some(fleet::first_listen_addr(&node.handle(), SETUP).await?);
        }
        handles.push(node.handle());
        fleet.push(node);
    }
    let to = SessionAddr {
        key: ids[1].public(),
        session: sessions[1].clone(),
    };
    let mut events = handles[0].events();
    fleet::wait_visible(
        &handles[0],
        &mut events,
        &to.key.to_hex(),
        Some(&to.session),
        SETUP,
    )
    .await
    .with_context(|| format!("{case}: the recipient never appeared"))?;
    Ok((handles[0].clone(), to))
}

async fn measure(
    sender: &Handle,
    to: &SessionAddr,
    messages: usize,
) -> anyhow::Result<Vec<Duration>> {
    let body = "x".repeat(1024);
    for _ in 0..WARM_UP {
        sender
            .send(OutgoingMessage::text(to.clone(), body.clone()))
            .await?;
    }
    let mut samples = Vec::with_capacity(messages);
    for _ in 0..messages {
        let start = Instant::now();
        let outcome = sender
            .send(OutgoingMessage::text(to.clone(), body.clone()))
            .await?;
        anyhow::ensure!(
            matches!(outcome, SendOutcome::Delivered(_)),
            "not delivered live: {outcome:?}"
        );
        samples.push(start.elapsed());
    }
    samples.sort();
    Ok(samples)
}

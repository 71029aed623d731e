//! `mailbox-dht`: store-and-forward through the DHT with N in-process session nodes on
//! the memory transport (every node bootstrapped to node 0). The recipient session is
//! killed (no goodbye); a sender queues messages for it. Measured per message:
//!
//! - **put confirmed**: from the send call until the first peer took the mailbox copy
//!   (`Handle::settle`): what a short-lived sender waits for before it may exit;
//! - **put replicated**: until min(K = 20, N − 1) live nodes hold it (every node's copy
//!   polled), which is what survives nodes leaving.
//!
//! Then the recipient restarts under its session id, knowing only node 0; **fetch** is
//! the time from its spawn until every queued message is in its inbox — connection,
//! Kademlia lookup, holders' copies, inbox fsync.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use interlink_core::{Identity, SessionId, trust::PeerPolicy, wire::SessionAddr};
use interlink_net::{Config, Delivery, Event, Handle, Node, OutgoingMessage, SendOutcome};
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
    name: "mailbox-dht",
    about: "N in-process nodes: queue for a killed session -> first holder / K holders; restart -> all in inbox",
    run: |ctx| Box::pin(run(ctx)),
};

const SIZES: &[usize] = &[10, 50];
const QUICK_SIZES: &[usize] = &[10];
/// Rounds per size (kill, queue, restart, drain), and messages queued per round.
const ROUNDS: usize = 5;
const QUICK_ROUNDS: usize = 2;
const PER_ROUND: usize = 10;
/// Kademlia's replication factor.
const K: usize = 20;
const ROSTER_TIMEOUT: Duration = Duration::from_secs(60);
const PUT_TIMEOUT: Duration = Duration::from_secs(10);
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(2);
const HOLDER_IDENTITIES: u8 = 5;

async fn run(ctx: &Context) -> anyhow::Result<Vec<Row>> {
    let (sizes, rounds) = if ctx.quick {
        (QUICK_SIZES, QUICK_ROUNDS)
    } else {
        (SIZES, ROUNDS)
    };
    let mut rows = Vec::new();
    for &n in sizes {
        progress(format_args!("mailbox-dht: {n} nodes, {rounds} rounds"));
        let case = format!("{n} nodes");
        rows.push(match measure(n, rounds).await {
            Ok(m) => Row::ok(&case, m),
            Err(e) => Row::failed(&case, format!("{e:#}"), Vec::new()),
        });
    }
    Ok(rows)
}

struct Samples {
    confirmed: Vec<Duration>,
    replicated: Vec<Duration>,
    /// Puts that never reached the replication target, with the holders they reached.
    under_replicated: Vec<usize>,
    fetch: Vec<Duration>,
}

async fn measure(n: usize, rounds: usize) -> anyhow::Result<Vec<Measurement>> {
    // The holders spread over several identities (each has a cap on sessions).
    let ids: Vec<Arc<Identity>> = fleet::identities(2 + HOLDER_IDENTITIES);
    let (sender_id, recipient_id) = (&ids[0], &ids[1]);
    let base = fleet::memory_ports(u64::try_from(n + rounds)?);
    let mut fleet = Fleet::default();
    let boot = fleet::memory_addr(base).with(libp2p::multiaddr::Protocol::P2p(
        ids[2]
            .transport_keypair(&SessionId::new("node-0")?)?
            .public()
            .to_peer_id(),
    ));
    // Node 0 and the other holders belong to other identities; the sender is node 1.
    for i in 0..n - 1 {
        let (identity, session) = if i == 1 {
            (sender_id, SessionId::new("sender")?)
        } else {
            (
                &ids[2 + i % usize::from(HOLDER_IDENTITIES)],
                SessionId::new(format!("node-{i}"))?,
            )
        };
        let mut config = node_config(base + i as u64, (i > 0).then(|| boot.clone()), None);
        if i == 1 {
            // Paired both ways, as two users' sessions are: the sender keeps a mailbox
            // pass only from a peer.
            config
                .delivery
                .policy
                .add("recipient", recipient_id.public())?;
        }
        fleet.push(fleet::spawn_session(identity, &session, config)?);
    }
    let recipient = SessionAddr {
        key: recipient_id.public(),
        session: SessionId::new("recipient")?,
    };
    let inbox = tempfile::tempdir()?;
    let mut policy = PeerPolicy::new();
    policy.add("sender", sender_id.public())?;
    let spawn_recipient = |port: u64| -> anyhow::Result<Node> {
        let config = node_config(port, Some(boot.clone()), Some((&inbox, policy.clone())));
        fleet::spawn_session(recipient_id, &recipient.session, config)
    };
    let holders = fleet.handles();
    let sender = holders[1].clone();
    let mut recipient_node = spawn_recipient(base + (n - 1) as u64)?;
    wait_sessions(&holders, n).await?;

    let mut s = Samples {
        confirmed: Vec::new(),
        replicated: Vec::new(),
        under_replicated: Vec::new(),
        fetch: Vec::new(),
    };
    // A mailbox keeps only a little mail from senders its owner has not admitted
    // (PROTOCOL §4.7): the sender first exchanges one live message with the recipient,
    // whose receipt carries the mailbox pass that lets its queued mail count in full.
    let outcome = sender
        .send(OutgoingMessage::text(recipient.clone(), "hello".to_owned()))
        .await?;
    anyhow::ensure!(
        matches!(outcome, SendOutcome::Delivered(_)),
        "the first, live message was not delivered: {outcome:?}"
    );
    let target = K.min(n - 1);
    for round in 0..rounds {
        recipient_node.abort();
        // The first message of a round pays the failed live attempt; it is not a sample.
        for i in 0..=PER_ROUND {
            let start = Instant::now();
            let outcome = sender
                .send(OutgoingMessage::text(
                    recipient.clone(),
                    format!("r{round} m{i}"),
                ))
                .await?;
            anyhow::ensure!(
                matches!(outcome, SendOutcome::Queued { .. }),
                "round {round}: message {i} was not queued: {outcome:?}"
            );
            let settled = sender.settle(PUT_TIMEOUT).await?;
            let confirmed = start.elapsed();
            anyhow::ensure!(
                settled.pending == 0,
                "round {round}: put unconfirmed after {PUT_TIMEOUT:?}: {settled:?}"
            );
            let (reached, at) = wait_holders(&holders, &recipient, i + 1, target, start).await?;
            if i > 0 {
                s.confirmed.push(confirmed);
                match at {
                    Some(d) => s.replicated.push(d),
                    None => s.under_replicated.push(reached),
                }
            }
        }
        let start = Instant::now();
        recipient_node = spawn_recipient(base + (n + round) as u64)?;
        let mut events = recipient_node.handle().events();
        let want = 1 + (round + 1) * (PER_ROUND + 1);
        wait_delivered(&mut events, &inbox, want)
            .await
            .with_context(|| format!("round {round}: the recipient never drained its mailbox"))?;
        s.fetch.push(start.elapsed());
    }
    recipient_node.abort();
    fleet.shutdown(Duration::from_secs(15)).await;

    let mut m = stats::summary("put_confirmed", &s.confirmed, None);
    m.extend(stats::summary(
        &format!("put_{target}_holders"),
        &s.replicated,
        None,
    ));
    m.push(Measurement::count(
        "puts_under_replicated",
        s.under_replicated.len(),
    ));
    if let Some(min) = s.under_replicated.iter().min() {
        m.push(Measurement::count("fewest_holders", *min));
    }
    m.extend(stats::summary("fetch_start_to_inbox", &s.fetch, None));
    m.push(Measurement::count("messages", rounds * (PER_ROUND + 1)));
    Ok(m)
}

fn node_config(
    port: u64,
    bootstrap: Option<Multiaddr>,
    inbox: Option<(&tempfile::TempDir, PeerPolicy)>,
) -> Config {
    let mut config = Config {
        listen: vec![fleet::memory_addr(port)],
        bootstrap: bootstrap.into_iter().collect(),
        mdns: false,
        ..Config::default()
    };
    if let Some((dir, policy)) = inbox {
        config.delivery = Delivery {
            inbox_dir: Some(dir.path().to_owned()),
            policy,
            pins_file: None,
            address_book: None,
        };
    }
    config
}

async fn wait_sessions(handles: &[Handle], n: usize) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + ROSTER_TIMEOUT;
    for h in handles {
        while fleet::session_count(&h.roster().await?) < n {
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "rosters did not reach {n} sessions in {ROSTER_TIMEOUT:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(())
}

/// Polls every live node until `target` of them hold at least `pending` envelopes of
/// the mailbox. Returns the most holders seen and when the target was reached.
async fn wait_holders(
    handles: &[Handle],
    mailbox: &SessionAddr,
    pending: usize,
    target: usize,
    start: Instant,
) -> anyhow::Result<(usize, Option<Duration>)> {
    let deadline = start + PUT_TIMEOUT;
    let mut most = 0;
    loop {
        let mut holding = 0;
        for h in handles {
            if h.held_mailbox(mailbox.clone())
                .await?
                .is_some_and(|m| m.pending >= pending)
            {
                holding += 1;
            }
        }
        most = most.max(holding);
        if holding >= target {
            return Ok((holding, Some(start.elapsed())));
        }
        if Instant::now() >= deadline {
            return Ok((most, None));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until the recipient's inbox holds `want` entries.
async fn wait_delivered(
    events: &mut tokio::sync::broadcast::Receiver<Event>,
    inbox: &tempfile::TempDir,
    want: usize,
) -> anyhow::Result<()> {
    let path = inbox.path().join(interlink_store::inbox::INBOX_FILE);
    let deadline = tokio::time::Instant::now() + FETCH_TIMEOUT;
    loop {
        let have = match interlink_store::inbox::read_from(&path, 0) {
            Ok((entries, _)) => entries.len(),
            Err(_) => 0,
        };
        if have >= want {
            return Ok(());
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "{have} of {want} messages after {FETCH_TIMEOUT:?}"
        );
        tokio::select! {
            _ = events.recv() => {}
            () = tokio::time::sleep(POLL) => {}
        }
    }
}

//! `delivery-latency`: two in-process sessions on loopback TCP; the time from a send
//! call until the sender holds the recipient's signed receipt (the message is then
//! fsynced in the recipient's inbox), for 1 KiB bodies, sent one at a time; then the
//! throughput of a burst. Measured in the same run as the floors: a raw TCP loopback
//! round trip of 1 KiB and the libp2p ping RTT between the two nodes.

use std::{
    io::{Read as _, Write as _},
    net::{TcpListener, TcpStream},
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use interlink_core::{Identity, SessionId, trust::PeerPolicy, wire::SessionAddr};
use interlink_net::{Config, Delivery, OutgoingMessage, SendOutcome};

use super::Scenario;
use crate::{
    Context,
    fleet::{self, Fleet},
    progress,
    report::{Measurement, Row},
    stats,
};

pub(crate) const SCENARIO: Scenario = Scenario {
    name: "delivery-latency",
    about: "send -> signed receipt (inbox fsynced), 1 KiB, two sessions on loopback; burst throughput; TCP and ping floors",
    run: |ctx| Box::pin(run(ctx)),
};

/// The targets.
const TARGET_P50_MS: f64 = 1.0;
const TARGET_P99_MS: f64 = 5.0;
/// 5,000 messages a second, as time per message.
const TARGET_PER_MESSAGE_MS: f64 = 0.2;
const MESSAGES: usize = 1000;
const QUICK_MESSAGES: usize = 200;
const BURST: usize = 200;
const BURSTS: usize = 10;
const QUICK_BURSTS: usize = 3;
const WARM_UP: usize = 20;
const ROUND_TRIPS: usize = 1000;

async fn run(ctx: &Context) -> anyhow::Result<Vec<Row>> {
    let (messages, bursts) = if ctx.quick {
        (QUICK_MESSAGES, QUICK_BURSTS)
    } else {
        (MESSAGES, BURSTS)
    };
    let mut rows = vec![tcp_floor()?];

    let ids: Vec<Arc<Identity>> = fleet::identities(2);
    let sessions = [SessionId::new("bench-a")?, SessionId::new("bench-b")?];
    let dirs = [tempfile::tempdir()?, tempfile::tempdir()?];
    let mut fleet = Fleet::default();
    let mut addrs = Vec::new();
    for i in 0..2 {
        let mut policy = PeerPolicy::new();
        policy.add("other", ids[1 - i].public())?;
        let bootstrap = addrs.first().cloned().into_iter().collect();
        let config = Config {
            listen: vec![fleet::loopback_tcp()],
            bootstrap,
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
        addrs.push(fleet::first_listen_addr(&node.handle(), Duration::from_secs(10)).await?);
        fleet.push(node);
    }
    let handles = fleet.handles();
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
        Duration::from_secs(10),
    )
    .await
    .context("the recipient never appeared on the sender's roster")?;
    let body = "x".repeat(1024);
    let send = |text: String| handles[0].send(OutgoingMessage::text(to.clone(), text));

    progress("delivery-latency: warming up");
    for _ in 0..WARM_UP {
        send(body.clone()).await?;
    }

    progress(format_args!(
        "delivery-latency: {messages} sequential sends"
    ));
    let mut samples = Vec::with_capacity(messages);
    let mut queued = 0usize;
    for _ in 0..messages {
        let start = Instant::now();
        match send(body.clone()).await? {
            SendOutcome::Delivered(_) => samples.push(start.elapsed()),
            SendOutcome::Queued { .. } => queued += 1,
        }
    }
    samples.sort();
    let mut m = stats::summary("latency", &samples, None);
    if let Some(p50) = stats::quantile(&samples, 0.5) {
        m.push(Measurement::ms("latency_p50_target", p50).at_most(TARGET_P50_MS));
    }
    if let Some(p99) = stats::quantile(&samples, 0.99) {
        m.push(Measurement::ms("latency_p99", p99).at_most(TARGET_P99_MS));
    }
    m.push(Measurement::count("delivered", samples.len()));
    m.push(Measurement::count("queued_instead", queued));
    let rtt = handles[0]
        .diagnostics()
        .await?
        .connected
        .iter()
        .find_map(|p| p.rtt_us);
    if let Some(us) = rtt {
        m.push(Measurement::ms(
            "libp2p_ping_rtt",
            Duration::from_micros(us),
        ));
    }
    rows.push(Row::ok("live send -> receipt, 1 KiB, sequential", m));

    progress(format_args!("delivery-latency: {bursts} bursts of {BURST}"));
    let start = Instant::now();
    let mut delivered = 0usize;
    for _ in 0..bursts {
        let results = futures::future::join_all((0..BURST).map(|_| send(body.clone()))).await;
        delivered += results
            .into_iter()
            .filter(|r| matches!(r, Ok(SendOutcome::Delivered(_))))
            .count();
    }
    let elapsed = start.elapsed();
    #[allow(clippy::cast_precision_loss)] // counts far below 2^52
    let per_s = delivered as f64 / elapsed.as_secs_f64();
    rows.push(Row::ok(
        "burst throughput, 1 KiB, one sender -> one recipient",
        vec![
            Measurement::new("messages_per_s", per_s, "msg/s"),
            Measurement::new("per_message", 1000.0 / per_s, "ms").at_most(TARGET_PER_MESSAGE_MS),
            Measurement::count("delivered", delivered),
            Measurement::count("sent", bursts * BURST),
        ],
    ));
    fleet.shutdown(Duration::from_secs(5)).await;
    Ok(rows)
}

/// Raw TCP loopback: 1 KiB written and echoed back, one round trip at a time.
fn tcp_floor() -> anyhow::Result<Row> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut s, _) = listener.accept()?;
        s.set_nodelay(true)?;
        let mut buf = [0u8; 1024];
        for _ in 0..ROUND_TRIPS {
            s.read_exact(&mut buf)?;
            s.write_all(&buf)?;
        }
        Ok(())
    });
    let mut c = TcpStream::connect(addr)?;
    c.set_nodelay(true)?;
    let buf = [7u8; 1024];
    let mut back = [0u8; 1024];
    let mut samples = Vec::with_capacity(ROUND_TRIPS);
    for _ in 0..ROUND_TRIPS {
        let start = Instant::now();
        c.write_all(&buf)?;
        c.read_exact(&mut back)?;
        samples.push(start.elapsed());
    }
    echo.join()
        .map_err(|_| anyhow::anyhow!("echo thread panicked"))??;
    samples.sort();
    Ok(Row::ok(
        "floor: raw TCP loopback round trip, 1 KiB",
        stats::summary("rtt", &samples, None),
    ))
}

//! Relay store benchmark: 100,000 queued messages across 1,000 mailboxes.
//!
//! Run: `cargo bench -p interlink-relay --bench store`
//! (set `RELAY_BENCH_DIR` to put the database on another file system; default: a
//! temporary directory). Prints a table; docs/BENCHMARKS.md has the numbers.
//!
//! Inputs are built before any timing: real envelopes, sealed to their recipient and
//! signed by their sender with interlink-core, each wrapped in the one-envelope record
//! a sender puts. Four senders write to each mailbox (the per-sender quota is 64).

use std::{
    fs,
    path::Path,
    time::{Duration, Instant},
};

use interlink_core::mailbox::{self, Mailbox};
use interlink_relay::store::{Caps, MailboxStore};
use interlink_testkit as testkit;

const MAILBOXES: usize = 1_000;
const PER_MAILBOX: usize = 100;
const SENDERS: usize = 4;
const TEXT_BYTES: usize = 256;
/// Puts per write transaction in the batched fill (one fsync per batch).
const BATCH: usize = 100;
/// Puts timed one commit each, into the filled store.
const SINGLE_PUTS: usize = 1_000;
/// Mailbox fetches timed.
const GETS: usize = 10_000;

/// Optional: the decoded-cache bound in MiB (default: the store's default).
const CACHE_ENV: &str = "RELAY_BENCH_CACHE_MIB";
/// Set to measure only the memory of decoded mailboxes against their records' size
/// (what `DECODED_SIZE_FACTOR` estimates).
const FACTOR_ENV: &str = "RELAY_BENCH_DECODED_FACTOR";
/// Set (to a database path) in the child process that measures a fresh relay's RSS.
const CHILD_ENV: &str = "RELAY_BENCH_CHILD_DB";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if let Some(path) = std::env::var_os(CHILD_ENV) {
        return child(Path::new(&path));
    }
    if !cfg!(target_os = "linux") {
        eprintln!("memory figures read /proc/self/status, which only Linux has: they show as ?");
    }
    if std::env::var_os(FACTOR_ENV).is_some() {
        return decoded_size_factor();
    }
    let rss_start = rss_kib();
    let now = interlink_net::Clock::system().now_ms();
    let session = testkit::session("inbox");
    let owners: Vec<_> = (0..MAILBOXES as u64)
        .map(|i| testkit::identity(10_000 + i))
        .collect();
    let senders: Vec<_> = (0..SENDERS as u64).map(testkit::identity).collect();
    let text = "x".repeat(TEXT_BYTES);

    let build = Instant::now();
    // Round-robin over mailboxes, so consecutive puts hit different mailboxes like
    // independent senders would.
    let mut puts: Vec<([u8; 32], Vec<u8>)> = Vec::with_capacity(MAILBOXES * PER_MAILBOX);
    for n in 0..PER_MAILBOX {
        for (m, owner) in owners.iter().enumerate() {
            let id = testkit::msg_id((m * PER_MAILBOX + n) as u64);
            let from = &senders[n % SENDERS];
            let ts = now - 60_000 + n as u64;
            let env = testkit::message(from, owner, &session, id, ts, &text);
            puts.push(testkit::record(&owner.public(), &session, &[env], &[], now));
        }
    }
    let single: Vec<([u8; 32], Vec<u8>)> = (0..SINGLE_PUTS)
        .map(|i| {
            let owner = &owners[i % MAILBOXES];
            let id = testkit::msg_id(1_000_000 + i as u64);
            let env = testkit::message(&senders[0], owner, &session, id, now, &text);
            testkit::record(&owner.public(), &session, &[env], &[], now)
        })
        .collect();
    let build_time = build.elapsed();
    let input_bytes: usize = puts.iter().map(|(_, b)| b.len()).sum();
    let rss_inputs = rss_kib();

    let tmp = tempfile::Builder::new()
        .prefix("relay-store-bench")
        .tempdir_in(
            std::env::var_os("RELAY_BENCH_DIR").unwrap_or_else(|| std::env::temp_dir().into()),
        )?;
    let path = tmp.path().join("mailboxes.redb");
    let mut caps = Caps::default();
    if let Some(mib) = std::env::var(CACHE_ENV)
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        caps = caps.with_decoded_cache_bytes(mib * 1024 * 1024);
    }
    let cache_mib = caps.decoded_cache_bytes / (1024 * 1024);
    let store = MailboxStore::open(&path, caps)?;

    let fill = Instant::now();
    for chunk in puts.chunks(BATCH) {
        let batch: Vec<([u8; 32], &[u8])> = chunk.iter().map(|(k, b)| (*k, b.as_slice())).collect();
        for r in store.put_many(&batch, now) {
            r?;
        }
    }
    let fill_time = fill.elapsed();
    let stats = store.stats();
    assert_eq!(
        stats.envelopes as usize,
        MAILBOXES * PER_MAILBOX,
        "every message held"
    );
    let rss_filled = rss_kib();

    let mut single_lat = Vec::with_capacity(SINGLE_PUTS);
    let single_start = Instant::now();
    for (k, b) in &single {
        let t = Instant::now();
        store.put(*k, b, now)?;
        single_lat.push(t.elapsed());
    }
    let single_time = single_start.elapsed();
    drop(puts);
    drop(single);

    // The owner's fetch as the relay serves it: one read transaction, the record's bytes.
    let mut get_lat = Vec::with_capacity(GETS);
    let mut record_bytes = 0usize;
    let keys: Vec<[u8; 32]> = owners
        .iter()
        .map(|o| mailbox::record_key(&o.public(), &session))
        .collect();
    for i in 0..GETS {
        let key = &keys[(i * 7919) % MAILBOXES];
        let t = Instant::now();
        let rec = store.get(key)?.ok_or("mailbox missing")?;
        get_lat.push(t.elapsed());
        record_bytes = rec.len();
    }
    // What the recipient then does with it (decode + verify every envelope), for scale.
    let mut decode_lat = Vec::new();
    for key in keys.iter().take(200) {
        let rec = store.get(key)?.ok_or("mailbox missing")?;
        let t = Instant::now();
        let (mb, _) = Mailbox::decode(&rec, now, &mailbox::Config::default())?;
        decode_lat.push(t.elapsed());
        assert!(mb.len() >= PER_MAILBOX);
    }
    let sweep = Instant::now();
    let report = store.sweep(now)?;
    let sweep_idle = sweep.elapsed();
    let db_bytes = fs::metadata(&path)?.len();
    drop(store);

    // A restarted relay holding the same data, in a fresh process so its RSS is not
    // the high-water mark of this one: open, serve a fetch of every mailbox.
    let out = std::process::Command::new(std::env::current_exe()?)
        .env(CHILD_ENV, &path)
        .output()?;
    let child_report = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let store = MailboxStore::open(&path, Caps::default())?;
    let expire = Instant::now();
    let expired = store.sweep(now + Caps::default().mailbox.retention_ms + 10 * 60_000)?;
    let sweep_all = expire.elapsed();

    let n = (MAILBOXES * PER_MAILBOX) as f64;
    println!(
        "relay store benchmark: {MAILBOXES} mailboxes x {PER_MAILBOX} envelopes ({SENDERS} senders, {TEXT_BYTES}-byte texts)"
    );
    println!(
        "database: {}; decoded-mailbox cache: {cache_mib} MiB",
        path.display()
    );
    println!("| measure | value |");
    println!("|---|---|");
    println!(
        "| inputs built (not timed) | {} puts, {:.1} MB, in {:.1} s |",
        MAILBOXES * PER_MAILBOX,
        mb(input_bytes as u64),
        build_time.as_secs_f64()
    );
    println!(
        "| fill, batches of {BATCH} puts per commit | {:.0} puts/s ({:.1} s) |",
        n / fill_time.as_secs_f64(),
        fill_time.as_secs_f64()
    );
    println!(
        "| single puts, one commit (fsync) each, into the full store | {:.0} puts/s; latency p50 {} p99 {} |",
        SINGLE_PUTS as f64 / single_time.as_secs_f64(),
        ms(pct(&mut single_lat, 50)),
        ms(pct(&mut single_lat, 99))
    );
    println!(
        "| held | {} mailboxes, {} envelopes, {:.1} MB of records |",
        stats.mailboxes,
        stats.envelopes,
        mb(stats.bytes)
    );
    println!("| database file | {:.1} MB |", mb(db_bytes));
    println!(
        "| mailbox fetch (get, {GETS}x, ~{:.0} KB record) | p50 {} p99 {} |",
        record_bytes as f64 / 1024.0,
        ms(pct(&mut get_lat, 50)),
        ms(pct(&mut get_lat, 99))
    );
    println!(
        "| recipient-side decode+verify of one fetched mailbox (for scale) | p50 {} |",
        ms(pct(&mut decode_lat, 50))
    );
    println!(
        "| sweep, nothing due | {} ({} mailboxes checked) |",
        ms(sweep_idle),
        report.mailboxes_checked
    );
    println!(
        "| sweep, everything expired | {:.2} s ({} envelopes dropped, {} mailboxes deleted) |",
        sweep_all.as_secs_f64(),
        expired.envelopes_dropped,
        expired.mailboxes_deleted
    );
    println!("{child_report}");
    println!(
        "| bench process RSS: start / inputs built / filled (inputs included) | {} / {} / {} MB |",
        rss_mb(rss_start),
        rss_mb(rss_inputs),
        rss_mb(rss_filled)
    );
    Ok(())
}

/// The child: a restarted relay's view of the filled store.
fn child(path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let rss_before = rss_kib();
    let t = Instant::now();
    let store = MailboxStore::open(path, caps_from_env())?;
    let open_time = t.elapsed();
    let rss_open = rss_kib();
    let session = testkit::session("inbox");
    let owners: Vec<_> = (0..MAILBOXES as u64)
        .map(|i| testkit::identity(10_000 + i))
        .collect();
    let mut bytes = 0;
    for owner in &owners {
        let key = mailbox::record_key(&owner.public(), &session);
        bytes += store.get(&key)?.map_or(0, |r| r.len());
    }
    let rss_fetched = rss_kib();
    // Then one more message into every mailbox, one commit each: the decoded cache
    // fills to its bound.
    let now = interlink_net::Clock::system().now_ms();
    let sender = testkit::identity(99);
    let puts: Vec<([u8; 32], Vec<u8>)> = owners
        .iter()
        .enumerate()
        .map(|(i, owner)| {
            let id = testkit::msg_id(2_000_000 + i as u64);
            let env = testkit::message(&sender, owner, &session, id, now, &"y".repeat(TEXT_BYTES));
            testkit::record(&owner.public(), &session, &[env], &[], now)
        })
        .collect();
    let t = Instant::now();
    for (k, b) in &puts {
        store.put(*k, b, now)?;
    }
    let put_time = t.elapsed();
    println!(
        "| restart: open the filled store | {} ({} mailboxes) |",
        ms(open_time),
        store.stats().mailboxes
    );
    println!(
        "| restarted relay RSS: before open / open / after fetching every mailbox ({:.1} MB) | {} / {} / {} MB |",
        mb(bytes as u64),
        rss_mb(rss_before),
        rss_mb(rss_open),
        rss_mb(rss_fetched)
    );
    println!(
        "| restarted relay: one more put into each mailbox, one commit each | {:.0} puts/s; RSS after {} MB |",
        MAILBOXES as f64 / put_time.as_secs_f64(),
        rss_mb(rss_kib())
    );
    Ok(())
}

/// Decodes 200 mailboxes of 100 envelopes, keeps them, and compares the memory they
/// take (RSS growth) with the size of their records.
fn decoded_size_factor() -> Result<(), Box<dyn std::error::Error>> {
    let now = interlink_net::Clock::system().now_ms();
    let session = testkit::session("inbox");
    let senders: Vec<_> = (0..SENDERS as u64).map(testkit::identity).collect();
    let text = "x".repeat(TEXT_BYTES);
    let records: Vec<Vec<u8>> = (0..200u64)
        .map(|m| {
            let owner = testkit::identity(10_000 + m);
            let envs: Vec<_> = (0..PER_MAILBOX as u64)
                .map(|n| {
                    let id = testkit::msg_id(m * 1000 + n);
                    testkit::message(
                        &senders[n as usize % SENDERS],
                        &owner,
                        &session,
                        id,
                        now - 1000 + n,
                        &text,
                    )
                })
                .collect();
            testkit::record(&owner.public(), &session, &envs, &[], now).1
        })
        .collect();
    let record_bytes: usize = records.iter().map(Vec::len).sum();
    let before = rss_kib().unwrap_or(0);
    let cfg = mailbox::Config::default();
    let mut kept = Vec::with_capacity(records.len());
    for r in &records {
        kept.push(Mailbox::decode(r, now, &cfg)?.0);
    }
    let after = rss_kib().unwrap_or(0);
    let grown = after.saturating_sub(before) as f64 * 1024.0;
    println!(
        "decoded {} mailboxes: records {:.1} MB, RSS grew {:.1} MB: factor {:.2}",
        kept.len(),
        mb(record_bytes as u64),
        grown / 1e6,
        grown / record_bytes as f64
    );
    Ok(())
}

/// The store caps, with the decoded-cache bound from [`CACHE_ENV`] if set.
fn caps_from_env() -> Caps {
    let caps = Caps::default();
    match std::env::var(CACHE_ENV)
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        Some(mib) => caps.with_decoded_cache_bytes(mib * 1024 * 1024),
        None => caps,
    }
}

fn pct(v: &mut [Duration], p: usize) -> Duration {
    v.sort_unstable();
    v.get((v.len() * p / 100).min(v.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

fn rss_kib() -> Option<u64> {
    status_kib("VmRSS:")
}

fn rss_mb(kib: Option<u64>) -> String {
    kib.map_or("?".into(), |k| format!("{:.0}", k as f64 / 1024.0))
}

fn status_kib(field: &str) -> Option<u64> {
    let status = fs::read_to_string(Path::new("/proc/self/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

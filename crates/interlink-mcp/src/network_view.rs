//! A running session's own view of its network: each connected peer (the sessions on
//! it, direct or relayed, transport, round trip), the node's NAT status and external
//! addresses, the dead connections it closed. `whoami` shows it; a session also keeps
//! it in `sessions/<id>/network.json`, refreshed every [`REFRESH`], so
//! `interlink-p2p peers --session <id>` can show what a running session sees — the
//! first thing one wants when a peer is unreachable, and what an observer node of its
//! own cannot show.

use std::{collections::HashMap, time::Duration};

use interlink_core::{presence::IdentityView, trust::PeerPolicy};
use interlink_net::{Diagnostics, Handle};
use interlink_store::{
    files::write_replacing,
    paths::{Home, SessionDir},
    policy,
};
use libp2p::PeerId;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tracing::debug;

/// How often a session's `network.json` is refreshed when something in it changed.
pub(crate) const REFRESH: Duration = Duration::from_secs(5);
/// How often it is rewritten unchanged, so its age says the session still runs.
pub const REWRITE_AT_LEAST: Duration = Duration::from_secs(30);

/// The view of `diag`, naming the sessions of `roster` behind each peer by the
/// petnames of `peers` (else their fingerprints).
pub(crate) fn view(diag: &Diagnostics, roster: &[IdentityView], peers: &PeerPolicy) -> Value {
    // The sessions behind each node, in one pass over the roster.
    let mut behind: HashMap<PeerId, Vec<String>> = HashMap::new();
    for s in roster.iter().flat_map(|i| i.sessions.iter()) {
        if let Some(peer) = s.announcement.peer_id() {
            let who = peers
                .name_of(&s.addr.key)
                .map_or_else(|| s.addr.key.fingerprint().to_string(), str::to_owned);
            behind
                .entry(peer)
                .or_default()
                .push(format!("{who}/{}", s.addr.session));
        }
    }
    let peers: Vec<Value> = diag
        .connected
        .iter()
        .map(|p| {
            let sessions = behind.remove(&p.peer_id).unwrap_or_default();
            json!({
                "peer_id": p.peer_id.to_string(),
                "sessions": sessions,
                "route": if p.relayed { "relayed" } else { "direct" },
                "transport": p.transport,
                "transports": p.transports,
                "connections": p.connections,
                "rtt_ms": p.rtt_us.map(|us| (us as f64 / 100.0).round() / 10.0),
                "addr": p.addr.to_string(),
            })
        })
        .collect();
    json!({
        "peer_id": diag.peer_id.map(|p| p.to_string()),
        "listen_addrs": diag.listen_addrs.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "external_addrs": diag.external_addrs.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "nat": diag.nat,
        "relay_reservations": diag.relay_reservations.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "dead_connections_closed": diag.dead_connections_closed,
        "tcp_moved_to_quic": diag.tcp_moved_to_quic,
        "circuits_to_punch_again": diag.circuits_to_punch_again,
        "circuits_closed_for_direct": diag.circuits_closed_for_direct,
        "peers": peers,
    })
}

/// The view as lines for a person (or the model): one per peer.
pub fn lines(view: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(nat) = view["nat"].as_str() {
        out.push(format!("nat {nat}"));
    }
    for a in view["external_addrs"].as_array().into_iter().flatten() {
        out.push(format!("external {}", a.as_str().unwrap_or_default()));
    }
    let peers = view["peers"].as_array().map_or(&[][..], Vec::as_slice);
    if peers.is_empty() {
        out.push("no peer connected".to_owned());
    }
    for p in peers {
        let who = p["sessions"]
            .as_array()
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_else(|| {
                let id = p["peer_id"].as_str().unwrap_or_default();
                format!("peer …{}", &id[id.len().saturating_sub(8)..])
            });
        let rtt = p["rtt_ms"]
            .as_f64()
            .map_or_else(String::new, |ms| format!(" {ms} ms"));
        out.push(format!(
            "{who}: {} {}{rtt}",
            p["route"].as_str().unwrap_or_default(),
            p["transport"].as_str().unwrap_or_default(),
        ));
    }
    out
}

/// Keeps `dir`'s `network.json` current until `cancel` fires or the node stops
/// (sessions named by `home`'s petnames; stamped by the session's `clock`).
pub async fn keep_written(
    handle: Handle,
    home: Home,
    dir: SessionDir,
    clock: interlink_net::Clock,
    cancel: CancellationToken,
) {
    let mut tick = tokio::time::interval(REFRESH);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last = Value::Null;
    let mut written = std::time::Instant::now();
    // The petnames, read again only when peers.json changed (a stat per tick).
    let mut watcher = policy::Watcher::new(&home);
    let mut names = policy::load(&home).unwrap_or_default();
    loop {
        tokio::select! {
            () = cancel.cancelled() => break,
            _ = tick.tick() => {}
        }
        let (Ok(diag), Ok(roster)) = (handle.diagnostics().await, handle.roster().await) else {
            break;
        };
        if let Some(Ok(changed)) = watcher.poll() {
            names = changed;
        }
        let now = view(&diag, &roster, &names);
        if now == last && written.elapsed() < REWRITE_AT_LEAST {
            continue;
        }
        let mut file = now.clone();
        file["updated_ms"] = json!(clock.now_ms());
        match serde_json::to_vec_pretty(&file) {
            Ok(bytes) => {
                if let Err(e) = write_replacing(&dir.network(), &bytes) {
                    debug!("network.json not written: {e}");
                }
            }
            Err(e) => debug!("network view not encoded: {e}"),
        }
        last = now;
        written = std::time::Instant::now();
    }
    // The view stays (`peers --session` shows what the session last saw), marked as the
    // view of a session that ended, so a reader need not wait for it to go stale.
    if last.is_object() {
        last["updated_ms"] = json!(clock.now_ms());
        last["stopped_ms"] = json!(clock.now_ms());
        if let Ok(bytes) = serde_json::to_vec_pretty(&last) {
            let _ = write_replacing(&dir.network(), &bytes);
        }
    }
}

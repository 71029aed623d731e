//! The human form of `interlink-p2p peers`: an aligned table of sessions grouped by
//! identity, then the network diagnostics.

use std::fmt::Write as _;

use super::report::{Report, SessionReport};

/// Longest cwd or summary shown in a table cell; the JSON output has them in full.
const MAX_CELL_CHARS: usize = 40;

/// Renders `report` as text (ends with a newline).
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let sessions: usize = report.identities.iter().map(|i| i.sessions.len()).sum();
    let _ = writeln!(
        out,
        "network {}: {} identit{}, {} session{}",
        report.network,
        report.identities.len(),
        if report.identities.len() == 1 {
            "y"
        } else {
            "ies"
        },
        sessions,
        if sessions == 1 { "" } else { "s" },
    );
    if sessions == 0 {
        out.push_str("(no sessions seen)\n");
    } else {
        out.push('\n');
        sessions_table(report, &mut out);
    }
    out.push('\n');
    diagnostics(report, &mut out);
    out
}

/// One row per session; identity columns only on an identity's first row. Below each
/// row, indented, its PeerId and addresses (too long for columns).
fn sessions_table(report: &Report, out: &mut String) {
    let header = [
        "IDENTITY", "NAME", "SESSION", "PRESENCE", "GIT", "CWD", "SUMMARY", "LINK",
    ];
    let mut rows: Vec<([String; 8], &SessionReport)> = Vec::new();
    for ident in &report.identities {
        let name = match (&ident.petname, ident.own) {
            (Some(p), true) => format!("{p} (you)"),
            (Some(p), false) => p.clone(),
            (None, true) => "(you)".to_owned(),
            (None, false) => "-".to_owned(),
        };
        for (i, s) in ident.sessions.iter().enumerate() {
            let (fp, nm) = if i == 0 {
                (ident.fingerprint.clone(), name.clone())
            } else {
                (String::new(), String::new())
            };
            rows.push((
                [
                    fp,
                    nm,
                    s.session_id.clone(),
                    format!("{} {}", s.presence, age(s.age_ms)),
                    s.git_label.clone().unwrap_or_else(|| "-".into()),
                    match &s.cwd {
                        Some(cwd) => shorten_tail(cwd),
                        None => "(not shared)".into(),
                    },
                    shorten_head(match s.summary.as_deref() {
                        Some("") | None => "-",
                        Some(summary) => summary,
                    }),
                    link(s),
                ],
                s,
            ));
        }
    }
    let mut widths = header.map(|h| h.chars().count());
    for (cells, _) in &rows {
        for (w, c) in widths.iter_mut().zip(cells) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[&str]| {
        let mut l = String::new();
        for (i, (c, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                l.push_str(c);
            } else {
                let _ = write!(l, "{c:<w$}  ");
            }
        }
        l.trim_end().to_owned()
    };
    let _ = writeln!(out, "{}", line(&header));
    let indent = widths[0] + 2 + widths[1] + 2;
    for (cells, s) in &rows {
        let refs: Vec<&str> = cells.iter().map(String::as_str).collect();
        let _ = writeln!(out, "{}", line(&refs));
        let pad = " ".repeat(indent);
        if let Some(p) = &s.peer_id {
            let _ = writeln!(out, "{pad}peer  {p}");
        }
        for a in &s.addrs {
            let _ = writeln!(out, "{pad}addr  {a}");
        }
    }
}

fn link(s: &SessionReport) -> String {
    match (s.connected, s.rtt_us) {
        (true, Some(us)) => format!("connected, rtt {}", rtt(us)),
        (true, None) => "connected".into(),
        (false, _) => "not connected".into(),
    }
}

fn diagnostics(report: &Report, out: &mut String) {
    let d = &report.diagnostics;
    let _ = writeln!(out, "this node (observer)");
    let _ = writeln!(out, "  peer id       {}", d.peer_id);
    if d.listen_addrs.is_empty() {
        let _ = writeln!(out, "  listening     -");
    }
    for (i, a) in d.listen_addrs.iter().enumerate() {
        let label = if i == 0 { "listening" } else { "" };
        let _ = writeln!(out, "  {label:<12}  {a}");
    }
    let _ = writeln!(out, "  connected     {} peer(s)", d.connected_peers.len());
    let width = d
        .connected_peers
        .iter()
        .map(|c| c.addr.chars().count())
        .max()
        .unwrap_or(0);
    for c in &d.connected_peers {
        let rtt = c.rtt_us.map(rtt).unwrap_or_else(|| "-".into());
        let agent = c.agent.as_deref().unwrap_or("-");
        let _ = writeln!(
            out,
            "    {}  {:<width$}  rtt {rtt:<9}  {agent}",
            c.peer_id, c.addr
        );
    }
    let _ = writeln!(
        out,
        "  gossipsub     {} mesh peer(s), {} topic peer(s)",
        d.mesh_peers.len(),
        d.topic_peers
    );
    let _ = writeln!(
        out,
        "  dht           {} routing-table entries",
        d.dht_routing_table
    );
    if d.relay_reservations.is_empty() {
        let _ = writeln!(out, "  relay         no reservations");
    }
    for (i, r) in d.relay_reservations.iter().enumerate() {
        let label = if i == 0 { "relay" } else { "" };
        let _ = writeln!(out, "  {label:<12}  {r}");
    }
}

/// `4s`, `3m`, `5h`, `2d`.
pub fn age(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

/// `0.42 ms`, `12 ms`.
fn rtt(us: u64) -> String {
    if us < 10_000 {
        format!("{:.2} ms", us as f64 / 1000.0)
    } else {
        format!("{} ms", us / 1000)
    }
}

/// Keeps the end of a path, where the interesting part is.
fn shorten_tail(s: &str) -> String {
    let n = s.chars().count();
    if n <= MAX_CELL_CHARS {
        return s.to_owned();
    }
    let tail: String = s.chars().skip(n - (MAX_CELL_CHARS - 1)).collect();
    format!("…{tail}")
}

/// Keeps the start of a sentence.
fn shorten_head(s: &str) -> String {
    if s.chars().count() <= MAX_CELL_CHARS {
        return s.to_owned();
    }
    let head: String = s.chars().take(MAX_CELL_CHARS - 1).collect();
    format!("{head}…")
}

#[cfg(test)]
#[path = "render_tests.rs"]
mod tests;

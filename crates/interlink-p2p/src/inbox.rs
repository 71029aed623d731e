//! `interlink-p2p inbox`: the messages a session's node delivered, read from its inbox
//! file (`<home>/sessions/<session id>/inbox.jsonl`, format in docs/DELIVERY.md).
//!
//! Reading changes nothing: every reader keeps its own cursor, a logical offset that
//! stays valid when the node compacts the inbox (older lines are read from its
//! archive, `interlink_net::inbox`). The cursor after the last complete line goes to
//! stderr, so a script can continue with `--from`.

use std::io::Write;

use anyhow::bail;
use interlink_core::{IdentityKey, SessionId, keyfile, session, trust::PeerPolicy};
use interlink_net::inbox::{self, InboxEntry};

use crate::{
    paths::{Home, SessionDir},
    policy,
};

/// How `inbox` runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// `--session`; else `INTERLINK_SESSION`, `CLAUDE_CODE_SESSION_ID`, else the only
    /// session with an inbox under the home directory.
    pub session: Option<String>,
    /// One JSON object per line.
    pub json: bool,
    /// Logical inbox offset to start reading at (0: the whole kept history).
    pub from: u64,
}

/// Runs `inbox`: messages to `out`, the cursor to `progress`.
pub fn run(
    home: &Home,
    options: &Options,
    env: impl Fn(&str) -> Option<String>,
    out: &mut impl Write,
    progress: &mut impl Write,
) -> anyhow::Result<()> {
    let session = resolve_session(home, options.session.as_deref(), env)?;
    let path = home.session(&session)?.inbox();
    let (entries, next) = inbox::read_from(&path, options.from)?;
    // Labels only: a peers file that does not parse costs the petnames, not the read.
    let peers = policy::load(home).unwrap_or_else(|e| {
        let _ = writeln!(progress, "inbox: no petnames: {e:#}");
        PeerPolicy::new()
    });
    let own = keyfile::load(&home.identity()).ok().map(|i| i.public());
    for entry in &entries {
        let sender: Option<IdentityKey> = entry.sender.parse().ok();
        let petname = sender.as_ref().and_then(|k| peers.name_of(k));
        if options.json {
            let mut value = serde_json::to_value(entry)?;
            if let Some(obj) = value.as_object_mut() {
                obj.insert("petname".into(), petname.into());
                obj.insert("own".into(), (sender.is_some() && sender == own).into());
            }
            writeln!(out, "{value}")?;
        } else {
            let label = match petname {
                _ if sender.is_some() && sender == own => "(you)",
                Some(name) => name,
                None => "(not a peer)",
            };
            out.write_all(render(entry, label).as_bytes())?;
        }
    }
    out.flush()?;
    let _ = writeln!(
        progress,
        "inbox: {} message(s) in session {session}; continue with --from {next}",
        entries.len()
    );
    Ok(())
}

/// The session whose inbox is read: the flag, the environment, or the only session
/// directory holding an inbox.
fn resolve_session(
    home: &Home,
    flag: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<SessionId> {
    let (id, source) = session::resolve(flag, env, &mut crate::os_rng())?;
    if source.is_pinned() {
        return Ok(id);
    }
    let dir = home.sessions();
    let mut found = Vec::new();
    if let Ok(read) = std::fs::read_dir(&dir) {
        for entry in read.flatten() {
            if SessionDir::at(entry.path()).inbox().is_file()
                && let Some(id) = entry
                    .file_name()
                    .to_str()
                    .and_then(|n| SessionId::new(n).ok())
            {
                found.push(id);
            }
        }
    }
    found.sort();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => bail!(
            "no session inbox under {}; pass --session ID (the id `interlink-p2p run` used)",
            dir.display()
        ),
        _ => bail!(
            "several sessions have an inbox ({}); pass --session ID",
            found
                .iter()
                .map(SessionId::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// One message for a human: a header line, then the text indented. Peer text is
/// untrusted, so control characters (terminal escapes) are shown escaped.
fn render(e: &InboxEntry, sender: &str) -> String {
    let mut head = format!(
        "{}  {sender} {}  session {}  msg {}",
        utc(e.sent_at),
        e.sender_fingerprint,
        clean(&e.sender_session),
        e.msg_id
    );
    let kind = serde_json::to_value(e.kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    if kind != "message" {
        head.push_str(&format!("  [{kind}]"));
    }
    if let Some(task) = &e.task_id {
        head.push_str(&format!("  task {}", clean(task)));
    }
    if let Some(status) = e.status.and_then(|s| serde_json::to_value(s).ok()) {
        head.push_str(&format!("  {}", status.as_str().unwrap_or_default()));
    }
    if let Some(re) = &e.in_reply_to {
        head.push_str(&format!("  re {re}"));
    }
    if let Some(g) = &e.group {
        // Recipients by session only: a human reads the keys with --json.
        let to: Vec<String> = g.members.iter().map(|m| clean(&m.session_id)).collect();
        head.push_str(&format!(
            "  group {} (to {}; thread {})",
            clean(&g.name),
            to.join(", "),
            clean(&g.thread)
        ));
    }
    let mut text = String::new();
    for line in e.text.as_deref().unwrap_or_default().split('\n') {
        text.push_str(&format!("    {}\n", clean(line)));
    }
    format!("{head}\n{text}")
}

/// Escapes control characters except tab.
fn clean(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() && c != '\t' {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// `YYYY-MM-DD HH:MM:SSZ` for ms since the Unix epoch.
fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = i64::try_from(days).unwrap_or(0) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use interlink_core::{MsgId, wire::EnvelopeKind};
    use interlink_net::inbox::Inbox;

    use super::*;

    #[test]
    fn dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00Z");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00Z");
        assert_eq!(utc(1_796_015_574_175), "2026-11-30 05:12:54Z");
    }

    fn entry(id: MsgId, text: &str) -> InboxEntry {
        InboxEntry {
            msg_id: id.to_string(),
            sender: "aa".repeat(32),
            sender_fingerprint: "0000-0000-0000".into(),
            sender_session: "s1".into(),
            reply_to: format!("{}#s1", "aa".repeat(32)),
            kind: EnvelopeKind::Message,
            task_id: Some("t1".into()),
            status: None,
            in_reply_to: None,
            sent_at: 0,
            received_at: 1,
            text: Some(text.into()),
            name: None,
            group: None,
        }
    }

    #[test]
    fn reads_the_only_session_and_continues_from_a_cursor() {
        let tmp = tempfile::tempdir().unwrap();
        let home = Home::new(tmp.path());
        let no_env = |_: &str| None;
        let opts = |from| Options {
            session: None,
            json: true,
            from,
        };
        let err = run(&home, &opts(0), no_env, &mut Vec::new(), &mut Vec::new());
        assert!(format!("{:#}", err.unwrap_err()).contains("--session"));

        let dir = home.session(&SessionId::new("s").unwrap()).unwrap();
        let mut inbox = Inbox::open(dir.path()).unwrap();
        let a = MsgId::from_bytes([1; 16]);
        inbox.append(a, &entry(a, "one\x1b[2J")).unwrap();
        let (mut out, mut progress) = (Vec::new(), Vec::new());
        run(&home, &opts(0), no_env, &mut out, &mut progress).unwrap();
        let line: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(line["text"], "one\x1b[2J");
        assert_eq!(line["petname"], serde_json::Value::Null);
        let progress = String::from_utf8(progress).unwrap();
        let next: u64 = progress.rsplit(' ').next().unwrap().trim().parse().unwrap();
        let mut out = Vec::new();
        run(&home, &opts(next), no_env, &mut out, &mut Vec::new()).unwrap();
        assert!(out.is_empty());

        // Human form: escapes control characters.
        let text = render(&entry(a, "one\x1b[2J\ntwo"), "alice");
        assert!(text.contains("alice 0000-0000-0000  session s1"), "{text}");
        assert!(text.contains("    one\\u{1b}[2J\n    two\n"), "{text}");
        assert!(text.contains("task t1"), "{text}");
    }
}

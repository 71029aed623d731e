//! `interlink-p2p inbox`: the messages a session's node delivered, read from its inbox
//! file (`<home>/sessions/<session id>/inbox.jsonl`, format in docs/DELIVERY.md).
//!
//! Reading changes nothing: every reader keeps its own cursor, a logical offset that
//! stays valid when the node compacts the inbox (older lines are read from its
//! archive, `interlink_store::inbox`). The cursor after the last complete line goes to
//! stderr, so a script can continue with `--from`.

use std::io::Write;

use anyhow::bail;
use interlink_core::wire::EnvelopeKind;
use interlink_core::{IdentityKey, SessionId, trust::PeerPolicy};
use interlink_store::inbox::{self, InboxEntry};

use crate::{
    paths::{Home, SessionDir, session_dir_name, session_of_dir_name},
    policy,
};

/// Runs `inbox`: messages to `out`, the cursor to `progress`.
pub fn run(
    home: &Home,
    options: &Args,
    env: impl Fn(&str) -> Option<String>,
    out: &mut impl Write,
    progress: &mut impl Write,
) -> anyhow::Result<()> {
    let (session, others) = resolve_session(home, options.session.as_deref(), env)?;
    if !others.is_empty() {
        let _ = writeln!(
            progress,
            "inbox: session {session}, the latest written; the others: {} (pass --session ID)",
            others
                .iter()
                .map(SessionId::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let dir = home.session(&session)?;
    let (entries, next) = inbox::read_from(&dir.inbox(), options.from)?;
    // Unread: what the session's agent has not acknowledged (a read state that does not
    // load marks nothing).
    let unread: std::collections::BTreeSet<(String, String)> =
        interlink_store::read_state::ReadState::load(&dir)
            .and_then(|r| r.unread())
            .map(|u| u.into_iter().map(|e| (e.sender, e.msg_id)).collect())
            .unwrap_or_default();
    // Labels only: a peers file that does not parse costs the petnames, not the read.
    let peers = policy::load(home).unwrap_or_else(|e| {
        let _ = writeln!(progress, "inbox: no petnames: {e:#}");
        PeerPolicy::new()
    });
    let own = interlink_mcp::cli::peers::own_key(home);
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
            let new = unread.contains(&(entry.sender.clone(), entry.msg_id.clone()));
            out.write_all(render(entry, label, new).as_bytes())?;
        }
    }
    out.flush()?;
    let messages = entries
        .iter()
        .filter(|e| e.kind == EnvelopeKind::Message)
        .count();
    let _ = writeln!(
        progress,
        "inbox: {messages} message(s), {} unread, in session {session}; continue with --from {next}",
        unread.len()
    );
    Ok(())
}

/// The session whose inbox is read — the flag, the environment, else the session
/// whose inbox was written last — and, in that last case, the other sessions with an
/// inbox.
fn resolve_session(
    home: &Home,
    flag: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<(SessionId, Vec<SessionId>)> {
    let (id, source) = interlink_mcp::cli::resolve_session(flag, env, &mut crate::os_rng())?;
    if source.is_pinned() {
        if !home.session(&id)?.inbox().is_file() {
            bail!(
                "session {id} has no inbox under {}: {}",
                home.sessions().display(),
                crate::session_ids::named(home, Some(INBOX_NAME), "an inbox")
            );
        }
        return Ok((id, Vec::new()));
    }
    let dir = home.sessions();
    let mut found = Vec::new();
    if let Ok(read) = std::fs::read_dir(&dir) {
        for entry in read.flatten() {
            if SessionDir::at(entry.path()).inbox().is_file()
                && let Some(id) = entry.file_name().to_str().and_then(session_of_dir_name)
                // The command line's own pairing session is no agent's inbox.
                && id.as_str() != crate::pairing_session::PAIR_SESSION
            {
                found.push(id);
            }
        }
    }
    // The most recently written inbox first: the live session, or the latest one.
    found.sort_by_key(|id| {
        let modified = std::fs::metadata(
            home.sessions()
                .join(session_dir_name(id).as_ref())
                .join(INBOX_NAME),
        )
        .and_then(|m| m.modified())
        .ok();
        std::cmp::Reverse(modified)
    });
    match found.len() {
        0 => bail!(
            "no session inbox under {}; pass --session ID (the id `interlink-p2p run` used)",
            dir.display()
        ),
        1 => Ok((found.remove(0), Vec::new())),
        _ => {
            let chosen = found.remove(0);
            Ok((chosen, found))
        }
    }
}

const INBOX_NAME: &str = interlink_store::inbox::INBOX_FILE;

/// One message for a human: a header line, then the text indented. Peer text is
/// untrusted, so control characters (terminal escapes) are shown escaped.
fn render(e: &InboxEntry, sender: &str, unread: bool) -> String {
    let mut head = format!(
        "{}{}  {sender} {}  session {}  msg {}",
        if unread { "* " } else { "" },
        interlink_mcp::cli::utc(e.sent_at),
        e.sender_fingerprint,
        clean(&e.sender_session),
        e.msg_id
    );
    // Lines for the agent side rather than the agent: one line each, saying what they
    // are (they carry no text).
    let what = match e.kind {
        EnvelopeKind::Message => None,
        EnvelopeKind::PairAccept => Some(format!(
            "accepted your pair request{}",
            e.name
                .as_deref()
                .map(|n| format!(" (suggests the name {:?})", clean(n)))
                .unwrap_or_default()
        )),
        EnvelopeKind::Knock => Some("asked to pair again".to_owned()),
        EnvelopeKind::Read if e.also_about.is_empty() => Some("read your message".to_owned()),
        EnvelopeKind::Read => Some(format!("read {} of your messages", 1 + e.also_about.len())),
        EnvelopeKind::HostQueued if e.also_about.is_empty() => {
            Some("handed your message to its agent".to_owned())
        }
        EnvelopeKind::HostQueued => Some(format!(
            "handed {} of your messages to its agent",
            1 + e.also_about.len()
        )),
        EnvelopeKind::Goodbye => Some("its session closed".to_owned()),
        EnvelopeKind::Pass => Some("handed over its mailbox pass".to_owned()),
    };
    if let Some(what) = what {
        head.push_str(&format!("  [{what}]"));
        if let Some(re) = &e.in_reply_to {
            head.push_str(&format!("  re {re}"));
            for more in &e.also_about {
                head.push_str(&format!(", {more}"));
            }
        }
        return format!("{head}\n");
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

/// Print a session's inbox: the messages its node delivered.
#[derive(Clone, Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  interlink-p2p inbox\n  interlink-p2p inbox --session reviewer --json\n  interlink-p2p inbox --from 4711\n\nUnread messages (not yet acknowledged by the session's agent) are marked *."
)]
pub struct Args {
    /// Session id [default: $INTERLINK_SESSION, else $CLAUDE_CODE_SESSION_ID, else
    /// the session whose inbox was written last]
    #[arg(long)]
    session: Option<String>,
    /// One JSON object per line (the inbox entry plus `petname` and `own`).
    #[arg(long)]
    json: bool,
    /// Start at this inbox offset (printed on stderr by the previous read).
    #[arg(long, value_name = "OFFSET", default_value_t = 0)]
    from: u64,
}

/// `interlink-p2p inbox`.
pub fn command(args: Args, ctx: &crate::Ctx) -> anyhow::Result<std::process::ExitCode> {
    run(
        &ctx.home()?,
        &args,
        |k| std::env::var(k).ok(),
        &mut std::io::stdout(),
        &mut std::io::stderr(),
    )?;
    Ok(std::process::ExitCode::SUCCESS)
}

#[cfg(test)]
#[path = "inbox_tests.rs"]
mod tests;

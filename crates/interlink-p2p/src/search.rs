//! `interlink-p2p search`: every session's messages, sent and received, that hold the
//! words asked for, newest first ([`crate::history`]). Reads the home; needs no running
//! session and disturbs none.

use std::{io::Write as _, process::ExitCode};

use anyhow::Context as _;

use crate::history::{self, Direction, MAX_LIMIT, Message, Query};

/// Search the messages of every session of this home, sent and received.
#[derive(Debug, clap::Args)]
#[command(after_help = "Exit status 1 when nothing matched.\n\nExamples:\n  \
                        interlink-p2p search migration\n  \
                        interlink-p2p search --peer bob --since 2d schema\n  \
                        interlink-p2p search --state queued --json")]
pub struct Args {
    /// Words the message must all hold (case aside); none: every message.
    words: Vec<String>,
    /// Only messages with this peer: a petname, or the start of its key.
    #[arg(long)]
    peer: Option<String>,
    /// Only this session's messages.
    #[arg(long)]
    session: Option<String>,
    /// Only messages sent in this last while: `90s`, `30m`, `2h`, `7d`.
    #[arg(long, value_parser = parse_age)]
    since: Option<u64>,
    /// Only messages in this state: received, queued, delivered, host_queued, read,
    /// not_kept.
    #[arg(long)]
    state: Option<String>,
    /// Most messages shown, newest first.
    #[arg(long, default_value_t = 50)]
    limit: usize,
    /// One JSON object per message, one per line.
    #[arg(long)]
    json: bool,
}

const STATES: &[&str] = &[
    "received",
    "queued",
    "not_kept",
    "delivered",
    "host_queued",
    "read",
];

/// A duration such as `30m` in ms.
fn parse_age(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (n, unit) = text.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("{text:?}: use e.g. 30m, 2h, 7d"))?;
    let unit_ms = match unit {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(format!("{text:?}: the unit is s, m, h or d")),
    };
    Ok(n.saturating_mul(unit_ms))
}

/// `interlink-p2p search`.
pub fn command(args: Args, ctx: &crate::Ctx) -> anyhow::Result<ExitCode> {
    let home = ctx.home()?;
    if let Some(state) = &args.state
        && !STATES.contains(&state.as_str())
    {
        return Err(crate::UsageError(format!(
            "--state {state}: use one of {}",
            STATES.join(", ")
        ))
        .into());
    }
    if args.limit == 0 || args.limit > MAX_LIMIT {
        return Err(crate::UsageError(format!("--limit is 1 to {MAX_LIMIT}")).into());
    }
    let now = crate::config::clock(ctx.env())?.now_ms();
    let mut query = Query::words(&args.words.join(" "));
    query.peer = args.peer;
    query.session = args.session;
    query.since = args.since.map(|age| now.saturating_sub(age));
    query.state = args.state;
    query.limit = args.limit;
    let (found, more) = history::search(&home, &query);
    let mut out = std::io::stdout().lock();
    for m in &found {
        if args.json {
            writeln!(out, "{}", serde_json::to_string(m)?)?;
        } else {
            writeln!(out, "{}", line(m))?;
        }
    }
    out.flush().context("writing the results")?;
    if found.is_empty() {
        eprintln!("search: no message matched");
    }
    if more {
        eprintln!(
            "search: more messages matched than the {} shown (--limit)",
            found.len()
        );
    }
    Ok(if found.is_empty() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// One message as a line: when, which session, which way, the other side, the state,
/// then the text's first line.
pub fn line(m: &Message) -> String {
    let (year, month, day, h, min, _) = interlink_core::dates::utc_fields(m.at / 1000);
    let who = match (&m.peer_name, m.own) {
        (_, true) => "you".to_owned(),
        (Some(name), _) => name.clone(),
        (None, _) => m.peer.get(..16).unwrap_or(&m.peer).to_owned(),
    };
    let arrow = match m.direction {
        Direction::In => "<-",
        Direction::Out => "->",
    };
    let mut text: String = m
        .text
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(120)
        .collect();
    if text.len() < m.text.len() {
        text.push('…');
    }
    // Peer text is shown escaped: it cannot pass for this program's own lines.
    let text = text.escape_debug();
    format!(
        "{year:04}-{month:02}-{day:02} {h:02}:{min:02}Z {} {arrow} {who}/{} [{}] {text}",
        m.session, m.peer_session, m.state
    )
}

#[cfg(test)]
#[path = "search_tests.rs"]
mod tests;

//! Every message of the home's sessions — received (each inbox and its archive) and
//! sent (each session's sent log, with its delivery state) — read from the files, for
//! `interlink-p2p search` and the `ui` page.
//!
//! No index: a search scans the files, newest first, and a line is decoded only when
//! its bytes hold every word asked for (case aside), so 100,000 messages answer in
//! tens of milliseconds (BENCHMARKS.md, "Search"). An index would be a second copy of
//! every opened message on disk, kept in step with compaction, retention and the
//! sessions writing: more to keep secret and more to go wrong than the scan costs.
//! Reading takes no lock and writes nothing, so it never disturbs a running session.

use interlink_core::{IdentityKey, trust::PeerPolicy, wire::EnvelopeKind};
use std::{borrow::Cow, collections::HashSet};

use interlink_store::{
    inbox::{self, InboxEntry},
    paths::{Home, SessionDir, session_of_dir_name},
    read_state::ReadState,
    sent_log::{HeldBy, MAX_SENT, State},
};
use serde::{Deserialize, Serialize};

/// Most sessions of a home read.
pub const MAX_SESSIONS: usize = 1024;
/// Most lines of one session's inbox (hot file and archive) a search looks at.
pub const MAX_LINES_PER_SESSION: usize = 200_000;
/// Most messages one search returns.
pub const MAX_LIMIT: usize = 1000;
/// Most words of a query.
pub const MAX_WORDS: usize = 16;

/// Which way a message went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Received by the home's session.
    In,
    /// Sent by it.
    Out,
}

/// One message, as the home has it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Message {
    /// The home's session that has it.
    pub session: String,
    /// Received or sent.
    pub direction: Direction,
    /// The other side's identity key (hex).
    pub peer: String,
    /// Its petname, if paired.
    pub peer_name: Option<String>,
    /// The other side's session.
    pub peer_session: String,
    /// Whether the other side is this home's own identity (another of its sessions).
    pub own: bool,
    /// The message id (32 hex digits).
    pub id: String,
    /// The task it belongs to.
    pub task_id: Option<String>,
    /// Its task status (`update`, `done`, ...).
    pub status: Option<String>,
    /// The message it answers.
    pub in_reply_to: Option<String>,
    /// The group it went through.
    pub group: Option<String>,
    /// The group's thread.
    pub thread: Option<String>,
    /// Its text (a sent one cut to the sent log's bound).
    pub text: String,
    /// When it was sent (ms since the Unix epoch).
    pub at: u64,
    /// Sent: `queued`, `not_kept`, `delivered`, `host_queued` or `read`, as the sender
    /// knows it. Received: `received` (in the session's inbox).
    pub state: &'static str,
    /// A queued message: where it was held when it was sent (this session's outbox, and
    /// how many relays and peers its mailbox copy went to).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_by: Option<HeldBy>,
    /// Received, where asked ([`mark_consumed`]): whether the session's agent has
    /// consumed it (acknowledged it, or its host was handed it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumed: Option<bool>,
}

/// What to look for. Empty fields match everything.
#[derive(Clone, Debug, Default)]
pub struct Query {
    /// Words the text must all hold, case aside.
    pub words: Vec<String>,
    /// The peer: a petname, or the start of its key (4 hex digits or more).
    pub peer: Option<String>,
    /// The home's session.
    pub session: Option<String>,
    /// Sent at or after (ms since the Unix epoch).
    pub since: Option<u64>,
    /// A state (`received`, `queued`, `delivered`, `host_queued`, `read`, `not_kept`).
    pub state: Option<String>,
    /// Most messages returned (newest first); at most [`MAX_LIMIT`].
    pub limit: usize,
}

impl Query {
    /// A query for the words of `text` (split at white space).
    pub fn words(text: &str) -> Self {
        Self {
            words: text
                .split_whitespace()
                .take(MAX_WORDS)
                .map(str::to_lowercase)
                .collect(),
            limit: 50,
            ..Self::default()
        }
    }
}

/// The newest messages that match, newest first; and whether more matched than were
/// returned.
pub fn search(home: &Home, query: &Query) -> (Vec<Message>, bool) {
    let searcher = Searcher::new(home, query);
    let limit = searcher.limit;
    let mut found = Vec::new();
    let mut more = false;
    for (session, dir) in sessions(home) {
        if query.session.as_deref().is_some_and(|s| s != session) {
            continue;
        }
        let (here, over) = searcher.session(&session, &dir);
        more |= over;
        found.extend(here);
        // Keep the newest `limit` as we go: memory stays bounded by the limit times the
        // sessions read, not by the home's messages.
        if found.len() > limit * 4 {
            newest_first(&mut found);
            more = true;
            found.truncate(limit);
        }
    }
    newest_first(&mut found);
    if found.len() > limit {
        more = true;
        found.truncate(limit);
    }
    (found, more)
}

/// A query made ready for the files: the home's names and own key read once, the words
/// lowercased.
#[derive(Debug)]
pub struct Searcher<'q> {
    query: &'q Query,
    own: Option<IdentityKey>,
    peers: PeerPolicy,
    peer: Option<PeerFilter>,
    words: Vec<String>,
    limit: usize,
}

impl<'q> Searcher<'q> {
    /// Ready to search `home` for `query` (its session filter is the caller's).
    pub fn new(home: &Home, query: &'q Query) -> Self {
        let peers = interlink_store::policy::load(home).unwrap_or_default();
        Self {
            own: interlink_mcp::cli::peers::own_key(home),
            peer: query.peer.as_deref().map(|p| PeerFilter::new(p, &peers)),
            peers,
            words: query.words.iter().map(|w| w.to_lowercase()).collect(),
            limit: query.limit.clamp(1, MAX_LIMIT),
            query,
        }
    }

    fn label(&self, key: &str) -> (Option<String>, bool) {
        let parsed = key.parse::<IdentityKey>().ok();
        let name = parsed
            .as_ref()
            .and_then(|k| self.peers.name_of(k))
            .map(str::to_owned);
        (name, parsed.is_some() && parsed == self.own)
    }

    /// The matches of one session (`dir`): the newest `limit` received, every sent one;
    /// and whether more received ones may match.
    pub fn session(&self, session: &str, dir: &SessionDir) -> (Vec<Message>, bool) {
        let (query, words) = (self.query, &self.words);
        let mut found = Vec::new();
        let mut more = false;
        if query.state.as_deref().is_none_or(|s| s == "received") {
            let keep = |e: &InboxEntry| {
                e.kind == EnvelopeKind::Message
                    && query.since.is_none_or(|t| e.sent_at >= t)
                    && self.peer.as_ref().is_none_or(|p| p.matches(&e.sender))
                    && e.text.as_deref().is_some_and(|t| holds_all(t, words))
            };
            let (entries, over) = inbox::read_newest_lines(
                &dir.inbox(),
                self.limit,
                MAX_LINES_PER_SESSION,
                |line| line_may_hold(line, words),
                keep,
            )
            .unwrap_or_default();
            more = over;
            found.extend(entries.into_iter().map(|e| {
                let (peer_name, own) = self.label(&e.sender);
                received(session, e, peer_name, own)
            }));
        }
        // A sent log that lacks a word (as bytes, case aside) holds no match: it is not
        // decoded at all. One that may is decoded in place (its strings borrowed from
        // the file's bytes), and an entry's text is lowercased only when its bytes may
        // hold the words.
        let bytes = std::fs::read(dir.sent_log()).unwrap_or_default();
        if words.is_empty() || line_may_hold(&bytes, words) {
            let rows = serde_json::from_slice::<SentFile<'_>>(&bytes)
                .map(|f| f.sent)
                .unwrap_or_default();
            for e in rows.iter().rev().take(MAX_SENT) {
                let ok = query.state.as_deref().is_none_or(|s| s == e.state.as_str())
                    && query.since.is_none_or(|t| e.sent_at >= t)
                    && self.peer.as_ref().is_none_or(|p| p.matches(&e.to_key))
                    && line_may_hold(e.text.as_bytes(), words)
                    && holds_all(&e.text, words);
                if ok {
                    let (peer_name, own) = self.label(&e.to_key);
                    found.push(sent(session, e, peer_name, own));
                }
            }
        }
        (found, more)
    }
}

/// Marks each of `found`'s messages received by the session in `dir` with whether its
/// agent consumed it, as that session's read state says (`read.json`, the state the
/// MCP server keeps; only read here). Unmarked when the state cannot be read.
///
/// It costs one read of the inbox past the consumed offset, so it is for one thread,
/// not for a search over every session.
pub fn mark_consumed(dir: &SessionDir, found: &mut [Message]) {
    if !found.iter().any(|m| m.direction == Direction::In) {
        return;
    }
    let Ok(unread) = ReadState::load(dir).and_then(|s| s.unread()) else {
        return;
    };
    let unread: HashSet<(&str, &str)> = unread
        .iter()
        .map(|e| (e.sender.as_str(), e.msg_id.as_str()))
        .collect();
    for m in found.iter_mut().filter(|m| m.direction == Direction::In) {
        m.consumed = Some(!unread.contains(&(m.peer.as_str(), m.id.as_str())));
    }
}

fn newest_first(found: &mut [Message]) {
    found.sort_by(|a, b| b.at.cmp(&a.at).then_with(|| a.id.cmp(&b.id)));
}

/// The home's sessions with their directories, at most [`MAX_SESSIONS`].
pub fn sessions(home: &Home) -> Vec<(String, SessionDir)> {
    let Ok(dirs) = std::fs::read_dir(home.sessions()) else {
        return Vec::new();
    };
    let mut out: Vec<(String, SessionDir)> = dirs
        .filter_map(Result::ok)
        .filter(|d| d.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|d| {
            let id = session_of_dir_name(&d.file_name().to_string_lossy())?;
            Some((id.as_str().to_owned(), SessionDir::at(d.path())))
        })
        .take(MAX_SESSIONS)
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Whether `text` holds every one of `words` (lowercase), case aside.
fn holds_all(text: &str, words: &[String]) -> bool {
    if words.is_empty() {
        return true;
    }
    let text = text.to_lowercase();
    words.iter().all(|w| text.contains(w.as_str()))
}

/// Whether an inbox line may hold every word: false only when a word that is plain
/// ASCII (and so appears in the JSON line as it is) is missing from the line, ASCII
/// case aside. Other words are left to the decoded text.
fn line_may_hold(line: &[u8], words: &[String]) -> bool {
    words.iter().all(|w| {
        let plain = w
            .bytes()
            .all(|b| b.is_ascii() && !b.is_ascii_control() && b != b'"' && b != b'\\');
        !plain || contains_ascii_nocase(line, w.as_bytes())
    })
}

/// Whether `hay` holds `needle` (lowercase ASCII), ASCII case aside.
fn contains_ascii_nocase(hay: &[u8], needle: &[u8]) -> bool {
    let Some(&first) = needle.first() else {
        return true;
    };
    let upper = first.to_ascii_uppercase();
    let mut at = 0;
    while let Some(i) = memchr::memchr2(first, upper, &hay[at..]) {
        let start = at + i;
        if hay
            .get(start..start + needle.len())
            .is_some_and(|w| w.eq_ignore_ascii_case(needle))
        {
            return true;
        }
        at = start + 1;
    }
    false
}

/// A peer filter: a petname, or the start of a key.
#[derive(Debug)]
struct PeerFilter {
    keys: Vec<String>,
    prefix: Option<String>,
}

impl PeerFilter {
    fn new(text: &str, peers: &PeerPolicy) -> Self {
        let text = text.trim();
        let keys = peers
            .iter()
            .filter(|(name, _)| name.eq_ignore_ascii_case(text))
            .map(|(_, k)| k.to_hex())
            .collect();
        let hex = text.len() >= 4 && text.bytes().all(|b| b.is_ascii_hexdigit());
        Self {
            keys,
            prefix: hex.then(|| text.to_ascii_lowercase()),
        }
    }

    fn matches(&self, key: &str) -> bool {
        self.keys.iter().any(|k| k == key)
            || self.prefix.as_deref().is_some_and(|p| key.starts_with(p))
    }
}

fn received(session: &str, e: InboxEntry, peer_name: Option<String>, own: bool) -> Message {
    let group = e.group.as_ref();
    Message {
        session: session.to_owned(),
        direction: Direction::In,
        peer: e.sender,
        peer_name,
        peer_session: e.sender_session,
        own,
        id: e.msg_id,
        task_id: e.task_id,
        status: e
            .status
            .and_then(|s| serde_json::to_value(s).ok())
            .and_then(|v| v.as_str().map(str::to_owned)),
        in_reply_to: e.in_reply_to,
        group: group.map(|g| g.name.clone()),
        thread: group.map(|g| g.thread.clone()),
        text: e.text.unwrap_or_default(),
        at: e.sent_at,
        state: "received",
        held_by: None,
        consumed: None,
    }
}

/// A session's `sent.json` ([`interlink_store::sent_log`]) as search reads it: the
/// fields it shows, borrowed from the file's bytes where no escape forces a copy.
#[derive(Deserialize)]
struct SentFile<'a> {
    #[serde(borrow)]
    sent: Vec<SentRow<'a>>,
}

#[derive(Deserialize)]
struct SentRow<'a> {
    #[serde(borrow)]
    msg_id: Cow<'a, str>,
    #[serde(borrow)]
    to_key: Cow<'a, str>,
    #[serde(borrow)]
    to_session: Cow<'a, str>,
    state: State,
    #[serde(borrow, default)]
    task_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    status: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    in_reply_to: Option<Cow<'a, str>>,
    #[serde(borrow)]
    text: Cow<'a, str>,
    sent_at: u64,
    #[serde(borrow, default)]
    group: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    thread: Option<Cow<'a, str>>,
    #[serde(default)]
    held_by: Option<HeldBy>,
}

fn sent(session: &str, e: &SentRow<'_>, peer_name: Option<String>, own: bool) -> Message {
    let owned = |v: &Option<Cow<'_, str>>| v.as_deref().map(str::to_owned);
    Message {
        session: session.to_owned(),
        direction: Direction::Out,
        peer: e.to_key.clone().into_owned(),
        peer_name,
        peer_session: e.to_session.clone().into_owned(),
        own,
        id: e.msg_id.clone().into_owned(),
        task_id: owned(&e.task_id),
        status: owned(&e.status),
        in_reply_to: owned(&e.in_reply_to),
        group: owned(&e.group),
        thread: owned(&e.thread),
        text: e.text.clone().into_owned(),
        at: e.sent_at,
        state: e.state.as_str(),
        held_by: (e.state == State::Queued).then_some(e.held_by).flatten(),
        consumed: None,
    }
}

#[cfg(test)]
#[path = "history_tests.rs"]
mod tests;

//! The page's data and actions, as JSON. Every read is of the home's files (sessions
//! need not run; running ones are not disturbed: nothing here takes a session's lock or
//! moves a read cursor); every action is one the CLI has (`pair`, `peer`, `send`).

use std::{
    collections::BTreeMap,
    convert::Infallible,
    time::{Duration, SystemTime},
};

use axum::{
    Json,
    extract::{Query as UrlQuery, State},
    http::StatusCode,
    response::{
        IntoResponse, Response,
        sse::{Event, KeepAlive, Sse},
    },
};
use futures::Stream;
use interlink_core::{IdentityKey, SessionId};
use interlink_store::{
    pairing,
    paths::{Home, SessionDir},
};
use serde::Deserialize;
use serde_json::{Value, json};

use super::App;
use crate::history::{self, Message, Query};

/// A running session rewrites its `network.json` at least this often
/// ([`interlink_mcp::network_view::REWRITE_AT_LEAST`]); older means it stopped.
const LIVE_WITHIN: Duration = Duration::from_secs(45);
/// Most messages of one thread shown.
const THREAD_LIMIT: usize = 500;
/// Most messages a search from the page returns (the newest; the page says when more
/// matched). A common word costs about 1 ms per 1,000 of these in a home of 100,000.
const PAGE_SEARCH_LIMIT: usize = 100;
/// Most bytes of one message the human writes on the page.
const MAX_WRITE_BYTES: usize = 16 * 1024;
/// Newest messages of each session the overview's conversations are counted from.
const OVERVIEW_MESSAGES: usize = 50;
/// Characters of a message's text the overview keeps (the latest one's is shown).
const OVERVIEW_TEXT_CHARS: usize = 160;

/// An error as the page shows it.
pub(super) struct Failure(StatusCode, String);

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        (self.0, Json(json!({"error": self.1}))).into_response()
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Self(StatusCode::BAD_REQUEST, format!("{e:#}"))
    }
}

/// Runs blocking file reads off the server's threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> Result<T, Failure> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Failure(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
        .map_err(Failure::from)
}

fn age(path: &std::path::Path) -> Option<Duration> {
    let modified = std::fs::metadata(path).ok()?.modified().ok()?;
    SystemTime::now().duration_since(modified).ok()
}

/// `GET /api/overview`: this user, the home's sessions and what each is connected to,
/// the peers, pair requests, conversations and claims.
pub(super) async fn overview(State(app): State<App>) -> Result<Json<Value>, Failure> {
    let overlay = match &app.overlay {
        Some(o) => o.report(&app.home, app.clock.now_ms()).await,
        None => None,
    };
    blocking(move || {
        let mut v = overview_of(&app);
        v["overlay"] = serde_json::to_value(overlay).unwrap_or(Value::Null);
        Ok(Json(v))
    })
    .await
}

fn overview_of(app: &App) -> Value {
    let home = &app.home;
    let now = app.clock.now_ms();
    let own = interlink_mcp::cli::peers::own_key(home);
    let peers = interlink_store::policy::load(home).unwrap_or_default();
    // A session's network view names the user's own identity by its fingerprint.
    let own_prefix = own.as_ref().map(|k| format!("{}/", k.fingerprint()));
    let sessions: Vec<Value> = history::sessions(home)
        .into_iter()
        .map(|(id, dir)| {
            let network: Value = std::fs::read(dir.network())
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .unwrap_or(Value::Null);
            let live = network["stopped_ms"].is_null()
                && age(&dir.network()).is_some_and(|a| a < LIVE_WITHIN);
            let links: Vec<Value> = network["peers"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|p| {
                    let route = p["route"].clone();
                    let own_prefix = own_prefix.clone();
                    p["sessions"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default()
                        .into_iter()
                        .map(move |s| {
                            let s = s.as_str().unwrap_or_default();
                            let s = match own_prefix.as_deref().and_then(|p| s.strip_prefix(p)) {
                                Some(own_session) => format!("you/{own_session}"),
                                None => s.to_owned(),
                            };
                            json!({"session": s, "route": route})
                        })
                })
                .collect();
            json!({"id": id, "live": live, "links": if live { links } else { Vec::new() }})
        })
        .collect();
    let peer_list: Vec<Value> = peers
        .iter()
        .map(|(name, key)| json!({"name": name, "key": key.to_hex(), "fingerprint": key.fingerprint().to_string()}))
        .collect();
    let pairing = pairing::current(home, now).ok();
    let recent = app.recent.recent(home);
    let mut conversations: BTreeMap<(String, String, String), (usize, Message)> = BTreeMap::new();
    for m in recent {
        let key = (m.session.clone(), m.peer.clone(), m.peer_session.clone());
        let entry = conversations.entry(key).or_insert((0, m.clone()));
        entry.0 += 1;
    }
    let conversations: Vec<Value> = conversations
        .into_values()
        .map(|(count, last)| {
            json!({
                "session": last.session, "peer": last.peer, "peer_name": last.peer_name,
                "peer_session": last.peer_session, "own": last.own, "count": count,
                "last_at": last.at, "last_text": last.text,
                "last_state": last.state,
            })
        })
        .collect();
    json!({
        "me": {
            "key": own.as_ref().map(IdentityKey::to_hex),
            "fingerprint": own.as_ref().map(|k| k.fingerprint().to_string()),
            "name": app.name,
        },
        "now": now,
        "sessions": sessions,
        "peers": peer_list,
        "pairing": pairing.map(|p| json!({"incoming": p.incoming, "outgoing": p.outgoing})),
        "conversations": conversations,
        "claims": interlink_mcp::cli::claims::boards(home, now),
    })
}

/// Each session's newest messages, kept between overviews and read again only for the
/// sessions whose inbox or sent log changed: with 100,000 messages in a home, reading
/// them all for every change would cost ~100 ms each time.
#[derive(Debug, Default)]
pub(super) struct Recent {
    by_session: std::sync::Mutex<BTreeMap<String, (u64, Vec<Message>)>>,
}

impl Recent {
    /// The newest [`OVERVIEW_MESSAGES`] of every session (their texts cut to what the
    /// overview shows), all sessions together.
    fn recent(&self, home: &Home) -> Vec<Message> {
        let query = Query {
            limit: OVERVIEW_MESSAGES,
            ..Query::default()
        };
        let sessions = history::sessions(home);
        let mut searcher = None;
        let Ok(mut cache) = self.by_session.lock() else {
            return Vec::new();
        };
        cache.retain(|id, _| sessions.iter().any(|(s, _)| s == id));
        for (id, dir) in &sessions {
            let stamp = session_stamp(dir);
            if cache.get(id).is_some_and(|(s, _)| *s == stamp) {
                continue;
            }
            let searcher = searcher.get_or_insert_with(|| history::Searcher::new(home, &query));
            let (mut found, _) = searcher.session(id, dir);
            found.sort_by_key(|m| std::cmp::Reverse(m.at));
            found.truncate(OVERVIEW_MESSAGES);
            for m in &mut found {
                if let Some((cut, _)) = m.text.char_indices().nth(OVERVIEW_TEXT_CHARS) {
                    m.text.truncate(cut);
                }
            }
            cache.insert(id.clone(), (stamp, found));
        }
        cache
            .values()
            .flat_map(|(_, m)| m.iter().cloned())
            .collect()
    }
}

/// A stamp of a session's messages: its inbox's logical bounds (an append overwrites
/// the inbox's padding, so neither its size nor, within the clock's coarse tick, its
/// modification time need change) and its sent log's file (replaced whole on a change).
fn session_stamp(dir: &SessionDir) -> u64 {
    use std::hash::{DefaultHasher, Hash as _, Hasher as _};
    let mut h = DefaultHasher::new();
    interlink_store::inbox::bounds(&dir.inbox())
        .ok()
        .hash(&mut h);
    file_stamp(&dir.sent_log()).hash(&mut h);
    h.finish()
}

/// A file's size, modification time and (on Unix) inode: a file replaced by a rename
/// is a new inode even when size and time are the same.
fn file_stamp(path: &std::path::Path) -> Option<(u64, Option<SystemTime>, u64)> {
    let m = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let ino = std::os::unix::fs::MetadataExt::ino(&m);
    #[cfg(not(unix))]
    let ino = 0;
    Some((m.len(), m.modified().ok(), ino))
}

/// The thread between one of the home's sessions and one peer session.
#[derive(Debug, Deserialize)]
pub(super) struct ThreadArgs {
    session: String,
    peer: String,
    peer_session: String,
}

/// `GET /api/thread`: its messages, oldest first, each with its state.
pub(super) async fn thread(
    State(app): State<App>,
    UrlQuery(args): UrlQuery<ThreadArgs>,
) -> Result<Json<Value>, Failure> {
    blocking(move || {
        let query = Query {
            session: Some(args.session.clone()),
            peer: Some(args.peer.clone()),
            limit: THREAD_LIMIT,
            ..Query::default()
        };
        let (mut found, more) = history::search(&app.home, &query);
        found.retain(|m| m.peer == args.peer && m.peer_session == args.peer_session);
        found.reverse();
        if let Ok(id) = SessionId::new(args.session.as_str())
            && let Ok(dir) = app.home.session(&id)
        {
            history::mark_consumed(&dir, &mut found);
        }
        Ok(Json(json!({"messages": found, "more": more})))
    })
    .await
}

/// A search from the page.
#[derive(Debug, Deserialize)]
pub(super) struct SearchArgs {
    #[serde(default)]
    q: String,
    peer: Option<String>,
    session: Option<String>,
    state: Option<String>,
    /// Only the last this many hours.
    hours: Option<u64>,
}

/// `GET /api/search`.
pub(super) async fn search(
    State(app): State<App>,
    UrlQuery(args): UrlQuery<SearchArgs>,
) -> Result<Json<Value>, Failure> {
    blocking(move || {
        let start = std::time::Instant::now();
        let mut query = Query::words(&args.q);
        query.peer = args.peer.filter(|p| !p.is_empty());
        query.session = args.session.filter(|s| !s.is_empty());
        query.state = args.state.filter(|s| !s.is_empty());
        query.since = args.hours.map(|h| {
            app.clock
                .now_ms()
                .saturating_sub(h.saturating_mul(3_600_000))
        });
        query.limit = PAGE_SEARCH_LIMIT;
        let (found, more) = history::search(&app.home, &query);
        let ms = start.elapsed().as_secs_f64() * 1000.0;
        Ok(Json(json!({"messages": found, "more": more, "ms": ms})))
    })
    .await
}

/// `GET /api/events`: a `change` event whenever the home's files change (a message in
/// or out, a state moving, a session starting or stopping, a pair request, a claim).
pub(super) async fn events(
    State(app): State<App>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, Failure> {
    let Ok(permit) = app.streams.clone().try_acquire_owned() else {
        return Err(Failure(
            StatusCode::TOO_MANY_REQUESTS,
            format!("at most {} pages at once", super::MAX_EVENT_STREAMS),
        ));
    };
    // The watch channel itself is the stream: the current stamp at once, then one
    // event per change; the permit goes with the stream when the page leaves.
    let stream = futures::stream::unfold(
        (app.changes.clone(), permit, true),
        |(mut changes, permit, first)| async move {
            if !first && changes.changed().await.is_err() {
                return None;
            }
            let stamp = *changes.borrow_and_update();
            let event = Event::default().event("change").data(stamp.to_string());
            Some((Ok(event), (changes, permit, false)))
        },
    );
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// A stamp of the home's files the page shows: it changes when any of them does.
pub(super) fn home_stamp(home: &Home) -> u64 {
    use std::hash::{DefaultHasher, Hash as _, Hasher as _};
    let mut h = DefaultHasher::new();
    file_stamp(&home.peers()).hash(&mut h);
    file_stamp(&home.pairing()).hash(&mut h);
    for (id, dir) in history::sessions(home) {
        id.hash(&mut h);
        session_stamp(&dir).hash(&mut h);
        file_stamp(&dir.network()).hash(&mut h);
        file_stamp(&dir.path().join("board.json")).hash(&mut h);
        // What the session's agent consumed: a thread shows it.
        file_stamp(&dir.read_state()).hash(&mut h);
        file_stamp(&dir.path().join(interlink_store::read_state::LAZY_FILE)).hash(&mut h);
    }
    h.finish()
}

/// A pair request, by its fingerprint.
#[derive(Debug, Deserialize)]
pub(super) struct Fingerprint {
    fingerprint: String,
}

/// `POST /api/pair/accept`: pins the requester and confirms to its session (as
/// `interlink-p2p pair accept`).
pub(super) async fn pair_accept(
    State(app): State<App>,
    Json(args): Json<Fingerprint>,
) -> Result<Json<Value>, Failure> {
    let mut out = Vec::new();
    crate::pair::run(
        &app.home,
        crate::pair::Action::Accept {
            fingerprint: args.fingerprint,
            wait: 5.0,
        },
        app.config.clone(),
        app.name.clone(),
        &mut out,
    )
    .await?;
    Ok(Json(json!({"done": String::from_utf8_lossy(&out).trim()})))
}

/// `POST /api/pair/reject`.
pub(super) async fn pair_reject(
    State(app): State<App>,
    Json(args): Json<Fingerprint>,
) -> Result<Json<Value>, Failure> {
    blocking(move || {
        let request = pairing::reject(&app.home, &args.fingerprint)?;
        Ok(Json(
            json!({"done": format!("rejected {}", request.fingerprint)}),
        ))
    })
    .await
}

/// A peer edit.
#[derive(Debug, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub(super) enum PeerEdit {
    /// Give a peer another petname.
    Rename {
        /// Its petname now.
        old: String,
        /// The new one.
        new: String,
    },
    /// Remove a peer.
    Remove {
        /// Its petname.
        name: String,
    },
}

/// `POST /api/peer`: rename or remove (as `interlink-p2p peer`).
pub(super) async fn peer(
    State(app): State<App>,
    Json(edit): Json<PeerEdit>,
) -> Result<Json<Value>, Failure> {
    blocking(move || {
        let action = match edit {
            PeerEdit::Rename { old, new } => crate::peer::Action::Rename { old, new },
            PeerEdit::Remove { name } => crate::peer::Action::Remove { name },
        };
        let mut out = Vec::new();
        crate::peer::run(&app.home, action, &mut out, &mut std::io::sink())?;
        Ok(Json(json!({"done": String::from_utf8_lossy(&out).trim()})))
    })
    .await
}

/// Words from the human to one of the home's sessions.
#[derive(Debug, Deserialize)]
pub(super) struct Write {
    session: String,
    text: String,
}

/// `POST /api/send`: the human's message to one of their sessions, signed with their key
/// from the page's own session, which the agent is shown as its user's words
/// ([`interlink_mcp::cli::USER_SESSION_PREFIX`]). One at a time: the page's session is
/// one node.
pub(super) async fn send(
    State(app): State<App>,
    Json(w): Json<Write>,
) -> Result<Json<Value>, Failure> {
    let text = w.text.trim().to_owned();
    if text.is_empty() {
        return Err(Failure(StatusCode::BAD_REQUEST, "nothing to send".into()));
    }
    if text.len() > MAX_WRITE_BYTES {
        return Err(Failure(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "{} bytes; a message holds at most {}",
                text.len(),
                MAX_WRITE_BYTES
            ),
        ));
    }
    let _one = app.sending.lock().await;
    let options = crate::send::Options {
        to: "self".into(),
        session: Some(w.session),
        task_id: None,
        status: None,
        wait: Duration::from_secs(5),
        cwd: app.home.path().to_owned(),
        reply_to: None,
        from_user: true,
    };
    let (mut out, mut progress) = (Vec::new(), Vec::new());
    let sent = crate::send::send(
        &app.home,
        app.config.clone(),
        options,
        crate::send::Messages::<tokio::io::BufReader<tokio::io::Empty>>::One(text),
        &mut out,
        &mut progress,
    )
    .await;
    let out = String::from_utf8_lossy(&out).trim().to_owned();
    match sent {
        Ok(_) => Ok(Json(json!({"done": out}))),
        Err(e) => Err(Failure(StatusCode::BAD_GATEWAY, format!("{e:#}"))),
    }
}

/// How long a code made on the page admits, unless the page says otherwise.
const INVITE_FOR: Duration = Duration::from_secs(3600);

/// An invite's lifetime, from the page.
#[derive(Debug, Deserialize)]
pub(super) struct InviteArgs {
    minutes: Option<u64>,
}

/// The code's line of an invite's output, handed over as soon as it is written (the
/// invite then goes on waiting for the join).
struct FirstLine {
    buf: Vec<u8>,
    tx: Option<tokio::sync::oneshot::Sender<String>>,
}

impl std::io::Write for FirstLine {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if self.tx.is_some() {
            self.buf.extend_from_slice(b);
            if let Some(nl) = self.buf.iter().position(|&c| c == b'\n') {
                let line = String::from_utf8_lossy(&self.buf[..nl]).into_owned();
                if let Some(tx) = self.tx.take() {
                    let _ = tx.send(line);
                }
            }
        }
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `POST /api/invite`: a one-line code that pairs one person with this user, once (as
/// `interlink-p2p invite`). The page's server keeps the invite's session waiting for
/// the join until the code expires or the server stops; the join then shows as a new
/// peer.
pub(super) async fn invite(
    State(app): State<App>,
    Json(args): Json<InviteArgs>,
) -> Result<Json<Value>, Failure> {
    let Ok(permit) = app.invites.clone().try_acquire_owned() else {
        return Err(Failure(
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "{} invites are waiting already; let one be used or expire",
                super::MAX_WAITING_INVITES
            ),
        ));
    };
    let expires = args.minutes.map_or(INVITE_FOR, |m| {
        Duration::from_secs(m.clamp(1, 7 * 24 * 60) * 60)
    });
    let options = crate::invite::InviteOptions {
        expires,
        no_wait: false,
        name: app.name.clone(),
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let (home, config) = (app.home.clone(), app.config.clone());
    tokio::spawn(async move {
        let _permit = permit;
        let mut out = FirstLine {
            buf: Vec::new(),
            tx: Some(tx),
        };
        if let Err(e) =
            crate::invite::invite(&home, config, &options, &mut out, &mut std::io::sink()).await
        {
            tracing::warn!("the page's invite ended: {e:#}");
        }
    });
    let code = rx.await.map_err(|_| {
        Failure(
            StatusCode::BAD_GATEWAY,
            "the invite could not start (see the server's log)".into(),
        )
    })?;
    Ok(Json(json!({
        "code": code,
        "minutes": expires.as_secs() / 60,
        "done": "send this code to the person over a channel you trust; they run: interlink-p2p join <code>",
    })))
}

//! What the tools and the background workers share about one session: the
//! [`Context`], the node's status, and the one lock over the session's mutable state.
//!
//! The context only holds state and answers questions about it; starting the session
//! is [`crate::startup`], the tools are [`crate::tools`], the workers
//! [`crate::workers`]. None of those is imported here, so the context sits below them
//! all.

use std::{
    path::PathBuf,
    sync::{
        Arc, Mutex, MutexGuard, RwLock,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use interlink_core::routing::Routes;
use interlink_core::{
    IdentityKey, MsgId, SessionId,
    presence::IdentityView,
    wire::{DeliveryMode, EnvelopeKind, HostKind, SessionAddr},
};
use interlink_net::{Config, Handle};
use interlink_store::inbox::InboxEntry;
use libp2p::Multiaddr;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};
use tokio::{sync::watch, task::JoinHandle};
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::{
    codex::CodexConfig,
    host_inbox::HostInbox,
    paths::{Home, SessionDir},
    read_state::{ReadState, ReadStateError},
    sent_log::SentLog,
};

/// Lets the tasks woken by the same delivery run before a worker reads the inbox. The
/// node hands the sender's receipt to the connection's task just before it tells the
/// workers; on the session's one thread, a worker reading the inbox at once kept that
/// receipt from the wire for as long as it read (about 60 µs of every `send_message`
/// in the `mcp` bench, docs/BENCHMARKS.md).
pub(crate) async fn after_the_network() {
    tokio::task::yield_now().await;
}

/// How long a tool waits for the node to come up before answering with an error.
pub(crate) const NODE_WAIT: Duration = Duration::from_secs(15);

/// Most read receipts waiting to be sent; beyond it new ones are dropped (and logged).
pub(crate) const RECEIPT_QUEUE: usize = 1024;

/// The setup error of a Codex-hosted session that is not bound to its thread yet.
pub(crate) const UNBOUND: &str = "setup error: this Codex session is not bound to its thread yet, \
so it neither announces itself nor receives messages. The interlink hooks call \
bind_codex_session with the thread id (run `interlink-p2p install codex` to set them up); \
until then nothing can be sent or received.";

/// Where the node is.
#[derive(Clone, Debug)]
pub(crate) enum NodeStatus {
    /// Not started: a Codex-hosted session waits for `bind_codex_session`, or the
    /// server waits for `initialize` to learn its host.
    Unbound,
    /// Starting in the background.
    Starting,
    /// Running.
    Ready(Arc<Ready>),
    /// It failed to start (the reason).
    Failed(String),
}

/// A running node and what it listens on.
#[derive(Debug)]
pub(crate) struct Ready {
    /// The node handle.
    pub handle: Handle,
    /// Listen addresses, each ending in `/p2p/<peer id>`.
    pub listen: Vec<Multiaddr>,
    /// The node's events since it started ([`interlink_net::Node::take_events`]),
    /// until [`Ready::events_since_start`] takes them. A lock of its own: `Ready` is
    /// built by the node task, before any [`Context`] can see it, and shared read-only
    /// through the status channel; this is its only part that changes, once.
    pub early_events: Mutex<Option<tokio::sync::broadcast::Receiver<interlink_net::Event>>>,
    /// When the node started listening: a roster that has had a few seconds to fill is
    /// not waited on again when a target is not on it.
    pub since: std::time::Instant,
}

impl Ready {
    /// The node's events from its start for the first caller — the inbox follower, so
    /// a receipt that arrives while the server is still starting is not missed — and
    /// a fresh subscription for any later one.
    pub(crate) fn events_since_start(
        &self,
    ) -> tokio::sync::broadcast::Receiver<interlink_net::Event> {
        // Poison is recovered: the slot holds an `Option` that a panicking holder
        // cannot leave half-written.
        self.early_events
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
            .unwrap_or_else(|| self.handle.events())
    }
}

/// The session this server runs, once its id is known.
#[derive(Clone, Debug)]
pub(crate) struct Bound {
    /// This session's address.
    pub own: SessionAddr,
    /// This session's state directory (inbox, read state, sent log).
    pub session_dir: SessionDir,
}

/// The session the server runs at the moment: empty until its id is known, replaced
/// when the host moves to another conversation (Claude Code's `/clear` and resume,
/// [`crate::startup::rebind`]).
#[derive(Debug, Default)]
pub(crate) struct BoundSlot(RwLock<Option<Bound>>);

impl BoundSlot {
    /// The bound session, if any.
    pub(crate) fn get(&self) -> Option<Bound> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set(&self, bound: Option<Bound>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = bound;
    }
}

/// A tool failed; the text tells the model what to do about it.
#[derive(Debug)]
pub(crate) struct ToolError(pub String);

impl<E: std::fmt::Display> From<E> for ToolError {
    fn from(e: E) -> Self {
        Self(e.to_string())
    }
}

/// A receipt to send: `read`, or `host_queued` (handed to the agent host). Queued by
/// the tools and workers through `Context::queue_read_receipts`, sent by
/// [`crate::workers::receipts`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ReadReceipt {
    /// The session the message came from.
    pub to: SessionAddr,
    /// The message.
    pub msg_id: MsgId,
    /// [`EnvelopeKind::Read`] or [`EnvelopeKind::HostQueued`].
    pub kind: EnvelopeKind,
}

impl ReadReceipt {
    /// The read receipt for an inbox message, if its reply route is valid.
    pub(crate) fn for_entry(e: &InboxEntry) -> Option<Self> {
        Self::of_kind(e, EnvelopeKind::Read)
    }

    /// The hand-over receipt for an inbox message.
    pub(crate) fn host_queued(e: &InboxEntry) -> Option<Self> {
        Self::of_kind(e, EnvelopeKind::HostQueued)
    }

    fn of_kind(e: &InboxEntry, kind: EnvelopeKind) -> Option<Self> {
        let (key, session) = reply_route(e)?;
        Some(Self {
            to: SessionAddr { key, session },
            msg_id: e.msg_id.parse().ok()?,
            kind,
        })
    }
}

/// The read receipts for the messages among `unread` whose ids were just acknowledged:
/// one per message, so when two senders used one id, each gets its own.
pub(crate) fn read_receipts_for(
    unread: &[InboxEntry],
    consumed: &[(IdentityKey, MsgId)],
) -> Vec<ReadReceipt> {
    let consumed: Vec<(String, String)> = consumed
        .iter()
        .map(|(s, id)| (s.to_hex(), id.to_string()))
        .collect();
    unread
        .iter()
        .filter(|e| {
            consumed
                .iter()
                .any(|(s, id)| *s == e.sender && *id == e.msg_id)
        })
        .filter_map(ReadReceipt::for_entry)
        .collect()
}

/// The sender's reply route of an inbox entry: `key#session`.
pub(crate) fn reply_route(e: &InboxEntry) -> Option<(IdentityKey, SessionId)> {
    let (key, session) = e.reply_to.split_once('#')?;
    Some((key.parse().ok()?, SessionId::new(session).ok()?))
}

/// When a session starts ([`crate::startup`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StartAt {
    /// At once.
    Now,
    /// At `initialize`, once the client's name tells the host.
    Initialize,
    /// At `bind_codex_session`.
    Bind,
}

/// What starting the session needs, kept in the [`Shared`] state until
/// [`crate::startup::start`] takes it.
#[derive(Debug)]
pub(crate) struct Starter {
    pub(crate) at: StartAt,
    /// The id to start under unless bound to a Codex thread.
    pub(crate) session: SessionId,
    pub(crate) cwd: PathBuf,
    pub(crate) config: Config,
    pub(crate) status: Arc<watch::Sender<NodeStatus>>,
    /// The receipt queue, for the receipts worker of the first start (it serves every
    /// session this process binds).
    pub(crate) receipts: Option<tokio::sync::mpsc::Receiver<ReadReceipt>>,
    /// Stops the node (after the workers).
    pub(crate) node_cancel: CancellationToken,
    /// Stops the workers.
    pub(crate) workers_cancel: CancellationToken,
}

/// The background tasks of a started session, awaited at shutdown.
#[derive(Debug, Default)]
pub(crate) struct Tasks {
    /// This process's claim on the session (one process per session id and home),
    /// held until the process ends.
    pub(crate) lock: Option<interlink_store::SessionLock>,
    pub(crate) node: Option<JoinHandle<()>>,
    pub(crate) flusher: Option<JoinHandle<()>>,
    /// Stop the bound session's node and workers (children of the process-wide
    /// tokens), so a rebind stops one session and starts another.
    pub(crate) node_cancel: Option<CancellationToken>,
    pub(crate) workers_cancel: Option<CancellationToken>,
    /// What starting another session needs, kept from the first start.
    pub(crate) restart: Option<Restart>,
}

/// What [`Starter`] held that every later start reuses.
#[derive(Debug)]
pub(crate) struct Restart {
    pub(crate) cwd: PathBuf,
    pub(crate) config: Config,
    pub(crate) status: Arc<watch::Sender<NodeStatus>>,
    pub(crate) node_cancel: CancellationToken,
    pub(crate) workers_cancel: CancellationToken,
}

/// The session's mutable state, behind the one lock of [`Context::shared`].
///
/// One lock for all of it: every use is a short, synchronous read or update (never
/// held across an `.await`), so the parts gain nothing from locks of their own.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Announced working directory: the process's, or the Codex thread's once
    /// `bind_codex_session` said it.
    pub cwd: String,
    /// Announced git label.
    pub git_label: Option<String>,
    /// Current summary.
    pub summary: String,
    /// Agent host (learnt at `initialize` when no flag or environment said it).
    pub host: HostKind,
    /// Routing hints per peer.
    pub routes: Routes,
    /// What this session sent and where each message stands.
    pub sent: SentLog,
    /// The Codex thread this session is bound to.
    pub codex_thread: Option<String>,
    /// The MCP client declared form elicitation at `initialize`: the human can be asked
    /// ([`crate::consent`]).
    pub can_ask_human: bool,
    /// `client.json` was written ([`crate::consent::note_client`]).
    pub client_noted: bool,
    /// Consent forms handed to the client and not answered yet: (subject, state token),
    /// at most [`crate::consent::PENDING_FORMS`].
    pub pending_forms: std::collections::VecDeque<(String, String)>,
    /// How the session is started, until it is ([`crate::startup`]).
    pub(crate) starter: Option<Starter>,
    /// The started session's tasks, for shutdown.
    pub(crate) tasks: Tasks,
    /// The session id was pinned (`--session`, `INTERLINK_SESSION`): the host's
    /// conversation hooks do not move it.
    pub pinned: bool,
    /// Delivery through the agent host's own inbox socket, where there is one.
    pub host_inbox: HostInboxState,
    /// Claims on files: the project, and what the agent should hear of conflicts.
    pub claims: crate::claims::ClaimsState,
}

/// Where delivery through the agent host's inbox socket stands
/// ([`crate::workers::host_inbox`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct HostInboxState {
    /// New messages go to the socket: it was found at launch, and since then it has
    /// neither failed nor held a message.
    pub active: bool,
    /// Why it stopped being used, once it did.
    pub stopped: Option<String>,
    /// Messages the host took for the model since the session started.
    pub handed: u64,
    /// Messages the host held for the user's approval (then woken through the hook).
    pub held: u64,
    /// Messages the host did not deliver (then woken through the hook).
    pub fell_back: u64,
}

/// What a [`Context`] is made from, besides its node status and receipt queue.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    /// The home directory (identity, peers.json, sessions/).
    pub home: Home,
    /// This user's identity key.
    pub identity: IdentityKey,
    /// Announced working directory.
    pub cwd: String,
    /// Announced git label.
    pub git_label: Option<String>,
    /// Initial summary.
    pub summary: String,
    /// Agent host.
    pub host: HostKind,
    /// Channel mode: messages are pushed as channel notifications.
    pub channels: bool,
    /// The agent may pair without asking the human ([`crate::consent`]).
    pub agent_pairing: bool,
    /// The name this user suggests for itself in knocks and acceptances.
    pub name: String,
    /// How notices are queued into Codex.
    pub codex: CodexConfig,
    /// The agent host's inbox socket, found (and answering) at launch.
    pub host_inbox: Option<HostInbox>,
    /// The clock of the node's configuration: every timestamp the session makes.
    pub clock: interlink_net::Clock,
}

/// Everything the tools share about this session.
#[derive(Debug)]
pub(crate) struct Context {
    /// The home directory (identity, peers.json, sessions/).
    pub home: Home,
    /// This user's identity key.
    pub identity: IdentityKey,
    /// The session, once its id is known ([`crate::startup`]). Shared with the channel
    /// worker, which starts before the session may be bound and outlives rebinds.
    pub bound: Arc<BoundSlot>,
    /// Channel mode: messages are pushed as channel notifications.
    pub channels: bool,
    /// The agent may pair without asking the human ([`crate::consent`]).
    pub agent_pairing: bool,
    /// The node, once started.
    pub node: watch::Receiver<NodeStatus>,
    /// Inbox offset before which nothing is unread (see `ReadState::unread_from`);
    /// shared with the channel worker, which reads the unread messages too.
    pub scanned: Arc<AtomicU64>,
    /// Tool calls served: a process that served none was a host's health check, whose
    /// empty session directory goes when it exits ([`crate::serve`]).
    pub tool_calls: AtomicU64,
    /// The name this user suggests for itself in knocks and acceptances.
    pub name: String,
    /// Read receipts waiting to be sent ([`crate::workers::receipts`]).
    pub receipts: ReceiptQueue,
    /// How notices are queued into Codex.
    pub codex: CodexConfig,
    /// The agent host's inbox socket, found at launch (not in channel mode).
    pub host_inbox: Option<HostInbox>,
    /// The clock of the node's configuration: every timestamp the session makes.
    pub clock: interlink_net::Clock,
    /// The mutable state; see [`Context::shared`].
    shared: SharedState,
    /// Serialises read-state changes (tools and the channel forwarder). An async lock,
    /// apart from [`Shared`]: it is held across awaits (a channel push) while the
    /// inbox's read state is read, changed and written.
    pub read_lock: Arc<tokio::sync::Mutex<()>>,
    /// Serialises changes to the saved Codex delivery failures. An async lock of its
    /// own: it is held across a `codex queue` run (up to its timeout), which must hold
    /// up neither the state above nor `receive_messages`.
    pub(crate) codex_lock: Arc<tokio::sync::Mutex<()>>,
}

impl Context {
    /// A context over `settings`, not bound to a session yet (see [`Context::bind`]),
    /// following the node through `node` and queueing receipts on `receipts`.
    pub(crate) fn new(
        settings: Settings,
        node: watch::Receiver<NodeStatus>,
        receipts: tokio::sync::mpsc::Sender<ReadReceipt>,
    ) -> Self {
        // Channel mode is the user's explicit choice: it wins over the host's socket.
        let host_inbox = settings.host_inbox.filter(|_| !settings.channels);
        Self {
            home: settings.home,
            identity: settings.identity,
            bound: Arc::new(BoundSlot::default()),
            channels: settings.channels,
            agent_pairing: settings.agent_pairing,
            node,
            scanned: Arc::new(AtomicU64::new(0)),
            tool_calls: AtomicU64::new(0),
            name: settings.name,
            clock: settings.clock,
            receipts: ReceiptQueue(receipts),
            codex: settings.codex,
            shared: SharedState::new(Shared {
                cwd: settings.cwd,
                git_label: settings.git_label,
                summary: settings.summary,
                host: settings.host,
                routes: Routes::default(),
                sent: SentLog::default(),
                codex_thread: None,
                can_ask_human: false,
                client_noted: false,
                pending_forms: std::collections::VecDeque::new(),
                starter: None,
                tasks: Tasks::default(),
                pinned: false,
                host_inbox: HostInboxState {
                    active: host_inbox.is_some(),
                    ..HostInboxState::default()
                },
                claims: crate::claims::ClaimsState::default(),
            }),
            host_inbox,
            read_lock: Arc::new(tokio::sync::Mutex::new(())),
            codex_lock: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    /// Binds the context to `session`, whose state lives in `session_dir`, and loads
    /// the session's sent log; a session bound before is replaced, with what was
    /// learnt in it (sticky routes, the unread scan position).
    pub(crate) fn bind(&self, session: SessionId, session_dir: SessionDir) {
        let bound = Bound {
            own: SessionAddr {
                key: self.identity,
                session,
            },
            session_dir: session_dir.clone(),
        };
        let sent = SentLog::load(&session_dir);
        self.scanned.store(0, std::sync::atomic::Ordering::Relaxed);
        self.bound.set(Some(bound));
        let mut shared = self.shared();
        shared.sent = sent;
        shared.routes = Routes::default();
    }

    /// Forgets the bound session (it stopped; see [`crate::startup::rebind`]).
    pub(crate) fn unbind(&self) {
        self.bound.set(None);
    }

    /// The mutable state, locked ([`SharedState::lock`]). Never held across an
    /// `.await`.
    pub(crate) fn shared(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock()
    }

    /// A handle to the mutable state, for a worker that needs it and nothing else of
    /// the context.
    pub(crate) fn shared_state(&self) -> SharedState {
        self.shared.clone()
    }

    /// The identity key.
    pub(crate) fn key(&self) -> IdentityKey {
        self.identity
    }

    /// This session's address (an error naming the setup step while unbound).
    pub(crate) fn own(&self) -> Result<SessionAddr, ToolError> {
        self.bound
            .get()
            .map(|b| b.own.clone())
            .ok_or_else(|| ToolError(UNBOUND.into()))
    }

    /// This session's state directory.
    pub(crate) fn session_dir(&self) -> Result<SessionDir, ToolError> {
        self.bound
            .get()
            .map(|b| b.session_dir.clone())
            .ok_or_else(|| ToolError(UNBOUND.into()))
    }

    /// The agent host.
    pub(crate) fn host(&self) -> HostKind {
        self.shared().host
    }

    /// How delivered messages reach the agent.
    pub(crate) fn delivery(&self) -> DeliveryMode {
        if self.channels {
            DeliveryMode::Channel
        } else if self.shared().host_inbox.active {
            DeliveryMode::HostInbox
        } else if self.host() == HostKind::Codex {
            DeliveryMode::Codex
        } else {
            DeliveryMode::Inbox
        }
    }

    /// Waits (at most [`NODE_WAIT`]) for the node.
    pub(crate) async fn ready(&self) -> Result<Arc<Ready>, ToolError> {
        wait_ready(&self.node).await
    }

    /// Pushes `peers.json` into this session's node at once, after this server edited
    /// it (other sessions notice the file within a second). A node still starting reads
    /// the file itself.
    pub(crate) async fn refresh_policy(&self) {
        refresh_policy(&self.node, &self.home).await;
    }

    /// The roster, from the node.
    pub(crate) async fn roster(&self) -> Result<Vec<IdentityView>, ToolError> {
        Ok(self.ready().await?.handle.roster().await?)
    }

    /// The unread messages, oldest first; notes each sender's session as its sticky
    /// route (the last inbound one wins).
    pub(crate) fn unread(&self) -> Result<Vec<InboxEntry>, ReadStateError> {
        match self.bound.get().as_ref() {
            Some(bound) => unread_in(&bound.session_dir, &self.scanned, &self.shared),
            None => Ok(Vec::new()),
        }
    }

    /// Queues read receipts without waiting.
    pub(crate) fn queue_read_receipts(&self, receipts: impl IntoIterator<Item = ReadReceipt>) {
        self.receipts.queue(receipts);
    }

    /// The number of unread messages, or why it cannot be known (a read-state file or
    /// inbox that cannot be read): said in every result, never taken for "none".
    fn unread_count(&self) -> Result<usize, String> {
        self.unread().map(|u| u.len()).map_err(|e| e.to_string())
    }

    /// What every result ends with, read now.
    pub(crate) fn status(&self) -> Status {
        Status {
            unread: self.unread_count(),
            pairs_waiting: crate::pairing::current(&self.home, self.clock.now_ms())
                .map(|p| p.incoming.len())
                .unwrap_or(0),
        }
    }

    /// The status, read once the message just handed to the node is on the wire
    /// (the node's tasks run first): a send reads it while the recipient stores the
    /// message, not after the receipt, where it cost every `send_message` its file
    /// reads. A message arriving in the meantime is in the next result's count.
    pub(crate) async fn status_in_flight(&self) -> Status {
        after_the_network().await;
        self.status()
    }

    /// A successful result: `text` for the model, `structured` as structuredContent
    /// (with `unread` added, or `read_state_error`), and the footer.
    pub(crate) fn ok(&self, text: String, structured: Value) -> CallToolResult {
        self.ok_with(None, text, structured)
    }

    /// [`Context::ok`] with the status if it was read before (else it is read now).
    pub(crate) fn ok_with(
        &self,
        status: Option<Status>,
        text: String,
        mut structured: Value,
    ) -> CallToolResult {
        let Status {
            unread: n,
            pairs_waiting,
        } = status.unwrap_or_else(|| self.status());
        if let Value::Object(map) = &mut structured {
            match &n {
                Ok(n) => map.insert("unread".into(), json!(n)),
                Err(e) => {
                    map.insert("unread".into(), Value::Null);
                    map.insert("read_state_error".into(), json!(e))
                }
            };
        }
        let text = with_footer(text, footer(n));
        let text = with_footer(text, pair_footer(pairs_waiting));
        let news = self.shared().claims.take_news();
        let text = with_footer(text, (!news.is_empty()).then(|| news.join("\n")));
        let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
        result.structured_content = Some(structured);
        result
    }

    /// A tool error: `isError`, the message as text (with the footer) and
    /// `{"error": message}` as structuredContent.
    pub(crate) fn error(&self, e: ToolError) -> CallToolResult {
        let mut result = CallToolResult::error(vec![ContentBlock::text(with_footer(
            e.0.clone(),
            footer(self.unread_count()),
        ))]);
        result.structured_content = Some(json!({ "error": e.0 }));
        result
    }
}

/// What ends every tool result: the unread count, or why it cannot be known, and the
/// pair requests waiting for the operator.
#[derive(Debug)]
pub(crate) struct Status {
    unread: Result<usize, String>,
    pairs_waiting: usize,
}

/// A footer line when pair requests wait for the operator.
fn pair_footer(n: usize) -> Option<String> {
    (n > 0).then(|| {
        format!(
            "[interlink: {n} pair request{} waiting for your operator's decision; see \
             list_pair_requests]",
            if n == 1 { "" } else { "s" }
        )
    })
}

/// A handle to the one lock over the session's mutable state ([`Shared`]): what the
/// context and the workers that change that state hold, so a worker needs no
/// [`Context`] for it.
#[derive(Clone, Debug)]
pub(crate) struct SharedState(Arc<Mutex<Shared>>);

impl SharedState {
    fn new(shared: Shared) -> Self {
        Self(Arc::new(Mutex::new(shared)))
    }

    /// The state, locked. Never held across an `.await`.
    ///
    /// A poisoned lock is recovered, not skipped: every update under it is a plain
    /// field assignment or a bounded collection change, so a holder that panicked
    /// cannot have left the state inconsistent, and dropping the work (a receipt, a
    /// route, a sent entry) would be worse than using it.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Shared> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The sending end of the receipt queue ([`crate::workers::receipts`]): cloneable, so
/// a worker that hands messages over queues their receipts without the context.
#[derive(Clone, Debug)]
pub(crate) struct ReceiptQueue(pub tokio::sync::mpsc::Sender<ReadReceipt>);

impl ReceiptQueue {
    /// Queues receipts without waiting; beyond [`RECEIPT_QUEUE`] waiting, a receipt is
    /// dropped and logged (receipts are best effort, a send must not wait for them).
    pub(crate) fn queue(&self, receipts: impl IntoIterator<Item = ReadReceipt>) {
        for r in receipts {
            if self.0.try_send(r).is_err() {
                warn!("read receipt dropped: {RECEIPT_QUEUE} already waiting");
            }
        }
    }
}

/// The unread messages of the inbox in `dir`, oldest first, reading from the offset
/// `scanned` remembers (and moving it on); notes each sender's session in `state` as
/// its sticky route (the last inbound one wins).
pub(crate) fn unread_in(
    dir: &SessionDir,
    scanned: &AtomicU64,
    state: &SharedState,
) -> Result<Vec<InboxEntry>, ReadStateError> {
    let hint = scanned.load(Ordering::Relaxed);
    let (entries, clean) = ReadState::load(dir)?.unread_from(hint)?;
    scanned.store(clean, Ordering::Relaxed);
    let mut shared = state.lock();
    for e in &entries {
        if let Some((key, session)) = reply_route(e) {
            shared.routes.inbound(key, session);
        }
    }
    Ok(entries)
}

/// Waits, without a limit, until the node `node` follows runs (`None`: it failed or
/// stopped). For background workers, which start before the session may be bound.
pub(crate) async fn running(node: &watch::Receiver<NodeStatus>) -> Option<Arc<Ready>> {
    let mut rx = node.clone();
    let status = rx
        .wait_for(|s| matches!(s, NodeStatus::Ready(_) | NodeStatus::Failed(_)))
        .await
        .ok()?
        .clone();
    match status {
        NodeStatus::Ready(r) => Some(r),
        _ => None,
    }
}

/// Pushes `home`'s `peers.json` into the node `node` follows, waiting for a node that
/// is starting (at most [`NODE_WAIT`]): a pairing tool answers once the node admits the
/// peer. A node that started without seeing the change would otherwise refuse the peer
/// until its next look at the file. Unbound or failed: nothing to push to (a node that
/// starts later reads the file).
pub(crate) async fn refresh_policy(node: &watch::Receiver<NodeStatus>, home: &Home) {
    if let Ok(r) = wait_ready(node).await
        && let Ok(policy) = crate::policy::load(home)
    {
        let _ = r.handle.set_policy(policy).await;
    }
}

/// Waits (at most [`NODE_WAIT`]) for the node `node` follows: the node's handle, or an
/// error saying why there is none.
pub(crate) async fn wait_ready(
    node: &watch::Receiver<NodeStatus>,
) -> Result<Arc<Ready>, ToolError> {
    let mut rx = node.clone();
    if matches!(*rx.borrow(), NodeStatus::Unbound) {
        return Err(ToolError(UNBOUND.into()));
    }
    let status = tokio::time::timeout(
        NODE_WAIT,
        rx.wait_for(|s| !matches!(s, NodeStatus::Starting)),
    )
    .await
    .map_err(|_| {
        ToolError(format!(
            "the network node did not start within {NODE_WAIT:?}"
        ))
    })?
    .map_err(|_| ToolError("the network node has stopped".into()))?
    .clone();
    match status {
        NodeStatus::Ready(r) => Ok(r),
        NodeStatus::Failed(e) => Err(ToolError(format!("the network node failed to start: {e}"))),
        NodeStatus::Starting => Err(ToolError("the network node is still starting".into())),
        NodeStatus::Unbound => Err(ToolError(UNBOUND.into())),
    }
}

/// The footer line, if unread messages wait, or why they cannot be known.
fn footer(n: Result<usize, String>) -> Option<String> {
    match n {
        Ok(0) => None,
        Ok(n) => Some(format!(
            "[interlink: {n} unread message{} waiting; call receive_messages]",
            if n == 1 { "" } else { "s" }
        )),
        Err(e) => Some(format!(
            "[interlink: unread messages cannot be shown: {e}. Nothing is lost: the inbox \
             keeps them; the operator can fix or remove that file (removed, the messages \
             still in the inbox count as unread again)]"
        )),
    }
}

fn with_footer(text: String, footer: Option<String>) -> String {
    match footer {
        Some(f) => format!("{text}\n\n{f}"),
        None => text,
    }
}

#[cfg(test)]
#[path = "context_tests.rs"]
mod tests;

//! What goes into the engine and what comes out of it.

use interlink_core::{
    IdentityKey, MsgId,
    mailbox::Mailbox,
    trust::{DropReason, Knock, PeerPolicy},
    wire::{Envelope, Receipt, Refusal as WireRefusal, RefusalCode, SessionAddr, Signed},
};

/// An opaque handle for a remote node, chosen by the shell (a PeerId table index, say).
/// The engine only compares handles; they are soft state and need not survive a restart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PeerRef(pub u64);

/// Names one `send` call, chosen by the shell; its [`Output::Reply`] carries it back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallId(pub u64);

/// Names one outbound live delivery request, chosen by the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReqId(pub u64);

/// Names one inbound live delivery request, chosen by the shell; answered by
/// [`Output::Respond`] (exactly once).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InboundId(pub u64);

/// Names one inbox append, chosen by the engine; answered by [`Input::InboxStored`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StoreToken(pub u64);

/// Names one mailbox publication ([`Output::DhtPut`]), chosen by the engine; holders'
/// answers to it come back as [`Input::PutAnswered`], then [`Input::PutEnded`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PutToken(pub u64);

/// Names one collected-mail receipt sent, chosen by the engine; answered by
/// [`Input::ReceiptSent`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReceiptId(pub u64);

/// One durable outbox record: a message this session sent and has no receipt for yet.
/// The shell stores it keyed by `envelope.body().msg_id`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboxEntry {
    /// The signed, sealed envelope exactly as it goes on the wire.
    pub envelope: Signed<Envelope>,
}

impl OutboxEntry {
    /// The store key: the message id.
    pub fn key(&self) -> MsgId {
        self.envelope.body().msg_id
    }
}

/// A durable write failed. The shell must have rolled back whatever part was written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// No space left.
    #[error("disk full")]
    DiskFull,
    /// The write or the sync did not complete.
    #[error("short write")]
    ShortWrite,
    /// Anything else, described.
    #[error("{0}")]
    Other(String),
}

/// A request the shell could not complete (no answer, no connection).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendFailure {
    /// No answer in time.
    #[error("timed out")]
    Timeout,
    /// No connection could be made.
    #[error("unreachable")]
    Unreachable,
    /// The connection the request went on closed while the peer stays connected by
    /// another (the peer moved it to QUIC, say): no sign the peer is gone.
    #[error("connection closed, peer still connected")]
    ConnectionLost,
    /// The stream failed or the answer did not decode.
    #[error("{0}")]
    Other(String),
}

/// Why a recipient refused one envelope, as a typed code (the shell maps it to the wire).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// Final: the sender is not a peer of the recipient.
    #[error("the sender is not a peer of the recipient; strangers may only knock")]
    NotPaired,
    /// Final: addressed to another identity or session.
    #[error("addressed to another identity or session")]
    WrongRecipient,
    /// Final: a pair acceptance nobody asked for.
    #[error("unsolicited pair acceptance")]
    UnsolicitedAccept,
    /// Final: the id was already used by this sender for a message the recipient holds
    /// under another record (only seen with a buggy peer).
    #[error("message id already used")]
    Replayed,
    /// Final: too many envelopes in one request, or another sender's envelope in it.
    #[error("malformed request")]
    Malformed,
    /// Final: the sealed body does not open with this session's sealing key.
    #[error("the sealed body does not open")]
    Unopenable,
    /// Not for the live path: older than the live freshness window. The sender keeps it
    /// and relies on the mailbox, whose window is the retention.
    #[error("too old for the live path")]
    Stale,
    /// Retryable: the timestamp is ahead of the recipient's clock beyond the tolerance.
    #[error("future-dated")]
    FutureDated,
    /// Retryable: the recipient could not make it durable (disk full, short write).
    #[error("the recipient could not store the message; send it again later")]
    StoreFailed,
    /// Retryable: the recipient is handling too much from this peer.
    #[error("the recipient is busy with this peer; send it again later")]
    Busy,
    /// Retryable: an earlier envelope of this sender in the request was not taken, so
    /// this one is not either (taking it would break the sender's order).
    #[error("behind a refused envelope")]
    Behind,
}

impl Refusal {
    /// Whether the sender should give the message up.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            Refusal::NotPaired
                | Refusal::WrongRecipient
                | Refusal::UnsolicitedAccept
                | Refusal::Replayed
                | Refusal::Malformed
                | Refusal::Unopenable
        )
    }

    /// The code for a trust-gate drop reason.
    pub fn from_drop(reason: &DropReason) -> Self {
        Self::from_code(reason.code())
    }

    /// The wire code that carries this refusal. [`Refusal::Behind`] has no code of its
    /// own yet and travels as `store_failed` (same meaning to a sender: nothing was
    /// recorded, send it again later); [`Refusal::Busy`] is `over_budget`.
    pub fn code(self) -> RefusalCode {
        match self {
            Refusal::NotPaired => RefusalCode::NotPaired,
            Refusal::WrongRecipient => RefusalCode::WrongRecipient,
            Refusal::UnsolicitedAccept => RefusalCode::UnsolicitedAccept,
            Refusal::Replayed => RefusalCode::Replayed,
            Refusal::Malformed => RefusalCode::Malformed,
            Refusal::Unopenable => RefusalCode::Unopenable,
            Refusal::Stale => RefusalCode::Stale,
            Refusal::FutureDated => RefusalCode::FutureDated,
            Refusal::StoreFailed | Refusal::Behind => RefusalCode::StoreFailed,
            Refusal::Busy => RefusalCode::OverBudget,
        }
    }

    /// The engine's reading of a wire code. `future_dated` is not final here: the
    /// recipient's clock will catch up with a signed timestamp that cannot change.
    /// Codes a sender cannot act on (an unknown one included) are final.
    pub fn from_code(code: RefusalCode) -> Self {
        match code {
            RefusalCode::NotPaired => Refusal::NotPaired,
            RefusalCode::WrongRecipient | RefusalCode::NotASession | RefusalCode::WrongMailbox => {
                Refusal::WrongRecipient
            }
            RefusalCode::UnsolicitedAccept => Refusal::UnsolicitedAccept,
            RefusalCode::Replayed => Refusal::Replayed,
            RefusalCode::Stale => Refusal::Stale,
            RefusalCode::FutureDated => Refusal::FutureDated,
            RefusalCode::StoreFailed => Refusal::StoreFailed,
            RefusalCode::OverBudget => Refusal::Busy,
            RefusalCode::Unopenable => Refusal::Unopenable,
            _ => Refusal::Malformed,
        }
    }

    /// This refusal as it goes on the wire, with `detail` for people.
    pub fn to_wire(self) -> WireRefusal {
        WireRefusal::new(self.code(), self.to_string())
    }
}

/// The answer to a live delivery request: one receipt signed by the recipient for every
/// envelope it holds, and one result per envelope, in order (`None` = held).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// The signed `delivered` receipt listing every held envelope; absent if none.
    pub receipt: Option<Signed<Receipt>>,
    /// Per envelope: `None` if held (and listed in the receipt), else why not.
    pub results: Vec<Option<Refusal>>,
}

/// Where a queued message is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HeldBy {
    /// Only in this session's durable outbox (the mailbox copy did not take it: future
    /// timestamp after a clock step, or the recipient's mailbox is full of older mail).
    Outbox,
    /// In the outbox, and a mailbox copy was published to the DHT.
    OutboxAndMailbox,
    /// A session without an outbox (a shell command about to exit): at least one other
    /// node answered that its copy of the recipient's mailbox keeps the message.
    Mailbox,
}

/// What a `send` call came to, once it can be said truthfully.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// The recipient session's signed receipt says it is durably in its inbox.
    Delivered {
        /// The session that signed the receipt.
        to: SessionAddr,
    },
    /// Durably queued; the engine keeps retrying until a receipt or the retention ends.
    Queued {
        /// Where it is held.
        held_by: HeldBy,
    },
    /// The recipient refused it for good; it was removed from the outbox.
    Refused {
        /// The recipient's refusal: a typed code and a detail.
        reason: Refusal,
    },
    /// It was given up before the caller was answered (the retention ended).
    NotKept {
        /// Retention ended, or the recipient's mailbox takes no more from this sender.
        why: NotKept,
    },
}

/// Why a `send` was not accepted; nothing was claimed and nothing is retried.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The envelope is not from this session.
    #[error("the envelope is not from this session")]
    NotMine,
    /// A message with this id is already in the outbox.
    #[error("message id already in the outbox")]
    DuplicateId,
    /// The outbox holds its most messages for this recipient or in all.
    #[error("outbox full ({held} held, limit {limit})")]
    OutboxFull {
        /// Messages held (for this recipient, or in all).
        held: usize,
        /// The limit that was hit.
        limit: usize,
    },
    /// Writing the outbox entry failed.
    #[error("outbox write failed: {0}")]
    Store(#[source] StoreError),
}

/// Why a message the sender was told was queued is no longer kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NotKept {
    /// The retention ended without a receipt.
    RetentionEnded {
        /// Age of the envelope's timestamp when it was given up, in ms.
        age_ms: u64,
    },
    /// A session without an outbox: the recipient is not reachable and its mailbox
    /// copy takes no more from this sender (older mail fills the sender's quota).
    MailboxFull,
    /// A session without an outbox: the recipient is not reachable, this sender holds
    /// no mailbox pass from it yet (it gets one with the recipient's first receipt or
    /// message), and the small room a mailbox keeps for mail without a pass is taken.
    NotAdmitted,
    /// A session without an outbox: no other node answered that it keeps the message
    /// before the publication ended. It may still arrive (a holder may have kept it
    /// without its answer reaching us); nothing here retries it.
    Unconfirmed,
}

/// Something that happened after the caller was answered.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A queued message was receipted by its recipient session.
    Delivered {
        /// The message.
        msg_id: MsgId,
        /// The session that signed the receipt.
        to: SessionAddr,
    },
    /// A queued message was given up.
    Expired {
        /// The message.
        msg_id: MsgId,
        /// Its recipient.
        to: SessionAddr,
        /// Retention ended, or the recipient's mailbox takes no more from this sender.
        why: NotKept,
    },
    /// A queued message was refused for good by its recipient.
    Refused {
        /// The message.
        msg_id: MsgId,
        /// Its recipient.
        to: SessionAddr,
        /// The recipient's refusal: a typed code and a detail.
        reason: Refusal,
    },
    /// A stranger's knock was held for the human (the gate's knock queue).
    KnockHeld(Knock),
    /// An inbound envelope was dropped by the trust gate (diagnostics).
    Dropped {
        /// Its signed sender.
        from: SessionAddr,
        #[allow(missing_docs)]
        msg_id: MsgId,
        /// The recipient's refusal: a typed code and a detail.
        reason: Refusal,
    },
}

/// An input to [`crate::Engine::handle`].
#[derive(Clone, Debug)]
#[allow(clippy::large_enum_variant)] // consumed at once; boxing buys nothing
#[non_exhaustive]
pub enum Input {
    /// Send an envelope the shell built, sealed and signed (timestamp from
    /// [`crate::Engine::next_ts`]). `route` is the recipient's node, `None` if it is
    /// not known (not on the roster).
    Send {
        /// The call to answer.
        caller: CallId,
        #[allow(missing_docs)]
        envelope: Signed<Envelope>,
        /// The recipient's node, if known.
        route: Option<PeerRef>,
    },
    /// The outbox write of [`Output::PersistOutbox`] finished.
    OutboxStored {
        /// Its message id.
        key: MsgId,
        /// Whether it is durable.
        result: Result<(), StoreError>,
    },
    /// The answer to [`Output::SendRequest`] (decoded; the receipt signature verified).
    DeliverResponse {
        /// The request.
        req: ReqId,
        /// The response, or why there is none.
        result: Result<Response, SendFailure>,
    },
    /// A collected-mail receipt arrived (PROTOCOL §8.6), signature verified.
    ReceiptCollected {
        #[allow(missing_docs)]
        receipt: Signed<Receipt>,
    },
    /// A node showed life (connection, announcement, ping).
    PeerAlive {
        /// The node.
        peer: PeerRef,
    },
    /// The shell has a connection to this node (`connected`), or has none left. While
    /// it is connected, a live attempt that runs past its window is waited for rather
    /// than given up (up to [`crate::LIVE_PATIENCE_MS`]): the connection is up and
    /// merely slow or being replaced, so the node is not marked unreachable and the
    /// messages behind it are not answered `queued`. A connection is also a sign of
    /// life. A shell that never says leaves every node unconnected: attempts end at
    /// their window.
    Connected {
        /// The node.
        peer: PeerRef,
        /// Whether a connection to it is up.
        connected: bool,
    },
    /// A session's node is now known (an announcement), or no longer (`None`).
    /// Some is also a sign of life of that node.
    Route {
        #[allow(missing_docs)]
        session: SessionAddr,
        /// Its node.
        peer: Option<PeerRef>,
    },
    /// An inbound live delivery request, decoded and every signature verified.
    DeliverRequest {
        /// The node it came from.
        from: PeerRef,
        /// The request, to answer with [`Output::Respond`].
        req: InboundId,
        /// The envelopes, in the sender's order.
        envelopes: Vec<Signed<Envelope>>,
    },
    /// One holder's copy of this session's own mailbox (any number per drain).
    MailboxFetched {
        /// The copy, decoded and verified.
        copy: Mailbox,
    },
    /// The inbox append of [`Output::AppendInbox`] finished.
    InboxStored {
        /// The append.
        token: StoreToken,
        /// Whether every entry is durable (on `Err` none may be).
        result: Result<(), StoreError>,
        /// On `Ok`: entries the store refused for their content and did not write
        /// (a sealed body that does not open); every other entry is durable.
        refused: Vec<(EntryKey, Refusal)>,
    },
    /// The shell has the thread to itself while the store writes (fed after it handed
    /// [`Output::AppendInbox`] to the store, never before): the engine signs the
    /// receipts the requests waiting on that append get if it is durable. They leave
    /// only with [`Input::InboxStored`]'s success, and a request whose outcome changes
    /// gets a receipt signed then; the signature is off the path from the disk's
    /// answer to the sender.
    Spare,
    /// A collected-mail receipt of [`Output::SendReceipt`] went out, or not.
    ReceiptSent {
        /// The receipt.
        id: ReceiptId,
        /// Whether the other node took it.
        result: Result<(), SendFailure>,
    },
    /// A holder answered [`Output::DhtPut`]: its merged copy keeps (or the owner
    /// acked) these entries of the published copy. Any number per publication.
    PutAnswered {
        /// The publication.
        put: PutToken,
        /// `(sender, id)` of the kept entries.
        kept: Vec<EntryKey>,
    },
    /// Every holder asked for [`Output::DhtPut`] answered or failed: no more
    /// [`Input::PutAnswered`] comes for it.
    PutEnded {
        /// The publication.
        put: PutToken,
    },
    /// The peers policy changed.
    SetPolicy(PeerPolicy),
    /// The process woke (tick gap) or got its first connection after none: drain
    /// this session's mailbox and publish every pending message's copy again.
    Wake,
    /// The timer of [`Output::SetTimer`] fired.
    Timer,
}

/// An output, drained with [`crate::Engine::poll_output`].
#[derive(Clone, Debug)]
#[allow(clippy::large_enum_variant)] // drained at once; boxing buys nothing
#[non_exhaustive]
pub enum Output {
    /// Write this outbox entry durably, then answer [`Input::OutboxStored`].
    PersistOutbox {
        #[allow(missing_docs)]
        entry: OutboxEntry,
    },
    /// Delete this outbox entry (no answer needed; a lost delete only causes a retry).
    RemoveOutbox {
        /// Its message id.
        key: MsgId,
    },
    /// Send a live delivery request; answer with [`Input::DeliverResponse`] (a late
    /// answer after the engine's own timeout is ignored).
    SendRequest {
        /// The request.
        req: ReqId,
        /// The recipient's node.
        peer: PeerRef,
        /// The envelopes, oldest first, for one recipient session.
        envelopes: Vec<Signed<Envelope>>,
    },
    /// Publish this mailbox copy (holders merge it into theirs); report each holder's
    /// answer with [`Input::PutAnswered`] and the end with [`Input::PutEnded`] (only a
    /// session without an outbox waits for them).
    DhtPut {
        /// The publication.
        put: PutToken,
        /// The copy.
        mailbox: Mailbox,
    },
    /// Fetch every holder's copy of this record; answer each with
    /// [`Input::MailboxFetched`].
    DhtGet {
        /// The record key (this session's mailbox).
        key: [u8; 32],
    },
    /// Append these envelopes to the inbox durably (all or nothing), in order; answer
    /// with [`Input::InboxStored`].
    AppendInbox {
        /// The append.
        token: StoreToken,
        /// The envelopes.
        entries: Vec<Signed<Envelope>>,
    },
    /// Answer an inbound live delivery request.
    Respond {
        /// The request.
        req: InboundId,
        /// The answer.
        response: Response,
    },
    /// Send a collected-mail receipt; answer with [`Input::ReceiptSent`].
    SendReceipt {
        /// The receipt.
        id: ReceiptId,
        /// The sending session's node.
        peer: PeerRef,
        #[allow(missing_docs)]
        receipt: Signed<Receipt>,
    },
    /// Call [`Input::Timer`] at this time (ms since the epoch), replacing any earlier
    /// timer.
    SetTimer {
        /// When.
        at: u64,
    },
    /// The answer to a `send` call.
    Reply {
        /// The call.
        caller: CallId,
        /// What it came to.
        outcome: Result<Outcome, SendError>,
    },
    /// Something worth telling the shell.
    Event(Event),
}

/// A key of the inbox index and of acks: the signed sender and its message id.
pub type EntryKey = (IdentityKey, MsgId);

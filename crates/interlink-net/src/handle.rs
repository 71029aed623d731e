//! The cheap, cloneable handle to a running node.

use interlink_core::{
    IdentityKey, MsgId, SessionId,
    presence::IdentityView,
    trust::PeerPolicy,
    wire::{EnvelopeKind, SessionAddr},
};
use libp2p::{Multiaddr, PeerId};
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::{Diagnostics, NetError, OutgoingMessage, SendError, SendOutcome, Settled};

/// Something that happened on the node, for subscribers (the CLI's `--watch`, the MCP
/// layer). Delivered through a bounded broadcast channel.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Event {
    /// The roster changed (a session appeared, changed, or left).
    RosterChanged,
    /// The node listens on a new address.
    ListenAddr(Multiaddr),
    /// A first connection to a peer opened.
    PeerConnected(PeerId),
    /// The last connection to a peer closed.
    PeerDisconnected(PeerId),
    /// A message was written to this session's inbox (first time only).
    Delivered {
        #[allow(missing_docs)]
        msg_id: MsgId,
        /// The verified sender.
        from: IdentityKey,
        /// Its kind: a message for the agent, or a receipt or notice for the session.
        kind: EnvelopeKind,
    },
    /// A message this session queued in a mailbox was receipted by its recipient
    /// after all: a live retry when the recipient came back, or the recipient's receipt
    /// for mail it collected from its mailbox. Signed by the recipient, but the id is
    /// not checked against what this node sent (it forgets on restart): count it only
    /// for a message sent to `to`.
    Receipted {
        #[allow(missing_docs)]
        msg_id: MsgId,
        /// The recipient session that signed the receipt.
        to: SessionAddr,
    },
    /// A message this session queued will not be delivered: the recipient refused it
    /// for good when it was retried, or it was not collected within the mailbox
    /// retention. It has left the outbox.
    NotKept {
        #[allow(missing_docs)]
        msg_id: MsgId,
        /// The recipient session it was for.
        to: SessionAddr,
        /// The reason, in words for a log or a person.
        reason: String,
    },
    /// A stranger knocked (held for the operator; nothing reached the inbox).
    Knock {
        /// The stranger's identity.
        from: IdentityKey,
        #[allow(missing_docs)]
        session: SessionId,
    },
    /// A holder answered a fetch of this session's own mailbox, and what its copy held
    /// was handed to delivery (whatever is new in it is on its way to the inbox).
    MailboxFetched {
        /// The holder's node.
        holder: PeerId,
    },
    /// A presence message or roster entry was refused.
    Rejected {
        /// The peer it came from.
        from: PeerId,
        /// The reason, in words for a log or a person.
        reason: String,
    },
}

/// Requests from handles to the node task; each carries its reply channel.
#[derive(Debug)]
pub(crate) enum Command {
    Roster(oneshot::Sender<Vec<IdentityView>>),
    Diagnostics(oneshot::Sender<Diagnostics>),
    SetSummary(String, oneshot::Sender<()>),
    SetDelivery(interlink_core::wire::DeliveryMode, oneshot::Sender<()>),
    SetClaims(Vec<interlink_core::claims::Claim>, oneshot::Sender<()>),
    Dial(Multiaddr, oneshot::Sender<Result<(), NetError>>),
    Send(
        Box<OutgoingMessage>,
        oneshot::Sender<Result<SendOutcome, SendError>>,
    ),
    SetPolicy(PeerPolicy, oneshot::Sender<()>),
    HeldMailbox(SessionAddr, oneshot::Sender<Option<HeldMailbox>>),
    Settle(std::time::Duration, oneshot::Sender<Settled>),
    Goodbye(oneshot::Sender<bool>),
    Departed(IdentityKey, oneshot::Sender<Vec<(SessionId, u64)>>),
}

/// What a node holds of one session's mailbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeldMailbox {
    /// Envelopes waiting for the owner.
    pub pending: usize,
    /// Message ids the owner acked (tombstones).
    pub acked: usize,
}

/// A handle to a running node. Cloning is cheap; all clones talk to the same task.
#[derive(Clone, Debug)]
pub struct Handle {
    pub(crate) commands: mpsc::Sender<Command>,
    pub(crate) events: broadcast::Sender<Event>,
    pub(crate) peer_id: PeerId,
    pub(crate) cancel: CancellationToken,
}

impl Handle {
    /// This node's PeerId.
    pub fn peer_id(&self) -> PeerId {
        self.peer_id
    }

    /// Subscribes to node events.
    pub fn events(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// The roster as this node sees it now: identity → sessions with presence.
    pub async fn roster(&self) -> Result<Vec<IdentityView>, NetError> {
        self.request(Command::Roster).await
    }

    /// A snapshot of the node's network state.
    pub async fn diagnostics(&self) -> Result<Diagnostics, NetError> {
        self.request(Command::Diagnostics).await
    }

    /// Changes this session's summary and re-announces at once.
    pub async fn set_summary(&self, summary: String) -> Result<(), NetError> {
        self.request(|tx| Command::SetSummary(summary, tx)).await
    }

    /// Sets this session's claims on files of its project (checked by the caller with
    /// `interlink_core::claims::check_set`; details that do not check are not
    /// announced) and announces them at once.
    pub async fn set_claims(
        &self,
        claims: Vec<interlink_core::claims::Claim>,
    ) -> Result<(), NetError> {
        self.request(|tx| Command::SetClaims(claims, tx)).await
    }

    /// Changes how this session says messages reach its agent (the announcement's
    /// `delivery`) and re-announces at once: the agent host's inbox socket stopped
    /// taking messages, say.
    pub async fn set_delivery(
        &self,
        delivery: interlink_core::wire::DeliveryMode,
    ) -> Result<(), NetError> {
        self.request(|tx| Command::SetDelivery(delivery, tx)).await
    }

    /// Dials an address (with or without a `/p2p/` suffix).
    pub async fn dial(&self, addr: Multiaddr) -> Result<(), NetError> {
        self.request(|tx| Command::Dial(addr, tx)).await?
    }

    /// Sends a message to a session on the roster: over the live path, answered by the
    /// recipient's signed receipt, or — if the recipient does not answer — queued in
    /// its DHT mailbox. A refusal by the recipient is an error with its reason.
    pub async fn send(&self, msg: OutgoingMessage) -> Result<SendOutcome, SendError> {
        self.submit(msg).await?.await
    }

    /// Hands `msg` to the node and returns once the node has it, with the outcome to
    /// await later. Messages submitted one after the other reach their recipient in that
    /// order; keeping several in flight lets the node batch them (one delivery request,
    /// one mailbox put for a burst to a sleeping recipient).
    pub async fn submit(&self, msg: OutgoingMessage) -> Result<Outcome, SendError> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(Command::Send(Box::new(msg), tx))
            .await
            .map_err(|_| SendError::Stopped)?;
        Ok(Outcome(rx))
    }

    /// Replaces the peers policy the node's trust gate applies.
    pub async fn set_policy(&self, policy: PeerPolicy) -> Result<(), NetError> {
        self.request(|tx| Command::SetPolicy(policy, tx)).await
    }

    /// What this node holds of `addr`'s mailbox, if anything.
    pub async fn held_mailbox(&self, addr: SessionAddr) -> Result<Option<HeldMailbox>, NetError> {
        self.request(|tx| Command::HeldMailbox(addr, tx)).await
    }

    /// Waits (at most `timeout`) until every message sent so far has left this node:
    /// delivered, or queued with its mailbox copy taken by at least one peer — or
    /// known to be held only here. A short-lived sender calls it before exiting.
    pub async fn settle(&self, timeout: std::time::Duration) -> Result<Settled, NetError> {
        self.request(|tx| Command::Settle(timeout, tx)).await
    }

    /// The sessions of `key` this node saw say goodbye (still remembered), most recent
    /// first, with the time of each goodbye: ids a message can still be queued for.
    pub async fn departed(&self, key: IdentityKey) -> Result<Vec<(SessionId, u64)>, NetError> {
        self.request(|tx| Command::Departed(key, tx)).await
    }

    /// Publishes the session's goodbye now, ahead of the rest of a shutdown, so peers
    /// drop the session at once even if the process is killed before it finishes
    /// closing; from then on the node never announces the session again. Returns
    /// whether a goodbye went to gossipsub (false: not a session, said already, or no
    /// peer to publish to). [`crate::Node::shutdown`] gives it time to leave.
    pub async fn say_goodbye(&self) -> Result<bool, NetError> {
        self.request(Command::Goodbye).await
    }

    /// Asks the node to shut down (publishing its goodbye first). Returns at once; await
    /// [`crate::Node::shutdown`] or the node's task to know when it is done.
    pub fn shutdown(&self) {
        self.cancel.cancel();
    }

    async fn request<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> Command,
    ) -> Result<T, NetError> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(make(tx))
            .await
            .map_err(|_| NetError::Stopped)?;
        rx.await.map_err(|_| NetError::Stopped)
    }
}

/// The outcome of a [`Handle::submit`]ted message, to await.
#[derive(Debug)]
pub struct Outcome(oneshot::Receiver<Result<SendOutcome, SendError>>);

impl std::future::Future for Outcome {
    type Output = Result<SendOutcome, SendError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0)
            .poll(cx)
            .map(|r| r.unwrap_or(Err(SendError::Stopped)))
    }
}

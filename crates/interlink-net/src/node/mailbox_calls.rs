//! Outgoing mailbox requests, a few at a time per peer.
//!
//! A node reads at most [`MAILBOX_STREAMS_PER_CONNECTION`] mailbox streams per
//! connection (`crate::behaviour`): every stream waiting to be read keeps up to a yamux
//! window (256 KiB) of its request buffered, so a swarm of peers each opening libp2p's
//! default 100 streams cost a session about 140 MiB. Our own requests must then stay
//! under the remote's cap, or a burst of them (a shell `send` of 50 messages publishes
//! 50 copies to one holder) would have its streams reset. So every mailbox request —
//! `hold`, a signed `fetch`, a relay's push to an owner — goes through here: at most
//! [`IN_FLIGHT_PER_PEER`] are on the wire to one peer, and the rest wait in order, up to
//! [`MAX_WAITING_PER_PEER`] per peer and [`MAX_WAITING_BYTES`] in all (they are our own
//! copies, but a peer that never answers must not make them pile up).
//!
//! Callers get a [`CallId`] at once and see the request's answer under it, whether it
//! went out at once or waited. A `hold` of a mailbox that already has one waiting for
//! the same peer replaces that one's copy and shares its answer: a node publishes its
//! whole merged copy of a mailbox each time (`node::mailbox`), so the newer copy holds
//! everything the older one did, and a burst of 50 sends to one sleeping recipient is a
//! few requests, not 50.
//!
//! [`MAILBOX_STREAMS_PER_CONNECTION`]: crate::behaviour::MAILBOX_STREAMS_PER_CONNECTION

use std::collections::{HashMap, VecDeque};

use interlink_core::wire::{MailboxOp, MailboxRequest};
use libp2p::{PeerId, request_response::OutboundRequestId};

use super::Actor;

/// Mailbox requests on the wire to one peer at once. Both sides of a connection
/// sending this many stay within the remote's stream cap.
const IN_FLIGHT_PER_PEER: usize = crate::behaviour::MAILBOX_IN_FLIGHT_PER_PEER;
/// Requests waiting for one peer.
const MAX_WAITING_PER_PEER: usize = 256;
/// Bytes of requests waiting, over all peers.
const MAX_WAITING_BYTES: usize = 64 * 1024 * 1024;

/// Names one outgoing mailbox request from the moment it is made, sent or waiting.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub(crate) struct CallId(u64);

/// The calls one request on the wire answers: one, or several coalesced holds.
pub(crate) type Calls = Vec<CallId>;

/// What an outgoing mailbox request is for, so its answer goes to the part of the
/// node that made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// A copy handed to a holder for a publication (`node::publishing`).
    Hold,
    /// A signed fetch of our own mailbox (`node::fetching`).
    Fetch,
    /// A relay's push of a mailbox copy to its connected owner (`node::mailbox_server`).
    Push(libp2p::kad::RecordKey),
}

/// A waiting request let out: to whom, the calls it answers, the request.
type Next = (PeerId, Calls, MailboxRequest);

/// Why a request was not taken.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum CallRefused {
    /// Too many requests already wait for this peer, or in all.
    QueueFull,
}

/// The outgoing mailbox requests of a node; `R` names a request on the wire (generic
/// so tests can make them).
#[derive(Debug)]
pub(crate) struct MailboxCalls<R = OutboundRequestId> {
    next: u64,
    /// Requests on the wire → the peer and the calls it answers.
    sent: HashMap<R, (PeerId, Calls)>,
    /// Requests on the wire per peer (peers with none are removed).
    in_flight: HashMap<PeerId, usize>,
    /// Requests waiting per peer, oldest first (empty queues are removed).
    waiting: HashMap<PeerId, VecDeque<(Calls, MailboxRequest)>>,
    waiting_bytes: usize,
    /// What each call sent or waiting is for (removed when it is answered).
    purposes: HashMap<CallId, Purpose>,
}

impl<R> Default for MailboxCalls<R> {
    fn default() -> Self {
        Self {
            next: 0,
            sent: HashMap::new(),
            in_flight: HashMap::new(),
            waiting: HashMap::new(),
            waiting_bytes: 0,
            purposes: HashMap::new(),
        }
    }
}

impl<R: std::hash::Hash + Eq> MailboxCalls<R> {
    /// Requests waiting, over all peers (diagnostics, tests).
    pub(crate) fn waiting(&self) -> usize {
        self.waiting.values().map(VecDeque::len).sum()
    }

    /// Whether a request is on the wire or waiting.
    pub(crate) fn is_idle(&self) -> bool {
        self.sent.is_empty() && self.waiting.is_empty()
    }

    /// Takes `request` for `peer`: handed back with its id to send now, or kept
    /// waiting under its id.
    fn admit(
        &mut self,
        peer: PeerId,
        request: MailboxRequest,
    ) -> Result<(CallId, Option<MailboxRequest>), CallRefused> {
        let id = CallId(self.next);
        let busy = self.in_flight.get(&peer).copied().unwrap_or(0);
        if busy < IN_FLIGHT_PER_PEER {
            self.next += 1;
            return Ok((id, Some(request)));
        }
        let bytes = request_bytes(&request);
        let queue = self.waiting.entry(peer).or_default();
        if let MailboxOp::Hold { key, .. } = &request.op
            && let Some((calls, waiting)) = queue
                .iter_mut()
                .find(|(_, w)| matches!(&w.op, MailboxOp::Hold { key: k, .. } if k == key))
        {
            let old = request_bytes(waiting);
            if self.waiting_bytes.saturating_sub(old).saturating_add(bytes) <= MAX_WAITING_BYTES {
                self.next += 1;
                self.waiting_bytes = self.waiting_bytes - old + bytes;
                *waiting = request;
                calls.push(id);
                return Ok((id, None));
            }
        }
        if queue.len() >= MAX_WAITING_PER_PEER
            || self.waiting_bytes.saturating_add(bytes) > MAX_WAITING_BYTES
        {
            if queue.is_empty() {
                self.waiting.remove(&peer);
            }
            return Err(CallRefused::QueueFull);
        }
        self.next += 1;
        self.waiting_bytes += bytes;
        queue.push_back((vec![id], request));
        Ok((id, None))
    }

    /// `rid` is on the wire for `peer`'s `calls`.
    fn on_sent(&mut self, rid: R, peer: PeerId, calls: Calls) {
        self.sent.insert(rid, (peer, calls));
        *self.in_flight.entry(peer).or_default() += 1;
    }

    /// `rid` ended: its calls, and the next request waiting for the same peer, to send.
    fn on_ended(&mut self, rid: R) -> Option<(Calls, Option<Next>)> {
        let (peer, id) = self.sent.remove(&rid)?;
        match self.in_flight.get_mut(&peer) {
            Some(n) if *n > 1 => *n -= 1,
            _ => {
                self.in_flight.remove(&peer);
            }
        }
        let queue = self.waiting.get_mut(&peer);
        let next = queue.and_then(VecDeque::pop_front);
        if self.waiting.get(&peer).is_some_and(VecDeque::is_empty) {
            self.waiting.remove(&peer);
        }
        let next = next.map(|(next, request)| {
            self.waiting_bytes = self.waiting_bytes.saturating_sub(request_bytes(&request));
            (peer, next, request)
        });
        Some((id, next))
    }
}

/// The bytes a request keeps while it waits: the copy it carries.
fn request_bytes(request: &MailboxRequest) -> usize {
    match &request.op {
        MailboxOp::Hold { key, record } => key.len() + record.len(),
        MailboxOp::Fetch { request } => request.len(),
        MailboxOp::Unread => 0,
    }
}

impl Actor {
    /// Sends `request` to `peer` now, or once fewer than [`IN_FLIGHT_PER_PEER`] of our
    /// mailbox requests to it are on the wire.
    pub(super) fn call_mailbox(
        &mut self,
        peer: PeerId,
        request: MailboxRequest,
        purpose: Purpose,
    ) -> Result<CallId, CallRefused> {
        let (id, now) = self.mailbox.calls.admit(peer, request)?;
        self.mailbox.calls.purposes.insert(id, purpose);
        if let Some(request) = now {
            self.send_call(peer, vec![id], request);
        }
        Ok(id)
    }

    fn send_call(&mut self, peer: PeerId, calls: Calls, request: MailboxRequest) {
        let rid = self
            .swarm
            .behaviour_mut()
            .mailbox
            .send_request(&peer, request);
        self.mailbox.calls.on_sent(rid, peer, calls);
    }

    /// The request `rid` was answered or failed: returns the calls it answers with
    /// what each was for, and sends the next request waiting for the same peer. `None`
    /// for a request not made here.
    pub(super) fn end_call(&mut self, rid: OutboundRequestId) -> Option<Vec<(CallId, Purpose)>> {
        let (ids, next) = self.mailbox.calls.on_ended(rid)?;
        if let Some((peer, next, request)) = next {
            self.send_call(peer, next, request);
        }
        let purposes = &mut self.mailbox.calls.purposes;
        Some(
            ids.into_iter()
                .filter_map(|id| purposes.remove(&id).map(|p| (id, p)))
                .collect(),
        )
    }
}

#[cfg(test)]
#[path = "mailbox_calls_tests.rs"]
mod tests;

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
mod tests {
    use interlink_core::wire::VERSION;
    use serde_bytes::ByteBuf;

    use super::*;

    /// Takes `request` and sends what `admit` hands back, as the actor does (wire ids
    /// counted up in `wire`).
    fn take_for(
        calls: &mut MailboxCalls<u64>,
        wire: &mut u64,
        peer: PeerId,
        request: MailboxRequest,
    ) -> Result<CallId, CallRefused> {
        let (id, now) = calls.admit(peer, request)?;
        if now.is_some() {
            *wire += 1;
            calls.on_sent(*wire, peer, vec![id]);
        }
        Ok(id)
    }

    /// A hold of mailbox `key` (one byte) with a copy of `bytes`.
    fn hold_of(key: u8, bytes: usize) -> MailboxRequest {
        MailboxRequest {
            v: VERSION,
            op: MailboxOp::Hold {
                key: ByteBuf::from(vec![key; 32]),
                record: ByteBuf::from(vec![0; bytes]),
            },
        }
    }

    fn fetch() -> MailboxRequest {
        MailboxRequest {
            v: VERSION,
            op: MailboxOp::Fetch {
                request: ByteBuf::from(vec![7; 100]),
            },
        }
    }

    #[test]
    fn a_burst_to_one_peer_goes_out_a_few_at_a_time_in_order() {
        let (a, b) = (PeerId::random(), PeerId::random());
        let mut calls = MailboxCalls::<u64>::default();
        let mut wire = 0;
        let ids: Vec<CallId> = (0..50)
            .map(|_| take_for(&mut calls, &mut wire, a, fetch()).expect("taken"))
            .collect();
        // Another peer is not held up by the first one's burst.
        take_for(&mut calls, &mut wire, b, fetch()).expect("taken");
        assert_eq!(wire as usize, IN_FLIGHT_PER_PEER + 1);
        assert_eq!(calls.waiting(), 50 - IN_FLIGHT_PER_PEER);

        // Each answer lets the next waiting request out, oldest first, and every call
        // is answered under its own id exactly once.
        let mut answered = Vec::new();
        let mut on_wire: VecDeque<u64> = (1..=IN_FLIGHT_PER_PEER as u64).collect();
        while let Some(rid) = on_wire.pop_front() {
            let (ids, next) = calls.on_ended(rid).expect("ours");
            answered.extend(ids);
            if let Some((peer, next, _)) = next {
                assert_eq!(peer, a);
                wire += 1;
                calls.on_sent(wire, peer, next);
                on_wire.push_back(wire);
            }
        }
        assert_eq!(answered, ids);
        assert_eq!(calls.waiting(), 0);
        assert_eq!(calls.waiting_bytes, 0);
        assert!(calls.on_ended(9999).is_none(), "not a request made here");
    }

    #[test]
    fn waiting_requests_are_bounded_per_peer_and_in_bytes() {
        let (a, b) = (PeerId::random(), PeerId::random());
        let mut calls = MailboxCalls::<u64>::default();
        let mut wire = 0;
        for _ in 0..IN_FLIGHT_PER_PEER + MAX_WAITING_PER_PEER {
            take_for(&mut calls, &mut wire, a, fetch()).expect("taken");
        }
        assert_eq!(
            take_for(&mut calls, &mut wire, a, fetch()),
            Err(CallRefused::QueueFull)
        );
        assert_eq!(calls.waiting(), MAX_WAITING_PER_PEER);
        // Big copies of distinct mailboxes for another peer: refused once the bytes
        // waiting would pass the cap.
        for key in 0..IN_FLIGHT_PER_PEER as u8 {
            take_for(&mut calls, &mut wire, b, hold_of(key, 4 << 20)).expect("sent at once");
        }
        let mut queued = 0;
        while take_for(&mut calls, &mut wire, b, hold_of(100 + queued, 4 << 20)).is_ok() {
            queued += 1;
        }
        assert_eq!(usize::from(queued), MAX_WAITING_BYTES / ((4 << 20) + 32));
        assert!(calls.waiting_bytes <= MAX_WAITING_BYTES);
    }

    fn hold(key: u8, copy: u8) -> MailboxRequest {
        MailboxRequest {
            v: VERSION,
            op: MailboxOp::Hold {
                key: ByteBuf::from(vec![key; 32]),
                record: ByteBuf::from(vec![copy; 64]),
            },
        }
    }

    #[test]
    fn waiting_holds_of_one_mailbox_become_one_request_with_the_newest_copy() {
        let peer = PeerId::random();
        let mut calls = MailboxCalls::<u64>::default();
        let mut wire = 0u64;
        let mut ids = Vec::new();
        for copy in 0..50u8 {
            let (id, now) = calls.admit(peer, hold(1, copy)).expect("taken");
            if now.is_some() {
                wire += 1;
                calls.on_sent(wire, peer, vec![id]);
            }
            ids.push(id);
        }
        // Another mailbox's hold waits on its own.
        let (other, now) = calls.admit(peer, hold(2, 0)).expect("taken");
        assert!(now.is_none());
        assert_eq!(
            calls.waiting(),
            2,
            "48 holds of mailbox 1 coalesced into one"
        );

        let (first, next) = calls.on_ended(1).expect("ours");
        assert_eq!(first, vec![ids[0]]);
        let (_, coalesced, request) = next.expect("the waiting hold goes out");
        assert_eq!(
            coalesced,
            ids[2..].to_vec(),
            "it answers every call it replaced"
        );
        assert!(
            matches!(&request.op, MailboxOp::Hold { record, .. } if record[0] == 49),
            "with the newest copy"
        );
        wire += 1;
        calls.on_sent(wire, peer, coalesced);
        let (second, next) = calls.on_ended(2).expect("ours");
        assert_eq!(second, vec![ids[1]]);
        let (_, last, _) = next.expect("mailbox 2's hold goes out");
        assert_eq!(last, vec![other]);
    }
}

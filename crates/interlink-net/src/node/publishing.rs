//! Following mailbox publications until a peer takes a copy ([`crate::Handle::settle`]).
//!
//! A publication (one [`super::Actor::publish_mailbox`]) goes out as DHT puts and relay
//! `hold` requests. It counts as stored remotely at the first of them a peer confirms,
//! and as local only when all of them failed. A process about to exit (`interlink-p2p
//! send`) asks `settle` to learn whether anything besides its own outbox holds what it
//! queued.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use libp2p::kad;
use tokio::sync::oneshot;

use super::Actor;
use crate::Settled;

/// Mailbox publications tracked until a peer confirms one.
const MAX_PUBLICATIONS: usize = 1024;
/// Callers of [`crate::Handle::settle`] waiting at once.
const MAX_SETTLE_WAITERS: usize = 16;

/// One way a mailbox publication reaches peers: a DHT put query, or a `hold` request
/// to a relay.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub(crate) enum PutId {
    /// A Kademlia put query.
    Kad(kad::QueryId),
    /// A mailbox-protocol `hold` request.
    Hold(libp2p::request_response::OutboundRequestId),
}

/// Publications in flight and the callers waiting for them.
#[derive(Debug, Default)]
pub(crate) struct Publishing {
    /// Puts in flight (DHT queries, relay holds) → their publication.
    puts: HashMap<PutId, u64>,
    /// Publications not settled yet → put queries still running for each.
    publications: HashMap<u64, usize>,
    next_publication: u64,
    settled: Settled,
    waiters: Vec<(Instant, oneshot::Sender<Settled>)>,
}

impl Publishing {
    /// The earliest moment a settle caller must be answered.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.waiters.iter().map(|(d, _)| *d).min()
    }
}

impl Actor {
    /// Records the puts of one mailbox publication.
    pub(super) fn track_publication(&mut self, queries: Vec<PutId>) {
        let p = &mut self.publishing;
        if queries.is_empty() || p.publications.len() >= MAX_PUBLICATIONS {
            // Nothing went out, or not followed: counted as local rather than guessed.
            p.settled.local_only += 1;
            return;
        }
        let id = p.next_publication;
        p.next_publication += 1;
        p.publications.insert(id, queries.len());
        for q in queries {
            p.puts.insert(q, id);
        }
    }

    /// A put ended: the publication is confirmed by the first peer that took a copy,
    /// or left local when none of its puts reached one.
    pub(super) fn on_put_result(&mut self, id: PutId, ok: bool) {
        let p = &mut self.publishing;
        let Some(publication) = p.puts.remove(&id) else {
            return;
        };
        let Some(left) = p.publications.get_mut(&publication) else {
            return;
        };
        if ok {
            p.publications.remove(&publication);
            p.puts.retain(|_, x| *x != publication);
            p.settled.stored_remotely += 1;
        } else {
            *left -= 1;
            if *left == 0 {
                p.publications.remove(&publication);
                p.settled.local_only += 1;
            }
        }
        self.answer_settle_waiters(Instant::now());
    }

    /// Whether nothing sent is still on its way: no publication, no live request, no
    /// caller waiting for its answer.
    fn sending_idle(&self) -> bool {
        self.publishing.publications.is_empty()
            && self
                .delivery
                .as_ref()
                .is_none_or(super::delivery::Delivery::idle)
    }

    pub(super) fn settle(&mut self, timeout: Duration, reply: oneshot::Sender<Settled>) {
        if self.sending_idle() || self.publishing.waiters.len() >= MAX_SETTLE_WAITERS {
            let _ = reply.send(self.settled_now());
            return;
        }
        self.publishing
            .waiters
            .push((Instant::now() + timeout, reply));
    }

    fn settled_now(&self) -> Settled {
        Settled {
            pending: self.publishing.publications.len(),
            ..self.publishing.settled
        }
    }

    /// Answers the settle callers that are due (idle, or past their deadline).
    pub(super) fn answer_settle_waiters(&mut self, now: Instant) {
        if self.publishing.waiters.is_empty() {
            return;
        }
        let idle = self.sending_idle();
        let settled = self.settled_now();
        let waiters = std::mem::take(&mut self.publishing.waiters);
        for (deadline, reply) in waiters {
            if idle || now >= deadline {
                let _ = reply.send(settled);
            } else {
                self.publishing.waiters.push((deadline, reply));
            }
        }
    }
}

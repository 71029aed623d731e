//! Following mailbox publications until peers answer ([`crate::Handle::settle`]).
//!
//! A publication (one [`super::Actor::publish_mailbox`]) goes out as `hold` requests
//! to every connected peer and relay, and to the mailbox key's closest peers once a DHT
//! query found them (those holds join the publication). A `hold` answer is the word on
//! storage: the holder lists which of the copy's envelopes its merged copy keeps (a
//! full mailbox keeps its older mail). Each answer goes to the engine
//! (`Input::PutAnswered`), and the publication's end once every request is answered
//! or failed (`Input::PutEnded`): a session without an outbox says `queued` only on a
//! holder's word. A publication counts as stored remotely at its first `hold` answer,
//! and as local only when none came. A process about to exit asks `settle` to learn
//! whether anything besides itself holds what it queued.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use interlink_core::wire::AckEntry;
use interlink_delivery::{Input, PutToken};
use libp2p::kad;
use tokio::sync::oneshot;

use super::Actor;
use crate::Settled;

/// Mailbox publications tracked until their requests end.
const MAX_PUBLICATIONS: usize = 1024;
/// Callers of [`crate::Handle::settle`] waiting at once.
const MAX_SETTLE_WAITERS: usize = 16;

/// One way a mailbox publication reaches peers: a `hold` request, or the query finding
/// the mailbox key's closest peers (which hands each of them a `hold` when it ends).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub(crate) enum PutId {
    /// A Kademlia closest-peers query (`node::fetching`).
    Closest(kad::QueryId),
    /// A mailbox-protocol `hold` request.
    Hold(super::mailbox_calls::CallId),
}

/// How one request of a publication ended.
#[derive(Debug)]
pub(crate) enum PutAnswer {
    /// A holder merged the copy; these of its envelopes the merged copy keeps.
    Kept(Vec<AckEntry>),
    /// The request ended without a word on storage (a query, a refusal, a failure).
    Ended,
}

/// One publication in flight.
#[derive(Debug)]
struct Publication {
    /// Requests not ended yet.
    left: usize,
    /// A holder answered it.
    confirmed: bool,
    /// The engine's publication, if the engine made it.
    engine: Option<PutToken>,
}

/// Publications in flight and the callers waiting for them.
#[derive(Debug, Default)]
pub(crate) struct Publishing {
    /// Requests in flight (DHT queries, holds) → their publication.
    puts: HashMap<PutId, u64>,
    /// Publications not ended yet.
    publications: HashMap<u64, Publication>,
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
    /// Records the requests of one mailbox publication (the engine's `engine`, if it
    /// made it). Called while the engine's outputs are carried out, so the engine is
    /// only fed here.
    pub(super) fn track_publication(&mut self, queries: Vec<PutId>, engine: Option<PutToken>) {
        let p = &mut self.mailbox.publishing;
        if queries.is_empty() || p.publications.len() >= MAX_PUBLICATIONS {
            // Nothing went out, or not followed: counted as local rather than guessed.
            p.settled.local_only += 1;
            if let Some(put) = engine {
                self.feed(Input::PutEnded { put });
            }
            return;
        }
        let id = p.next_publication;
        p.next_publication += 1;
        p.publications.insert(
            id,
            Publication {
                left: queries.len(),
                confirmed: false,
                engine,
            },
        );
        for q in queries {
            p.puts.insert(q, id);
        }
    }

    /// Adds `more` requests to the publication `of` belongs to (the holds a placement
    /// query sent to the closest peers it found); dropped if `of` is not followed.
    pub(super) fn add_to_publication(&mut self, of: PutId, more: Vec<PutId>) {
        let p = &mut self.mailbox.publishing;
        let Some(&publication) = p.puts.get(&of) else {
            return;
        };
        let Some(entry) = p.publications.get_mut(&publication) else {
            return;
        };
        entry.left += more.len();
        for q in more {
            p.puts.insert(q, publication);
        }
    }

    /// A request of a publication ended: a holder's answer goes to the engine, and the
    /// publication ends with its last request.
    pub(super) fn on_put_result(&mut self, id: PutId, answer: PutAnswer) {
        let p = &mut self.mailbox.publishing;
        let Some(publication) = p.puts.remove(&id) else {
            return;
        };
        let Some(entry) = p.publications.get_mut(&publication) else {
            return;
        };
        let engine = entry.engine;
        let mut inputs = Vec::new();
        if let PutAnswer::Kept(kept) = answer {
            if !entry.confirmed {
                entry.confirmed = true;
                p.settled.stored_remotely += 1;
            }
            if let Some(put) = engine {
                let kept = kept.into_iter().map(|e| (e.0, e.1)).collect();
                inputs.push(Input::PutAnswered { put, kept });
            }
        }
        entry.left = entry.left.saturating_sub(1);
        if entry.left == 0 {
            if !entry.confirmed {
                p.settled.local_only += 1;
            }
            p.publications.remove(&publication);
            if let Some(put) = engine {
                inputs.push(Input::PutEnded { put });
            }
        }
        for input in inputs {
            self.drive(input);
        }
        self.answer_settle_waiters(Instant::now());
    }

    /// Whether nothing sent is still on its way: no publication, no live request, no
    /// caller waiting for its answer.
    fn sending_idle(&self) -> bool {
        self.mailbox.publishing.publications.is_empty()
            && self
                .parts
                .delivery()
                .is_none_or(super::delivery::Delivery::idle)
    }

    pub(super) fn settle(&mut self, timeout: Duration, reply: oneshot::Sender<Settled>) {
        if self.sending_idle() || self.mailbox.publishing.waiters.len() >= MAX_SETTLE_WAITERS {
            let _ = reply.send(self.settled_now());
            return;
        }
        self.mailbox
            .publishing
            .waiters
            .push((Instant::now() + timeout, reply));
    }

    fn settled_now(&self) -> Settled {
        Settled {
            pending: self.mailbox.publishing.publications.len(),
            ..self.mailbox.publishing.settled
        }
    }

    /// Answers the settle callers that are due (idle, or past their deadline).
    pub(super) fn answer_settle_waiters(&mut self, now: Instant) {
        if self.mailbox.publishing.waiters.is_empty() {
            return;
        }
        let idle = self.sending_idle();
        let settled = self.settled_now();
        let waiters = std::mem::take(&mut self.mailbox.publishing.waiters);
        for (deadline, reply) in waiters {
            if idle || now >= deadline {
                let _ = reply.send(settled);
            } else {
                self.mailbox.publishing.waiters.push((deadline, reply));
            }
        }
    }
}

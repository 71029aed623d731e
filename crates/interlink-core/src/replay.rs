//! Freshness checks and the bounded replay set.
//!
//! A timestamp is accepted when it is at most [`MAX_FUTURE_SKEW_MS`] ahead of `now`
//! and at most the caller's window behind it. The window depends on the path: the live
//! path uses [`crate::limits::LIVE_FRESHNESS_MS`]; mailbox envelopes stay valid for
//! the mailbox retention, because a laptop asleep over a long weekend must still get its
//! mail. The replay set remembers message ids for as long as they could be accepted,
//! bounded by a capacity; the durable inbox dedupe (delivery layer) is the backstop.

use std::collections::{HashMap, VecDeque};

use crate::{limits::MAX_FUTURE_SKEW_MS, wire::MsgId};

/// A timestamp outside the accepted window.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone, Copy)]
#[non_exhaustive]
pub enum TimeError {
    /// Too far in the future (clock skew beyond tolerance, or forged).
    #[error("timestamp is {ahead_ms} ms in the future; tolerance is {MAX_FUTURE_SKEW_MS} ms")]
    FutureDated {
        /// How far ahead.
        ahead_ms: u64,
    },
    /// Older than the window.
    #[error("timestamp is {age_ms} ms old; the window is {window_ms} ms")]
    Stale {
        #[allow(missing_docs)]
        age_ms: u64,
        #[allow(missing_docs)]
        window_ms: u64,
    },
}

/// Checks `ts` against `now`: not more than the skew tolerance ahead, not more than
/// `window_ms` behind.
pub fn check_time(ts: u64, now: u64, window_ms: u64) -> Result<(), TimeError> {
    if ts > now.saturating_add(MAX_FUTURE_SKEW_MS) {
        return Err(TimeError::FutureDated { ahead_ms: ts - now });
    }
    let age_ms = now.saturating_sub(ts);
    if age_ms > window_ms {
        return Err(TimeError::Stale { age_ms, window_ms });
    }
    Ok(())
}

/// A message id was seen before.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone, Copy)]
#[error("message {0} was already received (replay)")]
pub struct Replayed(pub MsgId);

/// A bounded, expiring set of seen message ids.
#[derive(Debug)]
pub struct ReplaySet {
    capacity: usize,
    ttl_ms: u64,
    expiry: HashMap<MsgId, u64>,
    // Insertion order with expiry times; expiry is monotone in insertion order because
    // every entry lives exactly `ttl_ms` from its insertion time, and `now` never
    // decreases from the caller's point of view (a decreasing `now` only delays expiry).
    order: VecDeque<(u64, MsgId)>,
}

impl ReplaySet {
    /// A set remembering ids for `ttl_ms`, holding at most `capacity` ids; when full,
    /// the oldest id is forgotten first.
    pub fn new(capacity: usize, ttl_ms: u64) -> Self {
        Self {
            capacity: capacity.max(1),
            ttl_ms,
            expiry: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    /// Records `id` at `now`; fails if it is already remembered.
    pub fn insert(&mut self, id: MsgId, now: u64) -> Result<(), Replayed> {
        self.expire(now);
        if self.expiry.contains_key(&id) {
            return Err(Replayed(id));
        }
        while self.expiry.len() >= self.capacity {
            match self.order.pop_front() {
                Some((_, old)) => {
                    self.expiry.remove(&old);
                }
                None => break,
            }
        }
        let until = now.saturating_add(self.ttl_ms);
        self.expiry.insert(id, until);
        self.order.push_back((until, id));
        Ok(())
    }

    /// Whether `id` is remembered.
    pub fn contains(&self, id: &MsgId) -> bool {
        self.expiry.contains_key(id)
    }

    /// Number of remembered ids.
    pub fn len(&self) -> usize {
        self.expiry.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.expiry.is_empty()
    }

    fn expire(&mut self, now: u64) {
        while let Some(&(until, id)) = self.order.front() {
            if until > now {
                break;
            }
            self.order.pop_front();
            self.expiry.remove(&id);
        }
    }
}

#[cfg(test)]
#[path = "replay_tests.rs"]
mod tests;

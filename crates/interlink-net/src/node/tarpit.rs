//! Late answers for peers past their budget, as an IO-free queue.
//!
//! A peer past its budget is refused after its request was read in full; answering at
//! once would let it send the next one at once, and a few peers streaming copies to be
//! refused keep this node busy decrypting them (issue 13, item 2). Answered late, each
//! request a peer keeps in flight costs it the delay. The requests waiting hold only
//! what answers them (at most the capacity; past it they are answered at once).

use std::{
    collections::VecDeque,
    time::{Duration, Instant},
};

#[derive(Debug)]
pub(crate) struct Tarpit<T> {
    delay: Duration,
    capacity: usize,
    /// Oldest (soonest due) first: every item waits the same delay.
    waiting: VecDeque<(Instant, T)>,
}

impl<T> Tarpit<T> {
    pub(crate) fn new(delay: Duration, capacity: usize) -> Self {
        Self {
            delay,
            capacity,
            waiting: VecDeque::new(),
        }
    }

    /// Holds `item` until `now` + the delay; gives it back when full (answer it now).
    pub(crate) fn hold(&mut self, item: T, now: Instant) -> Result<(), T> {
        if self.waiting.len() >= self.capacity {
            return Err(item);
        }
        self.waiting.push_back((now + self.delay, item));
        Ok(())
    }

    /// The next item due at `now`, if any.
    pub(crate) fn poll_due(&mut self, now: Instant) -> Option<T> {
        if self.waiting.front().is_some_and(|(due, _)| *due <= now) {
            self.waiting.pop_front().map(|(_, item)| item)
        } else {
            None
        }
    }
}

#[cfg(test)]
#[path = "tarpit_tests.rs"]
mod tests;

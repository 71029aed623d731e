//! The event queue and the seeded random numbers that drive a run.

use std::{cmp::Ordering, collections::BinaryHeap};

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, and statistically fine for
/// sampling a simulation. A dependency-free PRNG keeps the simulator in the library
/// without pulling `rand_chacha` out of dev-dependencies.
#[derive(Clone, Debug)]
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0), by multiply-shift: no modulo bias worth
    /// the name at the sizes used here.
    pub(super) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// An index in `0..n`.
    pub(super) fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    /// A number in `lo..=hi`.
    pub(super) fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    /// True with probability `p`.
    pub(super) fn chance(&mut self, p: f64) -> bool {
        ((self.next_u64() >> 11) as f64) < p * (1u64 << 53) as f64
    }
}

/// Something that happens at one node at one instant. Node, link and message
/// numbers are `u32`, and the two larger kinds live in a [`Slab`], to keep the
/// queue's entries at 32 bytes: a 10,000-node run moves billions of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ev {
    /// The node starts (cold start): its timers begin.
    Start(u32),
    /// A link's connection is established (both ends fetch each other's roster).
    Connect(u32),
    /// A gossip copy of a message arrives at `to` from `from`.
    Gossip { to: u32, from: u32, msg: u32 },
    /// The node's 1 s tick: gossipsub heartbeat, anti-entropy.
    Tick(u32),
    /// Protocol 7: the node's session re-announces.
    Announce(u32),
    /// An IHAVE arrives (its contents in the world's IHAVE slab).
    Ihave(u32),
    /// A roster response arrives (its request in the world's sync slab).
    Synced(u32),
    /// Protocol 8: the node's pacer timer (a second look at a peer is due).
    Wake(u32),
}

/// Values parked while their event is queued, by index; freed slots are reused.
#[derive(Debug)]
pub(super) struct Slab<T> {
    items: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> Slab<T> {
    pub(super) fn insert(&mut self, value: T) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.items[i as usize] = Some(value);
                i
            }
            None => {
                self.items.push(Some(value));
                (self.items.len() - 1) as u32
            }
        }
    }

    pub(super) fn take(&mut self, i: u32) -> Option<T> {
        let value = self.items.get_mut(i as usize)?.take();
        if value.is_some() {
            self.free.push(i);
        }
        value
    }
}

#[derive(Debug)]
struct Entry {
    at: u64,
    seq: u64,
    ev: Ev,
}

impl Entry {
    fn key(&self) -> (u64, u64) {
        (self.at, self.seq)
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    /// Reversed, so the max-heap pops the earliest; `seq` breaks ties in push order,
    /// which is what makes a run a function of its seed.
    fn cmp(&self, other: &Self) -> Ordering {
        other.key().cmp(&self.key())
    }
}

/// Bucket width: 2^6 = 64 µs.
const BUCKET_SHIFT: u32 = 6;
/// Buckets in the ring: 2^15 × 64 µs ≈ 2.1 s ahead, past every link latency and
/// heartbeat; later events (announcements) wait in a heap.
const RING: u64 = 1 << 15;
/// Buckets close enough ahead (≈ 33 ms: every link latency) to be given a drained
/// buffer; farther ones, which hold a tick or two, start with a fresh small one.
const NEAR: u64 = 512;
/// Most drained buffers kept for reuse.
const SPARE: usize = 1024;

/// Events by `(time, push order)`: a calendar queue. Nearly every event of a run
/// is a message a few milliseconds ahead, so a ring of short buckets (each sorted
/// when its turn comes) replaces a binary heap of hundreds of thousands of entries,
/// which took half the run time.
#[derive(Debug)]
pub(super) struct Queue {
    ring: Vec<Vec<Entry>>,
    /// Events at least `RING` buckets ahead of `cur`.
    far: BinaryHeap<Entry>,
    /// The bucket being drained; never ahead of the clock's bucket.
    cur: u64,
    /// Whether the current bucket is sorted (latest first: it is drained from the back).
    sorted: bool,
    /// Events pushed into the current bucket after it was sorted (a short delay):
    /// inserting them into its thousands of entries would move memory per event.
    late: BinaryHeap<Entry>,
    in_ring: usize,
    seq: u64,
    /// Drained buckets' buffers, reused newest first: a bucket filled from a buffer
    /// just drained writes to memory still in cache, where a ring of retained
    /// buffers would touch a cold one per event.
    spare: Vec<Vec<Entry>>,
}

impl Default for Queue {
    fn default() -> Self {
        Self {
            ring: (0..RING).map(|_| Vec::new()).collect(),
            far: BinaryHeap::new(),
            cur: 0,
            sorted: false,
            late: BinaryHeap::new(),
            in_ring: 0,
            seq: 0,
            spare: Vec::new(),
        }
    }
}

impl Queue {
    /// Queues `ev` at `at`, which must not be before the last event popped.
    pub(super) fn push(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.insert(Entry {
            at,
            seq: self.seq,
            ev,
        });
    }

    fn insert(&mut self, e: Entry) {
        let b = (e.at >> BUCKET_SHIFT).max(self.cur);
        if b >= self.cur + RING {
            self.far.push(e);
            return;
        }
        if b == self.cur && self.sorted {
            self.late.push(e);
            return;
        }
        self.in_ring += 1;
        let slot = &mut self.ring[(b % RING) as usize];
        // Handing a large drained buffer to a bucket far ahead would leave every
        // slot of the ring owning one: gigabytes at 10,000 nodes.
        if slot.capacity() == 0
            && b - self.cur < NEAR
            && let Some(buffer) = self.spare.pop()
        {
            *slot = buffer;
        }
        slot.push(e);
    }

    /// The next event, if it is due by `until`.
    pub(super) fn pop_until(&mut self, until: u64) -> Option<(u64, Ev)> {
        let last = until >> BUCKET_SHIFT;
        loop {
            let slot = &mut self.ring[(self.cur % RING) as usize];
            if !slot.is_empty() || !self.late.is_empty() {
                if !self.sorted {
                    slot.sort_unstable_by_key(|e| std::cmp::Reverse(e.key()));
                    self.sorted = true;
                }
                let from_slot = match (slot.last(), self.late.peek()) {
                    (Some(a), Some(b)) => a.key() < b.key(),
                    (a, _) => a.is_some(),
                };
                let next_at = if from_slot {
                    slot.last().map(|e| e.at)
                } else {
                    self.late.peek().map(|e| e.at)
                };
                if next_at.is_none_or(|at| at > until) {
                    return None;
                }
                let e = if from_slot {
                    self.in_ring -= 1;
                    let e = slot.pop();
                    if slot.is_empty() {
                        let buffer = std::mem::take(slot);
                        if self.spare.len() < SPARE {
                            self.spare.push(buffer);
                        }
                    }
                    e
                } else {
                    self.late.pop()
                };
                return e.map(|e| (e.at, e.ev));
            }
            if self.cur >= last {
                return None;
            }
            self.cur = if self.in_ring == 0 {
                // Nothing in the ring: jump to the next far event (or to `until`).
                let next = self.far.peek().map_or(last, |e| e.at >> BUCKET_SHIFT);
                next.clamp(self.cur + 1, last)
            } else {
                self.cur + 1
            };
            self.sorted = false;
            while self
                .far
                .peek()
                .is_some_and(|e| e.at >> BUCKET_SHIFT < self.cur + RING)
            {
                if let Some(e) = self.far.pop() {
                    self.insert(e);
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;

//! Which signs of life are still live (protocol 8), and which are overdue: what a
//! requester marks in its roster request's bitmap (a session away, or overdue — its
//! next sign should have come), and what a node must hold after a heal.
//!
//! A node judges a session by the newest sign it holds, live while that sign is
//! younger than the window its interval stretches (§7.1). Every node of the model
//! shares one clock, so whether sign k of a session is live at a time is the same
//! for every node; and a session's signs expire in the order they were published,
//! because its interval never shrinks here (rosters only grow). So one number per
//! session — the oldest of its signs still live — answers "does this node judge it
//! live" for every node by one comparison, and it only moves forward.

use super::world::{Msg, World};

/// The oldest sign of each session still within a horizon (live, or not overdue),
/// as of the last [`Live::refresh`].
#[derive(Debug)]
pub(super) struct Live {
    /// When a sign leaves the horizon, µs: [`Msg::live_until`] or [`Msg::overdue_from`].
    horizon: fn(&Msg) -> u64,
    /// Per session, the oldest version still within the horizon (one past its newest:
    /// none is).
    pub(super) first: Vec<u16>,
    /// Per session, when `first` stops being live, µs (`u64::MAX`: not published).
    until: Vec<u64>,
    /// When it was last brought up to date, µs.
    at: Option<u64>,
}

impl Live {
    pub(super) fn new(n: usize, horizon: fn(&Msg) -> u64) -> Self {
        Self {
            horizon,
            first: vec![1; n],
            until: vec![u64::MAX; n],
            at: None,
        }
    }

    /// The first signs were published before the run (a converged world).
    pub(super) fn start(&mut self, msgs: &[Msg], versions: &[Vec<u32>]) {
        for (s, v) in versions.iter().enumerate() {
            self.first[s] = 1;
            self.until[s] = v
                .first()
                .map_or(u64::MAX, |&i| (self.horizon)(&msgs[i as usize]));
        }
        self.at = None;
    }

    /// `session` published its sign `version`.
    pub(super) fn published(&mut self, session: usize, version: u16, msg: &Msg) {
        if self.first[session] == version {
            self.until[session] = (self.horizon)(msg);
        }
    }

    /// Brings `first` up to `now` (which must not go back).
    pub(super) fn refresh(&mut self, now: u64, msgs: &[Msg], versions: &[Vec<u32>]) {
        if self.at == Some(now) {
            return;
        }
        self.at = Some(now);
        for (s, until) in self.until.iter_mut().enumerate() {
            while *until <= now {
                self.first[s] += 1;
                let next = versions[s].get(usize::from(self.first[s]) - 1);
                *until = next.map_or(u64::MAX, |&i| (self.horizon)(&msgs[i as usize]));
            }
        }
    }
}

/// A session's 64-bit key in [`super::world::Node::digest`] (SplitMix64's finaliser:
/// distinct sessions, unrelated keys).
pub(super) fn session_key(session: usize) -> u64 {
    let mut z = (session as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl World {
    /// Whether sign `version` of `session` (0: none held) is live at `at` (µs).
    pub(super) fn sign_live(&self, session: usize, version: u16, at: u64) -> bool {
        version > 0
            && self.versions[session]
                .get(usize::from(version) - 1)
                .is_some_and(|&i| self.msgs[i as usize].live_until() > at)
    }

    /// Whether sign `version` of `session` is overdue at `at` (µs): older than half the
    /// window its interval stretches, so a newer sign should have come
    /// ([`crate::presence::Config::overdue`]).
    pub(super) fn sign_overdue(&self, session: usize, version: u16, at: u64) -> bool {
        version > 0
            && self.versions[session]
                .get(usize::from(version) - 1)
                .is_some_and(|&i| self.msgs[i as usize].overdue_from() <= at)
    }

    /// Whether node `v` marks any session it holds now (away, or overdue): its roster
    /// request then carries the bitmap.
    pub(super) fn any_marked(&mut self, v: usize) -> bool {
        self.fresh.refresh(self.now, &self.msgs, &self.versions);
        let row = &self.roster[v * self.n..(v + 1) * self.n];
        row.iter()
            .zip(&self.fresh.first)
            .any(|(&held, &first)| held > 0 && held < first)
    }
}

//! Routing hints a session keeps in memory per peer identity: the *sticky* session
//! (the one the peer last wrote from, so a reply lands in the conversation that asked)
//! and the *remembered* session (the one last written to). [`RouteRequest`] takes them
//! as `sticky` and `remembered`.
//!
//! [`RouteRequest`]: super::RouteRequest

use crate::{bounded::LruMap, identity::IdentityKey, session::SessionId};

/// Most peers whose hints are kept; beyond it the least recently updated is dropped.
pub const MAX_ROUTE_HINTS: usize = 1024;

/// One peer's hints.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hints {
    /// The session the peer last wrote from.
    pub sticky: Option<SessionId>,
    /// The session last written to.
    pub remembered: Option<SessionId>,
}

/// Routing hints per peer identity, bounded by [`MAX_ROUTE_HINTS`].
#[derive(Debug)]
pub struct Routes {
    // Least recently updated first.
    hints: LruMap<IdentityKey, Hints>,
}

impl Default for Routes {
    fn default() -> Self {
        Self {
            hints: LruMap::new(MAX_ROUTE_HINTS),
        }
    }
}

impl Routes {
    /// The hints for `key`.
    pub fn get(&self, key: &IdentityKey) -> Hints {
        self.hints.get(key).cloned().unwrap_or_default()
    }

    /// Records that `key` wrote from `session`.
    pub fn inbound(&mut self, key: IdentityKey, session: SessionId) {
        self.touch(key).sticky = Some(session);
    }

    /// Records that a message went to `session` of `key`.
    pub fn outbound(&mut self, key: IdentityKey, session: SessionId) {
        self.touch(key).remembered = Some(session);
    }

    /// The peers' sticky sessions (those that wrote to this session), most recently
    /// updated first, at most `limit`.
    pub fn sticky(&self, limit: usize) -> Vec<(IdentityKey, SessionId)> {
        self.hints
            .iter()
            .rev()
            .filter_map(|(k, h)| Some((*k, h.sticky.clone()?)))
            .take(limit)
            .collect()
    }

    /// The peer's session `session` closed: it is no longer sticky.
    pub fn closed(&mut self, key: &IdentityKey, session: &SessionId) {
        if let Some(h) = self.hints.get_mut(key) {
            if h.sticky.as_ref() == Some(session) {
                h.sticky = None;
            }
            if h.remembered.as_ref() == Some(session) {
                h.remembered = None;
            }
        }
    }

    fn touch(&mut self, key: IdentityKey) -> &mut Hints {
        self.hints.entry(key, Hints::default).0
    }
}

#[cfg(test)]
#[path = "hints_tests.rs"]
mod tests;

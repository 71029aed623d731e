//! Routing: which session of a peer a message goes to.
//!
//! [`route`] applies the routing rules (docs/SESSIONS.md) to the node's roster view —
//! shared by `send_message` and `interlink-p2p send`; a process outside the node task
//! gets the roster as views ([`interlink_net::Handle::roster`]) and
//! [`interlink_core::routing::route_views`] does the choosing. [`Routes`] holds the
//! per-peer hints a session keeps in memory: the *sticky* session (the one the peer
//! last wrote from, so a reply lands in the conversation that asked) and the
//! *remembered* session (the one last written to).

use std::collections::{HashMap, VecDeque};

use interlink_core::{
    IdentityKey, SessionId,
    presence::IdentityView,
    routing::{self, Route, RouteError, RouteRequest},
};

/// Chooses the session of `req.target` among the sessions `roster` shows for it.
pub fn route(roster: &[IdentityView], req: &RouteRequest<'_>) -> Result<Route, RouteError> {
    let sessions = roster
        .iter()
        .filter(|i| i.key == req.target)
        .flat_map(|i| i.sessions.iter().cloned())
        .collect();
    routing::route_views(sessions, req)
}

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
#[derive(Debug, Default)]
pub struct Routes {
    hints: HashMap<IdentityKey, Hints>,
    // Least recently updated first; an identity appears once.
    order: VecDeque<IdentityKey>,
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
        self.order
            .iter()
            .rev()
            .filter_map(|k| Some((*k, self.hints.get(k)?.sticky.clone()?)))
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
        self.order.retain(|k| *k != key);
        self.order.push_back(key);
        while self.order.len() > MAX_ROUTE_HINTS {
            if let Some(old) = self.order.pop_front() {
                self.hints.remove(&old);
            }
        }
        self.hints.entry(key).or_default()
    }
}

#[cfg(test)]
mod tests {
    use interlink_core::{
        Identity, SessionId,
        presence::{Presence, SessionView},
        routing::RouteReason,
        wire::{Announcement, DeliveryMode, HostKind, SealingBinding, SessionAddr, VERSION},
    };

    use super::*;

    fn view(id: &Identity, session: &str, presence: Presence, age_ms: u64) -> SessionView {
        let session = SessionId::new(session).unwrap();
        let announcement = Announcement {
            v: VERSION,
            identity: id.public(),
            sealing: SealingBinding::new(id),
            session_id: session.clone(),
            peer_id: serde_bytes::ByteBuf::new(),
            addrs: Vec::new(),
            cwd: "/".into(),
            git_label: None,
            summary: String::new(),
            host: HostKind::Other,
            delivery: DeliveryMode::Poll,
            ts: 0,
            seq: 0,
        };
        SessionView {
            addr: SessionAddr {
                key: id.public(),
                session,
            },
            announcement,
            presence,
            age_ms,
        }
    }

    fn req<'a>(
        target: &Identity,
        session: Option<&'a str>,
        own: &'a SessionAddr,
    ) -> RouteRequest<'a> {
        RouteRequest {
            target: target.public(),
            session,
            own,
            sticky: None,
            remembered: None,
        }
    }

    #[test]
    fn the_core_rules_over_views() {
        let (me, bob) = (Identity::from_seed(&[1; 32]), Identity::from_seed(&[2; 32]));
        let own = SessionAddr {
            key: me.public(),
            session: SessionId::new("send-1").unwrap(),
        };
        let roster = vec![
            IdentityView {
                key: me.public(),
                sessions: vec![
                    view(&me, "send-1", Presence::Live, 0),
                    view(&me, "main", Presence::Live, 5),
                ],
            },
            IdentityView {
                key: bob.public(),
                sessions: vec![
                    view(&bob, "alpha-1", Presence::Live, 10),
                    view(&bob, "alpha-2", Presence::Away, 100_000),
                    view(&bob, "beta", Presence::Away, 200_000),
                ],
            },
        ];
        let r = |target: &Identity, session| route(&roster, &req(target, session, &own));
        // Self: the sending session is never a candidate.
        assert_eq!(r(&me, None).unwrap().session.as_str(), "main");
        assert_eq!(r(&me, Some("send-1")), Err(RouteError::OwnSession));
        // The single live session wins over away ones.
        let single = r(&bob, None).unwrap();
        assert_eq!(
            (single.session.as_str(), single.reason),
            ("alpha-1", RouteReason::SingleLive)
        );
        assert_eq!(r(&bob, Some("be")).unwrap().reason, RouteReason::Prefix);
        assert_eq!(r(&bob, Some("alpha-2")).unwrap().reason, RouteReason::Exact);
        let ambiguous = r(&bob, Some("alpha")).unwrap_err();
        assert!(
            matches!(&ambiguous, RouteError::AmbiguousPrefix { candidates, .. } if candidates.len() == 2)
        );
        assert_eq!(r(&bob, Some("gamma")).unwrap().presence, Presence::Gone);
        assert!(matches!(
            r(&bob, Some("no/pe")),
            Err(RouteError::InvalidSession { .. })
        ));
        // Nobody on the roster for a third identity.
        assert_eq!(
            r(&Identity::from_seed(&[3; 32]), None),
            Err(RouteError::NoSession)
        );
    }
    #[test]
    fn hints_are_bounded() {
        let mut routes = Routes::default();
        let s = |t: &str| SessionId::new(t).unwrap();
        let key = |n: u16| {
            let mut b = [0u8; 32];
            b[..2].copy_from_slice(&n.to_be_bytes());
            IdentityKey::from_bytes(b)
        };
        routes.inbound(key(0), s("a"));
        routes.outbound(key(0), s("b"));
        assert_eq!(
            routes.get(&key(0)),
            Hints {
                sticky: Some(s("a")),
                remembered: Some(s("b"))
            }
        );
        for n in 1..=MAX_ROUTE_HINTS as u16 {
            routes.inbound(key(n), s("x"));
        }
        assert_eq!(routes.get(&key(0)), Hints::default());
        assert_eq!(routes.hints.len(), MAX_ROUTE_HINTS);
        let recent = routes.sticky(2);
        assert_eq!(recent.len(), 2);
        assert_eq!(recent[0].0, key(MAX_ROUTE_HINTS as u16));
        routes.closed(&recent[0].0, &s("x"));
        assert_eq!(routes.get(&recent[0].0).sticky, None);
    }
}

//! Routing over the node's roster view.
//!
//! Shared by `send_message` and `interlink-p2p send`. A process outside the node task
//! gets the roster as views
//! ([`interlink_net::Handle::roster`]); [`interlink_core::routing::route_views`] applies
//! the routing rules (docs/SESSIONS.md) to them.

use interlink_core::{
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
}

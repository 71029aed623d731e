//! Routing over the node's roster view.
//!
//! [`interlink_core::routing::route`] reads a core `Roster`, which holds signed
//! announcements; a process outside the node task only gets the roster as views
//! ([`interlink_net::Handle::roster`]). This module applies exactly the core's rules to
//! those views and returns the core's [`Route`] and [`RouteError`] (so error texts are
//! the same). It goes away once the core offers routing over views (the rules are in
//! docs/SESSIONS.md; the core's tests cover them, the tests below check the port).

use interlink_core::{
    SessionId,
    presence::{IdentityView, Presence, SessionView},
    routing::{Candidate, Route, RouteError, RouteReason, RouteRequest},
};

/// Chooses the session of `req.target` among the sessions `roster` shows for it, by
/// the rules of [`interlink_core::routing::route`].
pub fn route(roster: &[IdentityView], req: &RouteRequest<'_>) -> Result<Route, RouteError> {
    let own = (req.target == req.own.key).then_some(&req.own.session);
    let mut retained: Vec<&SessionView> = roster
        .iter()
        .filter(|i| i.key == req.target)
        .flat_map(|i| &i.sessions)
        .filter(|v| v.presence != Presence::Gone && Some(&v.addr.session) != own)
        .collect();
    retained.sort_by(|a, b| {
        (a.presence, a.age_ms, &a.addr.session).cmp(&(b.presence, b.age_ms, &b.addr.session))
    });
    match req.session.map(str::trim).filter(|s| !s.is_empty()) {
        Some(text) => explicit(text, own, &retained),
        None => automatic(req, own, &retained),
    }
}

fn candidate(v: &SessionView) -> Candidate {
    Candidate {
        session: v.addr.session.clone(),
        cwd: v.announcement.cwd.clone(),
        git_label: v.announcement.git_label.clone(),
        summary: v.announcement.summary.clone(),
        presence: v.presence,
        age_ms: v.age_ms,
    }
}

fn chosen(v: &SessionView, reason: RouteReason) -> Route {
    Route {
        session: v.addr.session.clone(),
        presence: v.presence,
        reason,
    }
}

fn explicit(
    text: &str,
    own: Option<&SessionId>,
    retained: &[&SessionView],
) -> Result<Route, RouteError> {
    if own.is_some_and(|o| o.as_str() == text) {
        return Err(RouteError::OwnSession);
    }
    if let Some(v) = retained.iter().find(|v| v.addr.session.as_str() == text) {
        return Ok(chosen(v, RouteReason::Exact));
    }
    let fits: Vec<&&SessionView> = retained
        .iter()
        .filter(|v| v.addr.session.as_str().starts_with(text))
        .collect();
    match fits.as_slice() {
        [one] => Ok(chosen(one, RouteReason::Prefix)),
        [] => {
            let session = SessionId::new(text).map_err(|source| RouteError::InvalidSession {
                value: text.to_owned(),
                source,
            })?;
            Ok(Route {
                session,
                presence: Presence::Gone,
                reason: RouteReason::Literal,
            })
        }
        many => Err(RouteError::AmbiguousPrefix {
            prefix: text.to_owned(),
            candidates: many.iter().map(|v| candidate(v)).collect(),
        }),
    }
}

fn automatic(
    req: &RouteRequest<'_>,
    own: Option<&SessionId>,
    retained: &[&SessionView],
) -> Result<Route, RouteError> {
    if let Some(sticky) = req.sticky.filter(|s| Some(*s) != own)
        && let Some(v) = retained.iter().find(|v| &v.addr.session == sticky)
    {
        return Ok(chosen(v, RouteReason::Sticky));
    }
    let choose = || RouteError::ChooseSession {
        candidates: retained.iter().map(|v| candidate(v)).collect(),
    };
    for (presence, reason) in [
        (Presence::Live, RouteReason::SingleLive),
        (Presence::Away, RouteReason::SingleAway),
    ] {
        let mut matching = retained.iter().filter(|v| v.presence == presence);
        match (matching.next(), matching.next()) {
            (Some(v), None) => return Ok(chosen(v, reason)),
            (Some(_), Some(_)) => return Err(choose()),
            _ => {}
        }
    }
    match req.remembered.filter(|s| Some(*s) != own) {
        Some(session) => Ok(Route {
            session: session.clone(),
            presence: Presence::Gone,
            reason: RouteReason::Remembered,
        }),
        None => Err(RouteError::NoSession),
    }
}

#[cfg(test)]
mod tests {
    use interlink_core::{
        Identity,
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

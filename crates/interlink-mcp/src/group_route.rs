//! Who gets a copy of a group message (docs/GROUPS.md): the recipient sessions of a
//! group, shared by `send_message(to: "group:…")` and `interlink-p2p send --to
//! group:…`.
//!
//! A member narrowed to sessions gets exactly those (full ids, never a prefix). A
//! member that is not gets the session a direct message to it would go to; when the
//! routing rules find several that fit equally well (several live sessions and none
//! sticky — a direct message would have to name one), a group message goes to **each**
//! of them: one copy per live session, or per away session when none is live. A
//! broadcast is addressed to people, and a person may be running several agents.

use std::time::Duration;

use interlink_core::{
    IdentityKey,
    presence::Presence,
    routing::{Hints, Route, RouteError, RouteReason, RouteRequest},
    trust::PeerPolicy,
    wire::SessionAddr,
};
use interlink_net::{Handle, NetError};
use tokio::time::Instant;

use crate::{
    groups::Group,
    sender::{self, RouteWaitError},
};

/// How often the roster is read while a narrowed session is waited for.
const POLL: Duration = Duration::from_millis(50);

/// One recipient session of a group message.
#[derive(Clone, Debug)]
pub struct Recipient {
    /// Its address.
    pub to: SessionAddr,
    /// The member's petname.
    pub name: String,
    /// Why this session.
    pub route: Route,
}

/// Why a member gets no copy.
#[derive(Debug)]
#[non_exhaustive]
pub enum SkipReason {
    /// Removed from peers.json since it was added to the group.
    NotAPeer,
    /// The routing rules found no session of it.
    Route(RouteError),
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotAPeer => f.write_str("not a peer any more (removed from peers.json)"),
            Self::Route(e) => e.fmt(f),
        }
    }
}

/// A member, or one of its narrowed sessions, that gets no copy.
#[derive(Debug)]
pub struct Skipped {
    /// How it is called: its petname (or fingerprint), `/session` when narrowed.
    pub member: String,
    /// Its identity.
    pub key: IdentityKey,
    /// No longer a peer, or no session of it to route to.
    pub why: SkipReason,
}

/// The recipients of one group message, and the members left out.
#[derive(Debug, Default)]
pub struct Routed {
    /// Every recipient session, in member order.
    pub recipients: Vec<Recipient>,
    /// Members (or narrowed sessions) without a copy.
    pub skipped: Vec<Skipped>,
}

/// Routes every member of `group` over `handle`'s roster, waiting until `until` for
/// members not seen yet, and `settle` for a member's sessions to stop changing once
/// one shows (a node that just joined is still hearing of them: zero for one that has
/// been up a while). `own` is the sending session (never a recipient); `hints` gives
/// the sticky and remembered sessions this sender keeps per peer.
pub async fn route_group(
    handle: &Handle,
    group: &Group,
    policy: &PeerPolicy,
    own: &SessionAddr,
    hints: impl Fn(&IdentityKey) -> Hints,
    until: Instant,
    settle: Duration,
) -> Result<Routed, NetError> {
    let mut out = Routed::default();
    for m in &group.members {
        let Some(name) = policy.name_of(&m.key).map(str::to_owned) else {
            out.skipped.push(Skipped {
                member: m.key.fingerprint().to_string(),
                key: m.key,
                why: SkipReason::NotAPeer,
            });
            continue;
        };
        if !m.sessions.is_empty() {
            for s in &m.sessions {
                let addr = SessionAddr {
                    key: m.key,
                    session: s.clone(),
                };
                if addr == *own {
                    continue;
                }
                let route = exact_route(handle, &addr, until).await?;
                out.recipients.push(Recipient {
                    to: addr,
                    name: name.clone(),
                    route,
                });
            }
            continue;
        }
        let h = hints(&m.key);
        let req = RouteRequest {
            target: m.key,
            session: None,
            own,
            sticky: h.sticky.as_ref(),
            remembered: h.remembered.as_ref(),
        };
        let wait = sender::Wait { until, settle };
        match sender::route_when_seen(handle, &req, wait).await {
            Ok(route) => out.recipients.push(Recipient {
                to: SessionAddr {
                    key: m.key,
                    session: route.session.clone(),
                },
                name,
                route,
            }),
            Err(RouteWaitError::Route(RouteError::ChooseSession { candidates })) => {
                let presence = if candidates.iter().any(|c| c.presence == Presence::Live) {
                    Presence::Live
                } else {
                    Presence::Away
                };
                for c in candidates.into_iter().filter(|c| c.presence == presence) {
                    out.recipients.push(Recipient {
                        to: SessionAddr {
                            key: m.key,
                            session: c.session.clone(),
                        },
                        name: name.clone(),
                        route: Route {
                            session: c.session,
                            presence,
                            reason: RouteReason::EachOfSeveral,
                            others: Vec::new(),
                        },
                    });
                }
            }
            Err(RouteWaitError::Route(e)) => out.skipped.push(Skipped {
                member: name,
                key: m.key,
                why: SkipReason::Route(e),
            }),
            Err(RouteWaitError::Net(e)) => return Err(e),
        }
    }
    Ok(out)
}

/// Routes to exactly `addr`: the session as the roster shows it, or — not on the roster
/// by `until` — addressed literally (presence gone), never a session whose id merely
/// starts with it. For addresses that came from a message (a reply address, a group
/// tag) or a group's narrowed session, which are full ids.
pub(crate) async fn exact_route(
    handle: &Handle,
    addr: &SessionAddr,
    until: Instant,
) -> Result<Route, NetError> {
    loop {
        let roster = handle.roster().await?;
        let seen = roster
            .iter()
            .filter(|i| i.key == addr.key)
            .flat_map(|i| &i.sessions)
            .find(|s| s.addr == *addr && s.presence != Presence::Gone);
        if let Some(s) = seen {
            return Ok(Route {
                session: addr.session.clone(),
                presence: s.presence,
                reason: RouteReason::Exact,
                others: Vec::new(),
            });
        }
        if Instant::now() >= until {
            return Ok(Route {
                session: addr.session.clone(),
                presence: Presence::Gone,
                reason: RouteReason::Literal,
                others: Vec::new(),
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

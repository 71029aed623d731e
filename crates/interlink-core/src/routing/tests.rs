//! The routing rules as a table: one row per case, each with its roster, inputs and
//! expected outcome.

use super::*;
use crate::{
    limits::{AWAY_RETENTION_MS, MINUTE_MS},
    presence::tests::{T0, addr, ann, identity, sid},
};

const NOW: u64 = T0 + 10 * MINUTE_MS;
const LIVE: u64 = 0;
const AWAY: u64 = 5 * MINUTE_MS;
/// Older than the retention: still held until swept, but gone.
const EXPIRED: u64 = AWAY_RETENTION_MS + 1;

/// The peer messages are routed to.
const PEER: u8 = 1;
/// Another identity, so "nothing for the peer" is not "empty roster".
const OTHER: u8 = 2;
/// Our own identity; our session is [`OWN`].
const ME: u8 = 9;
const OWN: &str = "a3f2-0000";

#[derive(Debug)]
enum Expect {
    Ok(&'static str, Presence, RouteReason),
    Ambiguous(&'static [&'static str]),
    Choose(&'static [&'static str]),
    NoSession,
    OwnSession,
    Invalid,
}

struct Case {
    name: &'static str,
    /// (identity seed, session id, age of its announcement at [`NOW`]).
    roster: &'static [(u8, &'static str, u64)],
    target: u8,
    session: Option<&'static str>,
    sticky: Option<&'static str>,
    remembered: Option<&'static str>,
    expect: Expect,
}

const fn case(
    name: &'static str,
    roster: &'static [(u8, &'static str, u64)],
    expect: Expect,
) -> Case {
    Case {
        name,
        roster,
        target: PEER,
        session: None,
        sticky: None,
        remembered: None,
        expect,
    }
}

use Expect::*;
use Presence::{Away as A, Gone as G, Live as L};
use RouteReason as R;

#[rustfmt::skip]
const CASES: &[Case] = &[
    // Explicit session.
    Case { session: Some("abc"), ..case("exact id beats a longer id it prefixes",
        &[(PEER, "abc", LIVE), (PEER, "abcd", LIVE)], Ok("abc", L, R::Exact)) },
    Case { session: Some("b7"), ..case("unique prefix expands",
        &[(PEER, "a3f2-1111", LIVE), (PEER, "b7c1-3333", AWAY)], Ok("b7c1-3333", A, R::Prefix)) },
    Case { session: Some("a3f2"), ..case("ambiguous prefix lists the candidates",
        &[(PEER, "a3f2-2222", AWAY), (PEER, "a3f2-1111", LIVE), (PEER, "b7c1-3333", LIVE)],
        Ambiguous(&["a3f2-1111", "a3f2-2222"])) },
    Case { session: Some("ffff-9999"), ..case("unknown id is used literally, reported gone",
        &[(PEER, "a3f2-1111", LIVE)], Ok("ffff-9999", G, R::Literal)) },
    Case { session: Some("a3f2-1111"), ..case("expired entry is not on the roster",
        &[(PEER, "a3f2-1111", EXPIRED)], Ok("a3f2-1111", G, R::Literal)) },
    Case { session: Some("no/slash"), ..case("unknown text that is no id is an error",
        &[(PEER, "a3f2-1111", LIVE)], Invalid) },
    Case { session: Some("."), ..case("`.` is never a session, not even literally",
        &[(PEER, "a3f2-1111", LIVE)], Invalid) },
    Case { session: Some(".."), ..case("`..` is never a session, not even literally",
        &[(PEER, "a3f2-1111", LIVE)], Invalid) },
    Case { session: Some("  "), ..case("blank session counts as not given",
        &[(PEER, "a3f2-1111", LIVE)], Ok("a3f2-1111", L, R::SingleLive)) },
    Case { session: Some("a3f2-1111"), sticky: Some("b7c1-3333"), ..case("explicit beats sticky",
        &[(PEER, "a3f2-1111", LIVE), (PEER, "b7c1-3333", LIVE)], Ok("a3f2-1111", L, R::Exact)) },
    // Automatic selection.
    Case { sticky: Some("s2"), ..case("sticky live session",
        &[(PEER, "s1", LIVE), (PEER, "s2", LIVE)], Ok("s2", L, R::Sticky)) },
    Case { sticky: Some("s2"), ..case("sticky away session beats a live sibling",
        &[(PEER, "s1", LIVE), (PEER, "s2", AWAY)], Ok("s2", A, R::Sticky)) },
    Case { sticky: Some("s9"), ..case("sticky not on the roster falls through",
        &[(PEER, "s1", LIVE)], Ok("s1", L, R::SingleLive)) },
    Case { sticky: Some("s2"), ..case("sticky but expired falls through",
        &[(PEER, "s1", AWAY), (PEER, "s2", EXPIRED)], Ok("s1", A, R::SingleAway)) },
    case("single live session, away sibling ignored",
        &[(PEER, "s1", LIVE), (PEER, "s2", AWAY)], Ok("s1", L, R::SingleLive)),
    case("several live sessions need a choice",
        &[(PEER, "s3", AWAY), (PEER, "s2", LIVE), (PEER, "s1", LIVE), (OTHER, "x", LIVE)],
        Choose(&["s1", "s2", "s3"])),
    case("single away session",
        &[(PEER, "s1", AWAY), (OTHER, "x", LIVE)], Ok("s1", A, R::SingleAway)),
    case("several away sessions need a choice",
        &[(PEER, "s1", AWAY), (PEER, "s2", AWAY)], Choose(&["s1", "s2"])),
    Case { remembered: Some("s7"), ..case("remembered session when nothing is on the roster",
        &[(OTHER, "x", LIVE)], Ok("s7", G, R::Remembered)) },
    Case { remembered: Some("s7"), ..case("remembered session ignored while one is retained",
        &[(PEER, "s1", AWAY)], Ok("s1", A, R::SingleAway)) },
    case("nothing on the roster and nothing remembered",
        &[(OTHER, "x", LIVE), (PEER, "s1", EXPIRED)], NoSession),
    // Our own identity.
    Case { target: ME, ..case("self excludes our own session",
        &[(ME, OWN, LIVE)], NoSession) },
    Case { target: ME, ..case("self with one sibling routes to it",
        &[(ME, OWN, LIVE), (ME, "b7c1-3333", LIVE)], Ok("b7c1-3333", L, R::SingleLive)) },
    Case { target: ME, sticky: Some(OWN), ..case("own session is never sticky",
        &[(ME, OWN, LIVE), (ME, "b7c1-3333", AWAY)], Ok("b7c1-3333", A, R::SingleAway)) },
    Case { target: ME, session: Some(OWN), ..case("explicitly naming our own session is refused",
        &[(ME, OWN, LIVE), (ME, "b7c1-3333", LIVE)], OwnSession) },
    Case { target: ME, session: Some("a3f2"), ..case("own session is not a prefix candidate",
        &[(ME, OWN, LIVE), (ME, "a3f2-1111", LIVE)], Ok("a3f2-1111", L, R::Prefix)) },
    Case { target: ME, remembered: Some(OWN), ..case("own session is never remembered",
        &[(ME, OWN, LIVE)], NoSession) },
    Case { session: Some(OWN), ..case("our session id under another identity is fine",
        &[(PEER, OWN, LIVE)], Ok(OWN, L, R::Exact)) },
];

fn run(c: &Case) -> Result<Route, RouteError> {
    let mut roster = Roster::default();
    for &(seed, session, age) in c.roster {
        // Received when it was sent, so expired entries are held but unswept.
        let ts = NOW - age;
        roster
            .apply_announcement(ann(seed, session, ts, 1), ts)
            .unwrap();
    }
    let own = addr(ME, OWN);
    let sticky = c.sticky.map(sid);
    let remembered = c.remembered.map(sid);
    let req = RouteRequest {
        target: identity(c.target).public(),
        session: c.session,
        own: &own,
        sticky: sticky.as_ref(),
        remembered: remembered.as_ref(),
    };
    // Read as the target itself would (its own identity opens its details): the
    // candidates name directories and summaries.
    let mut views = roster.view(NOW);
    crate::wire::DetailsReader::new(&identity(c.target)).fill(&mut views);
    let routed = route_identities(&views, &req);
    assert_eq!(
        route(&roster, &req, NOW).ok().map(|r| r.session),
        routed.as_ref().ok().map(|r| r.session.clone()),
    );
    routed
}

fn names(candidates: &[Candidate]) -> Vec<&str> {
    candidates.iter().map(|c| c.session.as_str()).collect()
}

#[test]
fn routing_table() {
    for c in CASES {
        let got = run(c);
        let ok = match (&c.expect, &got) {
            (Ok(s, p, r), Result::Ok(route)) => {
                route.session.as_str() == *s && route.presence == *p && route.reason == *r
            }
            (Ambiguous(want), Err(RouteError::AmbiguousPrefix { candidates, .. }))
            | (Choose(want), Err(RouteError::ChooseSession { candidates })) => {
                names(candidates) == *want
            }
            (NoSession, Err(RouteError::NoSession))
            | (OwnSession, Err(RouteError::OwnSession))
            | (Invalid, Err(RouteError::InvalidSession { .. })) => true,
            _ => false,
        };
        assert!(ok, "{}: expected {:?}, got {:?}", c.name, c.expect, got);
    }
}

#[test]
fn candidates_carry_what_a_person_recognises() {
    let c = Case {
        session: Some("a3f2"),
        ..case(
            "",
            &[(PEER, "a3f2-1111", LIVE), (PEER, "a3f2-2222", AWAY)],
            NoSession,
        )
    };
    let Err(err @ RouteError::AmbiguousPrefix { .. }) = run(&c) else {
        panic!("expected an ambiguous prefix");
    };
    let RouteError::AmbiguousPrefix { prefix, candidates } = &err else {
        unreachable!()
    };
    assert_eq!(prefix, "a3f2");
    let first = &candidates[0];
    assert_eq!(first.cwd, "/home/dev/a3f2-1111");
    assert_eq!(first.git_label.as_deref(), Some("repo-a3f2-1111"));
    assert_eq!(first.summary, "working on a3f2-1111");
    assert_eq!((first.presence, candidates[1].presence), (L, A));
    assert_eq!(candidates[1].age_ms, AWAY);
    // The error text lists both, so a tool can show it as is.
    let text = err.to_string();
    assert!(
        text.contains("a3f2-1111 (live) /home/dev/a3f2-1111 git:repo-a3f2-1111"),
        "{text}"
    );
    assert!(text.contains("a3f2-2222 (away)"), "{text}");
}

/// The rules over a roster snapshot of identities (what `send_message` and
/// `interlink-p2p send` route over).
mod identities {
    use crate::{
        Identity,
        presence::IdentityView,
        wire::{Announcement, DeliveryMode, Details, HostKind, SealingBinding, VERSION},
    };

    use super::super::*;

    fn view(id: &Identity, session: &str, presence: Presence, age_ms: u64) -> SessionView {
        let session = SessionId::new(session).unwrap();
        let details = Details {
            cwd: "/".into(),
            git_label: None,
            summary: String::new(),
            host: HostKind::Other,
            delivery: DeliveryMode::Poll,
            project: None,
            claims: Vec::new(),
        };
        let announcement = Announcement {
            v: VERSION,
            identity: id.public(),
            sealing: SealingBinding::new(id),
            session_id: session.clone(),
            peer_id: serde_bytes::ByteBuf::new(),
            addrs: Vec::new(),
            details: details
                .seal(
                    id,
                    &session,
                    &[],
                    &mut <rand_chacha::ChaCha20Rng as rand_chacha::rand_core::SeedableRng>::seed_from_u64(1),
                )
                .unwrap(),
            heartbeat_ms: crate::limits::HEARTBEAT_MS,
            ts: 0,
            seq: 0,
        };
        SessionView {
            addr: SessionAddr {
                key: id.public(),
                session,
            },
            announcement,
            details: Some(details),
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
        let r = |target: &Identity, session| route_identities(&roster, &req(target, session, &own));
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

#[test]
fn a_literal_route_names_the_peers_sessions_and_the_closest_id() {
    let route = |id: &str, others: &[&str]| Route {
        session: sid(id),
        presence: Presence::Gone,
        reason: RouteReason::Literal,
        others: others
            .iter()
            .map(|s| Candidate {
                session: sid(s),
                cwd: String::new(),
                git_label: None,
                summary: String::new(),
                presence: Presence::Live,
                age_ms: 0,
            })
            .collect(),
    };
    let r = route("bob-3", &["bob-1", "alice-7"]);
    assert_eq!(r.closest().map(|c| c.session.as_str()), Some("bob-1"));
    assert_eq!(
        r.others_note().unwrap(),
        "its sessions now: bob-1 (live), alice-7 (live); did you mean bob-1?"
    );
    // Far from every id: listed, no guess.
    let r = route("0f3c9a2e-1111-4aaa-8bbb-123456789abc", &["bob-1"]);
    assert!(r.closest().is_none());
    assert_eq!(r.others_note().unwrap(), "its sessions now: bob-1 (live)");
    assert!(route("bob-3", &[]).others_note().is_none());
    assert_eq!(edit_distance("kitten", "sitting"), 3);
    assert_eq!(edit_distance("", "ab"), 2);
}

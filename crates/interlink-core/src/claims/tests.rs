use proptest::prelude::*;

use super::{
    project::{Basis, RepoFacts, normalise_remote, relative_to},
    *,
};
use crate::{IdentityKey, SessionId};

fn addr(key: u8, session: &str) -> SessionAddr {
    SessionAddr {
        key: IdentityKey::from_bytes([key; 32]),
        session: SessionId::new(session).expect("a session id"),
    }
}

fn claim(pattern: &str, exclusive: bool, since: u64) -> Claim {
    Claim {
        pattern: pattern.into(),
        exclusive,
        reason: "working on it".into(),
        since,
        until: since + HOUR_MS,
    }
}

fn p(text: &str) -> Pattern {
    Pattern::parse(text).expect("a good pattern")
}

#[test]
fn patterns_are_checked_and_normalised() {
    for bad in [
        "/etc/passwd",
        "src//a",
        "src/../x",
        "./src",
        "src\\a.rs",
        "src/a**b",
        "",
        "a\u{7}b",
    ] {
        assert!(Pattern::parse(bad).is_err(), "{bad:?} was taken");
    }
    assert!(Pattern::parse(&"a".repeat(MAX_PATTERN_BYTES + 1)).is_err());
    assert!(Pattern::parse(&vec!["a"; MAX_PATTERN_SEGMENTS + 1].join("/")).is_err());
    assert_eq!(p("src/api/").as_str(), "src/api/**");
    assert_eq!(p("src/**/**/x").as_str(), "src/**/x");
}

#[test]
fn what_a_pattern_covers() {
    let cases = [
        ("src/api/**", "src/api/auth.rs", true),
        ("src/api/**", "src/api", true),
        ("src/api/**", "src/apis/x.rs", false),
        ("src/api", "src/api/auth.rs", false),
        ("src/api", "src/api", true),
        ("src/*.rs", "src/main.rs", true),
        ("src/*.rs", "src/x/main.rs", false),
        ("**/*.rs", "a/b/c.rs", true),
        ("**/*.rs", "c.rs", true),
        ("**/*.rs", "c.md", false),
        ("src/?.rs", "src/a.rs", true),
        ("src/?.rs", "src/ab.rs", false),
        ("**", "anything/at/all", true),
        // In a path, `*` and `?` are characters (found by the fuzzer: they were read as
        // wildcards, so a path could be covered by two patterns that do not overlap).
        ("src/x*", "src/*", false),
        ("src/?", "src/*", true),
        ("*atfffes/z*/**", "**/*.rs", false),
    ];
    for (pattern, path, want) in cases {
        assert_eq!(p(pattern).covers(path), want, "{pattern} covers {path}");
    }
    // No file has a path this long: covered by nothing, and no deep search.
    let long = "a/".repeat(pattern::MAX_PATH_BYTES);
    assert!(!p("**").covers(&long));
}

#[test]
fn when_two_patterns_overlap() {
    let cases = [
        ("src/api/**", "src/api/auth.rs", true),
        ("src/api/**", "src/**/auth.rs", true),
        ("src/api/**", "docs/**", false),
        ("src/*.rs", "src/m*", true),
        ("src/*.rs", "src/*.md", false),
        ("src/a*", "src/*b", true),
        ("src/a?c", "src/?b?", true),
        ("src/a?c", "src/?bd", false),
        ("**/test/*.rs", "crates/x/test/a.rs", true),
        ("docs/a.md", "**/*.rs", false),
        ("a/b", "a/b", true),
        ("a/b", "a/b/c", false),
        ("**", "x", true),
    ];
    for (a, b, want) in cases {
        assert_eq!(p(a).overlaps(&p(b)), want, "{a} ~ {b}");
        assert_eq!(p(b).overlaps(&p(a)), want, "{b} ~ {a}");
    }
}

#[test]
fn the_earlier_claim_holds_and_both_sides_see_it() {
    let (a, b) = (addr(1, "a"), addr(2, "b"));
    let mut board = Board::new();
    board
        .set(a.clone(), vec![claim("src/api/**", true, 1_000)], 5_000)
        .expect("set");
    let mine = claim("src/api/auth.rs", true, 2_000);
    let behind = board.would_wait_behind(&b, &mine);
    assert_eq!(behind.len(), 1);
    assert_eq!(behind[0].by, a);
    board.set(b.clone(), vec![mine], 5_000).expect("set");
    let standings: Vec<_> = board.standings_of(&b).collect();
    assert!(matches!(&standings[0].1, Standing::Waits(first) if first.by == a));
    assert_eq!(
        board.standings_of(&a).next().map(|s| s.1),
        Some(Standing::Held)
    );
    assert_eq!(board.conflicts().len(), 1);
    assert_eq!(
        board.held_against("src/api/auth.rs", Some(&b)).count(),
        1,
        "b's edit collides with a's hold"
    );
    assert_eq!(board.held_against("src/api/auth.rs", Some(&a)).count(), 0);
    // A ends: B holds, with nothing done on B's side.
    board.remove(&a);
    assert_eq!(
        board.standings_of(&b).next().map(|s| s.1),
        Some(Standing::Held)
    );
    assert_eq!(board.held_against("src/api/auth.rs", Some(&a)).count(), 1);
}

#[test]
fn shared_claims_do_not_conflict_but_an_exclusive_one_does() {
    let mut board = Board::new();
    let (a, b, c) = (addr(1, "a"), addr(2, "b"), addr(3, "c"));
    board
        .set(a.clone(), vec![claim("docs/**", false, 1)], 10)
        .unwrap();
    board
        .set(b.clone(), vec![claim("docs/x.md", false, 2)], 10)
        .unwrap();
    assert!(board.conflicts().is_empty());
    assert_eq!(board.held_against("docs/x.md", Some(&c)).count(), 0);
    board
        .set(c.clone(), vec![claim("docs/x.md", true, 3)], 10)
        .unwrap();
    assert_eq!(board.conflicts().len(), 2);
    assert!(matches!(
        board.standings_of(&c).next().map(|s| s.1),
        Some(Standing::Waits(first)) if first.by == a
    ));
}

#[test]
fn a_hold_is_not_taken_away_by_a_third_claim_ending() {
    // a holds x; b's `*` waits behind a; c's y comes after b and waits behind b too.
    // When a releases, b holds and c still waits: nobody who held loses the hold.
    let (a, b, c) = (addr(1, "a"), addr(2, "b"), addr(3, "c"));
    let mut board = Board::new();
    board.set(a.clone(), vec![claim("x", true, 1)], 10).unwrap();
    board.set(b.clone(), vec![claim("*", true, 2)], 10).unwrap();
    board.set(c.clone(), vec![claim("y", true, 3)], 10).unwrap();
    let held = |board: &Board| -> Vec<SessionAddr> {
        board
            .claims()
            .filter(|(_, s)| *s == Standing::Held)
            .map(|(p, _)| p.by.clone())
            .collect()
    };
    assert_eq!(held(&board), vec![a.clone()]);
    board.remove(&a);
    assert_eq!(held(&board), vec![b]);
}

#[test]
fn sets_are_bounded_and_checked_whole() {
    let mut board = Board::new();
    let a = addr(1, "a");
    let many: Vec<Claim> = (0..=MAX_CLAIMS_PER_SESSION as u64)
        .map(|i| claim(&format!("f{i}"), true, 1))
        .collect();
    assert_eq!(
        board.set(a.clone(), many, 10),
        Err(ClaimError::TooMany(MAX_CLAIMS_PER_SESSION + 1))
    );
    let mut bad = claim("x", true, 1);
    bad.until = bad.since + MAX_CLAIM_LIFETIME_MS + 1;
    assert!(matches!(
        board.set(a.clone(), vec![claim("y", true, 1), bad], 10),
        Err(ClaimError::Times(_))
    ));
    let future = claim("x", true, 10 + MAX_FUTURE_SKEW_MS + 1);
    assert!(matches!(
        board.set(a.clone(), vec![future], 10),
        Err(ClaimError::Times(_))
    ));
    assert_eq!(board.sessions().count(), 0);
    for i in 0..MAX_BOARD_SESSIONS {
        board
            .set(addr(1, &format!("s{i}")), vec![claim("x", false, 1)], 10)
            .unwrap();
    }
    assert_eq!(
        board.set(addr(2, "one-more"), vec![claim("x", false, 1)], 10),
        Err(ClaimError::BoardFull)
    );
}

#[test]
fn lapsed_claims_leave_the_board() {
    let mut board = Board::new();
    let a = addr(1, "a");
    board.set(a.clone(), vec![claim("x", true, 1)], 10).unwrap();
    assert!(!board.sweep(HOUR_MS));
    assert!(board.sweep(HOUR_MS + 1));
    assert_eq!(board.claims().count(), 0);
    // A set whose claims have all lapsed takes the session off.
    board
        .set(a, vec![claim("x", true, 1)], HOUR_MS + 2)
        .unwrap();
    assert_eq!(board.sessions().count(), 0);
}

#[test]
fn one_project_across_clones_and_remote_forms() {
    let facts = |root: Option<&str>, shallow, origin: Option<&str>, top: &str| RepoFacts {
        toplevel: top.into(),
        first_root: root.map(Into::into),
        shallow,
        origin: origin.map(Into::into),
    };
    let root = "3f1e0c9a2b7d4e5f60718293a4b5c6d7e8f90123";
    let (x, basis) = ProjectId::of(&facts(
        Some(root),
        false,
        Some("git@github.com:o/r.git"),
        "/home/a/r",
    ));
    assert_eq!(basis, Basis::RootCommit);
    let (y, _) = ProjectId::of(&facts(Some(root), false, None, "C:\\src\\r"));
    assert_eq!(x, y, "the same history at another path, without a remote");
    let (other, _) = ProjectId::of(&facts(Some(&root.replace('3', "4")), false, None, "/r"));
    assert_ne!(x, other, "another history");
    let (s1, basis) = ProjectId::of(&facts(
        Some("aaaa"),
        true,
        Some("git@GitHub.com:o/r.git"),
        "/x",
    ));
    assert_eq!(basis, Basis::Origin);
    let (s2, _) = ProjectId::of(&facts(None, false, Some("https://github.com/o/r"), "/y"));
    assert_eq!(
        s1, s2,
        "a shallow clone and a fresh repository of one remote"
    );
    let (l1, basis) = ProjectId::of(&facts(None, false, None, "/home/a/r"));
    assert_eq!(basis, Basis::Local);
    assert_ne!(l1, ProjectId::of(&facts(None, false, None, "/home/b/r")).0);
    assert_eq!(x.to_hex().len(), 32);
}

#[test]
fn remote_urls_are_normalised() {
    for (url, want) in [
        ("git@github.com:o/r.git", Some("github.com/o/r")),
        ("ssh://git@GitHub.com:22/o/r.git/", Some("github.com/o/r")),
        ("https://user@github.com/o/r", Some("github.com/o/r")),
        (
            "https://gitlab.example.com/group/sub/r.git",
            Some("gitlab.example.com/group/sub/r"),
        ),
        ("/srv/git/r.git", None),
        ("file:///srv/git/r.git", None),
        ("./r", None),
    ] {
        assert_eq!(normalise_remote(url).as_deref(), want, "{url}");
    }
}

#[test]
fn paths_relative_to_the_root() {
    assert_eq!(
        relative_to("/home/a/r", "/home/a/r/src/x.rs").as_deref(),
        Some("src/x.rs")
    );
    assert_eq!(relative_to("/home/a/r/", "/home/a/r").as_deref(), Some(""));
    assert_eq!(relative_to("/home/a/r", "/home/a/rr/x.rs"), None);
    assert_eq!(relative_to("/home/a/r", "/home/a/r/../x.rs"), None);
    assert_eq!(
        relative_to("C:\\src\\r", "C:\\src\\r\\a\\b.rs").as_deref(),
        Some("a/b.rs")
    );
}

/// A word list small enough that random patterns often overlap.
fn arb_pattern() -> impl Strategy<Value = String> {
    let segment = prop_oneof![
        Just("a".to_string()),
        Just("b".to_string()),
        Just("*".to_string()),
        Just("a*".to_string()),
        Just("?".to_string()),
        Just("**".to_string()),
    ];
    prop::collection::vec(segment, 1..4).prop_map(|s| s.join("/"))
}

fn arb_path() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![Just("a"), Just("b"), Just("ab"), Just("c")],
        1..5,
    )
    .prop_map(|s| s.join("/"))
}

proptest! {
    /// Overlap is exact: where a sampled path is covered by both, they overlap, and
    /// overlap is symmetric.
    #[test]
    fn overlap_agrees_with_coverage(a in arb_pattern(), b in arb_pattern(), paths in prop::collection::vec(arb_path(), 1..20)) {
        let (pa, pb) = (p(&a), p(&b));
        prop_assert_eq!(pa.overlaps(&pb), pb.overlaps(&pa));
        if paths.iter().any(|x| pa.covers(x) && pb.covers(x)) {
            prop_assert!(pa.overlaps(&pb), "{} and {} share a path", a, b);
        }
    }

    /// Sessions that end up with the same claims agree on every holder, whatever the
    /// order in which each learnt, replaced, lost and relearnt them: a partition heals
    /// into the same board on both sides.
    #[test]
    fn any_order_gives_one_board(
        sets in prop::collection::vec((0u8..4, prop::collection::vec((arb_pattern(), any::<bool>(), 0u64..4), 0..4)), 1..12),
        order in any::<u64>(),
    ) {
        let sets: Vec<(SessionAddr, Vec<Claim>)> = sets.into_iter().map(|(who, claims)| {
            (addr(1 + who % 2, &format!("s{who}")),
             claims.into_iter().map(|(pat, ex, since)| claim(&pat, ex, since)).collect())
        }).collect();
        // One side learns the sets in order; the other in a shuffled order, with each
        // session dropped and put back once, as a partition and a restart do.
        let mut left = Board::new();
        for (who, set) in &sets {
            left.set(who.clone(), set.clone(), 10).unwrap();
        }
        let mut right = Board::new();
        let mut shuffled = sets.clone();
        let len = shuffled.len();
        for i in 0..len {
            shuffled.swap(i, (order as usize).wrapping_add(i * 7) % len);
        }
        for (who, set) in &shuffled {
            right.set(who.clone(), set.clone(), 10).unwrap();
            right.remove(who);
        }
        for (who, _) in &sets {
            // The last set each session published is the one that counts.
            let last = sets.iter().rev().find(|(w, _)| w == who).map(|(_, s)| s.clone()).unwrap_or_default();
            right.set(who.clone(), last, 10).unwrap();
        }
        let view = |b: &Board| b.claims().map(|(p, s)| (p.clone(), s)).collect::<Vec<_>>();
        prop_assert_eq!(view(&left), view(&right));
        prop_assert_eq!(left.conflicts(), right.conflicts());
        for path in ["a", "a/b", "b/a", "ab/c"] {
            for (who, _) in &sets {
                let l: Vec<_> = left.held_against(path, Some(who)).cloned().collect();
                let r: Vec<_> = right.held_against(path, Some(who)).cloned().collect();
                prop_assert_eq!(l, r);
            }
        }
        // Every held claim conflicts with nothing before it; every waiting one waits
        // behind a claim that comes before it and conflicts with it.
        let all: Vec<_> = left.claims().collect();
        for (i, (placed, standing)) in all.iter().enumerate() {
            let first = all[..i].iter().find(|(q, _)| q.conflicts_with(placed)).map(|(q, _)| (*q).clone());
            match standing {
                Standing::Held => prop_assert!(first.is_none()),
                Standing::Waits(behind) => prop_assert_eq!(Some((**behind).clone()), first),
            }
        }
    }
}

//! Fuzzes the claim patterns a paired peer's details carry (PROTOCOL §4.1, "Claims"):
//! two patterns and a path from arbitrary bytes — parsing never panics, overlap is
//! symmetric, and a path both cover makes the two overlap — and a claim set from
//! arbitrary CBOR through the board's checks and ranking.
#![no_main]

use interlink_core::{
    IdentityKey, SessionId,
    claims::{Board, Claim, Pattern},
    wire::SessionAddr,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.splitn(3, '\n');
    let (a, b, path) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    if let (Ok(a), Ok(b)) = (Pattern::parse(a), Pattern::parse(b)) {
        let overlap = a.overlaps(&b);
        assert_eq!(overlap, b.overlaps(&a), "overlap is symmetric");
        if a.covers(path) && b.covers(path) {
            assert!(overlap, "a path both cover makes them overlap");
        }
    }
    if let Ok(claims) = cbor4ii::serde::from_slice::<Vec<Claim>>(data) {
        let by = |n: u8| SessionAddr {
            key: IdentityKey::from_bytes([n; 32]),
            session: SessionId::new(format!("s{n}")).expect("a valid session id"),
        };
        let now = claims.first().map_or(0, |c| c.since);
        let _ = Board::from_sets([(by(1), claims.clone()), (by(2), claims)], now);
    }
});

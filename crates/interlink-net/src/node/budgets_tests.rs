use super::*;

#[test]
fn a_burst_then_only_the_refill_rate_per_peer_and_kind() {
    let mut b = Budgets::new(1);
    let (p, q) = (PeerId::random(), PeerId::random());
    let (burst, rate) = Kind::Hold.session_rates();
    let mb = 1 << 20;
    let mut spent = 0;
    while b.spend(p, Kind::Hold, mb, 0) {
        spent += mb as u64;
    }
    assert_eq!(spent, burst);
    // Another peer and another kind are untouched.
    assert!(b.spend(q, Kind::Hold, mb, 0));
    assert!(b.spend(p, Kind::Deliver, mb, 0));
    // One second refills `rate`.
    assert!(b.spend(p, Kind::Hold, usize::try_from(rate).unwrap(), 1000));
    assert!(!b.spend(p, Kind::Hold, 1, 1000));
    // The bucket never holds more than the burst.
    assert!(!b.spend(
        p,
        Kind::Hold,
        usize::try_from(burst + 1).unwrap(),
        10_000_000
    ));
}

/// A fresh peer's largest allowed roster request (16,384 tags, all away) fits its
/// burst, and one more byte of anything does not; an oversized summary, answered
/// empty unread, costs only the fixed part.
#[test]
fn the_largest_roster_request_fits_a_fresh_burst_and_an_oversized_one_costs_the_fixed_part() {
    use interlink_core::{presence::sync::MAX_SUMMARY_TAGS, wire::RosterRequest};
    let all_away = |tags: usize| RosterRequest {
        have: serde_bytes::ByteBuf::from(vec![0u8; tags * 8]),
        away: serde_bytes::ByteBuf::from(vec![0xff; tags.div_ceil(8)]),
        ..RosterRequest::default()
    };
    let largest = all_away(MAX_SUMMARY_TAGS);
    assert_eq!(roster_cost(&largest), ROSTER_BURST);
    let mut b = Budgets::new(1);
    let p = PeerId::random();
    assert!(b.spend(p, Kind::Roster, roster_cost(&largest), 0));
    assert!(!b.spend(p, Kind::Roster, 1, 0), "the burst is exactly that");
    let over = all_away(MAX_SUMMARY_TAGS + 1);
    assert_eq!(roster_cost(&over), ROSTER_REQUEST_COST);
    // A digest request costs the fixed part too: 66 in a burst.
    let q = PeerId::random();
    let digest = RosterRequest::with_digest([0; 16]);
    let mut answered = 0;
    while b.spend(q, Kind::Roster, roster_cost(&digest), 0) {
        answered += 1;
    }
    assert_eq!(answered, 66);
}

#[test]
fn tracked_peers_are_bounded() {
    let mut b = Budgets::new(1);
    for i in 0..(MAX_TRACKED_PEERS as u64 + 10) {
        b.spend(PeerId::random(), Kind::Hold, 1, i);
    }
    assert!(b.buckets.len() <= MAX_TRACKED_PEERS);
}

#[test]
fn a_network_may_grow_a_relay_store_by_a_burst_then_by_the_hourly_rate() {
    let burst = crate::behaviour::NETWORK_GROWTH_BURST;
    let mut n = NetworkBudgets::new(burst);
    let here: std::net::IpAddr = "10.0.0.2".parse().unwrap();
    let there: std::net::IpAddr = "10.0.0.3".parse().unwrap();
    let mut added = 0;
    while n.has_room(here, 0) {
        n.charge(here, 4 << 20, 0);
        added += 4 << 20;
    }
    assert_eq!(added, burst);
    assert!(n.has_room(there, 0), "another network has its own budget");
    // An hour later, another hour's worth.
    assert!(n.has_room(here, 3_600_000));
    n.charge(here, NETWORK_GROWTH_PER_HOUR, 3_600_000);
    assert!(!n.has_room(here, 3_600_000));
    // A hold that grows the store past what is left leaves a debt, refilled before
    // the next is let in: a trickle of refill does not let copies through.
    assert!(n.has_room(here, 3_600_010));
    n.charge(here, 1 << 20, 3_600_010);
    assert!(!n.has_room(here, 3_600_020));
    assert!(
        !n.has_room(here, 3_600_000 + 800_000),
        "part of the debt is still owed"
    );
    assert!(n.has_room(here, 3_600_000 + 1_000_000));
}

#[test]
fn an_ipv6_network_is_its_64_and_an_address_without_ip_has_none() {
    let a: libp2p::Multiaddr = "/ip6/2001:db8:1:2:aaaa::1/tcp/1".parse().unwrap();
    let b: libp2p::Multiaddr = "/ip6/2001:db8:1:2:bbbb::9/tcp/2".parse().unwrap();
    let c: libp2p::Multiaddr = "/ip6/2001:db8:1:3::1/tcp/2".parse().unwrap();
    assert_eq!(source_network(&a), source_network(&b));
    assert_ne!(source_network(&a), source_network(&c));
    let v4: libp2p::Multiaddr = "/ip4/192.0.2.7/tcp/9".parse().unwrap();
    assert_eq!(source_network(&v4), "192.0.2.7".parse().ok());
    assert_eq!(source_network(&"/memory/5".parse().unwrap()), None);
    let relayed: libp2p::Multiaddr =
        "/ip4/192.0.2.7/tcp/9/p2p/12D3KooWRBhwfeP2Y4TCx1SM6s9rUoHhR5STiGwxBhgFRcw3UERE/p2p-circuit"
            .parse()
            .unwrap();
    assert_eq!(source_network(&relayed), None, "not the sender's network");
}

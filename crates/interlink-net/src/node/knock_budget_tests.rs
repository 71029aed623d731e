use super::*;

fn net(last: u8) -> Option<IpAddr> {
    Some(IpAddr::from([192, 0, 2, last]))
}

#[test]
fn one_peer_gets_its_burst_then_one_per_period() {
    let mut b = KnockBudgets::new(0);
    let p = PeerId::random();
    for _ in 0..PER_PEER.burst {
        assert_eq!(b.spend(p, None, 0), Ok(()));
    }
    assert_eq!(b.spend(p, None, 0), Err(Over::Peer));
    assert_eq!(b.spend(p, None, PER_PEER.period_ms - 1), Err(Over::Peer));
    assert_eq!(b.spend(p, None, PER_PEER.period_ms), Ok(()));
    assert_eq!(b.spend(p, None, PER_PEER.period_ms), Err(Over::Peer));
    // Another peer is untouched.
    assert_eq!(b.spend(PeerId::random(), None, PER_PEER.period_ms), Ok(()));
}

#[test]
fn fresh_peer_ids_from_one_network_share_its_budget() {
    let mut b = KnockBudgets::new(0);
    for _ in 0..PER_NETWORK.burst {
        assert_eq!(b.spend(PeerId::random(), net(1), 0), Ok(()));
    }
    assert_eq!(b.spend(PeerId::random(), net(1), 0), Err(Over::Network));
    // Another network still knocks.
    assert_eq!(b.spend(PeerId::random(), net(2), 0), Ok(()));
    // The network's refill: one more after its period.
    assert_eq!(
        b.spend(PeerId::random(), net(1), PER_NETWORK.period_ms),
        Ok(())
    );
    assert_eq!(
        b.spend(PeerId::random(), net(1), PER_NETWORK.period_ms),
        Err(Over::Network)
    );
}

#[test]
fn many_networks_together_are_bounded_by_the_node_budget() {
    let mut b = KnockBudgets::new(0);
    let mut taken = 0u64;
    for i in 0..=255u8 {
        if b.spend(PeerId::random(), net(i), 0).is_ok() {
            taken += 1;
        }
    }
    assert_eq!(taken, OVERALL.burst);
    assert_eq!(b.spend(PeerId::random(), None, 0), Err(Over::Node));
    // A second later: `per` more.
    let mut later = 0u64;
    for _ in 0..100 {
        if b.spend(PeerId::random(), None, 1_000).is_ok() {
            later += 1;
        }
    }
    assert_eq!(later, OVERALL.per);
}

#[test]
fn a_refused_knock_spends_nothing_of_the_other_budgets() {
    let mut b = KnockBudgets::new(0);
    let flooder = PeerId::random();
    for _ in 0..PER_PEER.burst {
        assert_eq!(b.spend(flooder, net(1), 0), Ok(()));
    }
    // The flooder goes on; each knock is refused on its own budget.
    for _ in 0..1000 {
        assert_eq!(b.spend(flooder, net(1), 0), Err(Over::Peer));
    }
    // Its network and the node still have what the burst left.
    for _ in PER_PEER.burst..PER_NETWORK.burst {
        assert_eq!(b.spend(PeerId::random(), net(1), 0), Ok(()));
    }
    assert_eq!(b.spend(PeerId::random(), net(1), 0), Err(Over::Network));
    assert_eq!(b.spend(PeerId::random(), net(2), 0), Ok(()));
}

#[test]
fn tracked_sources_are_bounded() {
    let mut b = KnockBudgets::new(0);
    for i in 0..(MAX_TRACKED_KNOCKERS as u64 + 10) {
        let ip = IpAddr::from(u32::try_from(i).unwrap_or(0).to_be_bytes());
        let _ = b.spend(PeerId::random(), Some(ip), i * 1_000);
    }
    assert!(b.peers.len() <= MAX_TRACKED_KNOCKERS);
    assert!(b.networks.len() <= MAX_TRACKED_KNOCK_NETWORKS);
}

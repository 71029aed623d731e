use interlink_core::Identity;

use super::*;

const DAY: u64 = 24 * 3600 * 1000;

fn id(n: u8) -> IdentityKey {
    Identity::from_seed(&[n; 32]).public()
}

#[test]
fn remembers_merges_across_sessions_and_ages_out() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(ADDRESS_BOOK_FILE);
    let mut one = AddressBook::load(Some(path.clone()));
    let mut two = AddressBook::load(Some(path.clone()));
    let t0 = 1_800_000_000_000;
    assert!(one.remember(id(1), "/ip4/10.0.0.2/tcp/7385", Source::Invite, t0));
    assert!(
        !one.remember(id(1), "/ip4/10.0.0.2/tcp/7385", Source::Invite, t0 + 5),
        "a refresh within a day changes nothing"
    );
    assert!(!one.remember(id(1), "/ip4/10.0.0.2/tcp/1/p2p/12D3Koo", Source::Invite, t0));
    assert!(!one.remember(id(1), "ip4/10.0.0.2", Source::Invite, t0));
    one.save(t0).unwrap();
    assert!(two.remember(
        id(2),
        "/ip4/10.0.0.3/udp/7385/quic-v1",
        Source::Announcement,
        t0
    ));
    two.answered("/ip4/10.0.0.3/udp/7385/quic-v1", t0 + 1);
    two.save(t0 + 1).unwrap();
    let back = AddressBook::load(Some(path.clone()));
    assert_eq!(back.len(), 2, "the second session's save kept the first's");
    assert_eq!(back.addresses(&id(2))[0].answered_ms, Some(t0 + 1));
    // Never answered: gone after a week; answered: kept for a month after.
    let mut later = AddressBook::load(Some(path.clone()));
    later.save(t0 + 8 * DAY).unwrap();
    assert!(later.addresses(&id(1)).is_empty());
    assert_eq!(later.addresses(&id(2)).len(), 1);
    later.save(t0 + 31 * DAY).unwrap();
    assert!(later.is_empty());
    // A damaged file reads as nothing.
    std::fs::write(&path, b"{not json").unwrap();
    assert!(AddressBook::load(Some(path)).is_empty());
}

#[test]
fn bounded_per_identity_and_in_all_keeping_what_answered() {
    let mut book = AddressBook::load(None);
    let t0 = 1_800_000_000_000;
    book.remember(id(1), "/ip4/10.0.0.1/tcp/7385", Source::Invite, t0);
    book.answered("/ip4/10.0.0.1/tcp/7385", t0);
    for port in 0..100u64 {
        book.remember(
            id(1),
            &format!("/ip4/10.0.0.9/tcp/{}", 1000 + port),
            Source::Announcement,
            t0 + port,
        );
    }
    let kept = book.addresses(&id(1));
    assert_eq!(kept.len(), MAX_UNSTABLE_ADDRS_PER_IDENTITY);
    assert_eq!(
        kept[0].addr, "/ip4/10.0.0.1/tcp/7385",
        "the answered one first"
    );
    // Stable addresses (a host's well-known port) fill the rest; random ports
    // learned after them do not push them out.
    for host in 0..20u64 {
        book.remember_with(
            id(1),
            &format!("/ip4/10.0.1.{host}/tcp/7385"),
            Source::Invite,
            true,
            t0 + 200 + host,
        );
    }
    for port in 0..20u64 {
        book.remember(
            id(1),
            &format!("/ip4/10.0.0.9/tcp/{}", 3000 + port),
            Source::Announcement,
            t0 + 300 + port,
        );
    }
    let kept = book.addresses(&id(1));
    assert_eq!(kept.len(), MAX_ADDRS_PER_IDENTITY);
    let stable = kept.iter().filter(|e| e.stable).count();
    assert_eq!(stable, MAX_ADDRS_PER_IDENTITY - 1, "{kept:?}");
    assert_eq!(kept[0].addr, "/ip4/10.0.0.1/tcp/7385");
    for n in 0..=255u8 {
        book.remember(
            id(n),
            "/ip4/10.1.0.1/tcp/7385",
            Source::Knock,
            t0 + 1000 + u64::from(n),
        );
    }
    for n in 0..40u8 {
        let mut seed = [7u8; 32];
        seed[0] = n;
        let newcomer = Identity::from_seed(&seed).public();
        book.remember(newcomer, "/ip4/10.2.0.1/tcp/7385", Source::Knock, t0 + 5000);
    }
    assert_eq!(book.len(), MAX_IDENTITIES);
    book.failed("/ip4/10.0.0.1/tcp/7385");
    assert!(book.is_dirty());
    book.forget(&id(1));
    assert!(book.addresses(&id(1)).is_empty());
}

#[test]
fn a_forgotten_identity_is_not_merged_back_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(ADDRESS_BOOK_FILE);
    let t0 = 1_800_000_000_000;
    let mut one = AddressBook::load(Some(path.clone()));
    one.remember(id(1), "/ip4/10.0.0.2/tcp/7385", Source::Invite, t0);
    one.remember(id(2), "/ip4/10.0.0.3/tcp/7385", Source::Invite, t0);
    one.save(t0).unwrap();
    let mut two = AddressBook::load(Some(path.clone()));
    two.forget(&id(1));
    assert!(two.remove(&id(2), "/ip4/10.0.0.3/tcp/7385"));
    assert!(!two.remove(&id(2), "/ip4/10.0.0.3/tcp/7385"));
    two.save(t0).unwrap();
    let back = AddressBook::load(Some(path.clone()));
    assert!(
        back.addresses(&id(1)).is_empty(),
        "forgotten stays forgotten"
    );
    // A single address removed comes back from the file (another session may still
    // know it answers); only a forgotten identity stays out.
    assert_eq!(back.addresses(&id(2)).len(), 1);
    // A peer again, its addresses written by another command: merged again.
    let mut three = AddressBook::load(Some(path.clone()));
    three.forget(&id(2));
    three.unforget(&id(2));
    three.save(t0).unwrap();
    assert_eq!(
        AddressBook::load(Some(path.clone()))
            .addresses(&id(2))
            .len(),
        1
    );
    // Learned again: kept again.
    two.remember(id(1), "/ip4/10.0.0.2/tcp/7385", Source::Knock, t0 + 1);
    two.save(t0 + 1).unwrap();
    assert_eq!(AddressBook::load(Some(path)).addresses(&id(1)).len(), 1);
}

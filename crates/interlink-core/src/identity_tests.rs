use super::*;

fn id(n: u8) -> Identity {
    Identity::from_seed(&[n; 32])
}

#[test]
fn key_text_round_trip() {
    let k = id(1).public();
    let parsed: IdentityKey = k.to_hex().parse().unwrap();
    assert_eq!(parsed, k);
    assert_eq!(k.to_hex().to_uppercase().parse::<IdentityKey>().unwrap(), k);
    assert_eq!("abc".parse::<IdentityKey>(), Err(KeyError::BadLength(3)));
    assert_eq!("g".repeat(64).parse::<IdentityKey>(), Err(KeyError::NotHex));
}

#[test]
fn hex_is_lowercase_out_and_either_case_in() {
    assert_eq!(hex_encode(&[0x00, 0x9f, 0xa0, 0xff]), "009fa0ff");
    let mut out = [0u8; 2];
    assert_eq!(hex_decode_into("aBcD", &mut out), Some(()));
    assert_eq!(out, [0xab, 0xcd]);
    for bad in ["abc", "abcdef", "", "abcg", "ab d"] {
        assert_eq!(hex_decode_into(bad, &mut out), None, "{bad:?}");
    }
}

#[test]
fn fingerprint_shape() {
    let f = id(1).public().fingerprint().to_string();
    assert_eq!(f.len(), 14);
    assert_eq!(f.matches('-').count(), 2);
    assert_ne!(f, id(2).public().fingerprint().to_string());
}

#[test]
fn transport_key_is_deterministic_per_session() {
    let a = SessionId::new("a").unwrap();
    let b = SessionId::new("b").unwrap();
    let p1 = id(1).transport_keypair(&a).unwrap().public().to_peer_id();
    let p2 = id(1).transport_keypair(&a).unwrap().public().to_peer_id();
    let p3 = id(1).transport_keypair(&b).unwrap().public().to_peer_id();
    let p4 = id(2).transport_keypair(&a).unwrap().public().to_peer_id();
    assert_eq!(p1, p2);
    assert_ne!(p1, p3);
    assert_ne!(p1, p4);
}

#[test]
fn sealing_key_is_deterministic_and_distinct_from_identity() {
    let s1 = id(1).sealing_secret().public();
    assert_eq!(s1, id(1).sealing_secret().public());
    assert_ne!(s1, id(2).sealing_secret().public());
    assert_ne!(s1.as_bytes(), id(1).public().as_bytes());
}

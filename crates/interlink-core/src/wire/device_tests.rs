use super::*;
use crate::{SessionId, wire::Invite};

fn owner() -> Identity {
    Identity::from_seed(&[7; 32])
}

fn node_addr(port: u16) -> ByteBuf {
    let peer = owner()
        .transport_keypair(&SessionId::new("link").unwrap())
        .unwrap()
        .public()
        .to_peer_id();
    let addr: Multiaddr = format!("/ip4/192.0.2.7/tcp/{port}/p2p/{peer}")
        .parse()
        .unwrap();
    ByteBuf::from(addr.to_vec())
}

fn device_code() -> DeviceCode {
    DeviceCode {
        v: DEVICE_CODE_VERSION,
        key: owner().public(),
        secret: ByteArray::new([9; INVITE_SECRET_BYTES]),
        expires: 1_800_000_000_000,
        addrs: vec![node_addr(4101), node_addr(4102)],
    }
}

/// Re-frames a code's signed wrapper after `edit`, with a check that matches.
fn reframed(code: &str, edit: impl FnOnce(&mut Vec<u8>)) -> String {
    let mut signed = unframe(code, DEVICE_CODE_VERSION).unwrap();
    edit(&mut signed);
    frame(DEVICE_CODE_VERSION, &signed)
}

#[test]
fn a_code_round_trips_and_is_told_apart_from_an_invite() {
    let code = device_code().encode(&owner()).unwrap();
    assert!(code.starts_with(DEVICE_CODE_PREFIX), "{code}");
    assert!(DeviceCode::is_device_code(&code));
    assert!(DeviceCode::is_device_code(&code.to_ascii_uppercase()));
    assert_eq!(
        DeviceCode::decode(&format!("  {code}\n")).unwrap(),
        device_code()
    );
    assert_eq!(
        device_code().peer(),
        device_code().direct_addrs()[0]
            .iter()
            .last()
            .and_then(|p| match p {
                Protocol::P2p(p) => Some(p),
                _ => None,
            })
    );
    // An invite decoder names the format instead of misreading it.
    assert_eq!(Invite::decode(&code), Err(InviteError::Format(3)));
    assert!(code.len() < 500, "{} characters", code.len());
}

#[test]
fn only_the_named_identity_signs_a_code() {
    let other = Identity::from_seed(&[8; 32]);
    assert!(matches!(
        device_code().encode(&other),
        Err(InviteError::Invalid(_))
    ));
}

#[test]
fn a_damaged_code_is_refused_as_damaged() {
    let code = device_code().encode(&owner()).unwrap();
    let mut chars: Vec<char> = code.chars().collect();
    let i = chars.len() / 2;
    chars[i] = if chars[i] == 'a' { 'b' } else { 'a' };
    let damaged: String = chars.into_iter().collect();
    assert_eq!(DeviceCode::decode(&damaged), Err(InviteError::Damaged));
    assert_eq!(
        DeviceCode::decode(&code[..code.len() - 3]),
        Err(InviteError::Damaged)
    );
}

#[test]
fn an_altered_code_with_a_recomputed_check_is_refused_as_forged() {
    let code = device_code().encode(&owner()).unwrap();
    // The expiry's bytes sit in the body: move it a day later.
    let forged = reframed(&code, |signed| {
        let w: Wrapper = crate::wire::decode_cbor("t", signed).unwrap();
        let mut body: DeviceCode = crate::wire::decode_cbor("t", &w.body).unwrap();
        body.expires += 86_400_000;
        *signed = crate::wire::encode(&Wrapper {
            body: ByteBuf::from(crate::wire::encode(&body)),
            sig: w.sig,
        });
    });
    assert_eq!(DeviceCode::decode(&forged), Err(InviteError::Forged));
}

#[test]
fn a_pair_invite_signature_does_not_make_a_device_code() {
    // The same body signed in the invite domain: the device domain refuses it.
    let body = crate::wire::encode(&device_code());
    let sig = owner().sign(Domain::Invite, &body);
    let code = frame(
        DEVICE_CODE_VERSION,
        &crate::wire::encode(&Wrapper {
            body: ByteBuf::from(body),
            sig: ByteArray::new(sig),
        }),
    );
    assert_eq!(DeviceCode::decode(&code), Err(InviteError::Forged));
}

#[test]
fn addresses_are_held_to_their_rules() {
    let bad = |c: DeviceCode| {
        let body = crate::wire::encode(&c);
        let sig = owner().sign(Domain::DeviceLink, &body);
        let code = frame(
            DEVICE_CODE_VERSION,
            &crate::wire::encode(&Wrapper {
                body: ByteBuf::from(body),
                sig: ByteArray::new(sig),
            }),
        );
        matches!(DeviceCode::decode(&code), Err(InviteError::Invalid(_)))
    };
    assert!(bad(DeviceCode {
        addrs: vec![],
        ..device_code()
    }));
    assert!(bad(DeviceCode {
        addrs: vec![node_addr(1); MAX_DEVICE_ADDRS + 1],
        ..device_code()
    }));
    let no_peer: Multiaddr = "/ip4/192.0.2.7/tcp/4101".parse().unwrap();
    assert!(bad(DeviceCode {
        addrs: vec![ByteBuf::from(no_peer.to_vec())],
        ..device_code()
    }));
    let other_peer = {
        let peer = Identity::from_seed(&[3; 32])
            .transport_keypair(&SessionId::new("x").unwrap())
            .unwrap()
            .public()
            .to_peer_id();
        let a: Multiaddr = format!("/ip4/192.0.2.8/tcp/1/p2p/{peer}").parse().unwrap();
        ByteBuf::from(a.to_vec())
    };
    assert!(bad(DeviceCode {
        addrs: vec![node_addr(1), other_peer],
        ..device_code()
    }));
    assert!(bad(DeviceCode {
        addrs: vec![ByteBuf::from(vec![0xff; 8])],
        ..device_code()
    }));
    // Another format value inside a code framed as format 3.
    let body = crate::wire::encode(&DeviceCode {
        v: 2,
        ..device_code()
    });
    let sig = owner().sign(Domain::DeviceLink, &body);
    let code = frame(
        DEVICE_CODE_VERSION,
        &crate::wire::encode(&Wrapper {
            body: ByteBuf::from(body),
            sig: ByteArray::new(sig),
        }),
    );
    assert_eq!(DeviceCode::decode(&code), Err(InviteError::Format(2)));
}

#[test]
fn requests_and_responses_hold_to_their_shapes_and_limits() {
    let hello = LinkRequest {
        v: crate::wire::VERSION,
        step: step::HELLO,
        commit: Some(ByteArray::new([1; 32])),
        eph: None,
        addrs: None,
        mac: ByteArray::new([2; 32]),
    };
    let bytes = crate::wire::encode(&hello);
    assert_eq!(LinkRequest::decode(&bytes).unwrap(), hello);
    // A hello that also carries a key, a reveal without one, an old version.
    let both = LinkRequest {
        eph: Some(ByteArray::new([3; 32])),
        ..hello.clone()
    };
    assert!(LinkRequest::decode(&crate::wire::encode(&both)).is_err());
    let reveal = LinkRequest {
        step: step::REVEAL,
        commit: None,
        ..hello.clone()
    };
    assert!(LinkRequest::decode(&crate::wire::encode(&reveal)).is_err());
    let old = LinkRequest {
        v: 11,
        ..hello.clone()
    };
    assert!(LinkRequest::decode(&crate::wire::encode(&old)).is_err());
    // Oversized: refused before decoding; too many or too long addresses.
    assert!(LinkRequest::decode(&vec![0; MAX_LINK_REQUEST_BYTES + 1]).is_err());
    let confirm = |addrs: Vec<String>| LinkRequest {
        step: step::CONFIRM,
        commit: None,
        addrs: Some(addrs),
        ..hello.clone()
    };
    let ok = confirm(vec!["/ip4/192.0.2.1/tcp/7385".into(); MAX_LINK_ADDRS]);
    let enc = crate::wire::encode(&ok);
    assert!(enc.len() <= MAX_LINK_REQUEST_BYTES);
    assert_eq!(LinkRequest::decode(&enc).unwrap(), ok);
    let many = confirm(vec!["/ip4/192.0.2.1/tcp/7385".into(); MAX_LINK_ADDRS + 1]);
    assert!(LinkRequest::decode(&crate::wire::encode(&many)).is_err());
    let long = confirm(vec![format!("/dns4/{}.example/tcp/1", "a".repeat(250))]);
    assert!(LinkRequest::decode(&crate::wire::encode(&long)).is_err());
    let largest = confirm(vec![
        format!("/dns4/{}/tcp/7385", "a".repeat(236));
        MAX_LINK_ADDRS
    ]);
    assert!(crate::wire::encode(&largest).len() <= MAX_LINK_REQUEST_BYTES);
    assert!(LinkRequest::decode(&crate::wire::encode(&largest)).is_ok());
    // An unknown key is refused.
    let mut unknown = crate::wire::encode(&hello);
    unknown[0] += 1; // one more pair in the map
    unknown.extend_from_slice(&crate::wire::encode(&"x"));
    unknown.extend_from_slice(&crate::wire::encode(&1u8));
    assert!(LinkRequest::decode(&unknown).is_err());

    let refusal = LinkResponse::status(step::HELLO, LinkStatus::Refused);
    let bytes = crate::wire::encode(&refusal);
    assert_eq!(LinkResponse::decode(&bytes, step::HELLO).unwrap(), refusal);
    assert!(LinkResponse::decode(&bytes, step::REVEAL).is_err());
    let ok_without_key = LinkResponse::status(step::HELLO, LinkStatus::Ok);
    assert!(LinkResponse::decode(&crate::wire::encode(&ok_without_key), step::HELLO).is_err());
    let refusal_with_key = LinkResponse {
        eph: Some(ByteArray::new([1; 32])),
        ..refusal
    };
    assert!(LinkResponse::decode(&crate::wire::encode(&refusal_with_key), step::HELLO).is_err());
    assert!(LinkResponse::decode(&vec![0; MAX_LINK_RESPONSE_BYTES + 1], step::HELLO).is_err());
}

#[test]
fn an_offer_keeps_its_seed_out_of_debug_output() {
    let offer = DeviceOffer {
        seed: ByteArray::new([0xab; 32]),
        addrs: vec!["/ip4/192.0.2.1/tcp/7385".into()],
    };
    assert!(!format!("{offer:?}").contains("171"));
    let decoded = DeviceOffer::decode(&offer.encode()).unwrap();
    assert_eq!(*decoded.seed, [0xab; 32]);
    assert!(DeviceOffer::decode(&vec![0; MAX_OFFER_BYTES + 1]).is_err());
}

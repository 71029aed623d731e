use super::*;
use crate::Identity;

fn inviter() -> Identity {
    Identity::from_seed(&[7; 32])
}

fn session_addr(port: u16) -> ByteBuf {
    let peer = inviter()
        .transport_keypair(&SessionId::new("inv-1a2b3c").unwrap())
        .unwrap()
        .public()
        .to_peer_id();
    let addr: Multiaddr = format!("/ip4/192.0.2.7/tcp/{port}/p2p/{peer}")
        .parse()
        .unwrap();
    ByteBuf::from(addr.to_vec())
}

fn relay_addr() -> ByteBuf {
    let peer = Identity::from_seed(&[8; 32])
        .transport_keypair(&SessionId::new("relay").unwrap())
        .unwrap()
        .public()
        .to_peer_id();
    let addr: Multiaddr = format!("/ip4/198.51.100.1/tcp/4001/p2p/{peer}")
        .parse()
        .unwrap();
    ByteBuf::from(addr.to_vec())
}

fn invite() -> Invite {
    Invite {
        v: INVITE_VERSION,
        key: inviter().public(),
        name: "alice".into(),
        session: SessionId::new("inv-1a2b3c").unwrap(),
        secret: ByteArray::new([9; INVITE_SECRET_BYTES]),
        expires: 1_800_000_000_000,
        relays: vec![relay_addr()],
        addrs: vec![session_addr(4101)],
    }
}

fn code() -> String {
    invite().encode(&inviter()).unwrap()
}

/// The code's bytes after the prefix, and a code made of such bytes.
fn bytes_of(code: &str) -> Vec<u8> {
    data_encoding::BASE32_NOPAD
        .decode(code[INVITE_PREFIX.len()..].to_ascii_uppercase().as_bytes())
        .unwrap()
}

fn code_of(bytes: &[u8]) -> String {
    format!(
        "{INVITE_PREFIX}{}",
        data_encoding::BASE32_NOPAD
            .encode(bytes)
            .to_ascii_lowercase()
    )
}

/// A code whose wrapper carries `body` with `sig`, its check made right (what an
/// attacker who edits a code can always do).
fn rechecked(body: &[u8], sig: [u8; 64]) -> String {
    let mut bytes = crate::wire::encode(&Wrapper {
        body: ByteBuf::from(body.to_vec()),
        sig: ByteArray::new(sig),
    });
    let check = check_of(&bytes);
    bytes.extend_from_slice(&check);
    code_of(&bytes)
}

fn body_of(code: &str) -> Vec<u8> {
    let bytes = bytes_of(code);
    let wrapper: Wrapper =
        crate::wire::decode_cbor("invite", &bytes[..bytes.len() - INVITE_CHECK_BYTES]).unwrap();
    wrapper.body.into_vec()
}

#[test]
fn a_code_round_trips_in_any_case_and_with_spaces() {
    let code = code();
    assert!(code.starts_with(INVITE_PREFIX));
    assert!(code.chars().all(|c| c.is_ascii_alphanumeric()), "{code}");
    // One relay and one address: about 500 characters, a quarter of the limit.
    assert!(code.len() < 600, "{} characters", code.len());
    assert_eq!(Invite::decode(&code).unwrap(), invite());
    assert_eq!(
        Invite::decode(&format!("  {}\n", code.to_ascii_uppercase())).unwrap(),
        invite()
    );
    assert_eq!(invite().relay_addrs().len(), 1);
    assert_eq!(invite().direct_addrs().len(), 1);
}

#[test]
fn only_the_identity_it_names_can_sign_a_code() {
    assert!(matches!(
        invite().encode(&Identity::from_seed(&[1; 32])),
        Err(InviteError::Invalid(_))
    ));
}

#[test]
fn every_single_character_changed_or_lost_is_caught() {
    let code = code();
    let alphabet = "abcdefghijklmnopqrstuvwxyz234567";
    for i in INVITE_PREFIX.len()..code.len() {
        let original = code.as_bytes()[i] as char;
        for c in alphabet.chars().filter(|c| *c != original) {
            let mut typo = code.clone();
            typo.replace_range(i..=i, &c.to_string());
            assert!(
                matches!(
                    Invite::decode(&typo),
                    Err(InviteError::Damaged | InviteError::Forged)
                ),
                "position {i}: {c} for {original} was taken"
            );
        }
        let mut lost = code.clone();
        lost.remove(i);
        assert!(Invite::decode(&lost).is_err(), "losing position {i}");
    }
    // A typo is a typo, not a forgery: the check says so before the signature.
    let mut typo = code.clone();
    let i = code.len() / 2;
    let c = if &code[i..=i] == "a" { "b" } else { "a" };
    typo.replace_range(i..=i, c);
    assert_eq!(Invite::decode(&typo), Err(InviteError::Damaged));
}

#[test]
fn an_altered_code_with_a_recomputed_check_is_a_forgery() {
    let code = code();
    let sig = {
        let bytes = bytes_of(&code);
        let wrapper: Wrapper =
            crate::wire::decode_cbor("invite", &bytes[..bytes.len() - INVITE_CHECK_BYTES]).unwrap();
        wrapper.sig.into_array()
    };
    // The attacker's relay and address in the inviter's genuine code.
    let mut planted = invite();
    let attacker = Identity::from_seed(&[0xaa; 32])
        .transport_keypair(&SessionId::new("x").unwrap())
        .unwrap()
        .public()
        .to_peer_id();
    let evil: Multiaddr = format!("/ip4/203.0.113.9/tcp/4001/p2p/{attacker}")
        .parse()
        .unwrap();
    planted.relays = vec![ByteBuf::from(evil.to_vec())];
    assert_eq!(
        Invite::decode(&rechecked(&crate::wire::encode(&planted), sig)),
        Err(InviteError::Forged)
    );
    // One byte of the key changed, check recomputed: forged (or no key at all).
    let mut body = body_of(&code);
    let at = body
        .windows(32)
        .position(|w| w == inviter().public().as_bytes())
        .unwrap();
    body[at] ^= 1;
    assert_eq!(
        Invite::decode(&rechecked(&body, sig)),
        Err(InviteError::Forged)
    );
    // Body untouched, signature bit flipped.
    let mut bad = sig;
    bad[5] ^= 1;
    assert_eq!(
        Invite::decode(&rechecked(&body_of(&code), bad)),
        Err(InviteError::Forged)
    );
}

#[test]
fn a_key_off_the_curve_is_refused() {
    // y = 2 is not the y of any point on edwards25519.
    let mut not_a_point = [0u8; 32];
    not_a_point[0] = 2;
    let mut inv = invite();
    inv.key = IdentityKey::from_bytes(not_a_point);
    let body = crate::wire::encode(&inv);
    assert_eq!(
        Invite::decode(&rechecked(&body, [0; 64])),
        Err(InviteError::Forged)
    );
}

#[test]
fn addresses_that_are_not_multiaddrs_or_name_no_node_are_refused_even_when_signed() {
    let signed = |edit: &dyn Fn(&mut Invite)| {
        let mut inv = invite();
        edit(&mut inv);
        let body = crate::wire::encode(&inv);
        let sig = inviter().sign(Domain::Invite, &body);
        Invite::decode(&rechecked(&body, sig))
    };
    let random = ByteBuf::from((0u8..40).map(|i| i.wrapping_mul(37)).collect::<Vec<_>>());
    assert!(
        matches!(signed(&|i| i.addrs = vec![random.clone()]), Err(InviteError::Invalid(e)) if e.contains("not a multiaddr"))
    );
    let bare: Multiaddr = "/ip4/198.51.100.1/tcp/4001".parse().unwrap();
    assert!(
        matches!(signed(&|i| i.relays = vec![ByteBuf::from(bare.to_vec())]), Err(InviteError::Invalid(e)) if e.contains("/p2p/"))
    );
    assert!(
        matches!(signed(&|i| i.addrs = vec![ByteBuf::from(bare.to_vec())]), Err(InviteError::Invalid(e)) if e.contains("/p2p/"))
    );
    assert!(
        matches!(signed(&|i| i.addrs.push(relay_addr())), Err(InviteError::Invalid(e)) if e.contains("different nodes"))
    );
    assert!(matches!(
        signed(&|i| {
            i.addrs.clear();
            i.relays.clear();
        }),
        Err(InviteError::Invalid(_))
    ));
    assert!(matches!(
        signed(&|i| i.name = "a b".into()),
        Err(InviteError::Invalid(_))
    ));
    assert!(matches!(
        signed(&|i| i.addrs = vec![session_addr(1); MAX_INVITE_ADDRS + 1]),
        Err(InviteError::Invalid(_))
    ));
    // Every message is a sentence, not debug text.
    let e = signed(&|i| i.addrs = vec![random.clone()]).unwrap_err();
    assert!(!e.to_string().contains('{'), "{e}");
}

#[test]
fn other_formats_and_oversized_codes_are_refused_with_a_reason() {
    let code = code();
    assert_eq!(Invite::decode("hello"), Err(InviteError::Prefix));
    assert_eq!(Invite::decode("interlink"), Err(InviteError::Prefix));
    // A code of the first format (unsigned): told to update, not "damaged".
    assert_eq!(
        Invite::decode("interlink1qqqqqqqq"),
        Err(InviteError::Format(1))
    );
    assert_eq!(Invite::decode("interlink3abc"), Err(InviteError::Format(3)));
    assert_eq!(
        Invite::decode(&code[..code.len() - 7]),
        Err(InviteError::Damaged)
    );
    assert_eq!(
        Invite::decode(&format!("{code}!")),
        Err(InviteError::Damaged)
    );
    assert_eq!(Invite::decode(INVITE_PREFIX), Err(InviteError::Damaged));
    let long = format!("{INVITE_PREFIX}{}", "a".repeat(MAX_INVITE_CODE_CHARS));
    assert!(matches!(
        Invite::decode(&long),
        Err(InviteError::TooLong(_))
    ));
    // A signed body claiming another format inside this prefix.
    let mut inv = invite();
    inv.v = 3;
    let body = crate::wire::encode(&inv);
    let sig = inviter().sign(Domain::Invite, &body);
    assert_eq!(
        Invite::decode(&rechecked(&body, sig)),
        Err(InviteError::Format(3))
    );
}

#[test]
fn the_secret_stays_out_of_debug_output() {
    let shown = format!("{:?}", invite());
    assert!(!shown.contains("9, 9"), "{shown}");
}

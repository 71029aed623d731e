//! Invite codes as an attacker or a faulty program makes them (PROTOCOL.md §4.10):
//! what a genuine code carries changed after it was signed, with its 4-byte check made
//! right again (anyone can), or signed by the real inviter but breaking the rules (a
//! faulty inviter). Written from the document, not from the decoder.

use interlink_core::{
    Identity,
    sign::Domain,
    wire::{INVITE_CHECK_BYTES, INVITE_PREFIX, Invite},
};
use serde::{Deserialize, Serialize};
use serde_bytes::{ByteArray, ByteBuf};
use sha2::{Digest as _, Sha256};

#[derive(Serialize, Deserialize)]
struct Wrapper {
    body: ByteBuf,
    sig: ByteArray<64>,
}

fn bytes_of(code: &str) -> Vec<u8> {
    let code = code.trim();
    data_encoding::BASE32_NOPAD
        .decode(code[INVITE_PREFIX.len()..].to_ascii_uppercase().as_bytes())
        .expect("a code's base32")
}

fn unwrap(code: &str) -> (Invite, [u8; 64]) {
    let bytes = bytes_of(code);
    let wrapper: Wrapper =
        cbor4ii::serde::from_slice(&bytes[..bytes.len() - INVITE_CHECK_BYTES]).expect("wrapper");
    let invite: Invite = cbor4ii::serde::from_slice(&wrapper.body).expect("invite map");
    (invite, wrapper.sig.into_array())
}

/// The code of `body` under `sig`, with a correct check.
pub fn code_of(body: &[u8], sig: [u8; 64]) -> String {
    let mut bytes = cbor4ii::serde::to_vec(
        Vec::new(),
        &Wrapper {
            body: ByteBuf::from(body.to_vec()),
            sig: ByteArray::new(sig),
        },
    )
    .expect("encoding a wrapper");
    let digest = Sha256::new()
        .chain_update(b"interlink-p2p/v1/invite-check\0")
        .chain_update(&bytes)
        .finalize();
    bytes.extend_from_slice(&digest[..INVITE_CHECK_BYTES]);
    format!(
        "{INVITE_PREFIX}{}",
        data_encoding::BASE32_NOPAD
            .encode(&bytes)
            .to_ascii_lowercase()
    )
}

/// `code` with what it carries edited by `edit`, the inviter's signature kept and the
/// check recomputed: a tampered code that no typo check can catch.
pub fn altered(code: &str, edit: impl FnOnce(&mut Invite)) -> String {
    let (mut invite, sig) = unwrap(code);
    edit(&mut invite);
    code_of(
        &cbor4ii::serde::to_vec(Vec::new(), &invite).expect("invite"),
        sig,
    )
}

/// `code` edited by `edit` and signed again by `inviter` without any of the rules a
/// real inviter keeps: a faulty inviter's code.
pub fn resigned(code: &str, inviter: &Identity, edit: impl FnOnce(&mut Invite)) -> String {
    let (mut invite, _) = unwrap(code);
    edit(&mut invite);
    let body = cbor4ii::serde::to_vec(Vec::new(), &invite).expect("invite");
    let sig = inviter.sign(Domain::Invite, &body);
    code_of(&body, sig)
}

/// `code` with the character at `at` (counted from the code's start) replaced by
/// another of the base32 alphabet: a typo.
pub fn typo(code: &str, at: usize) -> String {
    let mut chars: Vec<char> = code.chars().collect();
    chars[at] = if chars[at] == 'a' { 'b' } else { 'a' };
    chars.into_iter().collect()
}

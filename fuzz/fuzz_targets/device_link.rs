//! Fuzzes the device link's readers (PROTOCOL.md §4.11, §8.8): the device-code reader,
//! the exchange's request and response decoders and the sealed offer's, and the waiting
//! side's state machine fed whatever request decodes. Any input must give a value or a
//! typed refusal, never a panic; whatever the state machine does with a request from a
//! stranger without the code's secret, it never hands out anything sealed.
//!
//! The first byte picks the reader: 0 a code's text (also framed as a format-3 code
//! with its check made right, to get past the check), 1 a request (also fed to a
//! waiting side), 2–4 a response to step 1–3, 5 an offer.
#![no_main]

use interlink_core::{
    Identity,
    device_link::{Inviter, Reply},
    wire::{DeviceCode, DeviceOffer, INVITE_CHECK_BYTES, LinkRequest, LinkResponse},
};
use libfuzzer_sys::fuzz_target;
use sha2::{Digest as _, Sha256};

/// A waiting side for a code whose secret the fuzzer does not know: 16 bytes of 0x77.
fn inviter() -> Inviter {
    let owner = Identity::from_seed(&[0x11; 32]);
    let code = DeviceCode {
        v: 3,
        key: owner.public(),
        secret: serde_bytes::ByteArray::new([0x77; 16]),
        expires: u64::MAX,
        addrs: Vec::new(),
    };
    Inviter::new(owner, &code, &[])
}

struct Zero;
impl rand_core::TryRng for Zero {
    type Error = std::convert::Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        Ok(0)
    }
    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        Ok(0)
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        dst.fill(0x42);
        Ok(())
    }
}
impl rand_core::TryCryptoRng for Zero {}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 6 {
        0 => {
            if let Ok(text) = std::str::from_utf8(rest) {
                let _ = DeviceCode::decode(text);
            }
            let digest = Sha256::new()
                .chain_update(b"interlink-p2p/v1/invite-check\0")
                .chain_update(rest)
                .finalize();
            let mut bytes = rest.to_vec();
            bytes.extend_from_slice(&digest[..INVITE_CHECK_BYTES]);
            if let Ok(code) = DeviceCode::decode(&format!(
                "interlink3{}",
                data_encoding::BASE32_NOPAD.encode(&bytes)
            )) {
                assert!(code.peer().is_some());
                assert_eq!(code.direct_addrs().len(), code.addrs.len());
            }
        }
        1 => {
            if let Ok(req) = LinkRequest::decode(rest) {
                let mut inv = inviter();
                let peer = Identity::from_seed(&[0x22; 32])
                    .transport_keypair(&interlink_core::SessionId::new("x").unwrap())
                    .unwrap()
                    .public()
                    .to_peer_id();
                let reply = inv.handle(peer, &req, 0, &mut Zero);
                if let Reply::Respond(r) = reply {
                    assert!(r.sealed.is_none() && r.eph.is_none());
                } else {
                    panic!("a request without the secret was held");
                }
                assert!(inv.comparison().is_none());
            }
        }
        2..=4 => {
            let _ = LinkResponse::decode(rest, which % 6 - 1);
        }
        _ => {
            let _ = DeviceOffer::decode(rest);
        }
    }
});

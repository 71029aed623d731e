//! Fuzzes the invite-code reader: any text must give an invite or a typed error, never
//! a panic; whatever reads has addresses that all parse. The input is also read as the
//! bytes inside a code with its check made right (PROTOCOL.md §4.10), so the fuzzer
//! gets past the check to the wrapper, the map, the address rules and the signature.
#![no_main]

use interlink_core::wire::{INVITE_CHECK_BYTES, INVITE_PREFIX, Invite};
use libfuzzer_sys::fuzz_target;
use sha2::{Digest as _, Sha256};

fn read(text: &str) {
    if let Ok(invite) = Invite::decode(text) {
        assert_eq!(invite.relay_addrs().len(), invite.relays.len());
        assert_eq!(invite.direct_addrs().len(), invite.addrs.len());
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        read(text);
    }
    let digest = Sha256::new()
        .chain_update(b"interlink-p2p/v1/invite-check\0")
        .chain_update(data)
        .finalize();
    let mut bytes = data.to_vec();
    bytes.extend_from_slice(&digest[..INVITE_CHECK_BYTES]);
    read(&format!(
        "{INVITE_PREFIX}{}",
        data_encoding::BASE32_NOPAD.encode(&bytes)
    ));
});

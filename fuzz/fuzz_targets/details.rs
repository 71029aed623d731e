//! Fuzzes what a reader does with an announcement's details (PROTOCOL §4.1, "Details"):
//! sealed details from arbitrary bytes in a fixed announcement — a reader must open
//! them or find nothing, never panic — and arbitrary bytes as the plaintext a wrap
//! opened to, through the details decoder and its rules.
#![no_main]

use interlink_core::{
    Identity, SessionId,
    wire::{Announcement, Details, DetailsReader, SealedDetails, SealingBinding, VERSION},
};
use libfuzzer_sys::fuzz_target;
use serde_bytes::ByteBuf;

fuzz_target!(|data: &[u8]| {
    if let Ok(details) = cbor4ii::serde::from_slice::<Details>(data) {
        let _ = details.check();
    }
    let Ok(sealed) = cbor4ii::serde::from_slice::<SealedDetails>(data) else {
        return;
    };
    let alice = Identity::from_seed(&[0x11; 32]);
    let bob = Identity::from_seed(&[0x22; 32]);
    let ann = Announcement {
        v: VERSION,
        identity: alice.public(),
        sealing: SealingBinding::new(&alice),
        session_id: SessionId::new("session-a").expect("a valid session id"),
        peer_id: ByteBuf::new(),
        addrs: Vec::new(),
        details: sealed,
        heartbeat_ms: 30_000,
        ts: 0,
        seq: 0,
    };
    if let Some(opened) = DetailsReader::new(&bob).open(&ann) {
        assert!(opened.check().is_ok(), "opened details that break their rules");
    }
});

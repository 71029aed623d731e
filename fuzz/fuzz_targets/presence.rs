//! Fuzzes the presence-topic decoder (announcement or goodbye inside a tagged map).
#![no_main]

use interlink_core::wire::PresenceMessage;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = PresenceMessage::decode(data) {
        assert_eq!(
            PresenceMessage::decode(&m.to_bytes()).expect("re-encoded decodes"),
            m
        );
    }
});

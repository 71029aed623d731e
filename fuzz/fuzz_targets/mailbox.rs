//! Fuzzes the mailbox record decoder: any bytes give a mailbox (with per-entry
//! rejections) or a typed error, never a panic; a decoded mailbox re-encodes to bytes
//! that decode to the same mailbox.
#![no_main]

use interlink_core::mailbox::{Config, Mailbox};
use libfuzzer_sys::fuzz_target;

const NOW: u64 = 1_790_000_000_000;

fuzz_target!(|data: &[u8]| {
    let cfg = Config::default();
    if let Ok((mailbox, _rejected)) = Mailbox::decode(data, NOW, &cfg) {
        let bytes = mailbox.encode();
        let (again, rejected) =
            Mailbox::decode(&bytes, NOW, &cfg).expect("re-encoded mailbox decodes");
        assert!(rejected.is_empty());
        assert_eq!(again.encode(), bytes);
    }
});

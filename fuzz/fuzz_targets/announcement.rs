//! Fuzzes the announcement decoder: any bytes must give a verified announcement or a typed error,
//! never a panic; whatever decodes must re-encode to bytes that decode the same.
#![no_main]

use interlink_core::wire::{Announcement, Signed};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = Signed::<Announcement>::decode(data) {
        let again =
            Signed::<Announcement>::decode(&v.to_bytes()).expect("re-encoded announcement decodes");
        assert_eq!(again, v);
    }
});

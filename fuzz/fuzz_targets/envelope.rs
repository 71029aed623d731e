//! Fuzzes the envelope decoder: any bytes must give a verified envelope or a typed error,
//! never a panic; whatever decodes must re-encode to bytes that decode the same.
#![no_main]

use interlink_core::wire::{Envelope, Signed};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = Signed::<Envelope>::decode(data) {
        let again = Signed::<Envelope>::decode(&v.to_bytes()).expect("re-encoded envelope decodes");
        assert_eq!(again, v);
    }
});

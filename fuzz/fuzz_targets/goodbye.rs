//! Fuzzes the goodbye decoder: any bytes must give a verified goodbye or a typed error,
//! never a panic; whatever decodes must re-encode to bytes that decode the same.
#![no_main]

use interlink_core::wire::{Goodbye, Signed};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = Signed::<Goodbye>::decode(data) {
        let again = Signed::<Goodbye>::decode(&v.to_bytes()).expect("re-encoded goodbye decodes");
        assert_eq!(again, v);
    }
});

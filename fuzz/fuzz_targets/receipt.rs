//! Fuzzes the receipt decoder: any bytes must give a verified receipt or a typed error,
//! never a panic; whatever decodes must re-encode to bytes that decode the same.
#![no_main]

use interlink_core::wire::{Receipt, Signed};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = Signed::<Receipt>::decode(data) {
        let again = Signed::<Receipt>::decode(&v.to_bytes()).expect("re-encoded receipt decodes");
        assert_eq!(again, v);
    }
});

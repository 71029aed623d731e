//! Fuzzes the ack decoder: any bytes must give a verified ack or a typed error,
//! never a panic; whatever decodes must re-encode to bytes that decode the same.
#![no_main]

use interlink_core::wire::{Ack, Signed};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = Signed::<Ack>::decode(data) {
        let again = Signed::<Ack>::decode(&v.to_bytes()).expect("re-encoded ack decodes");
        assert_eq!(again, v);
    }
});

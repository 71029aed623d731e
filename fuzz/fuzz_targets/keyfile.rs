//! Fuzzes the key-file parser: any text gives an identity or a reason, never a panic.
#![no_main]

use interlink_store::keyfile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(id) = keyfile::parse(text) {
            let again = keyfile::parse(&keyfile::render(&id)).expect("rendered key parses");
            assert_eq!(again.public(), id.public());
        }
    }
});

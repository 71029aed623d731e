//! Fuzzes the invite-code reader: any text must give an invite or a typed error, never
//! a panic; whatever reads must encode to a code that reads the same.
#![no_main]

use interlink_core::wire::Invite;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(invite) = Invite::decode(text) {
        let again = Invite::decode(&invite.encode()).expect("re-encoded invite reads");
        assert_eq!(again, invite);
    }
});

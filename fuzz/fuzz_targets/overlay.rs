//! Fuzzes the request-response messages of the overlay (roster fetch, live delivery,
//! mailbox protocol, receipts for collected mail) as the CBOR codec decodes them off the
//! wire — the first CBOR item of the stream, found by `item_len`: any bytes give an
//! error or a value that re-encodes to something that decodes to the same value, and
//! the walk never takes an item the decoder takes whole for a prefix of one.
#![no_main]

use interlink_core::wire::{
    item_len, DeliverRequest, DeliverResponse, MailboxFetch, MailboxOp, MailboxRequest, MailboxResponse,
    Receipt, ReceiptRequest, ReceiptResponse, RosterRequest, RosterResponse, Signed,
};
use libfuzzer_sys::fuzz_target;
use serde::{Serialize, de::DeserializeOwned};

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(data: &[u8]) {
    let found = item_len(data);
    // The reader would wait for more bytes forever (until its timeout) on an item the
    // decoder takes whole; refusing one (nested too deep, a simple value the RFC does
    // not allow) is stricter than the decoder and fine.
    if cbor4ii::serde::from_slice::<cbor4ii::core::Value>(data).is_ok() {
        assert!(found != Ok(None), "a decodable item taken for a prefix");
    }
    let Ok(Some(len)) = found else {
        return;
    };
    assert!(len <= data.len());
    let data = &data[..len];
    if let Ok(v) = cbor4ii::serde::from_slice::<T>(data) {
        let bytes = cbor4ii::serde::to_vec(Vec::new(), &v).expect("encodes");
        let back: T = cbor4ii::serde::from_slice(&bytes).expect("re-encoded decodes");
        assert_eq!(back, v);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 8 {
        0 => round_trip::<RosterRequest>(rest),
        1 => round_trip::<RosterResponse>(rest),
        2 => round_trip::<DeliverRequest>(rest),
        3 => round_trip::<DeliverResponse>(rest),
        4 => {
            round_trip::<MailboxRequest>(rest);
            // What a holder does next with a fetch: check the owner's signed request.
            if let Ok(MailboxRequest {
                op: MailboxOp::Fetch { request },
                ..
            }) = cbor4ii::serde::from_slice::<MailboxRequest>(rest)
            {
                let _ = Signed::<MailboxFetch>::check_fetch(&request, b"holder", 1_790_000_000_004);
            }
        }
        5 => round_trip::<MailboxResponse>(rest),
        6 => {
            round_trip::<ReceiptRequest>(rest);
            // What a sender does next: verify the receipt inside.
            if let Ok(req) = cbor4ii::serde::from_slice::<ReceiptRequest>(rest) {
                let _ = Signed::<Receipt>::decode(&req.receipt);
            }
        }
        _ => round_trip::<ReceiptResponse>(rest),
    }
});

use interlink_core::{IdentityKey, MsgId, wire::EnvelopeKind};
use interlink_store::read_state::testing::entry;

use crate::server::testing::harness;

/// Two senders' unread messages under one id: the id is named as shared, and a
/// read receipt goes to the sender whose message was consumed, not to both.
#[test]
fn one_id_from_two_senders_gets_one_read_receipt() {
    let id = MsgId::from_bytes([1; 16]);
    let from = |sender: &str| {
        let mut e = entry(id, EnvelopeKind::Message);
        e.sender = sender.repeat(32);
        e.reply_to = format!("{}#s", sender.repeat(32));
        e
    };
    let unread = vec![from("aa"), from("bb")];
    assert_eq!(
        crate::render::shared_ids(&unread)
            .into_iter()
            .collect::<Vec<_>>(),
        [id.to_string()]
    );
    let bb: IdentityKey = "bb".repeat(32).parse().unwrap();
    let receipts = super::read_receipts_for(&unread, &[(bb, id)]);
    let to: Vec<String> = receipts.iter().map(|r| r.to.key.to_hex()).collect();
    assert_eq!(
        to,
        ["bb".repeat(32)],
        "a read receipt for bb's message only"
    );
}

#[test]
fn a_poisoned_lock_is_recovered_not_skipped() {
    let home = tempfile::tempdir().unwrap();
    let h = harness(home.path(), "s1");
    let state = h.server.ctx.shared_state();
    let holder = state.clone();
    let panicked = std::thread::spawn(move || {
        let _held = holder.lock();
        panic!("a holder panics");
    })
    .join();
    assert!(panicked.is_err());
    // The worker's handle and the context reach the same state, poisoned or not.
    state.lock().summary = "after".into();
    assert_eq!(h.server.ctx.shared().summary, "after");
}

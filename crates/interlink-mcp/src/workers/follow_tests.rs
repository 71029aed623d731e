use super::*;
use crate::server::testing::harness;

fn held(sender: u8, id: u8) -> HeldKnock {
    HeldKnock {
        sender: format!("{sender:02x}").repeat(32),
        sender_fingerprint: String::new(),
        sender_session: "s".into(),
        name: None,
        msg_id: format!("{id:02x}").repeat(16),
        ts: 1,
        invite: None,
    }
}

#[test]
fn a_held_knock_is_decided_once_while_it_is_held() {
    let mut h = Handled::default();
    let (a, b) = (held(1, 1), held(2, 1));
    assert!(
        h.prune(std::slice::from_ref(&a)),
        "a new knock is to be decided"
    );
    h.insert(&a);
    assert!(
        !h.prune(std::slice::from_ref(&a)),
        "then it is not, on every later step"
    );
    assert!(h.prune(&[a.clone(), b.clone()]), "another knock is");
    assert!(h.contains(&a) && !h.contains(&b));
    // A newer knock of the same sender is another knock.
    assert!(h.prune(&[held(1, 2)]));
    // A knock no longer held is forgotten: the set follows the file's bound.
    assert!(!h.contains(&a));
    for i in 0..=u8::try_from(HANDLED_KNOCKS).unwrap_or(u8::MAX) {
        h.insert(&held(i, 9));
    }
    assert_eq!(h.knocks.len(), HANDLED_KNOCKS);
}

#[test]
fn the_follower_gets_the_bound_session() {
    let home = tempfile::tempdir().unwrap();
    let h = harness(home.path(), "s1");
    let ctx = &h.server.ctx;
    let f = Follow::of(ctx, &ctx.bound.get().unwrap());
    assert_eq!(f.dir, h.session_dir);
    assert_eq!(f.home.path(), home.path());
    assert_eq!(f.own, ctx.own().unwrap());
    // Its state handle is the context's state.
    f.state.lock().summary = "seen".into();
    assert_eq!(ctx.shared().summary, "seen");
}

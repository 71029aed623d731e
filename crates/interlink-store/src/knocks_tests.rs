use interlink_core::{Identity, MsgId, SessionId};

use super::*;

#[test]
fn held_knocks_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    assert!(load(dir.path()).is_empty());
    let k = Knock {
        sender: Identity::from_seed(&[1; 32]).public(),
        sender_session: SessionId::new("s").unwrap(),
        name: Some("carol".into()),
        msg_id: MsgId::from_bytes([3; 16]),
        ts: 9,
        recipient: Identity::from_seed(&[2; 32]).public(),
        sealed_invite: None,
    };
    save(dir.path(), &[HeldKnock::from(&k)]).unwrap();
    let back = load(dir.path());
    assert_eq!(back, vec![HeldKnock::from(&k)]);
    assert_eq!(back[0].name.as_deref(), Some("carol"));
}

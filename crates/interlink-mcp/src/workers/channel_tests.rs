use interlink_core::wire::{EnvelopeKind, TaskStatus};

use super::*;

/// A message pushed whose mark failed is not pushed again; once a mark is written
/// it is forgotten (no longer unread); another sender's message with the same id
/// is another message.
#[test]
fn a_pushed_message_whose_mark_failed_is_not_pushed_again() {
    let id = interlink_core::MsgId::from_bytes([1; 16]);
    let a = interlink_store::read_state::testing::entry(id, EnvelopeKind::Message);
    let mut b = a.clone();
    b.sender = "bb".repeat(32);
    let mut pushed = Pushed::default();
    pushed.insert(&a);
    assert!(pushed.contains(&a));
    assert!(!pushed.contains(&b), "(sender, id), not the bare id");
    pushed.marked(&[&a]);
    assert!(!pushed.contains(&a));
    for n in 0..=MAX_PUSHED_UNMARKED {
        let mut e = a.clone();
        e.msg_id = format!("{n:032x}");
        pushed.insert(&e);
    }
    assert_eq!(pushed.0.len(), MAX_PUSHED_UNMARKED, "bounded");
}

#[test]
fn meta_names_the_sender_and_leaves_absent_fields_out() {
    let mut e = InboxEntry {
        msg_id: "0a".repeat(16),
        sender: "aa".repeat(32),
        sender_fingerprint: "0000-0000-0000".into(),
        sender_session: "s1".into(),
        reply_to: format!("{}#s1", "aa".repeat(32)),
        kind: EnvelopeKind::Message,
        task_id: Some("t".into()),
        status: Some(TaskStatus::NeedsInput),
        in_reply_to: None,
        also_about: Vec::new(),
        sent_at: 1,
        received_at: 2,
        text: Some("hi".into()),
        name: None,
        group: None,
    };
    let mut policy = interlink_core::trust::PeerPolicy::new();
    policy.add("alice", e.sender.parse().unwrap()).unwrap();
    let own = interlink_core::Identity::from_seed(&[7; 32]).public();
    let names = render::Names::new(&policy, &own);
    let n = notification(&e, &names);
    assert_eq!(n.method, CHANNEL_METHOD);
    let p = n.params.unwrap();
    let content = p["content"].as_str().unwrap();
    let lines: Vec<&str> = content.lines().collect();
    assert_eq!(lines.len(), 3, "{content}");
    assert!(lines[0].starts_with("<<<msg-"), "{content}");
    assert_eq!(lines[1], "| hi");
    assert_eq!(lines[2], format!("{}>>>", &lines[0][3..]));
    assert_eq!(
        p["meta"],
        json!({
            "sender": "alice", "sender_key": "aa".repeat(32),
            "sender_fingerprint": "0000-0000-0000", "session": "s1",
            "msg_id": "0a".repeat(16), "task_id": "t", "status": "needs_input",
        })
    );
    e.task_id = None;
    e.status = None;
    let empty = interlink_core::trust::PeerPolicy::new();
    let p = notification(&e, &render::Names::new(&empty, &own))
        .params
        .unwrap();
    let mut keys: Vec<&String> = p["meta"].as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        ["msg_id", "sender_fingerprint", "sender_key", "session"]
    );
    // A group message names its group, thread and recipients.
    e.group = Some(interlink_store::inbox::InboxGroup {
        name: "team".into(),
        thread: "ab".repeat(16),
        members: vec![interlink_store::inbox::InboxGroupMember {
            identity_key: own.to_hex(),
            session_id: "b-1".into(),
        }],
    });
    let p = notification(&e, &names).params.unwrap();
    assert_eq!(p["meta"]["group"], "team");
    assert_eq!(p["meta"]["group_thread"], "ab".repeat(16));
    assert_eq!(p["meta"]["group_to"], "self/b-1");
}

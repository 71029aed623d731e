use interlink_core::wire::EnvelopeKind;
use interlink_store::inbox::Inbox;

use super::*;
use crate::{
    read_state::testing::entry,
    server::testing::{harness, text_of},
};

fn id(n: u8) -> MsgId {
    MsgId::from_bytes([n; 16])
}

#[tokio::test]
async fn receive_then_acknowledge_without_a_node() {
    let home = tempfile::tempdir().unwrap();
    let mut h = harness(home.path(), "s1");
    let mut inbox = Inbox::open(
        h.session_dir.path(),
        interlink_net::Clock::system().now_ms(),
    )
    .unwrap();
    for n in 1..=3 {
        inbox
            .append(id(n), &entry(id(n), EnvelopeKind::Message))
            .unwrap();
    }
    // A receipt line is for the agent side, never shown as a message.
    inbox
        .append(id(9), &entry(id(9), EnvelopeKind::Read))
        .unwrap();

    let r = h
        .server
        .receive_messages(Parameters(ReceiveArgs { limit: Some(2) }))
        .await;
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    let v = r.structured_content.clone().unwrap();
    let shown: Vec<&str> = v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["msg_id"].as_str().unwrap())
        .collect();
    assert_eq!(shown, [id(1).to_string(), id(2).to_string()]);
    assert_eq!(
        (v["more"].as_u64(), v["unread"].as_u64()),
        (Some(1), Some(3))
    );
    assert!(text_of(&r).contains("[interlink: 3 unread messages waiting"));

    let r = h
        .server
        .acknowledge_messages(Parameters(AcknowledgeArgs {
            msg_ids: vec![id(1).to_string(), id(1).to_string(), id(7).to_string()],
        }))
        .await;
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    let v = r.structured_content.clone().unwrap();
    assert_eq!(v["acknowledged"], json!([id(1).to_string()]));
    assert_eq!(v["unknown"], json!([id(7).to_string()]));
    assert_eq!(v["unread"].as_u64(), Some(2));
    // The sender is told it was read, through the queue (no network here).
    let receipt = h.receipts.try_recv().unwrap();
    assert_eq!(
        (receipt.msg_id, receipt.kind, receipt.to.session.as_str()),
        (id(1), EnvelopeKind::Read, "s")
    );
    assert!(h.receipts.try_recv().is_err());

    // Acknowledged stays acknowledged; only nothing new is an error.
    let r = h
        .server
        .acknowledge_messages(Parameters(AcknowledgeArgs {
            msg_ids: vec![id(7).to_string()],
        }))
        .await;
    assert_eq!(r.is_error, Some(true));
    assert_eq!(
        r.structured_content.unwrap()["error"],
        json!(format!(
            "acknowledged 0; not in this session's inbox: {}",
            id(7)
        ))
    );
    let r = h
        .server
        .receive_messages(Parameters(ReceiveArgs::default()))
        .await;
    let v = r.structured_content.unwrap();
    assert_eq!(v["messages"].as_array().unwrap().len(), 2);
    assert_eq!(v["more"].as_u64(), Some(0));
}

#[tokio::test]
async fn argument_checks_are_tool_errors() {
    let home = tempfile::tempdir().unwrap();
    let h = harness(home.path(), "s1");
    let r = h
        .server
        .receive_messages(Parameters(ReceiveArgs { limit: Some(0) }))
        .await;
    assert_eq!(r.is_error, Some(true));
    assert_eq!(
        r.structured_content.unwrap()["error"],
        json!("limit must be at least 1")
    );
    let r = h
        .server
        .acknowledge_messages(Parameters(AcknowledgeArgs { msg_ids: vec![] }))
        .await;
    assert_eq!(r.is_error, Some(true));
    let r = h.server.list_pending().await;
    assert_eq!(r.structured_content.unwrap()["pending"], json!([]));
    let r = h
        .server
        .message_status(Parameters(MessageStatusArgs {
            msg_id: id(1).to_string(),
        }))
        .await;
    assert_eq!(r.is_error, Some(true));
    // Without a node, sending says why at once.
    let r = h
        .server
        .send_message(Parameters(SendMessageArgs {
            to: Some("self".into()),
            session: None,
            text: "hi".into(),
            task_id: None,
            status: None,
            in_reply_to: None,
            reply_all: None,
        }))
        .await;
    assert_eq!(r.is_error, Some(true));
    assert_eq!(
        r.structured_content.unwrap()["error"],
        json!(crate::context::UNBOUND)
    );
}

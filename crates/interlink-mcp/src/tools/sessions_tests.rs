use interlink_core::Identity;

use super::*;
use crate::server::testing::harness;

#[tokio::test]
async fn whoami_without_a_node() {
    let home = tempfile::tempdir().unwrap();
    let h = harness(home.path(), "s1");
    let r = h.server.whoami().await;
    assert_ne!(r.is_error, Some(true));
    let key = Identity::from_seed(&[7; 32]).public();
    let v = r.structured_content.unwrap();
    assert_eq!(v["identity_key"], json!(key.to_hex()));
    assert_eq!(v["fingerprint"], json!(key.fingerprint().to_string()));
    assert_eq!(v["session_id"], json!("s1"));
    assert_eq!(v["summary"], json!("testing"));
    assert_eq!(v["delivery"], json!("inbox"));
    assert_eq!(v["node"], json!(crate::context::UNBOUND));
    assert_eq!(v["listen_addrs"], json!([]));
    assert_eq!(v["unread"], json!(0));
    // set_summary needs the node: refused, and the summary stays.
    let r = h
        .server
        .set_summary(Parameters(SetSummaryArgs {
            summary: "other".into(),
        }))
        .await;
    assert_eq!(r.is_error, Some(true));
    assert_eq!(h.server.ctx.shared().summary, "testing");
    drop(h.status);
}

/// A damaged read.json is said in every result — the count unknown, not zero — and
/// the footer says what to do; nothing is taken for "no messages".
#[tokio::test]
async fn a_damaged_read_state_is_said_not_taken_for_no_messages() {
    let home = tempfile::tempdir().unwrap();
    let h = harness(home.path(), "s1");
    let dir = interlink_store::paths::Home::new(home.path())
        .session(&interlink_core::SessionId::new("s1").unwrap())
        .unwrap();
    std::fs::create_dir_all(dir.path()).unwrap();
    std::fs::write(dir.read_state(), b"{not json").unwrap();
    let r = h.server.whoami().await;
    let v = r.structured_content.clone().unwrap();
    assert_eq!(v["unread"], json!(null), "{v}");
    let why = v["read_state_error"].as_str().unwrap_or_default();
    assert!(
        why.contains("read.json") && why.contains("not valid"),
        "{v}"
    );
    let text = crate::server::testing::text_of(&r);
    assert!(text.contains("unread messages cannot be shown"), "{text}");
    drop(h.status);
}

use interlink_core::Identity;

use super::*;
use crate::server::testing::{harness, text_of};

#[tokio::test]
async fn the_tools_edit_the_shared_file() {
    let home = tempfile::tempdir().unwrap();
    let h = harness(home.path(), "s1");
    let bob = Identity::from_seed(&[2; 32]).public();
    crate::peers::add(&h.server.ctx.home, "bob", &bob.to_hex()).unwrap();
    let r = h
        .server
        .group(Parameters(GroupArgs {
            name: Some("team".into()),
            members: vec!["bob/b-1".into()],
            ..GroupArgs::default()
        }))
        .await;
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    assert_eq!(
        text_of(&r).lines().next(),
        Some("created group team: bob/b-1")
    );
    let v = r.structured_content.unwrap();
    assert_eq!(v["members"][0]["sessions"], json!(["b-1"]));
    assert_eq!(v["members"][0]["petname"], "bob");

    // Two actions at once are refused, naming the choices.
    let r = h
        .server
        .group(Parameters(GroupArgs {
            name: Some("team".into()),
            members: vec!["bob".into()],
            delete: true,
            ..GroupArgs::default()
        }))
        .await;
    assert_eq!(r.is_error, Some(true));
    assert!(text_of(&r).contains("one of"), "{}", text_of(&r));

    // A stranger is refused; the group is unchanged.
    let stranger = Identity::from_seed(&[9; 32]).public().to_hex();
    let r = h
        .server
        .group(Parameters(GroupArgs {
            name: Some("team".into()),
            add: vec![stranger],
            ..GroupArgs::default()
        }))
        .await;
    assert_eq!(r.is_error, Some(true));
    assert!(text_of(&r).contains("only peers"), "{}", text_of(&r));

    let r = h.server.group(Parameters(GroupArgs::default())).await;
    let v = r.structured_content.unwrap();
    assert_eq!(v["groups"].as_array().unwrap().len(), 1);
    assert_eq!(v["groups"][0]["name"], "team");

    let r = h
        .server
        .group(Parameters(GroupArgs {
            name: Some("team".into()),
            delete: true,
            ..GroupArgs::default()
        }))
        .await;
    assert_ne!(r.is_error, Some(true), "{}", text_of(&r));
    let r = h.server.group(Parameters(GroupArgs::default())).await;
    assert!(text_of(&r).starts_with("no groups yet"), "{}", text_of(&r));
    // Sending to a group that does not exist says which exist.
    let e = h
        .server
        .send(crate::tools::messaging::SendMessageArgs {
            to: Some("group:team".into()),
            session: None,
            text: "hi".into(),
            task_id: None,
            status: None,
            in_reply_to: None,
            reply_all: None,
        })
        .await
        .unwrap_err();
    assert!(
        e.0.contains("no group is named \"team\"; this user's groups: none"),
        "{}",
        e.0
    );
}

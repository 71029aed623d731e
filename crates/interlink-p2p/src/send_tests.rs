use super::*;

#[test]
fn replies_go_to_the_flag_else_the_shells_session() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    };
    let id = |s: &str| Some(SessionId::new(s).unwrap());
    let both: &[(&str, &str)] = &[
        ("INTERLINK_SESSION", "mine"),
        ("CLAUDE_CODE_SESSION_ID", "claude-1"),
    ];
    assert_eq!(reply_to(Some("flag"), env(both)).unwrap(), id("flag"));
    assert_eq!(reply_to(None, env(both)).unwrap(), id("mine"));
    assert_eq!(
        reply_to(None, env(&[("CLAUDE_CODE_SESSION_ID", "claude-1")])).unwrap(),
        id("claude-1")
    );
    assert_eq!(reply_to(None, env(&[])).unwrap(), None);
    // A bad flag is an error; a bad environment value is passed over.
    assert!(reply_to(Some("a b"), env(&[])).is_err());
    assert_eq!(
        reply_to(
            None,
            env(&[
                ("INTERLINK_SESSION", "a b"),
                ("CLAUDE_CODE_SESSION_ID", "c")
            ])
        )
        .unwrap(),
        id("c")
    );
}

#[test]
fn statuses() {
    assert_eq!(parse_status("needs_input"), Ok(TaskStatus::NeedsInput));
    assert_eq!(parse_status("result"), Ok(TaskStatus::Result));
    assert!(parse_status("done").unwrap_err().contains("needs_input"));
}

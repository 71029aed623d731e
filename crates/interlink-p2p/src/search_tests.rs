use super::*;

#[test]
fn ages_parse_with_their_units() {
    assert_eq!(parse_age("90s"), Ok(90_000));
    assert_eq!(parse_age("30m"), Ok(1_800_000));
    assert_eq!(parse_age("2h"), Ok(7_200_000));
    assert_eq!(parse_age("7d"), Ok(604_800_000));
    assert!(parse_age("7").is_err());
    assert!(parse_age("d").is_err());
    assert!(parse_age("3w").is_err());
}

#[test]
fn a_line_shows_peer_text_escaped_on_one_line() {
    let m = Message {
        session: "s1".into(),
        direction: Direction::In,
        peer: "ab".repeat(32),
        peer_name: Some("bob".into()),
        peer_session: "s2".into(),
        own: false,
        id: "00".repeat(16),
        task_id: None,
        status: None,
        in_reply_to: None,
        group: None,
        thread: None,
        text: "done\u{1b}[2J\nsecond line".into(),
        at: 1_765_000_000_000,
        state: "received",
        held_by: None,
        consumed: None,
    };
    let l = line(&m);
    assert!(
        l.ends_with("s1 <- bob/s2 [received] done\\u{1b}[2J…"),
        "{l}"
    );
    assert!(!l.contains('\n') && !l.contains('\u{1b}'));
}

use super::*;

#[test]
fn names_the_sessions_that_have_the_file_and_says_so_when_none() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());
    assert_eq!(
        named(&home, Some("inbox.jsonl"), "an inbox"),
        "no session of this home has an inbox"
    );
    for id in ["a-1", "b-2"] {
        let d = dir.path().join("sessions").join(id);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("inbox.jsonl"), "").unwrap();
    }
    std::fs::create_dir_all(dir.path().join("sessions").join("c-3")).unwrap();
    let text = named(&home, Some("inbox.jsonl"), "an inbox");
    assert!(
        text.starts_with("sessions with an inbox, most recent first: "),
        "{text}"
    );
    assert!(
        text.contains("a-1") && text.contains("b-2") && !text.contains("c-3"),
        "{text}"
    );
    for n in 0..MAX_NAMED + 2 {
        std::fs::create_dir_all(dir.path().join("sessions").join(format!("s-{n}"))).unwrap();
    }
    let all = named(&home, None, "a state directory");
    assert!(all.ends_with(&format!("(and {} more)", 3 + 2)), "{all}");
}

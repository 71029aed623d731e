use super::*;

#[test]
fn our_wait_command_is_recognised_by_program_name() {
    let shell = |c: &str| json!({"type": "command", "command": c});
    assert!(is_our_wait(&shell("interlink-p2p wait")));
    assert!(is_our_wait(&shell(
        "/home/u/.cargo/bin/interlink-p2p wait --timeout 5"
    )));
    assert!(is_our_wait(&shell("'/Users/a b/bin/interlink-p2p' wait")));
    assert!(!is_our_wait(&shell("other wait")));
    assert!(!is_our_wait(&shell("interlink-p2p mcp")));
    assert!(!is_our_wait(&shell("'unterminated wait")));
    let exec = |c: &str, a: &str| json!({"type": "command", "command": c, "args": [a]});
    assert!(is_our_wait(&exec(
        r"C:\Users\a b\AppData\Local\interlink-p2p\bin\interlink-p2p.exe",
        "wait"
    )));
    assert!(!is_our_wait(&exec("interlink-p2p", "mcp")));
    assert!(!is_our_wait(&json!({"type": "mcp_tool", "tool": "wait"})));
}

#[test]
fn the_wait_hook_survives_a_path_with_spaces_and_quotes() {
    assert_eq!(
        shell_quoted("/home/u/bin/interlink-p2p"),
        "/home/u/bin/interlink-p2p"
    );
    assert_eq!(shell_quoted("/Users/a b/x"), "'/Users/a b/x'");
    assert_eq!(shell_quoted("/it's"), r"'/it'\''s'");
    let hook = wait_hook("/Users/a b/interlink-p2p");
    assert!(is_our_wait(&hook), "{hook}");
    if cfg!(windows) {
        assert_eq!(hook["args"], json!(["wait"]));
    } else {
        assert_eq!(hook["command"], "'/Users/a b/interlink-p2p' wait");
    }
}

#[test]
fn the_delivery_note_names_the_path_sessions_will_take() {
    let none = serde_json::Value::Null;
    let note = delivery_note(Some("2.1.332"), &none);
    assert!(
        note.contains("2.1.332 sessions get messages through their own inbox socket"),
        "{note}"
    );
    let note = delivery_note(Some("2.1.223"), &none);
    assert!(
        note.contains("has no inbox socket (it needs 2.1.224)"),
        "{note}"
    );
    let held = serde_json::json!({"crossSessionInbound": "hold"});
    let note = delivery_note(Some("2.1.332"), &held);
    assert!(
        note.contains("crossSessionInbound is \"hold\"") && note.contains("Stop hook"),
        "{note}"
    );
    let note = delivery_note(None, &none);
    assert!(note.contains("not found on PATH"), "{note}");
    assert!(delivery_note(Some("garbage"), &none).contains("not found"));
}

/// The PreToolUse claims hook goes in a group of its own matching the edit tools, next
/// to the user's own PreToolUse hooks; installing again changes nothing; uninstalling
/// removes ours and keeps theirs.
#[test]
fn the_claims_hook_matches_the_edit_tools_and_keeps_the_users_hooks() {
    let theirs = json!({"matcher": "Bash", "hooks": [{"type": "command", "command": "audit.sh"}]});
    let mut doc = json!({"hooks": {"PreToolUse": [theirs.clone()]}})
        .as_object()
        .unwrap()
        .clone();
    let notes = claims_hook(&mut doc, "/Users/a b/interlink-p2p", Action::Install).unwrap();
    assert_eq!(notes.len(), 1, "{notes:?}");
    let groups = doc["hooks"]["PreToolUse"].as_array().unwrap().clone();
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[0], theirs);
    assert_eq!(groups[1]["matcher"], EDIT_TOOLS);
    let ours = &groups[1]["hooks"][0];
    assert!(is_our_claims_hook(ours), "{ours}");
    if !cfg!(windows) {
        assert_eq!(ours["command"], "'/Users/a b/interlink-p2p' claims hook");
    }
    assert!(!is_our_claims_hook(&theirs["hooks"][0]));
    assert!(
        claims_hook(&mut doc, "/Users/a b/interlink-p2p", Action::Install)
            .unwrap()
            .is_empty()
    );
    let notes = claims_hook(&mut doc, "/x/interlink-p2p", Action::Uninstall).unwrap();
    assert_eq!(notes, ["removed the PreToolUse claims hook"]);
    assert_eq!(doc["hooks"]["PreToolUse"], json!([theirs]));
}

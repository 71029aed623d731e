use super::*;

#[test]
fn codex_edits_are_idempotent_and_reversible() {
    let original = "# my settings\nmodel = \"o3\"\n\n[mcp_servers.other]\ncommand = \"x\"\n";
    let mut doc: DocumentMut = original.parse().unwrap();
    let notes = edit(&mut doc, "/bin/interlink-p2p", Action::Install).unwrap();
    assert_eq!(notes.len(), 2 + CODEX_HOOK_EVENTS.len(), "{notes:?}");
    let installed = doc.to_string();
    assert!(installed.contains("# my settings"), "{installed}");
    assert!(installed.contains("[mcp_servers.other]"), "{installed}");
    assert!(
        installed.contains("thread_id = \"${session_id}\", cwd = \"${cwd}\""),
        "{installed}"
    );
    assert!(
        installed.contains("matcher = \"^mcp__interlink__\""),
        "{installed}"
    );
    let vars = doc["mcp_servers"]["interlink"]["env_vars"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect::<Vec<_>>();
    assert_eq!(vars, CODEX_ENV_VARS);
    let mut again: DocumentMut = installed.parse().unwrap();
    assert!(
        edit(&mut again, "/bin/interlink-p2p", Action::Install)
            .unwrap()
            .is_empty()
    );
    let notes = edit(&mut again, "/bin/interlink-p2p", Action::Uninstall).unwrap();
    assert_eq!(notes.len(), 2 + CODEX_HOOK_EVENTS.len(), "{notes:?}");
    let removed = again.to_string();
    assert!(!removed.contains("interlink"), "{removed}");
    assert!(removed.contains("[mcp_servers.other]") && removed.contains("# my settings"));
}

#[test]
fn codex_install_drops_the_stop_hook_of_an_older_install() {
    let mut doc: DocumentMut = "".parse().unwrap();
    edit(&mut doc, "/bin/interlink-p2p", Action::Install).unwrap();
    // What an older install added, next to a Stop hook of the user's own.
    let older = format!(
        "{doc}\n[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ntype = \"command\"\n\
             command = \"notify-send done\"\n\n[[hooks.Stop]]\n[[hooks.Stop.hooks]]\n\
             type = \"mcp_tool\"\nserver = \"interlink\"\ntool = \"bind_codex_session\"\n"
    );
    let mut doc: DocumentMut = older.parse().unwrap();
    let notes = edit(&mut doc, "/bin/interlink-p2p", Action::Install).unwrap();
    assert_eq!(
        notes,
        ["removed the Stop hook calling bind_codex_session"],
        "{doc}"
    );
    let stop = doc["hooks"]["Stop"].as_array_of_tables().unwrap();
    assert_eq!(stop.len(), 1, "{doc}");
    assert!(doc.to_string().contains("notify-send done"), "{doc}");
    // And uninstall removes it too.
    let mut doc: DocumentMut = older.parse().unwrap();
    let notes = edit(&mut doc, "/bin/interlink-p2p", Action::Uninstall).unwrap();
    assert!(
        notes.contains(&"removed the Stop hook calling bind_codex_session".to_owned()),
        "{notes:?}"
    );
    assert!(!doc.to_string().contains("bind_codex_session"), "{doc}");
}

#[test]
fn codex_update_keeps_the_users_own_keys_in_our_entry() {
    // An entry from an older install (no env_vars) that the user tuned.
    let original = "[mcp_servers.interlink]\ncommand = \"/old/interlink-p2p\"\n\
            args = [\"mcp\", \"--host\", \"codex\"]\nstartup_timeout_sec = 30\n\
            env_vars = [\"MY_VAR\", \"INTERLINK_HOME\"]\n";
    let mut doc: DocumentMut = original.parse().unwrap();
    let notes = edit(&mut doc, "/new/interlink-p2p", Action::Install).unwrap();
    assert!(
        notes[0].starts_with("updated [mcp_servers.interlink]"),
        "{notes:?}"
    );
    let server = &doc["mcp_servers"]["interlink"];
    assert_eq!(server["command"].as_str(), Some("/new/interlink-p2p"));
    assert_eq!(server["startup_timeout_sec"].as_integer(), Some(30));
    let vars = server["env_vars"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect::<Vec<_>>();
    assert_eq!(&vars[..2], ["MY_VAR", "INTERLINK_HOME"]);
    assert!(CODEX_ENV_VARS.iter().all(|v| vars.contains(v)), "{vars:?}");
    assert_eq!(
        vars.len(),
        CODEX_ENV_VARS.len() + 1,
        "no duplicates: {vars:?}"
    );

    // An inline-table entry is updated in place too.
    let mut doc: DocumentMut = "mcp_servers.interlink = { command = \"x\", args = [] }\n"
        .parse()
        .unwrap();
    edit(&mut doc, "/bin/interlink-p2p", Action::Install).unwrap();
    let again = doc.to_string();
    let mut reparsed: DocumentMut = again.parse().unwrap();
    assert!(
        edit(&mut reparsed, "/bin/interlink-p2p", Action::Install)
            .unwrap()
            .is_empty(),
        "{again}"
    );
}

/// The claims hook on `apply_patch` sits in a group of its own next to the user's own
/// PreToolUse hooks and our bind hook; a moved binary updates it in place of adding a
/// second; uninstall removes it alone.
#[test]
fn codex_claims_hook_is_added_updated_and_removed() {
    let theirs = "[[hooks.PreToolUse]]\nmatcher = \"^Bash$\"\n[[hooks.PreToolUse.hooks]]\n\
                  type = \"command\"\ncommand = \"audit.sh\"\n";
    let mut doc: DocumentMut = theirs.parse().unwrap();
    let notes = edit(&mut doc, "/opt/my tools/interlink-p2p", Action::Install).unwrap();
    assert!(
        notes.contains(
            &"added the PreToolUse hook on apply_patch: `claims hook` (claims on files)".to_owned()
        ),
        "{notes:?}"
    );
    let claims_groups = |doc: &DocumentMut| -> Vec<(String, String)> {
        doc["hooks"]["PreToolUse"]
            .as_array_of_tables()
            .unwrap()
            .iter()
            .filter(|g| g.get("matcher").and_then(Item::as_str) == Some(CODEX_EDIT_MATCHER))
            .map(|g| {
                let h = &g["hooks"].as_array_of_tables().unwrap().get(0).unwrap();
                (
                    h["type"].as_str().unwrap().to_owned(),
                    h["command"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let expected = if cfg!(windows) {
        "\"/opt/my tools/interlink-p2p\" claims hook"
    } else {
        "'/opt/my tools/interlink-p2p' claims hook"
    };
    assert_eq!(
        claims_groups(&doc),
        [("command".to_owned(), expected.to_owned())]
    );
    // Three PreToolUse groups: the user's, our bind hook, the claims hook.
    assert_eq!(
        doc["hooks"]["PreToolUse"]
            .as_array_of_tables()
            .unwrap()
            .len(),
        3
    );

    let mut moved: DocumentMut = doc.to_string().parse().unwrap();
    let notes = edit(&mut moved, "/usr/bin/interlink-p2p", Action::Install).unwrap();
    assert!(
        notes.contains(&"updated the PreToolUse claims hook on apply_patch".to_owned()),
        "{notes:?}"
    );
    assert_eq!(claims_groups(&moved).len(), 1, "{moved}");
    assert!(
        claims_groups(&moved)[0]
            .1
            .trim_start_matches('"')
            .starts_with("/usr/bin/interlink-p2p"),
        "quoted on Windows, bare on Unix: {moved}"
    );

    let notes = edit(&mut moved, "/usr/bin/interlink-p2p", Action::Uninstall).unwrap();
    assert!(
        notes.contains(&"removed the PreToolUse claims hook on apply_patch".to_owned()),
        "{notes:?}"
    );
    let left = moved.to_string();
    assert!(
        left.contains("audit.sh") && !left.contains("claims hook"),
        "{left}"
    );
}

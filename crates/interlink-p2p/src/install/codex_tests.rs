use super::*;

#[test]
fn codex_edits_are_idempotent_and_reversible() {
    let original = "# my settings\nmodel = \"o3\"\n\n[mcp_servers.other]\ncommand = \"x\"\n";
    let mut doc: DocumentMut = original.parse().unwrap();
    let notes = edit(&mut doc, "/bin/interlink-p2p", Action::Install).unwrap();
    assert_eq!(notes.len(), 1 + CODEX_HOOK_EVENTS.len(), "{notes:?}");
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
    assert_eq!(notes.len(), 1 + CODEX_HOOK_EVENTS.len(), "{notes:?}");
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

//! `interlink-p2p install` / `uninstall` against a throwaway HOME (and CODEX_HOME):
//! the entries are added once, running it again changes nothing, `--dry-run` writes
//! nothing, the user's other entries survive, and uninstall removes only ours.
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{path::Path, process::Command};

use interlink_e2e::binary;
use interlink_p2p::install::CODEX_ENV_VARS;
use serde_json::{Value, json};

/// `interlink-p2p` with a throwaway HOME and CODEX_HOME; `CLAUDE_CONFIG_DIR` is
/// removed so a developer's own setting never points it at their real config.
fn command(home: &Path, codex_home: &Path) -> Command {
    let mut c = Command::new(binary("interlink-p2p").unwrap());
    c.env_remove("INTERLINK_HOME")
        .env_remove("CLAUDE_CONFIG_DIR")
        .env("HOME", home)
        .env("CODEX_HOME", codex_home);
    c
}

fn p2p(home: &Path, codex_home: &Path, args: &[&str]) -> String {
    let out = command(home, codex_home).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn json_file(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn claude_install_is_idempotent_keeps_other_entries_and_uninstalls() {
    let home = tempfile::tempdir().unwrap();
    let codex = tempfile::tempdir().unwrap();
    let h = home.path();
    let claude_json = h.join(".claude.json");
    let settings = h.join(".claude").join("settings.json");
    std::fs::create_dir_all(h.join(".claude")).unwrap();
    std::fs::write(
        &claude_json,
        r#"{"numStartups": 3, "mcpServers": {"other": {"command": "x"}}}"#,
    )
    .unwrap();
    std::fs::write(
        &settings,
        // With the SessionEnd hook an earlier version installed (Claude Code runs no
        // mcp_tool hook there and says so on every `claude mcp list`): install removes it.
        r#"{"model": "opus", "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}], "SessionEnd": [{"hooks": [{"type": "mcp_tool", "server": "interlink", "tool": "end_session", "input": {}}]}]}}"#,
    )
    .unwrap();
    let cmd = "/opt/bin/interlink-p2p";

    let dry = p2p(
        h,
        codex.path(),
        &["install", "claude", "--dry-run", "--command", cmd],
    );
    assert!(dry.contains("would change"), "{dry}");
    assert!(
        !std::fs::read_to_string(&claude_json)
            .unwrap()
            .contains("interlink")
    );

    let out = p2p(h, codex.path(), &["install", "claude", "--command", cmd]);
    assert!(out.contains("added mcpServers.interlink"), "{out}");
    assert!(out.contains("added the Stop hook"), "{out}");
    let c = json_file(&claude_json);
    assert_eq!(c["numStartups"], 3);
    assert_eq!(c["mcpServers"]["other"]["command"], "x");
    assert_eq!(c["mcpServers"]["interlink"]["command"], cmd);
    assert_eq!(c["mcpServers"]["interlink"]["args"], json!(["mcp"]));
    let s = json_file(&settings);
    assert_eq!(s["model"], "opus");
    let stop = s["hooks"]["Stop"].as_array().unwrap();
    assert_eq!(stop.len(), 2, "{s}");
    let ours = &stop[1]["hooks"][0];
    assert_eq!(ours["command"], format!("{cmd} wait"));
    assert_eq!(
        (&ours["async"], &ours["asyncRewake"]),
        (&json!(true), &json!(true))
    );

    // The conversation hook: SessionStart binds the server to the conversation
    // (/clear, resume), an mcp_tool hook on our server; no SessionEnd hook is left.
    let hook = &s["hooks"]["SessionStart"][0]["hooks"][0];
    assert_eq!(
        (&hook["type"], &hook["server"], &hook["tool"]),
        (
            &json!("mcp_tool"),
            &json!("interlink"),
            &json!("bind_session")
        ),
        "{s}"
    );
    assert_eq!(hook["input"]["session_id"], "${session_id}");
    assert_eq!(hook["input"]["source"], "${source}");
    assert!(s["hooks"].get("SessionEnd").is_none(), "{s}");
    assert!(out.contains("removed the SessionEnd hook"), "{out}");

    let again = p2p(h, codex.path(), &["install", "claude", "--command", cmd]);
    assert_eq!(again.matches("unchanged").count(), 2, "{again}");

    let out = p2p(h, codex.path(), &["uninstall", "claude"]);
    assert!(out.contains("removed mcpServers.interlink"), "{out}");
    let c = json_file(&claude_json);
    assert_eq!(c["mcpServers"], json!({"other": {"command": "x"}}));
    let s = json_file(&settings);
    assert_eq!(
        s["hooks"]["Stop"],
        json!([{"hooks": [{"type": "command", "command": "notify-send done"}]}])
    );
    // The conversation hooks leave with their events (nothing else was in them).
    assert_eq!(
        s["hooks"].as_object().unwrap().keys().collect::<Vec<_>>(),
        vec!["Stop"],
        "{s}"
    );
    assert!(
        out.contains("removed the SessionStart hook calling bind_session"),
        "{out}"
    );
    let again = p2p(h, codex.path(), &["uninstall", "claude"]);
    assert_eq!(again.matches("unchanged").count(), 2, "{again}");
}

#[test]
fn codex_install_writes_the_server_and_bind_hooks_under_codex_home() {
    let home = tempfile::tempdir().unwrap();
    let codex = tempfile::tempdir().unwrap();
    let config = codex.path().join("config.toml");
    let original = "# keep me\nmodel = \"o3\"\n\n[mcp_servers.other]\ncommand = \"x\"\n";
    std::fs::write(&config, original).unwrap();
    let cmd = "/opt/bin/interlink-p2p";

    let out = p2p(
        home.path(),
        codex.path(),
        &["install", "codex", "--command", cmd],
    );
    assert!(out.contains("added [mcp_servers.interlink]"), "{out}");
    for event in ["SessionStart", "UserPromptSubmit", "PreToolUse"] {
        assert!(out.contains(&format!("added the {event} hook")), "{out}");
    }
    // No Stop hook: Codex takes its result for Stop hook JSON and reports a failure.
    assert!(!out.contains("Stop"), "{out}");
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.starts_with("# keep me"), "{text}");
    assert!(text.contains("[mcp_servers.other]"), "{text}");
    assert!(
        text.contains("args = [\"mcp\", \"--host\", \"codex\"]"),
        "{text}"
    );
    assert!(text.contains("tool = \"bind_codex_session\""), "{text}");
    for var in CODEX_ENV_VARS {
        assert!(
            text.contains(&format!("\"{var}\"")),
            "env_vars lacks {var}: {text}"
        );
    }
    assert!(out.contains("only after you trust them"), "{out}");
    assert!(text.contains("thread_id = \"${session_id}\""), "{text}");
    assert!(
        !home.path().join(".codex").exists(),
        "CODEX_HOME is honoured"
    );

    let again = p2p(
        home.path(),
        codex.path(),
        &["install", "codex", "--command", cmd],
    );
    assert!(again.contains("unchanged"), "{again}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), text);

    let out = p2p(
        home.path(),
        codex.path(),
        &["uninstall", "codex", "--dry-run"],
    );
    assert!(out.contains("would change"), "{out}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), text);
    p2p(home.path(), codex.path(), &["uninstall", "codex"]);
    let after = std::fs::read_to_string(&config).unwrap();
    assert!(!after.contains("interlink"), "{after}");
    assert!(
        after.contains("# keep me") && after.contains("[mcp_servers.other]"),
        "{after}"
    );
}

#[test]
fn a_malformed_config_is_refused_not_overwritten() {
    let home = tempfile::tempdir().unwrap();
    let codex = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join(".claude.json"), "{not json").unwrap();
    let out = command(home.path(), codex.path())
        .args(["install", "claude"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not valid JSON"));
    assert_eq!(
        std::fs::read_to_string(home.path().join(".claude.json")).unwrap(),
        "{not json"
    );
}

#[test]
fn claude_config_dir_is_where_claude_entries_go() {
    let home = tempfile::tempdir().unwrap();
    let codex = tempfile::tempdir().unwrap();
    let dir = home.path().join("claude-config");
    let cmd = "/opt/bin/interlink-p2p";
    let out = command(home.path(), codex.path())
        .env("CLAUDE_CONFIG_DIR", &dir)
        .args(["install", "claude", "--command", cmd])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let c = json_file(&dir.join(".claude.json"));
    assert_eq!(c["mcpServers"]["interlink"]["command"], cmd);
    let s = json_file(&dir.join("settings.json"));
    assert_eq!(
        s["hooks"]["Stop"][0]["hooks"][0]["command"],
        format!("{cmd} wait")
    );
    assert!(!home.path().join(".claude.json").exists());
    assert!(!home.path().join(".claude").exists());
}

/// Every file under `dir`, relative, sorted.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            out.push(p.strip_prefix(dir).unwrap().display().to_string());
            if p.is_dir() {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn install_from_a_build_tree_registers_a_stable_copy_and_uninstall_leaves_nothing() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let codex = h.join(".codex");
    let built = std::fs::canonicalize(binary("interlink-p2p").unwrap()).unwrap();
    let copy = h.join(".local/share/interlink-p2p/bin/interlink-p2p");
    let p2p = |args: &[&str]| {
        let out = command(h, &codex)
            .env_remove("XDG_DATA_HOME")
            .args(args)
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };

    let out = p2p(&["install", "claude", "--dry-run"]);
    assert!(out.contains("would copy"), "{out}");
    assert!(tree(h).is_empty(), "a dry run wrote {:?}", tree(h));

    let out = p2p(&["install", "claude"]);
    assert!(
        out.contains(&format!("{}: copied {}", copy.display(), built.display())),
        "install says what it did: {out}"
    );
    let build_dir = built.parent().unwrap().parent().unwrap().to_str().unwrap();
    for file in [h.join(".claude.json"), h.join(".claude/settings.json")] {
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            !text.contains(build_dir),
            "{} runs the build tree: {text}",
            file.display()
        );
    }
    let c = json_file(&h.join(".claude.json"));
    assert_eq!(
        c["mcpServers"]["interlink"]["command"],
        copy.to_str().unwrap()
    );
    let s = json_file(&h.join(".claude/settings.json"));
    assert_eq!(
        s["hooks"]["Stop"][0]["hooks"][0]["command"],
        format!("{} wait", copy.display())
    );
    let version = Command::new(&copy).arg("--version").output().unwrap();
    assert!(version.status.success(), "the copy runs");
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        std::fs::read(&built).unwrap()
    );

    let again = p2p(&["install", "claude"]);
    assert_eq!(again.matches("unchanged").count(), 3, "{again}");

    // Both hosts run the one copy; it stays until the last uninstall.
    p2p(&["install", "codex"]);
    let out = p2p(&["uninstall", "claude"]);
    assert!(out.contains("kept"), "{out}");
    assert!(copy.exists());
    let out = p2p(&["uninstall", "codex"]);
    assert!(
        out.contains(&format!("{}: removed", copy.display())),
        "{out}"
    );
    assert!(
        tree(h).is_empty(),
        "uninstall left what install made: {:?}",
        tree(h)
    );
}

#[test]
fn uninstall_keeps_a_users_other_settings_and_drops_only_emptied_containers() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let codex = h.join(".codex");
    std::fs::create_dir_all(h.join(".claude")).unwrap();
    std::fs::write(h.join(".claude/settings.json"), r#"{"model": "opus"}"#).unwrap();
    let cmd = "/opt/bin/interlink-p2p";
    p2p(h, &codex, &["install", "claude", "--command", cmd]);
    p2p(h, &codex, &["uninstall", "claude"]);
    assert_eq!(
        json_file(&h.join(".claude/settings.json")),
        json!({"model": "opus"})
    );
    assert!(
        !h.join(".claude.json").exists(),
        "install made it; nothing is left in it"
    );
}

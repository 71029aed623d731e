// They run git, which the Windows test run (Wine) does not have.
#![cfg(unix)]

use std::path::Path;

use interlink_store::claims::{ViewClaim, write_board};

use super::*;

/// A repository with `src/api/auth.rs` and `README.md`; `None` without git.
pub(crate) fn repo(root: &Path) -> Option<std::path::PathBuf> {
    interlink_testkit::git::available().then(|| {
        interlink_testkit::git::repo(
            &root.join("repo"),
            &[("src/api/auth.rs", "fn login() {}\n"), ("README.md", "r\n")],
        )
    })
}

pub(crate) use interlink_testkit::git::git;

/// Alice's key, as a board view spells it.
pub(crate) fn alice_key() -> String {
    interlink_core::Identity::from_seed(&[3; 32])
        .public()
        .to_hex()
}

/// A held exclusive claim of `key`'s `session` on `pattern`, made at 9,000,000 ms for
/// an hour (the tests' `now` is 10,000,000).
pub(crate) fn held(key: &str, session: &str, pattern: &str) -> ViewClaim {
    ViewClaim {
        key: key.into(),
        session: session.into(),
        name: Some("alice".into()),
        pattern: pattern.into(),
        exclusive: true,
        reason: "moving auth to v2".into(),
        since: 9_000_000,
        until: 9_000_000 + 3_600_000,
        held: true,
        waits_behind: None,
    }
}

/// Writes a running session's board of the project of `repo` into `home`.
pub(crate) fn board(home: &Home, repo: &Path, claims: Vec<ViewClaim>, now: u64) {
    let project = interlink_mcp::cli::claims::project_of(repo).unwrap();
    let dir = home
        .session(&interlink_core::SessionId::new("writer").unwrap())
        .unwrap();
    std::fs::create_dir_all(dir.path()).unwrap();
    let mut view = BoardView::new(
        project.id.to_hex(),
        project.root.to_string_lossy().into_owned(),
        "k".into(),
        "writer".into(),
        now,
    );
    view.claims = claims;
    write_board(&dir, &view).unwrap();
}

#[test]
fn the_edit_hook_warns_blocks_or_stays_quiet() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(repo) = repo(tmp.path()) else { return };
    let home = Home::new(tmp.path().join("home"));
    std::fs::create_dir_all(home.path()).unwrap();
    let now = 10_000_000;
    board(
        &home,
        &repo,
        vec![held(&alice_key(), "cl-a", "src/api/**")],
        now,
    );
    let input = |file: &str, session: &str| {
        json!({
            "session_id": session,
            "cwd": repo,
            "hook_event_name": "PreToolUse",
            "tool_name": "Edit",
            "tool_input": {"file_path": file, "old_string": "a", "new_string": "b"},
        })
        .to_string()
    };
    let auth = repo.join("src/api/auth.rs").to_string_lossy().into_owned();
    let warn = edit_hook(&home, &input(&auth, "cl-b"), HookMode::Warn, now).unwrap();
    let warn: Value = serde_json::from_str(&warn).unwrap();
    let context = warn["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    assert!(
        context.contains("src/api/auth.rs is claimed: alice's session cl-a holds src/api/**"),
        "{context}"
    );
    assert!(warn["hookSpecificOutput"]["permissionDecision"].is_null());
    let block = edit_hook(&home, &input(&auth, "cl-b"), HookMode::Block, now).unwrap();
    let block: Value = serde_json::from_str(&block).unwrap();
    assert_eq!(block["hookSpecificOutput"]["permissionDecision"], "deny");
    assert!(
        block["hookSpecificOutput"]["permissionDecisionReason"]
            .as_str()
            .unwrap()
            .contains("cl-a")
    );
    // A relative path from the hook's cwd, and a file not written yet, are the same.
    assert!(edit_hook(&home, &input("src/api/new.rs", "cl-b"), HookMode::Warn, now).is_some());
    // Free files, the mode off, a stale board and input that is no edit: nothing.
    let readme = repo.join("README.md").to_string_lossy().into_owned();
    assert_eq!(
        edit_hook(&home, &input(&readme, "cl-b"), HookMode::Block, now),
        None
    );
    assert_eq!(
        edit_hook(&home, &input(&auth, "cl-b"), HookMode::Off, now),
        None
    );
    assert_eq!(
        edit_hook(&home, &input(&auth, "cl-b"), HookMode::Block, now + 60_000),
        None
    );
    assert_eq!(edit_hook(&home, "not json", HookMode::Block, now), None);
    assert_eq!(
        edit_hook(
            &home,
            &json!({"tool_input": {"command": "ls"}}).to_string(),
            HookMode::Block,
            now
        ),
        None
    );
    assert!(HookMode::from_setting(Some("nope".into())).is_err());
    assert_eq!(HookMode::from_setting(None).unwrap(), HookMode::Warn);
}

/// Codex's `apply_patch`: the files its patch names (relative to the hook's cwd) are
/// checked, each one, and a patch of free files alone says nothing.
#[test]
fn the_edit_hook_reads_the_files_of_a_codex_patch() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(repo) = repo(tmp.path()) else { return };
    let home = Home::new(tmp.path().join("home"));
    std::fs::create_dir_all(home.path()).unwrap();
    let now = 10_000_000;
    board(
        &home,
        &repo,
        vec![held(&alice_key(), "cl-a", "src/api/**")],
        now,
    );
    let patch = |body: &str| {
        json!({
            "session_id": "thread-b",
            "cwd": repo,
            "hook_event_name": "PreToolUse",
            "tool_name": "apply_patch",
            "tool_input": {"command": format!("*** Begin Patch\n{body}*** End Patch\n")},
        })
        .to_string()
    };
    let both = patch(
        "*** Update File: README.md\n@@\n-r\n+s\n*** Add File: src/api/v2.rs\n+fn v2() {}\n\
         *** Update File: docs/old.md\n*** Move to: src/api/moved.md\n@@\n-a\n+b\n",
    );
    let out = edit_hook(&home, &both, HookMode::Block, now).unwrap();
    let out: Value = serde_json::from_str(&out).unwrap();
    let reason = out["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap();
    assert!(
        reason.contains("src/api/v2.rs is claimed: alice's session cl-a"),
        "{reason}"
    );
    assert!(reason.contains("src/api/moved.md is claimed"), "{reason}");
    assert!(!reason.contains("README.md"), "{reason}");
    let free = patch("*** Update File: README.md\n@@\n-r\n+s\n*** Delete File: docs/x.md\n");
    assert_eq!(edit_hook(&home, &free, HookMode::Block, now), None);
    // Another tool's `command` (a shell command) is no patch.
    let shell = json!({"cwd": repo, "tool_name": "Bash",
        "tool_input": {"command": "*** Update File: src/api/auth.rs"}});
    assert_eq!(
        edit_hook(&home, &shell.to_string(), HookMode::Block, now),
        None
    );
}

/// The holder's own edits go through: the hook's session is the claim's.
#[test]
fn the_holder_edits_freely() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(repo) = repo(tmp.path()) else { return };
    let home = Home::new(tmp.path().join("home"));
    std::fs::create_dir_all(home.path()).unwrap();
    let (identity, _) = crate::load_identity(&home).unwrap();
    let key = identity.public().to_hex();
    let now = 10_000_000;
    board(&home, &repo, vec![held(&key, "cl-a", "src/api/**")], now);
    let input = json!({
        "session_id": "cl-a",
        "cwd": repo,
        "tool_name": "Write",
        "tool_input": {"file_path": repo.join("src/api/auth.rs"), "content": "x"},
    })
    .to_string();
    assert_eq!(edit_hook(&home, &input, HookMode::Block, now), None);
}

/// A session that does not see the holder yet (not connected to it) writes the
/// freshest board, an empty one: the hook still sees the claim another session's view
/// shows, since it reads every fresh view together.
#[test]
fn a_fresher_view_that_misses_the_claim_does_not_hide_it() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(repo) = repo(tmp.path()) else { return };
    let home = Home::new(tmp.path().join("home"));
    std::fs::create_dir_all(home.path()).unwrap();
    let now = 10_000_000;
    let key = interlink_core::Identity::from_seed(&[3; 32])
        .public()
        .to_hex();
    board(
        &home,
        &repo,
        vec![held(&key, "cl-a", "src/api/**")],
        now - 5_000,
    );
    // A second session's view, newer and empty.
    let project = interlink_mcp::cli::claims::project_of(&repo).unwrap();
    let dir = home
        .session(&interlink_core::SessionId::new("newcomer").unwrap())
        .unwrap();
    std::fs::create_dir_all(dir.path()).unwrap();
    let empty = BoardView::new(
        project.id.to_hex(),
        project.root.to_string_lossy().into_owned(),
        "k".into(),
        "newcomer".into(),
        now,
    );
    write_board(&dir, &empty).unwrap();
    let input = json!({
        "session_id": "cl-b",
        "cwd": repo,
        "tool_name": "Write",
        "tool_input": {"file_path": repo.join("src/api/new.rs"), "content": "x"},
    })
    .to_string();
    let out = edit_hook(&home, &input, HookMode::Block, now).expect("the claim is seen");
    assert!(
        out.contains("alice's session cl-a holds src/api/**"),
        "{out}"
    );
}

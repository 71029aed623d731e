//! Claims meet the real hosts' edit hooks: the pinned Claude Code (`claude -p`) and
//! Codex (`codex exec`), each against the fake model API of
//! [`interlink_e2e::agent_cli`] scripted to edit a file. A session of the same user
//! holds `src/api/**`; interlink is installed for the host the way a user does
//! (`install claude` adds the PreToolUse hook on the edit tools, `install codex` the one
//! on `apply_patch`); the model's edit of a file under `src/api/` is refused with
//! `claims_hook = "block"` (the file is not written, and the model is told who holds
//! it), and goes through with a warning the model reads with the default, `warn`.
//!
//! Unset `INTERLINK_TEST_CLAUDE_BIN` / `INTERLINK_TEST_CODEX_BIN`: SKIPPED, except under
//! CI, where it fails.
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::path::Path;

use interlink_e2e::{
    agent_cli::{FakeModel, Home, agent_cli, check_runs, run},
    mcp_session::{McpSession, deadline, start_in_dir},
};
use serde_json::json;

/// One `claude -p` turn in `repo` whose model writes `file`, with `env` added; the
/// fake model's requests.
fn write_turn(home: &Home, bin: &Path, repo: &Path, file: &Path, env: &[(&str, &str)]) -> String {
    let model = FakeModel::scripted(vec![json!({
        "name": "Write",
        "input": {"file_path": file, "content": "pub fn next() {}\n"},
    })]);
    let mut cmd = home.command(bin);
    cmd.current_dir(repo)
        .args([
            "-p",
            "add the next endpoint",
            "--permission-mode",
            "acceptEdits",
        ])
        .env("ANTHROPIC_BASE_URL", &model.url)
        .env("ANTHROPIC_API_KEY", "sk-ant-test-not-a-key");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = run(&mut cmd);
    assert!(out.status.success(), "claude -p: {out}");
    model.requests().join("\n")
}

/// A repository in `home` whose `src/api/` another session of the user holds, with the
/// holder's board on disk (what the hooks read); the repository and the holder.
async fn claimed_repo(home: &Home) -> (std::path::PathBuf, McpSession) {
    let repo = interlink_testkit::git::repo(
        &home.path().join("shop"),
        &[("src/api/auth.rs", "pub fn login() {}\n")],
    );
    let holder = start_in_dir(
        &home.interlink_home(),
        "holder",
        None,
        &repo,
        None,
        interlink_e2e::mcp_session::LOOPBACK,
    )
    .await
    .unwrap();
    let (text, _) = holder
        .ok(
            "claim",
            json!({"paths": ["src/api"], "reason": "auth rewrite"}),
        )
        .await
        .unwrap();
    assert!(
        text.contains("src/api/** (exclusive: \"auth rewrite\"): held"),
        "{text}"
    );
    let board = home.interlink_home().join("sessions/holder/board.json");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !std::fs::read_to_string(&board).is_ok_and(|b| b.contains("src/api/**")) {
        assert!(std::time::Instant::now() < until, "no board written");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    (repo, holder)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_codes_edit_of_a_claimed_file_is_blocked_or_warned() {
    let Some(bin) = agent_cli("INTERLINK_TEST_CLAUDE_BIN", "Claude Code") else {
        return;
    };
    let home = Home::new();
    check_runs(&home, &bin, "INTERLINK_TEST_CLAUDE_BIN");
    home.p2p(&["install", "claude"]);
    let settings = std::fs::read_to_string(home.path().join(".claude/settings.json")).unwrap();
    assert!(settings.contains("claims hook"), "{settings}");

    let (repo, holder) = claimed_repo(&home).await;
    let blocked = repo.join("src/api/new.rs");
    let requests = write_turn(
        &home,
        &bin,
        &repo,
        &blocked,
        &[("INTERLINK_CLAIMS_HOOK", "block")],
    );
    if blocked.exists() {
        // What the hook says to the same input, by hand, for the failure report.
        let input = json!({"session_id": "x", "cwd": repo, "hook_event_name": "PreToolUse",
            "tool_name": "Write", "tool_input": {"file_path": repo.join("src/api/third.rs"), "content": ""}});
        let mut cmd = home.command(&interlink_e2e::binary("interlink-p2p").unwrap());
        cmd.current_dir(&repo)
            .args(["claims", "hook"])
            .env("INTERLINK_CLAIMS_HOOK", "block");
        let by_hand = {
            use std::io::Write as _;
            let mut child = cmd
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            child
                .stdin
                .take()
                .unwrap()
                .write_all(input.to_string().as_bytes())
                .unwrap();
            format!("{:?}", child.wait_with_output().unwrap())
        };
        panic!(
            "the Write went through the block\nsettings: {settings}\nby hand: {by_hand}\nrequests: {requests}"
        );
    }
    assert!(
        requests.contains("src/api/new.rs is claimed: your session holder holds src/api/**"),
        "the model was not told why: {requests}"
    );

    let warned = repo.join("src/api/other.rs");
    let requests = write_turn(&home, &bin, &repo, &warned, &[]);
    assert!(warned.exists(), "a warning must not stop the Write");
    assert!(
        requests.contains("src/api/other.rs is claimed: your session holder holds src/api/**"),
        "the model was not warned: {requests}"
    );
    holder.close(deadline()).await.unwrap();
}

/// One `codex exec` turn in `repo` whose model (`gpt-5.5`, a model Codex offers
/// `apply_patch` to) applies `patch`, with `env` added; the fake model's requests and
/// what Codex printed.
fn patch_turn(
    home: &Home,
    bin: &Path,
    repo: &Path,
    patch: &str,
    env: &[(&str, &str)],
) -> (String, String) {
    let model = FakeModel::scripted(vec![json!({"name": "apply_patch", "input": patch})]);
    let provider = format!(
        "model_providers.fake={{name=\"fake\",base_url=\"{}/v1\",wire_api=\"responses\",\
         request_max_retries=0,stream_max_retries=0,supports_websockets=false}}",
        model.url
    );
    let mut cmd = home.command(bin);
    cmd.current_dir(repo)
        .args(["exec", "--strict-config", "--sandbox", "workspace-write"])
        // Hook trust is the user's decision in Codex's TUI (`install codex` says so);
        // this run skips it so the hook itself is what is tested.
        .arg("--dangerously-bypass-hook-trust")
        .args(["-c", &provider, "-c", "model_provider=fake"])
        .args(["-c", "model=gpt-5.5", "fix the login"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = run(&mut cmd);
    let printed = format!("{}{}", out.stdout, out.stderr);
    assert!(out.status.success(), "codex exec: {out}");
    (model.requests().join("\n"), printed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codexs_patch_of_a_claimed_file_is_blocked_or_warned() {
    let Some(bin) = agent_cli("INTERLINK_TEST_CODEX_BIN", "Codex CLI") else {
        return;
    };
    let home = Home::new();
    check_runs(&home, &bin, "INTERLINK_TEST_CODEX_BIN");
    home.p2p(&["install", "codex"]);
    let config = std::fs::read_to_string(home.codex_home().join("config.toml")).unwrap();
    assert!(config.contains("claims hook"), "{config}");
    let (repo, holder) = claimed_repo(&home).await;

    let auth = repo.join("src/api/auth.rs");
    let patch = "*** Begin Patch\n*** Update File: src/api/auth.rs\n@@\n-pub fn login() {}\n\
                 +pub fn login() { todo!() }\n*** End Patch\n";
    let (requests, printed) = patch_turn(
        &home,
        &bin,
        &repo,
        patch,
        &[("INTERLINK_CLAIMS_HOOK", "block")],
    );
    assert_eq!(
        std::fs::read_to_string(&auth).unwrap(),
        "pub fn login() {}\n",
        "the patch went through the block\n{config}\n{printed}"
    );
    assert!(
        requests.contains("src/api/auth.rs is claimed: your session holder holds src/api/**"),
        "the model was not told why: {printed}\n{requests}"
    );

    let (requests, printed) = patch_turn(&home, &bin, &repo, patch, &[]);
    assert!(
        std::fs::read_to_string(&auth).unwrap().contains("todo!()"),
        "a warning must not stop the patch: {printed}"
    );
    assert!(
        requests.contains("src/api/auth.rs is claimed: your session holder holds src/api/**"),
        "the model was not warned: {printed}\n{requests}"
    );
    holder.close(deadline()).await.unwrap();
}

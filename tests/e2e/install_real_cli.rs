//! `interlink-p2p install` / `uninstall` checked by the real agent CLIs, each against
//! a throwaway HOME (and CODEX_HOME) so the machine's own configuration is never read
//! or written.
//!
//! - Claude Code: `claude mcp list` health-checks the server by starting it over stdio
//!   and must show `interlink` connected; `claude mcp get interlink` the same, in user
//!   scope; `claude doctor` must find no invalid settings (our Stop hook), which a
//!   control home with a broken hook shows it does check; after uninstall the list is
//!   empty. `CLAUDE_CONFIG_DIR` is honoured. (Real sessions receiving messages, through
//!   the Stop hook and through Claude Code's inbox socket: `claude_inbox.rs`.)
//! - Codex: `codex mcp list --json` / `codex mcp get interlink --json` show our entry;
//!   the app server's `hooks/list` finds the four `mcp_tool` hooks with no errors (and
//!   untrusted: Codex runs user hooks only after the user trusts them); one real turn
//!   of `codex exec --strict-config` (no unknown config keys) against a model API on
//!   loopback that calls `interlink`'s `whoami` and then answers, with hook trust
//!   bypassed for that run: the SessionStart hook binds the `interlink` server to
//!   Codex's thread id — in the `INTERLINK_HOME` that only reaches the server through
//!   our `env_vars` — the PreToolUse matcher catches the tool call, and no hook fails;
//!   after uninstall the list and the hooks are gone.
//!
//! The CLIs and the fake model API: [`interlink_e2e::agent_cli`]. Unset, a test says it
//! was skipped — except under CI (`CI` set), where it fails; set to a binary that does
//! not run, it fails with the reason.
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Instant,
};

use interlink_e2e::agent_cli::{
    FakeModel, Group, Home, Output, STEP, agent_cli, assert_codex_turn_bound, check_runs,
    codex_exec_turn, codex_hooks, run, thread_of,
};
use interlink_p2p::install::CODEX_HOOK_EVENTS;
use serde_json::{Value, json};

/// The `interlink-p2p` that `install` registers when run from the build tree: its
/// stable copy in the user's data directory, never the build tree's binary.
fn installed_path(home: &Home) -> PathBuf {
    home.path()
        .join(".local/share/interlink-p2p/bin/interlink-p2p")
}

/// The line of `claude mcp list` about `interlink`, if any.
fn claude_list_line(listing: &str) -> Option<&str> {
    listing.lines().find(|l| l.starts_with("interlink:"))
}

fn claude_round_trip(home: &Home, claude: &Path, config_dir: Option<&Path>) {
    let claude_cmd = |args: &[&str]| {
        let mut c = home.command(claude);
        if let Some(dir) = config_dir {
            c.env("CLAUDE_CONFIG_DIR", dir);
        }
        c.args(args);
        c
    };
    let p2p = installed_path(home);
    let p2p = p2p.to_str().unwrap();
    let built = interlink_e2e::binary("interlink-p2p").unwrap();

    let mut install = home.command(&built);
    if let Some(dir) = config_dir {
        install.env("CLAUDE_CONFIG_DIR", dir);
    }
    let out = run(install.args(["install", "claude"]));
    assert!(out.status.success(), "install claude: {out}");

    let out = run(&mut claude_cmd(&["mcp", "list"]));
    assert!(out.status.success(), "claude mcp list: {out}");
    let line = claude_list_line(&out.stdout)
        .unwrap_or_else(|| panic!("claude mcp list does not show interlink: {out}"));
    assert!(
        line.contains(&format!("{p2p} mcp")) && line.contains("Connected"),
        "interlink is not connected: {out}"
    );
    // A healthy install prints no error: no hook Claude Code cannot run (the SessionEnd
    // `mcp_tool` hook of earlier versions printed one on every list and get).
    let clean = |out: &Output| {
        let text = format!("{}\n{}", out.stdout, out.stderr);
        !text.contains("failed") && !text.to_lowercase().contains("error")
    };
    assert!(clean(&out), "claude mcp list printed an error: {out}");

    let out = run(&mut claude_cmd(&["mcp", "get", "interlink"]));
    assert!(out.status.success(), "claude mcp get interlink: {out}");
    assert!(clean(&out), "claude mcp get printed an error: {out}");
    for want in [
        "Scope: User config",
        "Status: ✔ Connected",
        "Type: stdio",
        &format!("Command: {p2p}"),
        "Args: mcp",
    ] {
        assert!(out.stdout.contains(want), "no `{want}` in: {out}");
    }

    // The Stop hook against Claude Code's own settings schema: `doctor` lists every
    // entry it would ignore under "Invalid settings".
    let out = run(&mut claude_cmd(&["doctor"]));
    assert!(out.status.success(), "claude doctor: {out}");
    assert!(
        !out.stdout.contains("Invalid settings"),
        "Claude Code rejects our settings: {out}"
    );

    let mut uninstall = home.command(&built);
    if let Some(dir) = config_dir {
        uninstall.env("CLAUDE_CONFIG_DIR", dir);
    }
    let out = run(uninstall.args(["uninstall", "claude"]));
    assert!(out.status.success(), "uninstall claude: {out}");
    let out = run(&mut claude_cmd(&["mcp", "list"]));
    assert!(out.status.success(), "claude mcp list: {out}");
    assert!(
        claude_list_line(&out.stdout).is_none() && !out.stdout.contains("interlink"),
        "interlink is still listed after uninstall: {out}"
    );
}

#[test]
fn claude_lists_interlink_connected_and_forgets_it_after_uninstall() {
    let Some(claude) = agent_cli("INTERLINK_TEST_CLAUDE_BIN", "Claude Code CLI") else {
        return;
    };
    let home = Home::new();
    let version = check_runs(&home, &claude, "INTERLINK_TEST_CLAUDE_BIN");
    eprintln!("claude --version: {version}");

    // Control: `claude doctor` does report a hook Claude Code cannot use, so its
    // silence about ours below means something.
    let control = Home::new();
    std::fs::create_dir_all(control.path().join(".claude")).unwrap();
    std::fs::write(
        control.path().join(".claude").join("settings.json"),
        r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "x", "asyncRewake": "yes"}]}]}}"#,
    )
    .unwrap();
    let out = run(control.command(&claude).arg("doctor"));
    assert!(
        out.stdout.contains("Invalid settings") && out.stdout.contains("asyncRewake"),
        "claude doctor no longer reports invalid hooks; the settings check below would \
         prove nothing: {out}"
    );

    claude_round_trip(&home, &claude, None);
}

#[test]
fn claude_config_dir_install_is_the_one_claude_reads() {
    let Some(claude) = agent_cli("INTERLINK_TEST_CLAUDE_BIN", "Claude Code CLI") else {
        return;
    };
    let home = Home::new();
    check_runs(&home, &claude, "INTERLINK_TEST_CLAUDE_BIN");
    let dir = home.path().join("claude-config");
    claude_round_trip(&home, &claude, Some(&dir));
    assert!(
        !home.path().join(".claude.json").exists(),
        "nothing was written to ~/.claude.json"
    );
}

#[test]
fn codex_lists_interlink_runs_its_hooks_and_forgets_both_after_uninstall() {
    let Some(codex) = agent_cli("INTERLINK_TEST_CODEX_BIN", "Codex CLI") else {
        return;
    };
    let home = Home::new();
    let version = check_runs(&home, &codex, "INTERLINK_TEST_CODEX_BIN");
    eprintln!("codex --version: {version}");
    let p2p = installed_path(&home);
    let p2p = p2p.to_str().unwrap();

    let out = home.p2p(&["install", "codex"]);
    assert!(out.contains("added [mcp_servers.interlink]"), "{out}");

    let out = run(home.command(&codex).args(["mcp", "list"]));
    assert!(out.status.success(), "codex mcp list: {out}");
    assert!(
        out.stdout
            .lines()
            .any(|l| l.starts_with("interlink ") && l.contains(p2p) && l.contains("enabled")),
        "codex mcp list does not list interlink: {out}"
    );
    let out = run(home
        .command(&codex)
        .args(["mcp", "get", "interlink", "--json"]));
    assert!(out.status.success(), "codex mcp get: {out}");
    let entry: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("codex mcp get --json is not JSON ({e}): {out}"));
    assert_eq!(entry["enabled"], true, "{entry}");
    assert_eq!(entry["transport"]["type"], "stdio", "{entry}");
    assert_eq!(entry["transport"]["command"], p2p, "{entry}");
    assert_eq!(
        entry["transport"]["args"],
        json!(["mcp", "--host", "codex"]),
        "{entry}"
    );

    // Codex parses our hooks (an ill-formed one fails the whole config load) and sees
    // each as an `mcp_tool` hook on the event we meant.
    let (hooks, listing) = codex_hooks(&home, &codex);
    assert_eq!(listing["errors"], json!([]), "{listing}");
    assert_eq!(hooks.len(), CODEX_HOOK_EVENTS.len(), "{listing}");
    for (event, matcher) in CODEX_HOOK_EVENTS {
        let mut name = String::from(*event);
        name[..1].make_ascii_lowercase();
        let hook = hooks
            .iter()
            .find(|h| h["eventName"] == name.as_str())
            .unwrap_or_else(|| panic!("no {event} hook in {listing}"));
        assert_eq!(hook["handlerType"], "mcpTool", "{hook}");
        assert_eq!(hook["tool"], "bind_codex_session", "{hook}");
        assert_eq!(hook["matcher"], json!(matcher), "{hook}");
        assert_eq!(hook["enabled"], true, "{hook}");
        // Why `install codex` tells the user to trust them.
        assert_eq!(hook["trustStatus"], "untrusted", "{hook}");
    }
    // And the claims hook on apply_patch, a command hook.
    let claims = listing["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["matcher"] == "^apply_patch$")
        .unwrap_or_else(|| panic!("no claims hook in {listing}"));
    assert_eq!(claims["eventName"], "preToolUse", "{claims}");
    assert_eq!(claims["handlerType"], "command", "{claims}");
    assert!(
        claims["command"]
            .as_str()
            .unwrap()
            .ends_with(" claims hook"),
        "{claims}"
    );

    // A real turn: the SessionStart hook binds the server to the thread — under the
    // INTERLINK_HOME that reaches the server only through `env_vars` — the PreToolUse
    // matcher catches the `interlink` tool call, and no hook fails.
    let (thread, printed) = codex_exec_turn(&home, &codex, None);
    let default = home
        .path()
        .join(".config/interlink-p2p/sessions")
        .join(&thread);
    assert!(
        !default.exists(),
        "the thread was bound in {}, not in INTERLINK_HOME: Codex did not pass the \
         variable to the server (env_vars)\n{printed}",
        default.display()
    );
    assert_codex_turn_bound(
        &home,
        &thread,
        &printed,
        &[
            "hook: SessionStart Completed",
            "hook: UserPromptSubmit Completed",
            "hook: PreToolUse Completed",
            "mcp: interlink/whoami (completed)",
        ],
    );
    // Codex prints `hook: <Event>` when a hook starts and `hook: <Event> <outcome>`
    // when it ends.
    let failed: Vec<&str> = printed
        .lines()
        .filter(|l| l.starts_with("hook: ") && l.split_whitespace().count() == 3)
        .filter(|l| !l.ends_with(" Completed"))
        .collect();
    assert!(
        failed.is_empty(),
        "hooks that did not complete: {failed:?}\n{printed}"
    );

    // The real CLI takes the exact command a Codex session's server runs to hand a
    // message to its thread (crates/interlink-mcp/src/codex.rs), on this real thread.
    // With no Codex daemon here the resume part is only a warning.
    let out = run(home.command(&codex).args([
        "queue",
        "--thread",
        thread.as_str(),
        "--message",
        "[interlink] New message (test)",
        "--resume",
    ]));
    assert!(out.status.success(), "codex queue: {out}");

    let out = home.p2p(&["uninstall", "codex"]);
    assert!(out.contains("removed [mcp_servers.interlink]"), "{out}");
    let out = run(home.command(&codex).args(["mcp", "list"]));
    assert!(out.status.success(), "codex mcp list: {out}");
    assert!(
        !out.stdout.contains("interlink"),
        "interlink is still listed after uninstall: {out}"
    );
    let (hooks, listing) = codex_hooks(&home, &codex);
    assert!(hooks.is_empty(), "hooks left after uninstall: {listing}");
}

/// `codex queue --thread <id> --message <text> --resume` — what the Codex worker runs for
/// each message ([`interlink_mcp::codex`]) — starts a turn in an idle thread when the
/// local app-server daemon runs: the model gets a request with the text, and no one
/// typed anything. The daemon (`codex app-server --listen unix://`, the default socket
/// `queue` looks for) needs the thread's model provider in `config.toml`, and `queue`
/// must get no `-c` overrides while a daemon runs (it refuses them).
#[test]
fn codex_queue_resume_starts_a_turn_in_an_idle_thread_of_the_daemon() {
    let Some(codex) = agent_cli("INTERLINK_TEST_CODEX_BIN", "Codex CLI") else {
        return;
    };
    let home = Home::new();
    check_runs(&home, &codex, "INTERLINK_TEST_CODEX_BIN");
    let model = FakeModel::start();
    std::fs::write(
        home.codex_home().join("config.toml"),
        format!(
            "model = \"fake-model\"\nmodel_provider = \"fake\"\n\n[model_providers.fake]\n\
             name = \"fake\"\nbase_url = \"{}/v1\"\nwire_api = \"responses\"\n\
             request_max_retries = 0\nstream_max_retries = 0\nsupports_websockets = false\n",
            model.url
        ),
    )
    .unwrap();
    // A thread, run to its end: idle from here on.
    let out = run(home
        .command(&codex)
        .args(["exec", "--skip-git-repo-check", "say hi"]));
    assert!(out.status.success(), "codex exec: {out}");
    let thread = thread_of(&out);

    let socket = home
        .codex_home()
        .join("app-server-control")
        .join("app-server-control.sock");
    let _daemon = Group::spawn(
        home.command(&codex)
            .args(["app-server", "--listen", "unix://"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    let deadline = Instant::now() + STEP;
    while !socket.exists() {
        assert!(
            Instant::now() < deadline,
            "the daemon never bound {}",
            socket.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }

    let text = format!("QUEUED_PING_{}", std::process::id());
    let out = run(home.command(&codex).args([
        "queue",
        "--thread",
        &thread,
        "--message",
        &text,
        "--resume",
    ]));
    assert!(
        out.status.success() && out.stdout.contains("Queued message"),
        "codex queue: {out}"
    );
    // A failed resume is only a warning (exit 0): the model's side is what counts.
    let deadline = Instant::now() + STEP;
    while !model.requests().iter().any(|r| r.contains(&text)) {
        assert!(
            Instant::now() < deadline,
            "no turn started in the idle thread {thread}: {out}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

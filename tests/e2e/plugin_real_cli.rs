//! The plugin in this repository (`.claude-plugin/marketplace.json`,
//! `plugins/interlink-p2p/`) installed by the real agent CLIs from the checkout, as a
//! user would, in a throwaway home with no Rust toolchain on `PATH`. The plugin's
//! servers and hooks run its launcher (`scripts/launch.cjs`), which runs the
//! interlink-p2p already on the machine, else the npm package through npx.
//!
//! - Claude Code: `claude plugin validate` passes; `marketplace add`, `plugin install`;
//!   with nothing installed and no package published, `claude mcp list` shows the
//!   server failed with the launcher's reason (what to run); with the binary on `PATH`
//!   and still no package, ✔ Connected; through npx, with the npm packages this build
//!   makes on a registry on loopback ([`interlink_e2e::npm`]), ✔ Connected; after
//!   `plugin uninstall` it is gone.
//! - Codex: `codex plugin marketplace add` reads the same marketplace file, `plugin add`
//!   installs it; `codex mcp list` has the server; the app server lists the plugin's
//!   three `mcp_tool` hooks with no errors, and the server's status (the launcher's
//!   reason with nothing installed, its tools with the binary on `PATH`); in a real turn
//!   the SessionStart hook calls the server (through npx) and binds the thread to its
//!   mailbox; after `plugin remove` the server is gone.
//!
//! The CLIs: [`interlink_e2e::agent_cli`] (SKIPPED unless set; failing under CI).
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use interlink_e2e::{
    agent_cli::{
        Home, agent_cli, assert_codex_turn_bound, check_runs, codex_app_server_in, codex_exec_turn,
        codex_hooks, run,
    },
    binary,
    npm::{Registry, Tarballs, VERSION, node_dir, pack, path_without_rust},
};
use interlink_p2p::install::{CODEX_ENV_VARS, CODEX_HOOK_EVENTS};
use serde_json::{Value, json};

const MARKETPLACE: &str = "interlink-p2p";
const PLUGIN: &str = "interlink-p2p@interlink-p2p";

fn checkout() -> PathBuf {
    std::fs::canonicalize(Path::new(env!("CARGO_MANIFEST_DIR")).join("..")).unwrap()
}

fn json_at(path: &str) -> Value {
    let path = checkout().join(path);
    let text = std::fs::read_to_string(&path).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The plugin's launcher: Claude Code's servers and hooks run `node <it> <args>`, never
/// a bare `npx`, which hosts on Windows cannot start.
const LAUNCHER: &str = "${CLAUDE_PLUGIN_ROOT}/scripts/launch.cjs";

/// The npx command the launcher falls back to, at this version.
fn npx_args() -> Vec<String> {
    [
        "--prefer-offline",
        "-y",
        &format!("interlink-p2p@{VERSION}"),
    ]
    .map(str::to_owned)
    .to_vec()
}

/// What the launcher says when it finds nothing to run: the commands that fix it.
const FIXES: [&str; 2] = [
    "cargo install --locked --path crates/interlink-p2p",
    "npm install -g interlink-p2p@",
];

/// The version in every manifest is the workspace's (the launcher takes the plugin's
/// from `.claude-plugin/plugin.json`, and npx fetches exactly that version): a plugin
/// update and its binary move together.
#[test]
fn the_plugin_and_packages_carry_the_workspace_version() {
    assert_eq!(
        json_at("dist/npm/interlink-p2p/package.json")["version"],
        VERSION
    );
    let market = json_at(".claude-plugin/marketplace.json");
    assert_eq!(market["name"], MARKETPLACE);
    assert_eq!(market["plugins"][0]["version"], VERSION);
    let root = market["plugins"][0]["source"].as_str().unwrap();
    assert_eq!(root, "./plugins/interlink-p2p");
    for manifest in [".claude-plugin/plugin.json", ".codex-plugin/plugin.json"] {
        assert_eq!(json_at(&format!("{root}/{manifest}"))["version"], VERSION);
    }
    let claude = json_at(&format!("{root}/.mcp.json"));
    assert_eq!(claude["mcpServers"]["interlink"]["command"], "node");
    assert_eq!(
        claude["mcpServers"]["interlink"]["args"],
        json!([LAUNCHER, "mcp"])
    );
    let hooks = json_at(&format!("{root}/hooks/hooks.json"));
    let stop = &hooks["hooks"]["Stop"][0]["hooks"][0];
    assert_eq!(stop["command"], "node");
    assert_eq!(stop["args"], json!([LAUNCHER, "wait"]));

    // Codex expands no plugin root in a server's arguments (`${CLAUDE_PLUGIN_ROOT}` and
    // `${PLUGIN_ROOT}` reach the program as they are, 0.171) but resolves a relative
    // `cwd` against the plugin's directory: the server starts there, and the hooks
    // pass the thread's own directory (`${cwd}`) to `bind_codex_session`.
    let codex = json_at(&format!("{root}/.codex-plugin/mcp.json"));
    let server = &codex["mcpServers"]["interlink"];
    assert_eq!(server["command"], "node");
    assert_eq!(server["cwd"], ".");
    assert_eq!(
        server["args"],
        json!(["./scripts/launch.cjs", "mcp", "--host", "codex"])
    );
    let vars: Vec<&str> = server["env_vars"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    // The launcher's own: where `install` keeps its copy, an explicit binary.
    let launcher_vars = ["XDG_DATA_HOME", "LOCALAPPDATA", "INTERLINK_P2P_BINARY"];
    for var in CODEX_ENV_VARS.iter().chain(&launcher_vars) {
        assert!(
            vars.contains(var),
            "the Codex plugin does not pass {var}: {vars:?}"
        );
    }
    let hooks = json_at(&format!("{root}/.codex-plugin/hooks.json"));
    let events: Vec<&String> = hooks["hooks"].as_object().unwrap().keys().collect();
    assert_eq!(events.len(), CODEX_HOOK_EVENTS.len(), "{hooks}");
    for (event, matcher) in CODEX_HOOK_EVENTS {
        let group = &hooks["hooks"][event][0];
        assert_eq!(group["matcher"], json!(matcher), "{event}");
        assert_eq!(group["hooks"][0]["tool"], "bind_codex_session", "{event}");
        assert_eq!(
            group["hooks"][0]["input"],
            json!({"thread_id": "${session_id}", "cwd": "${cwd}"}),
            "{event}"
        );
    }
}

/// A user of `home` with node but no Rust, whose npm reaches only `registry` and starts
/// with an empty cache.
fn npm_user(home: &Home, cli: &Path, node_dir: &Path, registry: &Registry) -> Command {
    let mut c = home.command(cli);
    c.env("PATH", path_without_rust(node_dir))
        .env("npm_config_registry", &registry.url)
        .env("npm_config_cache", home.path().join("npm-cache"))
        .env("npm_config_update_notifier", "false");
    c
}

fn fetched_from(registry: &Registry) {
    let requests = registry.requests();
    for want in [
        "/interlink-p2p".to_owned(),
        format!("/-/interlink-p2p-{VERSION}.tgz"),
    ] {
        assert!(
            requests.contains(&want),
            "npx never fetched {want}: {requests:?}"
        );
    }
}

#[test]
fn claude_installs_the_plugin_from_the_checkout_and_lists_its_server_connected() {
    let Some(claude) = agent_cli("INTERLINK_TEST_CLAUDE_BIN", "Claude Code CLI") else {
        return;
    };
    let Some(node_dir) = node_dir() else { return };
    let home = Home::new();
    check_runs(&home, &claude, "INTERLINK_TEST_CLAUDE_BIN");
    let Tarballs { platform, launcher } = pack(&home.path().join("tarballs"));
    let registry = Registry::serve(&[&platform, &launcher]);
    let root = checkout();
    let root = root.to_str().unwrap();
    let claude_run = |args: &[&str]| {
        let out = run(npm_user(&home, &claude, &node_dir, &registry).args(args));
        assert!(out.status.success(), "claude {args:?}: {out}");
        out
    };

    let out = claude_run(&["plugin", "validate", root]);
    assert!(!out.stdout.contains('✘'), "{out}");
    let out = claude_run(&[
        "plugin",
        "validate",
        &format!("{root}/plugins/interlink-p2p"),
    ]);
    assert!(!out.stdout.contains('✘'), "{out}");
    claude_run(&["plugin", "marketplace", "add", root]);
    let out = claude_run(&["plugin", "install", PLUGIN]);
    assert!(out.stdout.contains("Successfully installed"), "{out}");

    let out = claude_run(&["mcp", "list"]);
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with("plugin:interlink-p2p:interlink:"))
        .unwrap_or_else(|| panic!("claude mcp list does not show the plugin's server: {out}"));
    assert!(
        line.contains("scripts/launch.cjs mcp") && line.contains("✔ Connected"),
        "the plugin's server is not connected: {out}"
    );
    fetched_from(&registry);

    let out = claude_run(&["plugin", "list"]);
    assert!(out.stdout.contains(PLUGIN), "{out}");
    claude_run(&["plugin", "uninstall", PLUGIN]);
    let out = claude_run(&["mcp", "list"]);
    assert!(
        !out.stdout.contains("interlink"),
        "still listed after uninstall: {out}"
    );
    claude_run(&["plugin", "marketplace", "remove", MARKETPLACE]);
}

#[test]
fn codex_installs_the_plugin_from_the_checkout_and_runs_a_turn_with_it() {
    let Some(codex) = agent_cli("INTERLINK_TEST_CODEX_BIN", "Codex CLI") else {
        return;
    };
    let Some(node_dir) = node_dir() else { return };
    let home = Home::new();
    check_runs(&home, &codex, "INTERLINK_TEST_CODEX_BIN");
    let Tarballs { platform, launcher } = pack(&home.path().join("tarballs"));
    let registry = Registry::serve(&[&platform, &launcher]);
    let root = checkout();
    let root = root.to_str().unwrap();
    let codex_run = |args: &[&str]| {
        let out = run(npm_user(&home, &codex, &node_dir, &registry).args(args));
        assert!(out.status.success(), "codex {args:?}: {out}");
        out
    };

    codex_run(&["plugin", "marketplace", "add", root]);
    codex_run(&["plugin", "add", PLUGIN]);
    let out = codex_run(&["mcp", "list", "--json"]);
    let servers: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("codex mcp list --json ({e}): {out}"));
    let server = servers
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "interlink")
        .unwrap_or_else(|| panic!("codex mcp list does not list the plugin's server: {out}"));
    assert_eq!(server["enabled"], true, "{server}");
    assert_eq!(server["transport"]["command"], "node", "{server}");

    let (hooks, listing) = codex_hooks(&home, &codex);
    assert_eq!(listing["errors"], json!([]), "{listing}");
    assert_eq!(hooks.len(), CODEX_HOOK_EVENTS.len(), "{listing}");
    let claims = listing["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["matcher"] == "^apply_patch$")
        .unwrap_or_else(|| panic!("no claims hook in {listing}"));
    assert_eq!(claims["handlerType"], "command", "{claims}");
    // Codex puts the plugin's directory in for `${PLUGIN_ROOT}`.
    let command = claims["command"].as_str().unwrap();
    assert!(
        command.ends_with("/scripts/launch.cjs\" claims hook") && !command.contains("${"),
        "{claims}"
    );

    // Codex sends a turn's first model request without waiting for a plugin's MCP
    // servers: the first npx start, which fetches and unpacks the package, can miss
    // it. A user's later sessions start from npx's cache, as this one does.
    let warm = run(npm_user(&home, Path::new("npx"), &node_dir, &registry)
        .args(npx_args())
        .arg("--version"));
    assert!(warm.status.success(), "npx: {warm}");
    fetched_from(&registry);

    // A real turn, with the npm settings the plugin's env_vars pass on to npx.
    let mut turn = npm_user(&home, &codex, &node_dir, &registry);
    let (thread, printed) = codex_exec_turn(&home, &codex, Some(&mut turn));
    // The SessionStart hook is an MCP tool call to the plugin's server, started through
    // npx: the thread bound in INTERLINK_HOME (which reaches the server only through the
    // plugin's env_vars) shows that server answered. The model's own `whoami` call is
    // not required: Codex may send the turn's first request before it has listed a
    // plugin server's tools (seen in 1 run of 4; INSTALL.md says so).
    assert_codex_turn_bound(&home, &thread, &printed, &["hook: SessionStart Completed"]);
    if !printed.contains("mcp: interlink/whoami (completed)") {
        eprintln!("note: Codex sent its first request before listing the plugin's tools");
    }

    codex_run(&["plugin", "remove", PLUGIN]);
    let out = codex_run(&["mcp", "list", "--json"]);
    assert!(
        !out.stdout.contains("interlink"),
        "still listed after remove: {out}"
    );
}

/// A registry address where nothing answers: no package is published anywhere.
fn no_registry() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}/")
}

/// A user of `home` with node, no Rust, no npm package to fetch, and `bin` (which may
/// hold an `interlink-p2p`) first on `PATH`.
fn offline_user(home: &Home, cli: &Path, node_dir: &Path, bin: &Path) -> Command {
    let mut c = home.command(cli);
    let path = format!("{}:{}", bin.display(), path_without_rust(node_dir));
    c.env("PATH", path)
        .env("npm_config_registry", no_registry())
        .env("npm_config_cache", home.path().join("npm-cache"))
        .env("npm_config_update_notifier", "false");
    c
}

/// `bin/interlink-p2p` in `home`: the built binary, as `cargo install` leaves it on
/// `PATH`.
fn put_binary_on_path(bin: &Path) {
    std::fs::create_dir_all(bin).unwrap();
    std::fs::copy(binary("interlink-p2p").unwrap(), bin.join("interlink-p2p")).unwrap();
}

#[test]
fn claude_plugin_from_a_checkout_says_what_to_run_then_runs_the_binary_on_path() {
    let Some(claude) = agent_cli("INTERLINK_TEST_CLAUDE_BIN", "Claude Code CLI") else {
        return;
    };
    let Some(node_dir) = node_dir() else { return };
    let home = Home::new();
    check_runs(&home, &claude, "INTERLINK_TEST_CLAUDE_BIN");
    let bin = home.path().join("bin");
    let root = checkout();
    let root = root.to_str().unwrap();
    let claude_run = |args: &[&str]| {
        let out = run(offline_user(&home, &claude, &node_dir, &bin).args(args));
        assert!(out.status.success(), "claude {args:?}: {out}");
        out
    };
    claude_run(&["plugin", "marketplace", "add", root]);
    claude_run(&["plugin", "install", PLUGIN]);
    let server_line = |out: &interlink_e2e::agent_cli::Output| {
        out.stdout
            .lines()
            .find(|l| l.starts_with("plugin:interlink-p2p:interlink:"))
            .unwrap_or_else(|| panic!("claude mcp list does not show the plugin's server: {out}"))
            .to_owned()
    };

    // Nothing installed, nothing published: the host shows why, and what to run.
    let started = std::time::Instant::now();
    let out = claude_run(&["mcp", "list"]);
    let took = started.elapsed();
    let line = server_line(&out);
    assert!(line.contains("✘ Failed to connect"), "{out}");
    for fix in FIXES {
        assert!(
            line.contains(fix),
            "the failure does not name `{fix}`: {out}"
        );
    }
    // Claude Code gives up on a server after 30 s ("connection timed out"): a reason
    // at all means the launcher answered well before.
    assert!(line.contains("PATH: no interlink-p2p"), "{out}");
    eprintln!("claude mcp list with nothing to run: {took:?}");
    let out = claude_run(&["mcp", "get", "plugin:interlink-p2p:interlink"]);
    assert!(out.stdout.contains(FIXES[0]), "{out}");

    // The fix: the binary on PATH (as `cargo install` puts it). Still no package.
    put_binary_on_path(&bin);
    let out = claude_run(&["mcp", "list"]);
    let line = server_line(&out);
    assert!(
        line.contains("scripts/launch.cjs mcp") && line.contains("✔ Connected"),
        "the plugin's server is not connected with the binary on PATH: {out}"
    );
    assert!(!out.stdout.contains("failed"), "{out}");
    claude_run(&["plugin", "uninstall", PLUGIN]);
}

#[test]
fn codex_plugin_from_a_checkout_says_what_to_run_then_runs_the_binary_on_path() {
    let Some(codex) = agent_cli("INTERLINK_TEST_CODEX_BIN", "Codex CLI") else {
        return;
    };
    let Some(node_dir) = node_dir() else { return };
    let home = Home::new();
    check_runs(&home, &codex, "INTERLINK_TEST_CODEX_BIN");
    let bin = home.path().join("bin");
    let root = checkout();
    let root = root.to_str().unwrap();
    let codex_run = |args: &[&str]| {
        let out = run(offline_user(&home, &codex, &node_dir, &bin).args(args));
        assert!(out.status.success(), "codex {args:?}: {out}");
        out
    };
    codex_run(&["plugin", "marketplace", "add", root]);
    codex_run(&["plugin", "add", PLUGIN]);
    let status = || {
        let result = codex_app_server_in(
            &mut offline_user(&home, &codex, &node_dir, &bin),
            "mcpServerStatus/list",
            json!({}),
        );
        result["data"]
            .as_array()
            .unwrap_or_else(|| panic!("mcpServerStatus/list: {result}"))
            .iter()
            .find(|s| s["name"] == "interlink")
            .unwrap_or_else(|| panic!("no interlink server: {result}"))
            .clone()
    };

    // Nothing installed, nothing published: the server's startup error is the reason.
    let server = status();
    let error = server["toolsError"].as_str().unwrap_or_default();
    for fix in FIXES {
        assert!(
            error.contains(fix),
            "the failure does not name `{fix}`: {server}"
        );
    }

    // The binary on PATH: the server starts and lists its tools.
    put_binary_on_path(&bin);
    let server = status();
    assert_eq!(server["toolsError"], Value::Null, "{server}");
    assert!(
        server["tools"].to_string().contains("bind_codex_session"),
        "{server}"
    );
    codex_run(&["plugin", "remove", PLUGIN]);
}

//! `interlink-p2p install` / `uninstall` checked by the real agent CLIs, each against
//! a throwaway HOME (and CODEX_HOME) so the machine's own configuration is never read
//! or written.
//!
//! - Claude Code: `claude mcp list` health-checks the server by starting it over stdio
//!   and must show `interlink` connected; `claude mcp get interlink` the same, in user
//!   scope; `claude doctor` must find no invalid settings (our Stop hook), which a
//!   control home with a broken hook shows it does check; after uninstall the list is
//!   empty. `CLAUDE_CONFIG_DIR` is honoured. And one real session (`claude -p` with
//!   stream-json input, against a model API on loopback that answers every request with
//!   "ok"): Claude Code starts our server under its session id and runs the Stop hook
//!   `interlink-p2p wait` for the same session; a message sent to that session with
//!   `interlink-p2p send` wakes the agent — the next model request carries its text.
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
//! The CLIs come from `INTERLINK_TEST_CLAUDE_BIN` and `INTERLINK_TEST_CODEX_BIN`
//! (`eval "$(.ci/agent-clis)"` installs the pinned versions and prints them). Unset, a
//! test says it was skipped — except under CI (`CI` set), where it fails; set to a
//! binary that does not run, it fails with the reason.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{
    fs::File,
    io::{BufRead as _, BufReader, Read as _, Write as _},
    net::{TcpListener, TcpStream},
    os::unix::process::CommandExt as _,
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    sync::{
        Arc, Mutex,
        mpsc::{Receiver, sync_channel},
    },
    time::{Duration, Instant},
};

use interlink_e2e::{
    binary, mcp_session,
    process::{DEADLINE, Session},
    user::LOOPBACK,
};
use interlink_p2p::install::CODEX_HOOK_EVENTS;
use serde_json::{Value, json};

/// How long one CLI command may take (`claude mcp list` waits for the health checks).
const STEP: Duration = Duration::from_secs(60);

/// Where the CLI named by `var` is, or `None` (skipped) outside CI when it is unset.
fn agent_cli(var: &str, what: &str) -> Option<PathBuf> {
    match std::env::var_os(var).filter(|v| !v.is_empty()) {
        Some(path) => Some(PathBuf::from(path)),
        None if std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false") => {
            panic!(
                "{var} is not set, and CI must run this test against the real {what}: \
                 run `eval \"$(bash .ci/agent-clis)\"` before the tests"
            )
        }
        None => {
            eprintln!(
                "SKIPPED: {var} is not set (the real {what} is needed; \
                 `eval \"$(bash .ci/agent-clis)\"` installs it)"
            );
            None
        }
    }
}

/// A throwaway user: HOME, CODEX_HOME and INTERLINK_HOME of its own.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".codex")).unwrap();
        std::fs::create_dir_all(dir.path().join("interlink")).unwrap();
        Self { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn codex_home(&self) -> PathBuf {
        self.path().join(".codex")
    }

    fn interlink_home(&self) -> PathBuf {
        self.path().join("interlink")
    }

    /// `program` with only this home's environment: nothing of the developer's own
    /// (API keys, `CLAUDE_CONFIG_DIR`, `CODEX_HOME`, `INTERLINK_*`) leaks in. The
    /// `INTERLINK_*` values reach the MCP servers the CLIs start: a loopback listener,
    /// no mDNS, this home's state directory.
    fn command(&self, program: &Path) -> Command {
        let mut c = Command::new(program);
        c.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("LANG", "C.UTF-8")
            .env("HOME", self.path())
            .env("CODEX_HOME", self.codex_home())
            .env("INTERLINK_HOME", self.interlink_home())
            .env("INTERLINK_LISTEN", "/ip4/127.0.0.1/tcp/0")
            .env("INTERLINK_MDNS", "0")
            // Claude Code: no update checks, telemetry or error reports (the machine
            // may have no network; nothing here needs it).
            .env("DISABLE_AUTOUPDATER", "1")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_ERROR_REPORTING", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .current_dir(self.path());
        c
    }

    /// Runs `interlink-p2p` with `args`, which must succeed; returns its stdout.
    fn p2p(&self, args: &[&str]) -> String {
        let out = run(self.command(&binary("interlink-p2p").unwrap()).args(args));
        assert!(out.status.success(), "interlink-p2p {args:?}: {out}");
        out.stdout
    }
}

/// What a finished command printed.
struct Output {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl std::fmt::Display for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}\n--- stdout\n{}\n--- stderr\n{}",
            self.status, self.stdout, self.stderr
        )
    }
}

/// A child in its own process group, killed with the whole group (the MCP servers it
/// started among them) when dropped, so no test leaves a process behind.
struct Group {
    child: Child,
}

impl Group {
    fn spawn(cmd: &mut Command) -> Self {
        let child = cmd
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
        Self { child }
    }

    fn wait(&mut self, deadline: Instant) -> Option<ExitStatus> {
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Group {
    fn signal_group(&self, signal: &str) {
        let _ = Command::new("kill")
            .args([signal, "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // SIGTERM first, so a wrapper (npm's `codex` is a node script around the
        // native binary) can reap its own children rather than leave them as zombies
        // of init; then SIGKILL for whatever is left.
        self.signal_group("-TERM");
        let _ = self.wait(Instant::now() + Duration::from_secs(3));
        self.signal_group("-KILL");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `cmd` to completion (at most [`STEP`]); output goes through files, so a
/// grandchild that keeps a descriptor open cannot block the test.
fn run(cmd: &mut Command) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let mut group = Group::spawn(
        cmd.stdin(Stdio::null())
            .stdout(File::create(&out).unwrap())
            .stderr(File::create(&err).unwrap()),
    );
    let status = group.wait(Instant::now() + STEP);
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let Some(status) = status else {
        panic!(
            "{cmd:?} did not finish in {STEP:?}\n--- stdout\n{}\n--- stderr\n{}",
            read(&out),
            read(&err)
        );
    };
    Output {
        status,
        stdout: read(&out),
        stderr: read(&err),
    }
}

/// Checks that the CLI at `bin` runs here at all, with a clear failure if not.
fn check_runs(home: &Home, bin: &Path, var: &str) -> String {
    let out = run(home.command(bin).arg("--version"));
    assert!(
        out.status.success() && !out.stdout.trim().is_empty(),
        "{var}={} does not run on this machine (`--version` failed): {out}",
        bin.display()
    );
    out.stdout.trim().to_owned()
}

/// The `interlink-p2p` that `install` registers by default: its own executable, as
/// the kernel names it (symlinks resolved).
fn p2p_path() -> PathBuf {
    std::fs::canonicalize(binary("interlink-p2p").unwrap()).unwrap()
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
    let p2p = p2p_path();
    let p2p = p2p.to_str().unwrap();

    let mut install = home.command(Path::new(p2p));
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

    let out = run(&mut claude_cmd(&["mcp", "get", "interlink"]));
    assert!(out.status.success(), "claude mcp get interlink: {out}");
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

    let mut uninstall = home.command(Path::new(p2p));
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

/// A stand-in for a model API on loopback, so a real agent CLI can run turns without
/// a network or an account:
/// - Anthropic Messages (`POST /v1/messages`, Claude Code): every request gets the
///   one-word answer "ok" (streamed when asked);
/// - OpenAI Responses (`POST /v1/responses`, Codex): the first request gets a call of
///   the `interlink` MCP server's `whoami` tool, every later one the answer "done";
/// - anything else: an empty JSON object (model lists and the like).
///
/// Keeps the request bodies, so a test can see what the agent was sent.
struct FakeModel {
    url: String,
    requests: Arc<Mutex<Vec<String>>>,
}

impl FakeModel {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let kept = requests.clone();
        // Threads end with the test process (nextest runs each test in its own).
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { break };
                let kept = kept.clone();
                std::thread::spawn(move || {
                    let _ = Self::serve(stream, &kept);
                });
            }
        });
        Self { url, requests }
    }

    /// Serves one keep-alive connection.
    fn serve(stream: TcpStream, kept: &Mutex<Vec<String>>) -> std::io::Result<()> {
        let mut reader = BufReader::new(stream.try_clone()?);
        let mut writer = stream;
        loop {
            let mut request_line = String::new();
            if reader.read_line(&mut request_line)? == 0 {
                return Ok(());
            }
            let mut length = 0;
            loop {
                let mut header = String::new();
                reader.read_line(&mut header)?;
                let header = header.trim_end();
                if header.is_empty() {
                    break;
                }
                if let Some((name, value)) = header.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body)?;
            let body = String::from_utf8_lossy(&body).into_owned();
            let mut words = request_line.split_whitespace();
            let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
            let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            let (content_type, reply) = if method != "POST" {
                (
                    "application/json",
                    r#"{"data": [], "models": []}"#.to_owned(),
                )
            } else if path.starts_with("/v1/messages") && !path.contains("count_tokens") {
                kept.lock().unwrap().push(body.clone());
                Self::answer(&request)
            } else if path.starts_with("/v1/responses") {
                let first = {
                    let mut kept = kept.lock().unwrap();
                    kept.push(body.clone());
                    kept.len() == 1
                };
                ("text/event-stream", Self::respond(first))
            } else {
                ("application/json", "{}".to_owned())
            };
            write!(
                writer,
                "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n{reply}",
                reply.len()
            )?;
            writer.flush()?;
        }
    }

    fn answer(request: &Value) -> (&'static str, String) {
        let model = request["model"].as_str().unwrap_or("fake");
        let usage = json!({"input_tokens": 1, "output_tokens": 1});
        if request["stream"] != true {
            let message = json!({"id": "msg_fake", "type": "message", "role": "assistant",
                "model": model, "content": [{"type": "text", "text": "ok"}],
                "stop_reason": "end_turn", "stop_sequence": null, "usage": usage});
            return ("application/json", message.to_string());
        }
        let events = [
            json!({"type": "message_start", "message": {"id": "msg_fake", "type": "message",
                "role": "assistant", "model": model, "content": [], "stop_reason": null,
                "stop_sequence": null, "usage": usage}}),
            json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": "ok"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn",
                "stop_sequence": null}, "usage": {"output_tokens": 1}}),
            json!({"type": "message_stop"}),
        ];
        let stream = events
            .iter()
            .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
            .collect();
        ("text/event-stream", stream)
    }

    /// A Responses API stream: a call of `mcp__interlink`'s `whoami` the `first` time,
    /// else the message "done".
    fn respond(first: bool) -> String {
        let item = if first {
            json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
                "namespace": "mcp__interlink", "name": "whoami", "arguments": "{}",
                "status": "completed"})
        } else {
            json!({"type": "message", "id": "msg_done", "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "done", "annotations": []}]})
        };
        let usage = json!({"input_tokens": 1, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 1, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 2});
        [
            json!({"type": "response.created",
                "response": {"id": "resp_fake", "status": "in_progress", "output": []}}),
            json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
            json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
            json!({"type": "response.completed", "response": {"id": "resp_fake",
                "status": "completed", "output": [item], "usage": usage}}),
        ]
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
        .collect()
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

/// Polls `check` every 50 ms until it returns something, failing with `what` (and
/// `context()`) at `deadline`.
fn poll<T>(
    deadline: Instant,
    what: &str,
    context: impl Fn() -> String,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}\n{}", context());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn claude_stop_hook_wakes_the_agent_when_a_message_arrives() {
    let Some(claude) = agent_cli("INTERLINK_TEST_CLAUDE_BIN", "Claude Code CLI") else {
        return;
    };
    let home = Home::new();
    check_runs(&home, &claude, "INTERLINK_TEST_CLAUDE_BIN");
    home.p2p(&["install", "claude"]);

    // A headless session of the same user: the overlay's bootstrap node, through which
    // `send` finds the session Claude Code starts.
    let anchor = Session::start_in(&home.interlink_home(), "anchor", LOOPBACK, &[]).unwrap();
    let bootstrap = anchor.loopback_addr().unwrap().to_owned();

    let model = FakeModel::start();
    let log = home.path().join("claude.log");
    let file = File::create(&log).unwrap();
    let mut cmd = home.command(&claude);
    cmd.args(["-p", "--input-format", "stream-json"])
        .args(["--output-format", "stream-json", "--verbose"])
        .env("ANTHROPIC_BASE_URL", &model.url)
        .env("ANTHROPIC_API_KEY", "sk-ant-test-not-a-key")
        .env("INTERLINK_BOOTSTRAP", &bootstrap)
        .stdin(Stdio::piped())
        .stderr(file.try_clone().unwrap())
        .stdout(file);
    let mut session = Group::spawn(&mut cmd);
    // Stream-json input keeps the session (and its MCP server) alive while stdin is
    // open, as an interactive one would be between prompts.
    let mut stdin = session.child.stdin.take().unwrap();
    writeln!(
        stdin,
        "{}",
        json!({"type": "user", "message": {"role": "user", "content": "hello"}})
    )
    .unwrap();

    let context = || {
        format!(
            "--- claude\n{}\n--- model requests: {}",
            std::fs::read_to_string(&log).unwrap_or_default(),
            model.requests().len()
        )
    };
    // The turn ends, and the Stop hook `interlink-p2p wait` runs for the session the
    // MCP server started under (it locks that session's wait.lock).
    let sessions = home.interlink_home().join("sessions");
    let deadline = Instant::now() + STEP;
    let id = poll(
        deadline,
        "no `interlink-p2p wait` for Claude Code's session",
        context,
        || {
            std::fs::read_dir(&sessions)
                .ok()?
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .find(|id| {
                    // inbox.jsonl: the server's node; wait.lock: the hook's `wait`.
                    let dir = sessions.join(id);
                    id != "anchor"
                        && dir.join("inbox.jsonl").exists()
                        && dir.join("wait.lock").exists()
                })
        },
    );

    // What Claude Code declared at `initialize`, as our server recorded it: the
    // declaration the e2e tests' client copies (`claude_code_capabilities`), so pairing
    // asks the human there as it does in the real CLI.
    // Written at `initialize`, which may come after the server has started its node.
    let client_file = sessions.join(&id).join("client.json");
    let client: Value = poll(
        Instant::now() + STEP,
        "our server never recorded Claude Code's initialize (client.json)",
        context,
        || serde_json::from_str(&std::fs::read_to_string(&client_file).ok()?).ok(),
    );
    assert!(
        client["capabilities"]["elicitation"].is_object(),
        "Claude Code no longer declares elicitation: {client}"
    );
    assert_eq!(
        client["pairing"], "asks the human (MCP elicitation)",
        "{client}"
    );
    let ours = serde_json::to_value(mcp_session::claude_code_capabilities()).unwrap();
    for (capability, declared) in ours.as_object().unwrap() {
        assert_eq!(
            &client["capabilities"][capability], declared,
            "our stand-in declares {capability} unlike Claude Code: {client}"
        );
    }

    let text = "PING from the overlay: what are you working on?";
    let out = run(home.command(&binary("interlink-p2p").unwrap()).args([
        "send",
        "--to",
        "self",
        "--session",
        &id,
        "--bootstrap",
        &bootstrap,
        "--listen",
        "/ip4/127.0.0.1/tcp/0",
        "--no-mdns",
        text,
    ]));
    assert!(
        out.status.success() && out.stdout.starts_with("delivered "),
        "send to Claude Code's session {id}: {out}\n{}",
        context()
    );

    // The hook exits 2 with the message; Claude Code (asyncRewake) starts a turn with it.
    poll(
        Instant::now() + DEADLINE,
        "the message did not wake the agent",
        context,
        || {
            model
                .requests()
                .iter()
                .any(|r| r.contains(text))
                .then_some(())
        },
    );
    drop(stdin);
}

/// `codex app-server` over stdio: initialize, then one request; returns its result.
fn codex_app_server(home: &Home, codex: &Path, method: &str, params: Value) -> Value {
    let mut group = Group::spawn(
        home.command(codex)
            .arg("app-server")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
    );
    let mut stdin = group.child.stdin.take().unwrap();
    let stdout = group.child.stdout.take().unwrap();
    let (tx, rx) = sync_channel::<String>(64);
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + STEP;
    let reply = |rx: &Receiver<String>, id: u64| -> Value {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("codex app-server: no reply {id}: {e}"));
            let msg: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            if msg["id"] == json!(id) {
                assert!(msg.get("error").is_none(), "codex app-server: {msg}");
                return msg["result"].clone();
            }
        }
    };
    let mut send = |msg: Value| writeln!(stdin, "{msg}").unwrap();
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"clientInfo": {"name": "interlink-e2e", "version": "0"}}}));
    reply(&rx, 1);
    send(json!({"jsonrpc": "2.0", "method": "initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": params}));
    reply(&rx, 2)
}

/// Our hooks as Codex sees them (`hooks/list` for the home directory).
fn codex_hooks(home: &Home, codex: &Path) -> (Vec<Value>, Value) {
    let result = codex_app_server(
        home,
        codex,
        "hooks/list",
        json!({"cwds": [home.path().to_str().unwrap()]}),
    );
    let entry = result["data"][0].clone();
    let ours = entry["hooks"]
        .as_array()
        .unwrap_or_else(|| panic!("hooks/list: {result}"))
        .iter()
        .filter(|h| h["server"] == "interlink")
        .cloned()
        .collect();
    (ours, entry)
}

/// Runs one whole `codex exec --strict-config` turn against [`FakeModel`]: the model
/// calls `interlink`'s `whoami`, then answers. Returns the thread id and what Codex
/// printed.
fn codex_exec_turn(home: &Home, codex: &Path) -> (String, String) {
    let model = FakeModel::start();
    let provider = format!(
        "model_providers.fake={{name=\"fake\",base_url=\"{}/v1\",wire_api=\"responses\",\
         request_max_retries=0,stream_max_retries=0,supports_websockets=false}}",
        model.url
    );
    let out = run(home
        .command(codex)
        .args(["exec", "--strict-config", "--skip-git-repo-check"])
        // Hook trust is the user's decision in Codex's TUI; this one run skips it so
        // the hooks themselves can be checked.
        .arg("--dangerously-bypass-hook-trust")
        .args(["-c", &provider, "-c", "model_provider=fake"])
        .args(["-c", "model=fake-model", "say hi"]));
    let printed = format!("{}{}", out.stdout, out.stderr);
    assert!(out.status.success(), "codex exec: {out}");
    // The thread id Codex prints in its header ("session id: <uuid>").
    let thread = printed
        .lines()
        .find_map(|l| l.trim().strip_prefix("session id: "))
        .unwrap_or_else(|| panic!("no session id in: {out}"))
        .to_owned();
    assert_eq!(
        model.requests().len(),
        2,
        "one request for the tool call, one after it: {out}"
    );
    (thread, printed)
}

#[test]
fn codex_lists_interlink_runs_its_hooks_and_forgets_both_after_uninstall() {
    let Some(codex) = agent_cli("INTERLINK_TEST_CODEX_BIN", "Codex CLI") else {
        return;
    };
    let home = Home::new();
    let version = check_runs(&home, &codex, "INTERLINK_TEST_CODEX_BIN");
    eprintln!("codex --version: {version}");
    let p2p = p2p_path();
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

    // A real turn: the SessionStart hook binds the server to the thread — under the
    // INTERLINK_HOME that reaches the server only through `env_vars` — the PreToolUse
    // matcher catches the `interlink` tool call, and no hook fails.
    let (thread, printed) = codex_exec_turn(&home, &codex);
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
    let bound = home.interlink_home().join("sessions").join(&thread);
    assert!(
        bound.join("inbox.jsonl").exists(),
        "the Codex thread {thread} has no interlink session in {}\n{printed}",
        bound.display()
    );
    for line in [
        "hook: SessionStart Completed",
        "hook: UserPromptSubmit Completed",
        "hook: PreToolUse Completed",
        "mcp: interlink/whoami (completed)",
    ] {
        assert!(
            printed.lines().any(|l| l.trim() == line),
            "no `{line}`:\n{printed}"
        );
    }
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

//! Driving the real agent CLIs (Claude Code, Codex) in tests: a throwaway user for
//! them ([`Home`]), children killed with their whole process group ([`Group`]), and a
//! model API on loopback ([`FakeModel`]) so they run real turns with no account and
//! no network.
//!
//! The CLIs come from `INTERLINK_TEST_CLAUDE_BIN` and `INTERLINK_TEST_CODEX_BIN`
//! (`eval "$(.ci/agent-clis)"` installs the pinned versions and prints them); see
//! [`agent_cli`].

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)] // test code: a panic is a failure report

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

use serde_json::{Value, json};

use crate::binary;

/// How long one CLI command may take (`claude mcp list` waits for the health checks).
pub const STEP: Duration = Duration::from_secs(60);

/// Where the CLI named by `var` is, or `None` (skipped) outside CI when it is unset.
pub fn agent_cli(var: &str, what: &str) -> Option<PathBuf> {
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
#[allow(missing_debug_implementations)]
pub struct Home {
    /// The directory, removed when dropped.
    pub dir: tempfile::TempDir,
}

impl Default for Home {
    fn default() -> Self {
        Self::new()
    }
}

impl Home {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".codex")).unwrap();
        std::fs::create_dir_all(dir.path().join("interlink")).unwrap();
        Self { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn codex_home(&self) -> PathBuf {
        self.path().join(".codex")
    }

    pub fn interlink_home(&self) -> PathBuf {
        self.path().join("interlink")
    }

    /// `program` with only this home's environment: nothing of the developer's own
    /// (API keys, `CLAUDE_CONFIG_DIR`, `CODEX_HOME`, `INTERLINK_*`) leaks in. The
    /// `INTERLINK_*` values reach the MCP servers the CLIs start: a loopback listener,
    /// no mDNS, this home's state directory.
    pub fn command(&self, program: &Path) -> Command {
        let mut c = Command::new(program);
        c.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("LANG", "C.UTF-8")
            .env("HOME", self.path())
            .env("CODEX_HOME", self.codex_home())
            .env("INTERLINK_HOME", self.interlink_home())
            .env("INTERLINK_LISTEN", "/ip4/127.0.0.1/tcp/0")
            .env("INTERLINK_MDNS", "0")
            // No host's well-known port: other tests' sessions run on this host too.
            .env("INTERLINK_PORT", "0")
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
    pub fn p2p(&self, args: &[&str]) -> String {
        let out = run(self.command(&binary("interlink-p2p").unwrap()).args(args));
        assert!(out.status.success(), "interlink-p2p {args:?}: {out}");
        out.stdout
    }
}

/// What a finished command printed.
#[allow(missing_debug_implementations)]
pub struct Output {
    /// How it ended.
    pub status: ExitStatus,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
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
#[allow(missing_debug_implementations)]
pub struct Group {
    pub child: Child,
}

impl Group {
    pub fn spawn(cmd: &mut Command) -> Self {
        let child = cmd
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
        Self { child }
    }

    pub fn wait(&mut self, deadline: Instant) -> Option<ExitStatus> {
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
    pub fn signal_group(&self, signal: &str) {
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
pub fn run(cmd: &mut Command) -> Output {
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
pub fn check_runs(home: &Home, bin: &Path, var: &str) -> String {
    let out = run(home.command(bin).arg("--version"));
    assert!(
        out.status.success() && !out.stdout.trim().is_empty(),
        "{var}={} does not run on this machine (`--version` failed): {out}",
        bin.display()
    );
    out.stdout.trim().to_owned()
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
#[allow(missing_debug_implementations)]
pub struct FakeModel {
    /// The base URL (`ANTHROPIC_BASE_URL`, or Codex's provider URL).
    pub url: String,
    requests: Arc<Mutex<Vec<String>>>,
    script: Arc<Mutex<Script>>,
}

/// A fresh number, for tool-use ids.
fn next_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Tool calls the fake model makes, one per main-loop request, before it answers.
#[derive(Default)]
struct Script {
    /// `{"name": …, "input": {…}}`, in order.
    steps: std::collections::VecDeque<Value>,
    /// When each step was served.
    served: Vec<Instant>,
}

impl FakeModel {
    pub fn start() -> Self {
        Self::scripted(Vec::new())
    }

    /// A fake model whose first main-loop Messages requests (those offering tools), or
    /// first Responses requests, each get a call of the next tool in `steps`
    /// (`{"name", "input"}`); the rest, "ok" (Messages) or as [`Self::start`]'s.
    pub fn scripted(steps: Vec<Value>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(Script {
            steps: steps.into(),
            served: Vec::new(),
        }));
        let (kept, steps) = (requests.clone(), script.clone());
        // Threads end with the test process (nextest runs each test in its own).
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { break };
                let (kept, steps) = (kept.clone(), steps.clone());
                std::thread::spawn(move || {
                    let _ = Self::serve(stream, &kept, &steps);
                });
            }
        });
        Self {
            url,
            requests,
            script,
        }
    }

    /// When each scripted tool call was handed to the agent.
    pub fn tool_calls_served(&self) -> Vec<Instant> {
        self.script.lock().unwrap().served.clone()
    }

    /// Serves one keep-alive connection.
    fn serve(
        stream: TcpStream,
        kept: &Mutex<Vec<String>>,
        script: &Mutex<Script>,
    ) -> std::io::Result<()> {
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
                let offers_tools = request["tools"].as_array().is_some_and(|t| !t.is_empty());
                let step = offers_tools
                    .then(|| {
                        let mut script = script.lock().unwrap();
                        let step = script.steps.pop_front();
                        if step.is_some() {
                            script.served.push(Instant::now());
                        }
                        step
                    })
                    .flatten();
                Self::answer(&request, step.as_ref())
            } else if path.starts_with("/v1/responses") {
                let first = {
                    let mut kept = kept.lock().unwrap();
                    kept.push(body.clone());
                    kept.len() == 1
                };
                let step = {
                    let mut script = script.lock().unwrap();
                    let step = script.steps.pop_front();
                    if step.is_some() {
                        script.served.push(Instant::now());
                    }
                    step
                };
                ("text/event-stream", Self::respond(first, step.as_ref()))
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

    /// A Messages API answer: a call of `tool` (`{"name", "input"}`) if given, else
    /// the text "ok"; streamed when the request asks for it.
    fn answer(request: &Value, tool: Option<&Value>) -> (&'static str, String) {
        let model = request["model"].as_str().unwrap_or("fake");
        let usage = json!({"input_tokens": 1, "output_tokens": 1});
        let (block, stop) = match tool {
            Some(t) => (
                json!({"type": "tool_use", "id": format!("toolu_{}", next_id()),
                    "name": t["name"], "input": t["input"]}),
                "tool_use",
            ),
            None => (json!({"type": "text", "text": "ok"}), "end_turn"),
        };
        if request["stream"] != true {
            let message = json!({"id": "msg_fake", "type": "message", "role": "assistant",
                "model": model, "content": [block],
                "stop_reason": stop, "stop_sequence": null, "usage": usage});
            return ("application/json", message.to_string());
        }
        let (start, delta) = if tool.is_some() {
            let mut empty = block.clone();
            empty["input"] = json!({});
            let partial = block["input"].to_string();
            (
                empty,
                json!({"type": "input_json_delta", "partial_json": partial}),
            )
        } else {
            (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": "ok"}),
            )
        };
        let events = [
            json!({"type": "message_start", "message": {"id": "msg_fake", "type": "message",
                "role": "assistant", "model": model, "content": [], "stop_reason": null,
                "stop_sequence": null, "usage": usage}}),
            json!({"type": "content_block_start", "index": 0, "content_block": start}),
            json!({"type": "content_block_delta", "index": 0, "delta": delta}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "message_delta", "delta": {"stop_reason": stop,
                "stop_sequence": null}, "usage": {"output_tokens": 1}}),
            json!({"type": "message_stop"}),
        ];
        let stream = events
            .iter()
            .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
            .collect();
        ("text/event-stream", stream)
    }

    /// A Responses API stream: a call of the scripted `step` if there is one — a
    /// freeform (custom) tool's call with `{"name", "input"}` where `input` is a string,
    /// such as `apply_patch`'s patch — else a call of `mcp__interlink`'s `whoami` the
    /// `first` time, else the message "done".
    fn respond(first: bool, step: Option<&Value>) -> String {
        let item = if let Some(step) = step {
            json!({"type": "custom_tool_call", "id": format!("ctc_{}", next_id()),
                "call_id": format!("call_{}", next_id()), "name": step["name"],
                "input": step["input"], "status": "completed"})
        } else if first {
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

    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

/// Polls `check` every 50 ms until it returns something, failing with `what` (and
/// `context()`) at `deadline`.
pub fn poll<T>(
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

/// `codex app-server` over stdio: initialize, then one request; returns its result.
pub fn codex_app_server(home: &Home, codex: &Path, method: &str, params: Value) -> Value {
    codex_app_server_in(&mut home.command(codex), method, params)
}

/// [`codex_app_server`] run by `codex` (a command of the Codex CLI with its environment).
pub fn codex_app_server_in(codex: &mut Command, method: &str, params: Value) -> Value {
    let mut group = Group::spawn(
        codex
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
pub fn codex_hooks(home: &Home, codex: &Path) -> (Vec<Value>, Value) {
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

/// The thread id `codex exec` prints in its header ("session id: <uuid>").
pub fn thread_of(out: &Output) -> String {
    format!("{}{}", out.stdout, out.stderr)
        .lines()
        .find_map(|l| l.trim().strip_prefix("session id: ").map(str::to_owned))
        .unwrap_or_else(|| panic!("no session id in: {out}"))
}

/// Runs one whole `codex exec --strict-config` turn against [`FakeModel`]: the model
/// calls `interlink`'s `whoami`, then answers. Returns the thread id and what Codex
/// printed. `command` is the `codex` command to add the turn's arguments to (default:
/// `home`'s).
pub fn codex_exec_turn(
    home: &Home,
    codex: &Path,
    command: Option<&mut Command>,
) -> (String, String) {
    let model = FakeModel::start();
    let provider = format!(
        "model_providers.fake={{name=\"fake\",base_url=\"{}/v1\",wire_api=\"responses\",\
         request_max_retries=0,stream_max_retries=0,supports_websockets=false}}",
        model.url
    );
    let mut own = home.command(codex);
    let out = run(command
        .unwrap_or(&mut own)
        .args(["exec", "--strict-config", "--skip-git-repo-check"])
        // Hook trust is the user's decision in Codex's TUI; this one run skips it so
        // the hooks themselves can be checked.
        .arg("--dangerously-bypass-hook-trust")
        .args(["-c", &provider, "-c", "model_provider=fake"])
        .args(["-c", "model=fake-model", "say hi"]));
    let printed = format!("{}{}", out.stdout, out.stderr);
    assert!(out.status.success(), "codex exec: {out}");
    let thread = thread_of(&out);
    assert_eq!(
        model.requests().len(),
        2,
        "one request for the tool call, one after it: {out}"
    );
    (thread, printed)
}

/// Asserts that the Codex `thread` has its interlink session in `home`'s
/// `INTERLINK_HOME` and that Codex printed each of `lines` (e.g. `hook: SessionStart
/// Completed`) for the turn.
pub fn assert_codex_turn_bound(home: &Home, thread: &str, printed: &str, lines: &[&str]) {
    let bound = home.interlink_home().join("sessions").join(thread);
    assert!(
        bound.join("inbox.jsonl").exists(),
        "the Codex thread {thread} has no interlink session in {}\n{printed}",
        bound.display()
    );
    for line in lines {
        assert!(
            printed.lines().any(|l| l.trim() == *line),
            "no `{line}`:\n{printed}"
        );
    }
}

//! `interlink-p2p mcp` sessions driven by an rmcp client, as an agent host drives them.
//!
//! The client talks to the child over its stdin/stdout. Every stdout line also goes
//! into a record, so a test can check that stdout carried nothing but JSON-RPC. Custom
//! notifications (channel mode) are collected in a bounded channel.

use std::{
    path::{Path, PathBuf},
    process::ExitStatus,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use rmcp::{
    ClientHandler, RoleClient,
    model::{
        CallToolRequestParams, CallToolResult, ClientConfig, CustomNotification, Implementation,
    },
    service::{NotificationContext, RunningService},
};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader},
    process::{Child, Command},
    sync::mpsc,
};

use crate::{process::command, user::User};

/// Most custom notifications kept unread by a test.
const NOTIFICATION_CAPACITY: usize = 256;

/// Flags that keep an MCP session on loopback without mDNS.
pub const LOOPBACK: &[&str] = &["--listen", "/ip4/127.0.0.1/tcp/0", "--no-mdns"];

/// Presence windows short enough for tests (a session away within seconds).
pub const STEADY: &[(&str, &str)] = &[
    ("INTERLINK_TEST_LIVE_WINDOW_MS", "10000"),
    ("INTERLINK_TEST_HEARTBEAT_MS", "1000"),
];

/// The deadline of one step of a test.
pub fn deadline() -> Instant {
    Instant::now() + crate::process::DEADLINE
}

/// Starts `interlink-p2p mcp --session <session>` in `user`'s home on loopback without
/// mDNS ([`LOOPBACK`]), with the [`STEADY`] presence knobs and `env` added,
/// bootstrapped to `boot` if given.
pub async fn start_on_loopback(
    user: &User,
    session: &str,
    boot: Option<&str>,
    env: &[(&str, &str)],
) -> anyhow::Result<McpSession> {
    let mut args: Vec<&str> = LOOPBACK.to_vec();
    if let Some(b) = boot {
        args.extend(["--bootstrap", b]);
    }
    let mut all_env = STEADY.to_vec();
    all_env.extend_from_slice(env);
    McpSession::start(user.home(), session, &args, &all_env).await
}

/// Like [`start_on_loopback`], the session working in `dir` (its cwd: a repository,
/// for claims).
pub async fn start_on_loopback_in(
    user: &User,
    session: &str,
    boot: Option<&str>,
    dir: &Path,
) -> anyhow::Result<McpSession> {
    start_in_dir(user.home(), session, boot, dir, None, LOOPBACK).await
}

/// Starts `interlink-p2p mcp --session <session> LISTEN` for the interlink home `home`
/// working in `dir`, in the network namespace `netns` if given, with the [`STEADY`]
/// knobs, bootstrapped to `boot` if given.
pub async fn start_in_dir(
    home: &Path,
    session: &str,
    boot: Option<&str>,
    dir: &Path,
    netns: Option<&str>,
    listen: &[&str],
) -> anyhow::Result<McpSession> {
    let mut args: Vec<&str> = vec!["--session", session];
    args.extend_from_slice(listen);
    if let Some(b) = boot {
        args.extend(["--bootstrap", b]);
    }
    let mut cmd = crate::process::command_in(netns, home, STEADY)?;
    cmd.current_dir(dir).arg("mcp").args(&args);
    McpSession::launch(cmd, home, session, None, Human::Approves, false).await
}

/// Waits (one step's [`deadline`]) until `viewer`'s `discover` lists `session`, of any
/// identity; returns that `discover` result.
pub async fn sees(viewer: &McpSession, session: &str) -> anyhow::Result<Value> {
    viewer
        .poll("discover", serde_json::json!({}), deadline(), |v| {
            session_ids(v).contains(session)
        })
        .await
}

/// The session ids a `discover` result lists, of every identity.
pub fn session_ids(discover: &Value) -> std::collections::BTreeSet<String> {
    discover["identities"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|i| i["sessions"].as_array().into_iter().flatten())
        .filter_map(|s| s["session_id"].as_str().map(str::to_owned))
        .collect()
}

/// The first loopback listen address of `s`, from `whoami`.
pub async fn loopback_addr(s: &McpSession) -> String {
    let Ok((_, who)) = s.ok("whoami", serde_json::json!({})).await else {
        return String::new();
    };
    who["listen_addrs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .find(|a| a.starts_with("/ip4/127.0.0.1/"))
        .unwrap_or_default()
        .to_owned()
}

/// The human behind a test client, as far as the MCP server can ask them
/// (`accept_pair` and `add_peer` ask before admitting a key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Human {
    /// The client declares what Claude Code declares ([`claude_code_capabilities`]);
    /// the human answers every confirmation with yes.
    Approves,
    /// Same declaration; the human says no.
    Declines,
    /// The client declares no elicitation: nobody can be asked.
    Absent,
}

/// The client capabilities Claude Code declares (2.1.332: roots with `listChanged`,
/// elicitation by form and by URL), on protocol 2026-07-28 in every request's `_meta`.
/// Checked against the real CLI by `tests/e2e/install_real_cli.rs`, which reads what our
/// server recorded in `client.json`.
pub fn claude_code_capabilities() -> rmcp::model::ClientCapabilities {
    let mut caps = rmcp::model::ClientCapabilities::default();
    let mut roots = rmcp::model::RootsCapabilities::default();
    roots.list_changed = Some(true);
    caps.roots = Some(roots);
    caps.elicitation = Some(
        rmcp::model::ElicitationCapability::new()
            .with_form(rmcp::model::FormElicitationCapability::default())
            .with_url(rmcp::model::UrlElicitationCapability::new()),
    );
    caps
}

/// The protocol Claude Code speaks (2.1.332): no `initialize`, client context in each
/// request's `_meta`, no server-to-client requests (a form comes back as an
/// input-required result the client answers by calling again).
pub const CLAUDE_CODE_PROTOCOL: &str = "2026-07-28";

/// The client side: records custom notifications, answers confirmations as `human`.
#[derive(Debug, Clone)]
pub struct Recorder {
    notes: mpsc::Sender<CustomNotification>,
    /// The client name sent at `initialize` (default: rmcp's).
    name: Option<String>,
    human: Human,
    /// Speaks Claude Code's protocol ([`CLAUDE_CODE_PROTOCOL`]).
    like_claude: bool,
    /// Every confirmation asked, its message.
    asked: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Recorder {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        if let Some(name) = &self.name {
            info.client_info = Implementation::new(name.clone(), "0.0.0");
        }
        if self.human != Human::Absent {
            info.capabilities = claude_code_capabilities();
        }
        if !self.like_claude {
            // The handshake of the hosts before Claude Code moved to 2026-07-28.
            info.protocol_version = rmcp::model::ProtocolVersion::V_2025_06_18;
        }
        info
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        use rmcp::model::{ElicitResult, ElicitationAction};
        if let Ok(mut asked) = self.asked.lock() {
            asked.push(match &request {
                rmcp::model::ElicitRequestParams::FormElicitationParams { message, .. } => {
                    message.clone()
                }
                other => format!("{other:?}"),
            });
        }
        let mut result = ElicitResult::new(ElicitationAction::Accept);
        result.content = Some(serde_json::json!({"approve": self.human == Human::Approves}));
        Ok(result)
    }

    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.notes.try_send(notification);
    }
}

/// A running `interlink-p2p mcp` with a connected client. The child is killed when
/// dropped.
#[derive(Debug)]
pub struct McpSession {
    pub client: RunningService<RoleClient, Recorder>,
    /// Custom notifications received, oldest first.
    pub notes: mpsc::Receiver<CustomNotification>,
    /// Every line the child wrote to stdout.
    pub stdout: Arc<Mutex<Vec<String>>>,
    /// The session id.
    pub session: String,
    /// The confirmations the server asked the human, their messages.
    pub asked: Arc<Mutex<Vec<String>>>,
    child: Child,
    stderr_path: PathBuf,
}

impl McpSession {
    /// Starts `interlink-p2p mcp --session <session> ARGS` in `home` with `env` added and
    /// completes the MCP handshake.
    pub async fn start(
        home: &Path,
        session: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        let mut all = vec!["--session", session];
        all.extend_from_slice(args);
        Self::spawn(home, session, &all, env).await
    }

    /// Starts `interlink-p2p mcp ARGS` (no `--session` added) in `home` with `env`
    /// added, and completes the MCP handshake; `label` names its stderr log.
    pub async fn spawn(
        home: &Path,
        label: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        Self::spawn_as(home, label, args, env, None).await
    }

    /// Like [`McpSession::spawn`], the client introducing itself as `client_name` at
    /// `initialize`.
    pub async fn spawn_as(
        home: &Path,
        label: &str,
        args: &[&str],
        env: &[(&str, &str)],
        client_name: Option<&str>,
    ) -> anyhow::Result<Self> {
        Self::spawn_with(home, label, args, env, client_name, Human::Approves, false).await
    }

    /// Like [`McpSession::spawn_as`], with `human` behind the client, which speaks
    /// Claude Code's protocol ([`CLAUDE_CODE_PROTOCOL`]) if `like_claude`, else the
    /// `initialize` handshake.
    pub async fn spawn_with(
        home: &Path,
        label: &str,
        args: &[&str],
        env: &[(&str, &str)],
        client_name: Option<&str>,
        human: Human,
        like_claude: bool,
    ) -> anyhow::Result<Self> {
        let mut cmd = command(home, env)?;
        cmd.arg("mcp").args(args);
        Self::launch(cmd, home, label, client_name, human, like_claude).await
    }

    /// Like [`McpSession::start`], in the network namespace `netns` (a lab's host).
    pub async fn start_in_netns(
        netns: &str,
        home: &Path,
        session: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        let mut cmd = crate::process::command_in(Some(netns), home, env)?;
        cmd.args(["mcp", "--session", session]).args(args);
        Self::launch(cmd, home, session, None, Human::Approves, false).await
    }

    /// Spawns `cmd` (an `interlink-p2p mcp` command) and completes the handshake.
    async fn launch(
        mut cmd: std::process::Command,
        home: &Path,
        label: &str,
        client_name: Option<&str>,
        human: Human,
        like_claude: bool,
    ) -> anyhow::Result<Self> {
        let session = label;
        let stderr_path = home.join(format!("mcp-{session}.{}.stderr.log", nanos()));
        cmd.stderr(std::fs::File::create(&stderr_path)?);
        let mut cmd = Command::from(cmd);
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().context("spawning interlink-p2p mcp")?;
        let child_in = child.stdin.take().context("no stdin pipe")?;
        let child_out = child.stdout.take().context("no stdout pipe")?;
        // Tee the child's stdout: into the record, and on to the client.
        let (client_read, mut tee_write) = tokio::io::duplex(1 << 20);
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let record = stdout.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(child_out).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(mut r) = record.lock() {
                    r.push(line.clone());
                }
                let mut bytes = line.into_bytes();
                bytes.push(b'\n');
                if tee_write.write_all(&bytes).await.is_err() {
                    break;
                }
            }
        });
        let (tx, notes) = mpsc::channel(NOTIFICATION_CAPACITY);
        let asked = Arc::new(Mutex::new(Vec::new()));
        let recorder = Recorder {
            notes: tx,
            name: client_name.map(str::to_owned),
            human,
            like_claude,
            asked: asked.clone(),
        };
        let lifecycle = if like_claude {
            rmcp::service::ClientLifecycleMode::Discover {
                preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
            }
        } else {
            rmcp::service::ClientLifecycleMode::Initialize
        };
        let client = rmcp::service::serve_client_with_lifecycle(
            recorder,
            (client_read, child_in),
            lifecycle,
        )
        .await
        .with_context(|| format!("MCP handshake failed; stderr:\n{}", read(&stderr_path)))?;
        Ok(Self {
            client,
            notes,
            stdout,
            session: session.to_owned(),
            asked,
            child,
            stderr_path,
        })
    }

    /// Calls `tool` with `args` (a JSON object).
    pub async fn call(&self, tool: &str, args: Value) -> anyhow::Result<CallToolResult> {
        let mut params = CallToolRequestParams::new(tool.to_owned());
        if let Value::Object(map) = args {
            params = params.with_arguments(map);
        }
        self.client
            .call_tool(params)
            .await
            .with_context(|| format!("{tool}: protocol error; stderr:\n{}", self.stderr()))
    }

    /// Calls `tool` and requires success; returns (text, structuredContent).
    pub async fn ok(&self, tool: &str, args: Value) -> anyhow::Result<(String, Value)> {
        let r = self.call(tool, args).await?;
        let text = text_of(&r);
        if r.is_error == Some(true) {
            bail!("{tool} failed: {text}");
        }
        Ok((text, r.structured_content.unwrap_or(Value::Null)))
    }

    /// Calls `tool` and requires a tool error; returns its text.
    pub async fn err(&self, tool: &str, args: Value) -> anyhow::Result<String> {
        let r = self.call(tool, args).await?;
        let text = text_of(&r);
        if r.is_error != Some(true) {
            bail!("{tool} succeeded but should have failed: {text}");
        }
        Ok(text)
    }

    /// Calls `tool` until `check` accepts its structuredContent or `deadline` passes.
    pub async fn poll(
        &self,
        tool: &str,
        args: Value,
        deadline: Instant,
        check: impl Fn(&Value) -> bool,
    ) -> anyhow::Result<Value> {
        loop {
            let (_, value) = self.ok(tool, args.clone()).await?;
            if check(&value) {
                return Ok(value);
            }
            if Instant::now() >= deadline {
                bail!("{tool} never showed the expected state; last: {value}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The texts of the session's unread messages, oldest first, once `done` accepts
    /// them or `deadline` passes (`receive_messages` does not consume them).
    pub async fn unread_texts_until(
        &self,
        deadline: Instant,
        done: impl Fn(&[String]) -> bool,
    ) -> anyhow::Result<Vec<String>> {
        loop {
            let (_, got) = self.ok("receive_messages", json!({"limit": 100})).await?;
            let texts: Vec<String> = got["messages"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| m["text"].as_str().map(str::to_owned))
                .collect();
            if done(&texts) || Instant::now() >= deadline {
                return Ok(texts);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// What the child wrote to stderr so far.
    pub fn stderr(&self) -> String {
        read(&self.stderr_path)
    }

    /// The child's pid.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Closes the client (and so the child's stdin) and waits for the child to exit;
    /// returns its status and how long it took after the close.
    pub async fn close(self, deadline: Instant) -> anyhow::Result<(ExitStatus, Duration)> {
        let Self {
            client,
            mut child,
            stderr_path,
            ..
        } = self;
        let started = Instant::now();
        let _ = client.cancel().await;
        wait_exit(&mut child, &stderr_path, started, deadline).await
    }

    /// Sends SIGTERM and waits for the child to exit; returns status and duration.
    pub async fn terminate(self, deadline: Instant) -> anyhow::Result<(ExitStatus, Duration)> {
        self.signal("-TERM", deadline).await
    }

    /// Kills the child with SIGKILL — no goodbye, no flush, as a crash would — and
    /// waits for it to exit.
    pub async fn kill(self, deadline: Instant) -> anyhow::Result<(ExitStatus, Duration)> {
        self.signal("-KILL", deadline).await
    }

    async fn signal(
        mut self,
        signal: &str,
        deadline: Instant,
    ) -> anyhow::Result<(ExitStatus, Duration)> {
        let pid = self.pid().context("child already reaped")?;
        let started = Instant::now();
        let status = std::process::Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()?;
        anyhow::ensure!(status.success(), "kill {signal} {pid} failed");
        wait_exit(&mut self.child, &self.stderr_path, started, deadline).await
    }

    /// Stdout lines that are not JSON-RPC 2.0 messages.
    pub fn non_jsonrpc_stdout(&self) -> Vec<String> {
        let lines = self.stdout.lock().map(|l| l.clone()).unwrap_or_default();
        lines
            .into_iter()
            .filter(|l| {
                serde_json::from_str::<Value>(l)
                    .map(|v| v["jsonrpc"] != "2.0")
                    .unwrap_or(true)
            })
            .collect()
    }
}

async fn wait_exit(
    child: &mut Child,
    stderr_path: &Path,
    started: Instant,
    deadline: Instant,
) -> anyhow::Result<(ExitStatus, Duration)> {
    let left = deadline.saturating_duration_since(Instant::now());
    match tokio::time::timeout(left, child.wait()).await {
        Ok(status) => Ok((status?, started.elapsed())),
        Err(_) => bail!("mcp did not exit in time; stderr:\n{}", read(stderr_path)),
    }
}

/// The text content of a tool result, joined.
pub fn text_of(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

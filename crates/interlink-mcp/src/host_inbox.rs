//! Claude Code's own cross-session inbox as this session's last mile.
//!
//! Since 2.1.224 every Claude Code session binds an inbox socket (a Unix socket, its
//! user's only; on Windows a named pipe, see `sock`) and exports its path to the processes it starts, this MCP server among
//! them (`CLAUDE_CODE_MESSAGING_SOCKET`, with `CLAUDE_CODE_MESSAGING_TOKEN` proving a
//! connection comes from the session's own child). A line written there is read by the
//! model between tool calls of a busy turn, or starts a new turn when the session is
//! idle — the push the Stop hook cannot give. The vendor documents the socket for
//! scripts and hooks (code.claude.com/docs/en/cross-session-messaging, "The session's
//! inbox socket"); this module is that contract and nothing more:
//!
//! - [`HostInbox`]: where the socket is (the environment, else the parent's entry in
//!   Claude Code's session registry, else the entry of its session id), and [`HostInbox::post`]: one connection per
//!   frame — the auth line, the frame, half-close, wait for the session to close.
//! - [`frame`]: a `user` frame whose text is one message rendered as everywhere else
//!   (verified sender in a header line, the peer's text in a fenced block), inside
//!   the `<cross-session-message>` envelope that names our reply socket.
//! - [`ReplySocket`]: Claude Code never answers on the connection; it reports what it
//!   did with a frame (`held` for the user's approval, later `delivered`, or
//!   `expired`/`refused`/`dropped`) as a new connection to the frame's `from`
//!   address, which must be a socket in the same directory as its own. Connections
//!   from any process but the parent Claude Code are ignored.
//! - [`HandoverFile`]: what was handed over, written for `interlink-p2p wait` (the
//!   Stop hook), so a message reaches the agent once: through the socket, or — when
//!   the socket is gone, refuses it, or the host holds it — through the hook.
//!
//! Claude Code accepts a frame silently: no answer means the model will see it.

use std::{
    collections::BTreeSet,
    io,
    path::{Path, PathBuf},
    time::Duration,
};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader},
    sync::{Semaphore, mpsc},
};
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::{files::write_replacing, paths::SessionDir};

mod sock;

/// Longest wait for the host's socket to accept a connection.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Longest wait for the host to close a connection after reading a frame (its own
/// senders wait 5 s).
pub(crate) const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest line the host reads (characters; a longer one drops the connection).
pub(crate) const MAX_FRAME: usize = 1 << 20;
/// Longest receipt line read from the host, and most bytes of one receipt connection.
pub(crate) const MAX_RECEIPT_BYTES: usize = 64 * 1024;
/// Receipt connections read at once; more wait for the accept loop.
pub(crate) const RECEIPT_CONNECTIONS: usize = 8;
/// Receipts waiting for the worker.
pub(crate) const RECEIPT_QUEUE: usize = 64;
/// Most message keys [`HandoverFile`] lists in each of its sets.
pub(crate) const MAX_LISTED: usize = 4096;
/// The name our frames give as their sender (the verified one is in the text).
pub(crate) const FROM_NAME: &str = "interlink-p2p";

/// Where the agent host's inbox socket is, and how to prove we are its child.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostInbox {
    socket: PathBuf,
    token: Option<String>,
    /// The process listening on the socket, as the kernel named it at the last
    /// [`HostInbox::probe`].
    host_pid: Option<u32>,
}

/// Posting a frame failed: the socket is gone, refused the connection, or stalled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PostError {
    /// The path is not a socket (or is a symbolic link, which is never followed).
    #[error("{} is not a socket", .0.display())]
    NotASocket(PathBuf),
    /// Connecting or writing failed.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The socket.
        path: PathBuf,
        /// What the operating system reported.
        source: io::Error,
    },
    /// The host did not accept the connection in time.
    #[error("{} did not accept a connection within {CONNECT_TIMEOUT:?}", .0.display())]
    Timeout(PathBuf),
    /// The frame is longer than the host reads.
    #[error("the frame is {0} bytes, over the host's {MAX_FRAME}")]
    TooLong(usize),
}

/// `0` (or `false`, `off`, `no`) keeps messages out of Claude Code's own inbox socket:
/// the session then wakes its agent through the Stop hook (or channels) only.
pub const HOST_INBOX: &str = "INTERLINK_HOST_INBOX";

impl HostInbox {
    /// The socket of the Claude Code session that started this process: its exported
    /// path, else the `messagingSocketPath` of the parent's registry entry
    /// (`<config dir>/sessions/<parent pid>.json`), else of the entry whose session id
    /// is `CLAUDE_CODE_SESSION_ID`. `None` when there is none, or when
    /// [`HOST_INBOX`] turns the path off.
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> Option<Self> {
        use interlink_store::env::{CLAUDE_MESSAGING_SOCKET, CLAUDE_MESSAGING_TOKEN};
        if env(HOST_INBOX).is_some_and(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "0" | "false" | "off" | "no"
            )
        }) {
            return None;
        }
        let nonempty = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        let socket = nonempty(CLAUDE_MESSAGING_SOCKET)
            .map(PathBuf::from)
            .or_else(|| registry_socket(&env, sock::parent_pid()?))?;
        if !socket.is_absolute() {
            return None;
        }
        let token = nonempty(CLAUDE_MESSAGING_TOKEN).filter(|t| is_token(t));
        Some(Self {
            socket,
            token,
            host_pid: None,
        })
    }

    /// The host's socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Whether the socket is there and accepts a connection (closed at once: the host
    /// takes an empty connection for a liveness probe, as its own senders make); notes
    /// the pid of the process listening ([`HostInbox::host_pid`]).
    pub async fn probe(&mut self) -> bool {
        let Ok(stream) = self.connect().await else {
            return false;
        };
        self.host_pid = sock::server_pid(&stream);
        true
    }

    /// The process listening on the socket when it was probed: the host, whose
    /// connections alone carry receipts ([`ReplySocket::serve`]).
    pub fn host_pid(&self) -> Option<u32> {
        self.host_pid
    }

    async fn connect(&self) -> Result<sock::Stream, PostError> {
        let io_err = |source| PostError::Io {
            path: self.socket.clone(),
            source,
        };
        if !sock::check_address(&self.socket).map_err(io_err)? {
            return Err(PostError::NotASocket(self.socket.clone()));
        }
        match sock::connect(&self.socket, CONNECT_TIMEOUT).await {
            None => Err(PostError::Timeout(self.socket.clone())),
            Some(connected) => connected.map_err(io_err),
        }
    }

    /// Writes one frame (a JSON line from [`frame`]) on a connection of its own: the
    /// auth line first when there is a token, then the frame, then half-close, and
    /// waits (at most [`CLOSE_TIMEOUT`]) for the host to close its side. Success means
    /// the host read the whole frame; what it did with it comes later, as a receipt.
    pub async fn post(&self, frame: &str) -> Result<(), PostError> {
        if frame.len() > MAX_FRAME {
            return Err(PostError::TooLong(frame.len()));
        }
        let mut stream = self.connect().await?;
        let io_err = |source| PostError::Io {
            path: self.socket.clone(),
            source,
        };
        let mut bytes = String::with_capacity(frame.len() + 64);
        if let Some(token) = &self.token {
            bytes.push_str(&json!({"type": "auth", "token": token}).to_string());
            bytes.push('\n');
        }
        bytes.push_str(frame);
        bytes.push('\n');
        stream.write_all(bytes.as_bytes()).await.map_err(io_err)?;
        if !sock::finish(stream, CLOSE_TIMEOUT).await.map_err(io_err)? {
            // It has the bytes; a late close is not a lost frame.
            debug!(socket = %self.socket.display(), "the host did not close the connection in time");
        }
        Ok(())
    }
}

/// A peer token is 32 lowercase hex digits (16 random bytes).
fn is_token(t: &str) -> bool {
    t.len() == 32 && t.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Registry entries looked at when searching for a session id.
const REGISTRY_SCAN: usize = 256;

/// The user's home directory: `HOME`, else (on Windows, where `HOME` is usually unset)
/// `USERPROFILE`. Claude Code and Codex keep their files under it on every platform.
pub fn user_home(env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let nonempty = |k: &str| env(k).filter(|v| !v.trim().is_empty());
    nonempty("HOME")
        .or_else(|| cfg!(windows).then(|| nonempty("USERPROFILE")).flatten())
        .map(PathBuf::from)
}

/// The `messagingSocketPath` in Claude Code's session registry
/// (`$CLAUDE_CONFIG_DIR/sessions/`, else `~/.claude/sessions/`) of process `pid` (our
/// parent), else of the entry whose `sessionId` is `CLAUDE_CODE_SESSION_ID` (a server
/// started through a wrapper process).
fn registry_socket(env: &impl Fn(&str) -> Option<String>, pid: u32) -> Option<PathBuf> {
    let config = env("CLAUDE_CONFIG_DIR")
        .filter(|v| !v.trim().is_empty())
        .map(PathBuf::from)
        .or_else(|| user_home(env).map(|h| h.join(".claude")))?;
    let sessions = config.join("sessions");
    let read = |path: &Path| -> Option<Value> {
        let meta = std::fs::metadata(path).ok()?;
        // An entry is a few hundred bytes; anything large is not one.
        if meta.len() > 64 * 1024 {
            return None;
        }
        serde_json::from_slice(&std::fs::read(path).ok()?).ok()
    };
    let socket = |entry: &Value| entry["messagingSocketPath"].as_str().map(PathBuf::from);
    if let Some(entry) = read(&sessions.join(format!("{pid}.json")))
        && entry["pid"].as_u64() == Some(u64::from(pid))
    {
        return socket(&entry);
    }
    let id = env(interlink_store::env::CLAUDE_SESSION).filter(|v| !v.trim().is_empty())?;
    std::fs::read_dir(&sessions)
        .ok()?
        .flatten()
        .take(REGISTRY_SCAN)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
        .filter_map(|e| read(&e.path()))
        .find(|entry| entry["sessionId"].as_str() == Some(id.trim()))
        .and_then(|entry| socket(&entry))
}

/// The `user` frame carrying `text` (one rendered message) under the id `msg_id` (a
/// UUID, echoed in the host's receipts as `orig_msg_id`), with `reply` as the address
/// receipts go to. The text goes inside the host's own envelope, which names no mode
/// and no session: every attribute there is the sender's claim, so the verified
/// sender is in the text, under interlink's framing.
pub(crate) fn frame(text: &str, msg_id: &str, reply: &Path) -> String {
    let from = format!("uds:{}", reply.display());
    // The host accepts an envelope only if it re-serializes to the same string; a path
    // that would need escaping in an attribute goes without one (the host then wraps
    // the text as a whole).
    let plain = |s: &str| !s.contains(['"', '<', '>', '&', '\n', '\r']);
    let content = if plain(&from) {
        format!(
            "<cross-session-message from=\"{from}\" from-name=\"{FROM_NAME}\">\n{text}\n</cross-session-message>"
        )
    } else {
        text.to_owned()
    };
    json!({
        "type": "user",
        "msgV": 1,
        "msg_id": msg_id,
        "priority": "next",
        "from": from,
        "message": {"role": "user", "content": content},
    })
    .to_string()
}

/// A fresh UUID (version 4) naming one frame.
pub(crate) fn frame_id() -> String {
    let mut b = [0u8; 16];
    if getrandom::fill(&mut b).is_err() {
        // No OS randomness: a time-based id is unique enough to match receipts.
        b[..16].copy_from_slice(
            &interlink_net::Clock::system()
                .now_ms()
                .to_be_bytes()
                .repeat(2),
        );
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// What the host did with frames we sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HostReceipt {
    /// The frames it is about (`orig_msg_id`, and a drop's `dropped_msg_ids`).
    pub frames: Vec<String>,
    /// What happened.
    pub status: HostStatus,
}

/// A frame's fate, as the host reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum HostStatus {
    /// Held for the user's approval (`crossSessionInbound`, or permission-mode parity).
    Held,
    /// A held frame was released to the model.
    Delivered,
    /// The model will not see it: `expired`, `refused`, `denied` or `dropped` (the
    /// host's word, with its detail).
    NotDelivered(String),
}

/// Parses one line a host sent to our reply socket; `None` for anything but a
/// `peer_message_status` control frame naming a frame.
pub(crate) fn parse_receipt(line: &str) -> Option<HostReceipt> {
    let v: Value = serde_json::from_str(line).ok()?;
    if v["type"] != "control" || v["action"] != "peer_message_status" {
        return None;
    }
    let status = v["status"].as_str()?;
    let mut frames: Vec<String> = v["orig_msg_id"]
        .as_str()
        .map(str::to_owned)
        .into_iter()
        .collect();
    if let Some(ids) = v["dropped_msg_ids"].as_array() {
        frames.extend(ids.iter().filter_map(|i| i.as_str().map(str::to_owned)));
    }
    frames.truncate(MAX_LISTED);
    if frames.is_empty() {
        return None;
    }
    let detail = [v["status_detail"].as_str(), v["drop_reason"].as_str()]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(", ");
    let status = match status {
        "held" => HostStatus::Held,
        "delivered" => HostStatus::Delivered,
        other if detail.is_empty() => HostStatus::NotDelivered(other.to_owned()),
        other => HostStatus::NotDelivered(format!("{other} ({detail})")),
    };
    Some(HostReceipt { frames, status })
}

/// Our socket for the host's receipts: `<pid>.sock` beside the host's own socket (the
/// host sends receipts only there), removed when dropped.
#[derive(Debug)]
pub(crate) struct ReplySocket {
    path: PathBuf,
    listener: Option<sock::Listener>,
}

impl ReplySocket {
    /// Binds beside `host_socket`. Unix: `<our pid>.sock`, or `<our pid>-<8 hex>.sock`
    /// if a live socket has that name (a stale one is replaced); Windows: a new
    /// `cc-msg-<32 hex>` pipe in the host's namespace.
    pub(crate) fn bind_beside(host_socket: &Path) -> io::Result<Self> {
        let mut last = io::Error::other("no name to bind");
        for path in sock::reply_names(host_socket)? {
            match sock::bind(&path) {
                Ok(listener) => {
                    return Ok(Self {
                        path,
                        listener: Some(listener),
                    });
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// The socket's path (the frames' `from` address).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Reads receipts until `cancel` fires, handing each to `tx`. Only connections
    /// from process `host_pid` count (its credentials, checked by the kernel); at most
    /// [`RECEIPT_CONNECTIONS`] are read at once, each bounded in bytes and time.
    pub(crate) async fn serve(
        mut self,
        host_pid: u32,
        tx: mpsc::Sender<HostReceipt>,
        cancel: CancellationToken,
    ) {
        let Some(mut listener) = self.listener.take() else {
            return;
        };
        let slots = std::sync::Arc::new(Semaphore::new(RECEIPT_CONNECTIONS));
        loop {
            let accepted = tokio::select! {
                () = cancel.cancelled() => return,
                a = listener.accept() => a,
            };
            let stream = match accepted {
                Ok(s) => s,
                Err(e) => {
                    warn!("host inbox: accepting a receipt connection: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let from_host = sock::client_pid(&stream) == Some(host_pid);
            if !from_host {
                // A probe (`interlink-p2p wait` checking we are alive) or a stranger
                // process of this user: nothing it writes counts.
                continue;
            }
            let Ok(permit) = slots.clone().try_acquire_owned() else {
                continue;
            };
            let tx = tx.clone();
            tokio::spawn(async move {
                let _permit = permit;
                let _ = tokio::time::timeout(CLOSE_TIMEOUT, read_receipts(stream, &tx)).await;
            });
        }
    }
}

async fn read_receipts(stream: sock::Incoming, tx: &mpsc::Sender<HostReceipt>) {
    let mut lines = BufReader::new(stream.take(MAX_RECEIPT_BYTES as u64)).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Some(r) = parse_receipt(&line) else {
            // The host's own wording tells the model to reply to `from`: a
            // `SendMessage` lands here, where nothing carries it on.
            if line.contains("\"type\":\"user\"") {
                warn!(
                    "host inbox: a SendMessage reached interlink's reply socket and was dropped; \
                     replies to overlay peers go through send_message"
                );
            }
            continue;
        };
        if tx.send(r).await.is_err() {
            return;
        }
    }
}

impl Drop for ReplySocket {
    fn drop(&mut self) {
        sock::unbind(&self.path);
    }
}

/// What the MCP server handed to the host, for `interlink-p2p wait`
/// (`sessions/<id>/host_inbox.json`, replaced whole, not synced: losing it repeats a
/// wake-up at worst). Messages are named `"<sender key>:<msg id>"`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct HandoverFile {
    /// Format version (1).
    pub version: u32,
    /// Our reply socket: while it accepts connections, the server is alive.
    pub reply: PathBuf,
    /// Whether new messages still go to the host's socket; `false` once it was gone,
    /// refused, or held one (the hook then wakes the agent for every new message).
    pub active: bool,
    /// Messages the host took for the model: the hook never announces them.
    pub handed: BTreeSet<String>,
    /// Messages the host did not deliver: the hook announces them.
    pub fell_back: BTreeSet<String>,
}

impl HandoverFile {
    /// The file of `dir`, if there is one that parses.
    pub(crate) fn load(dir: &SessionDir) -> Option<Self> {
        let bytes = std::fs::read(dir.host_inbox()).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Replaces the file of `dir`.
    pub(crate) fn save(&self, dir: &SessionDir) -> io::Result<()> {
        let bytes = serde_json::to_vec(self).map_err(io::Error::other)?;
        write_replacing(&dir.host_inbox(), &bytes)
    }

    /// Whether the server that wrote it is still running (its reply socket accepts a
    /// connection) and still hands new messages to the host.
    pub(crate) fn handing_over(&self) -> bool {
        self.active && sock::accepts(&self.reply)
    }

    /// Whether the hook should announce the unread message `key`: never one the host
    /// took; while the server hands messages over, only the ones the host did not
    /// deliver.
    pub(crate) fn hook_announces(&self, key: &str, handing_over: bool) -> bool {
        !self.handed.contains(key) && (!handing_over || self.fell_back.contains(key))
    }
}

#[cfg(test)]
mod tests;

//! The MCP server's stdio transport: newline-delimited JSON-RPC, with an answer for every
//! line that needs one and a cap on the requests the server works on at once.
//!
//! rmcp's own line transport drops input that is not JSON (logged at debug) and answers
//! well-formed JSON of the wrong shape with an `Invalid Request` that carries no id, so
//! a client whose request had bad `params` waits forever on its id. Here:
//! - a line that is not JSON (or nests too deep) is answered `-32700 Parse error`;
//! - a line longer than [`MAX_LINE_BYTES`] is answered `-32700 Parse error` too, with
//!   the request's id when the line's first [`MAX_LINE_BYTES`] bytes name it at the top
//!   level (`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{…10 MiB…}}`), so a
//!   host that sent a huge tool call is answered instead of waiting on its id;
//! - JSON that is not a request object (`null`, `[]`, a batch, no `method`, not
//!   `"jsonrpc": "2.0"`) is answered `-32600 Invalid Request`, with the line's id when it
//!   has one;
//! - a request whose method is known but whose params do not fit it is answered
//!   `-32602 Invalid params` with its id;
//! - a notification that does not parse gets no answer (JSON-RPC: notifications are
//!   never answered), only a log line; nor does a response from the client.
//!
//! Every error response carries `id` — `null` when the line's id could not be read
//! (JSON-RPC 2.0 §5: the member is required), which rmcp leaves out.
//!
//! Every rejected line is logged at warn on stderr. Requests handed to the server are
//! counted until their response or error goes out (or the client cancels them): at
//! [`MAX_REQUESTS_IN_FLIGHT`] the transport stops reading stdin until one finishes, so a
//! client that pipelines thousands of calls is held back by the pipe instead of the
//! server buffering them all.

use std::{
    collections::HashSet,
    sync::{Arc, Mutex},
};

use rmcp::{
    RoleServer,
    model::{ClientNotification, ErrorData, JsonRpcMessage, RequestId},
    service::{RxJsonRpcMessage, TxJsonRpcMessage},
    transport::Transport,
};
use tokio::{
    io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader},
    sync::Notify,
};
use tracing::warn;

/// Longest input line taken (a tool call's arguments are far smaller: a message's text
/// is at most 64 KiB). Longer ones are answered with a parse error and skipped without
/// being buffered.
pub(crate) const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

/// Most client requests the server works on at once; beyond it stdin is not read.
pub(crate) const MAX_REQUESTS_IN_FLIGHT: usize = 32;

/// How much of a rejected line the log shows.
const LOGGED_BYTES: usize = 120;

/// The requests handed to the server and not yet answered, by id.
#[derive(Debug, Default)]
struct InFlight {
    ids: Mutex<HashSet<RequestId>>,
    finished: Notify,
}

impl InFlight {
    fn len(&self) -> usize {
        self.ids.lock().map_or(0, |ids| ids.len())
    }

    fn start(&self, id: &RequestId) {
        if let Ok(mut ids) = self.ids.lock() {
            ids.insert(id.clone());
        }
    }

    fn finish(&self, id: &RequestId) {
        let removed = self.ids.lock().is_ok_and(|mut ids| ids.remove(id));
        if removed {
            self.finished.notify_one();
        }
    }
}

/// What a line that rmcp cannot take gets.
#[derive(Debug, PartialEq)]
enum Rejection {
    /// An error response.
    Answer(ErrorData, Option<RequestId>),
    /// Nothing but a log line (a notification or a client's response).
    Ignore(String),
}

/// The transport over the server's stdin and stdout.
pub(crate) struct LineTransport<R, W> {
    read: BufReader<R>,
    line: Vec<u8>,
    /// Skipping the rest of an over-long line.
    skipping: bool,
    /// The id read from the start of the over-long line being skipped.
    overlong_id: Option<RequestId>,
    write: Arc<tokio::sync::Mutex<Option<W>>>,
    in_flight: Arc<InFlight>,
}

impl<R, W> LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    pub(crate) fn new(read: R, write: W) -> Self {
        Self {
            read: BufReader::new(read),
            line: Vec::new(),
            skipping: false,
            overlong_id: None,
            write: Arc::new(tokio::sync::Mutex::new(Some(write))),
            in_flight: Arc::default(),
        }
    }

    /// Reads one line into `self.line`, never holding more than [`MAX_LINE_BYTES`].
    /// `Ok(false)` at the end of input; `Ok(true)` with an empty `line` for an over-long
    /// line, which was skipped. Cancellation-safe: bytes are moved into `line` and
    /// consumed with no await between, so a cancelled read resumes where it stopped.
    async fn read_line(&mut self) -> std::io::Result<Option<bool>> {
        loop {
            let (used, outcome) = {
                let buf = self.read.fill_buf().await?;
                if buf.is_empty() {
                    return Ok(None);
                }
                let end = buf.iter().position(|b| *b == b'\n');
                let used = end.map_or(buf.len(), |i| i + 1);
                if self.skipping {
                    self.skipping = end.is_none();
                    (used, None)
                } else if self.line.len() + used > MAX_LINE_BYTES + 1 {
                    // What fitted is the line's start: enough to find the id of a
                    // request whose huge part comes after it, as a host writes them.
                    self.overlong_id = leading_id(&self.line);
                    self.line.clear();
                    self.skipping = end.is_none();
                    (used, Some(false))
                } else {
                    self.line.extend_from_slice(&buf[..used]);
                    (used, end.map(|_| true))
                }
            };
            self.read.consume(used);
            if let Some(fits) = outcome {
                return Ok(Some(fits));
            }
        }
    }
}

/// Writes an error response.
async fn answer<W: AsyncWrite + Unpin>(
    write: &tokio::sync::Mutex<Option<W>>,
    error: ErrorData,
    id: Option<RequestId>,
) -> std::io::Result<()> {
    write_message(write, &TxJsonRpcMessage::<RoleServer>::error(error, id)).await
}

async fn write_message<W: AsyncWrite + Unpin>(
    write: &tokio::sync::Mutex<Option<W>>,
    message: &TxJsonRpcMessage<RoleServer>,
) -> std::io::Result<()> {
    let mut bytes = match message {
        // rmcp leaves out an unknown id; JSON-RPC requires the member, `null` then.
        JsonRpcMessage::Error(e) if e.id.is_none() => {
            let mut value = serde_json::to_value(message).map_err(std::io::Error::other)?;
            if let Some(object) = value.as_object_mut() {
                object.insert("id".to_owned(), serde_json::Value::Null);
            }
            serde_json::to_vec(&value)
        }
        _ => serde_json::to_vec(message),
    }
    .map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    let mut guard = write.lock().await;
    let out = guard
        .as_mut()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotConnected, "closed"))?;
    out.write_all(&bytes).await?;
    out.flush().await
}

/// Why `line` (not empty, without its newline) is not a message rmcp takes, and what
/// the client gets for it.
fn reject(line: &[u8], error: &serde_json::Error) -> Rejection {
    let value: serde_json::Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            return Rejection::Answer(ErrorData::parse_error(format!("not JSON: {e}"), None), None);
        }
    };
    let Some(object) = value.as_object() else {
        let what = match &value {
            serde_json::Value::Array(a) if a.is_empty() => "an empty batch",
            serde_json::Value::Array(_) => "a batch (not supported)",
            _ => "not a request object",
        };
        return Rejection::Answer(ErrorData::invalid_request(what.to_owned(), None), None);
    };
    let id = object
        .get("id")
        .and_then(|v| serde_json::from_value::<RequestId>(v.clone()).ok());
    let is_response = object.contains_key("result") || object.contains_key("error");
    let Some(method) = object.get("method").and_then(serde_json::Value::as_str) else {
        if is_response {
            return Rejection::Ignore(format!("a response that does not parse: {error}"));
        }
        return Rejection::Answer(ErrorData::invalid_request("no method".to_owned(), None), id);
    };
    if object.get("jsonrpc").and_then(serde_json::Value::as_str) != Some("2.0") {
        return Rejection::Answer(
            ErrorData::invalid_request("\"jsonrpc\" must be \"2.0\"".to_owned(), None),
            id,
        );
    }
    match (object.get("id"), id) {
        (None, _) => Rejection::Ignore(format!("notification {method:?}: {error}")),
        (Some(_), None) => Rejection::Answer(
            ErrorData::invalid_request("\"id\" must be a string or an integer".to_owned(), None),
            None,
        ),
        (Some(_), Some(id)) => Rejection::Answer(
            ErrorData::invalid_params(format!("{method}: {error}"), None),
            Some(id),
        ),
    }
}

/// The id of the request object that `start` (the beginning of a line too long to
/// parse) opens, if a top-level `"id"` member comes before the cut: the members before
/// it are skipped by their syntax alone (strings with their escapes, nested objects and
/// arrays by depth), so the scan is linear and keeps nothing. `None` when the start is
/// not an object, the id is not a string or an integer, or the cut comes first.
fn leading_id(start: &[u8]) -> Option<RequestId> {
    let mut scan = Scan { s: start, at: 0 };
    scan.skip_ws();
    scan.eat(b'{')?;
    loop {
        scan.skip_ws();
        let key = scan.string()?;
        scan.skip_ws();
        scan.eat(b':')?;
        scan.skip_ws();
        if key == b"id" {
            let from = scan.at;
            scan.value()?;
            return serde_json::from_slice(&start[from..scan.at]).ok();
        }
        scan.value()?;
        scan.skip_ws();
        scan.eat(b',')?;
    }
}

/// A cursor over JSON text for [`leading_id`]: every step is `None` at the cut or at
/// text that is not JSON.
struct Scan<'a> {
    s: &'a [u8],
    at: usize,
}

impl<'a> Scan<'a> {
    fn skip_ws(&mut self) {
        while self.s.get(self.at).is_some_and(|b| b" \t\r\n".contains(b)) {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.s.get(self.at) == Some(&byte)).then(|| self.at += 1)
    }

    /// A string's raw bytes between its quotes (escapes left as they are: a key that
    /// spells `id` with escapes is not taken for it, which only costs the id).
    fn string(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let from = self.at;
        loop {
            match self.s.get(self.at)? {
                b'"' => {
                    self.at += 1;
                    return Some(&self.s[from..self.at - 1]);
                }
                b'\\' => self.at += 2,
                _ => self.at += 1,
            }
        }
    }

    /// Skips one value: a string, or anything else up to the `,` `}` or `]` that ends
    /// it at this depth.
    fn value(&mut self) -> Option<()> {
        let mut depth = 0usize;
        loop {
            match *self.s.get(self.at)? {
                b'"' => {
                    self.string()?;
                    if depth == 0 {
                        return Some(());
                    }
                    continue;
                }
                b'{' | b'[' => depth += 1,
                b'}' | b']' if depth == 0 => return Some(()),
                b'}' | b']' => {
                    depth -= 1;
                    if depth == 0 {
                        self.at += 1;
                        return Some(());
                    }
                }
                b',' if depth == 0 => return Some(()),
                _ => {}
            }
            self.at += 1;
        }
    }
}

fn shown(line: &[u8]) -> String {
    let cut = &line[..line.len().min(LOGGED_BYTES)];
    let more = if line.len() > LOGGED_BYTES { "…" } else { "" };
    format!("{}{more}", String::from_utf8_lossy(cut).escape_debug())
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let write = self.write.clone();
        let in_flight = self.in_flight.clone();
        async move {
            let answered = match &item {
                JsonRpcMessage::Response(r) => Some(r.id.clone()),
                JsonRpcMessage::Error(e) => e.id.clone(),
                _ => None,
            };
            let sent = write_message(&write, &item).await;
            if let Some(id) = answered {
                in_flight.finish(&id);
            }
            sent
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            // At the cap, wait for an answer to go out before reading on. (The service
            // loop sends while this waits: it polls both.)
            while self.in_flight.len() >= MAX_REQUESTS_IN_FLIGHT {
                self.in_flight.finished.notified().await;
            }
            let fits = match self.read_line().await {
                Ok(Some(fits)) => fits,
                Ok(None) => return None,
                Err(e) => {
                    warn!("cannot read stdin: {e}");
                    return None;
                }
            };
            if !fits {
                warn!(max = MAX_LINE_BYTES, "input line too long; skipped");
                let error = ErrorData::parse_error(
                    format!("line longer than {MAX_LINE_BYTES} bytes"),
                    None,
                );
                let id = self.overlong_id.take();
                if answer(&self.write, error, id).await.is_err() {
                    return None;
                }
                continue;
            }
            let (parsed, logged) = {
                let text = trim(&self.line);
                if text.is_empty() {
                    (None, String::new())
                } else {
                    let parsed = serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(text)
                        .map_err(|e| reject(text, &e));
                    let logged = if parsed.is_err() {
                        shown(text)
                    } else {
                        String::new()
                    };
                    (Some(parsed), logged)
                }
            };
            self.line.clear();
            match parsed {
                None => {}
                Some(Ok(message)) => {
                    match &message {
                        JsonRpcMessage::Request(r) => self.in_flight.start(&r.id),
                        JsonRpcMessage::Notification(n) => {
                            if let ClientNotification::CancelledNotification(c) = &n.notification
                                && let Some(id) = &c.params.request_id
                            {
                                // A cancelled request may never be answered.
                                self.in_flight.finish(id);
                            }
                        }
                        _ => {}
                    }
                    return Some(message);
                }
                Some(Err(Rejection::Ignore(why))) => {
                    warn!(line = %logged, "input ignored: {why}");
                }
                Some(Err(Rejection::Answer(error, id))) => {
                    warn!(line = %logged, code = error.code.0, "input refused: {}", error.message);
                    if answer(&self.write, error, id).await.is_err() {
                        return None;
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let mut write = self.write.lock().await;
        if let Some(mut w) = write.take() {
            w.shutdown().await?;
        }
        Ok(())
    }
}

/// The line without its newline, a carriage return before it, or a UTF-8 byte order
/// mark before it all.
fn trim(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    line.strip_prefix(b"\xEF\xBB\xBF".as_slice())
        .unwrap_or(line)
}

#[cfg(test)]
#[path = "jsonrpc_lines_tests.rs"]
mod tests;

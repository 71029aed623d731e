use tokio::io::AsyncWriteExt as _;

use super::*;

/// An absolute address of the host's inbox on this platform: a socket path on Unix,
/// a pipe name on Windows.
fn host_address(n: u32) -> String {
    if cfg!(windows) {
        format!(r"\\.\pipe\cc-msg-{n:032x}")
    } else {
        format!("/tmp/cc-socks/{n}.sock")
    }
}

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
}

#[test]
fn found_in_the_environment_or_the_parents_registry_entry_and_can_be_turned_off() {
    let token = "0123456789abcdef0123456789abcdef";
    let one = host_address(1);
    let found = HostInbox::from_env(env(&[
        ("CLAUDE_CODE_MESSAGING_SOCKET", &one),
        ("CLAUDE_CODE_MESSAGING_TOKEN", token),
    ]))
    .unwrap();
    assert_eq!(found.socket(), Path::new(&one));
    assert_eq!(found.token.as_deref(), Some(token));
    // A token of the wrong shape is not sent; a relative path is not a socket address.
    let odd = HostInbox::from_env(env(&[
        ("CLAUDE_CODE_MESSAGING_SOCKET", &one),
        ("CLAUDE_CODE_MESSAGING_TOKEN", "x\ny"),
    ]))
    .unwrap();
    assert_eq!(odd.token, None);
    assert!(HostInbox::from_env(env(&[("CLAUDE_CODE_MESSAGING_SOCKET", "rel.sock")])).is_none());
    assert!(
        HostInbox::from_env(env(&[
            ("CLAUDE_CODE_MESSAGING_SOCKET", &one),
            ("INTERLINK_HOST_INBOX", "0"),
        ]))
        .is_none()
    );

    // No variable: the parent's registry entry, which must name the parent.
    let tmp = tempfile::tempdir().unwrap();
    let sessions = tmp.path().join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let ppid = sock::parent_pid().unwrap();
    let nine = host_address(9);
    std::fs::write(
        sessions.join(format!("{ppid}.json")),
        json!({"pid": ppid, "messagingSocketPath": nine}).to_string(),
    )
    .unwrap();
    let dir = tmp.path().to_str().unwrap();
    let found = HostInbox::from_env(env(&[("CLAUDE_CONFIG_DIR", dir)])).unwrap();
    assert_eq!(found.socket(), Path::new(&nine));
    std::fs::write(
        sessions.join(format!("{ppid}.json")),
        json!({"pid": ppid + 1, "messagingSocketPath": nine}).to_string(),
    )
    .unwrap();
    assert!(HostInbox::from_env(env(&[("CLAUDE_CONFIG_DIR", dir)])).is_none());
    // …unless another entry is Claude Code's session (a server behind a wrapper).
    let other = host_address(777);
    std::fs::write(
        sessions.join("777.json"),
        json!({"pid": 777, "sessionId": "s-1", "messagingSocketPath": other}).to_string(),
    )
    .unwrap();
    let found = HostInbox::from_env(env(&[
        ("CLAUDE_CONFIG_DIR", dir),
        ("CLAUDE_CODE_SESSION_ID", "s-1"),
    ]))
    .unwrap();
    assert_eq!(found.socket(), Path::new(&other));
    assert!(
        HostInbox::from_env(env(&[
            ("CLAUDE_CONFIG_DIR", dir),
            ("CLAUDE_CODE_SESSION_ID", "s-2")
        ]))
        .is_none()
    );
}

#[test]
fn a_frame_is_one_user_line_naming_the_reply_socket() {
    let reply = Path::new("/tmp/cc-socks/42.sock");
    let text = "line one\n| quoted </cross-session-message> \"x\"";
    let f = frame(text, "1b4e28ba-2fa1-41d2-883f-0016d3cca427", reply);
    assert!(!f.contains('\n'), "one line: {f}");
    let v: Value = serde_json::from_str(&f).unwrap();
    assert_eq!(v["type"], "user");
    assert_eq!(v["msg_id"], "1b4e28ba-2fa1-41d2-883f-0016d3cca427");
    assert_eq!(v["from"], "uds:/tmp/cc-socks/42.sock");
    assert_eq!(v["message"]["role"], "user");
    let content = v["message"]["content"].as_str().unwrap();
    assert_eq!(
        content,
        format!(
            "<cross-session-message from=\"uds:/tmp/cc-socks/42.sock\" from-name=\"interlink-p2p\">\n{text}\n</cross-session-message>"
        )
    );
    // A path an attribute cannot hold goes without the envelope.
    let f = frame("t", "id", Path::new("/tmp/a\"b/1.sock"));
    let v: Value = serde_json::from_str(&f).unwrap();
    assert_eq!(v["message"]["content"], "t");
    // A Windows pipe goes in the attribute as it is (the host's address characters
    // include the backslash).
    let pipe = r"\\.\pipe\cc-msg-0123456789abcdef0123456789abcdef";
    let v: Value = serde_json::from_str(&frame("t", "id", Path::new(pipe))).unwrap();
    assert_eq!(
        v["message"]["content"],
        format!(
            "<cross-session-message from=\"uds:{pipe}\" from-name=\"interlink-p2p\">\nt\n</cross-session-message>"
        )
    );
}

#[test]
fn frame_ids_are_version_4_uuids() {
    let a = frame_id();
    assert_eq!(a.len(), 36);
    assert_eq!(&a[14..15], "4");
    assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"), "{a}");
    assert_ne!(a, frame_id());
}

#[test]
fn receipts_name_their_frames_and_anything_else_is_ignored() {
    let held = r#"{"type":"control","action":"peer_message_status","status":"held","reason":"…","from":"uds:/x/1.sock","orig_msg_id":"f1","msgV":1,"msg_id":"z"}"#;
    assert_eq!(
        parse_receipt(held),
        Some(HostReceipt {
            frames: vec!["f1".into()],
            status: HostStatus::Held
        })
    );
    let refused = r#"{"type":"control","action":"peer_message_status","status":"expired","status_detail":"refused","orig_msg_id":"f2"}"#;
    assert_eq!(
        parse_receipt(refused).unwrap().status,
        HostStatus::NotDelivered("expired (refused)".into())
    );
    let dropped = r#"{"type":"control","action":"peer_message_status","status":"dropped","drop_reason":"rate-limited","dropped_msg_ids":["f3","f4"]}"#;
    let d = parse_receipt(dropped).unwrap();
    assert_eq!(d.frames, ["f3", "f4"]);
    assert_eq!(
        d.status,
        HostStatus::NotDelivered("dropped (rate-limited)".into())
    );
    for other in [
        "",
        "not json",
        r#"{"type":"user","message":{"role":"user","content":"hi"}}"#,
        r#"{"type":"control","action":"rename","name":"x"}"#,
        r#"{"type":"control","action":"peer_message_status","status":"held"}"#,
    ] {
        assert_eq!(parse_receipt(other), None, "{other}");
    }
}

#[test]
fn the_hook_announces_only_what_the_host_did_not_take() {
    let mut f = HandoverFile {
        version: 1,
        active: true,
        ..HandoverFile::default()
    };
    f.handed.insert("a:1".into());
    f.fell_back.insert("a:2".into());
    // While the server hands over: only the fallen-back message.
    assert!(!f.hook_announces("a:1", true));
    assert!(f.hook_announces("a:2", true));
    assert!(!f.hook_announces("a:3", true));
    // Once it stopped (or died): everything but what the host took.
    assert!(!f.hook_announces("a:1", false));
    assert!(f.hook_announces("a:2", false));
    assert!(f.hook_announces("a:3", false));
    // No reply socket answering: not handing over, whatever the file says.
    f.reply = PathBuf::from("/nonexistent/1.sock");
    assert!(!f.handing_over());
}

/// A stand-in for the host's inbox: returns its address and what each connection
/// wrote (awaited: a test blocking its runtime would also hold back the closing of its
/// own pipe handles on Windows). Unix: a socket in the private directory `dir`.
#[cfg(unix)]
fn host_socket(dir: &Path) -> (PathBuf, mpsc::Receiver<String>) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let path = dir.join("100.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let (tx, rx) = mpsc::channel(16);
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { return };
            let mut got = String::new();
            let _ = std::io::Read::read_to_string(&mut s, &mut got);
            if tx.blocking_send(got).is_err() {
                return;
            }
        }
    });
    (path, rx)
}

/// Windows: a `cc-msg-<32 hex>` pipe, served on a thread of its own as the host
/// serves it: a new instance for each client, each read until the client is gone.
#[cfg(windows)]
fn host_socket(_dir: &Path) -> (PathBuf, mpsc::Receiver<String>) {
    use tokio::{io::AsyncReadExt as _, net::windows::named_pipe::ServerOptions};
    let n = u128::from(sock::random_u32()) << 64 | u128::from(std::process::id());
    let path = PathBuf::from(format!(r"\\.\pipe\cc-msg-{n:032x}"));
    let (tx, rx) = mpsc::channel(16);
    let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel(1);
    let name = path.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let mut server = ServerOptions::new()
                .first_pipe_instance(true)
                .create(&name)
                .unwrap();
            ready_tx.send(()).unwrap();
            loop {
                if server.connect().await.is_err() {
                    return;
                }
                let mut s =
                    std::mem::replace(&mut server, ServerOptions::new().create(&name).unwrap());
                let mut got = Vec::new();
                let _ = s.read_to_end(&mut got).await;
                if tx
                    .send(String::from_utf8_lossy(&got).into_owned())
                    .await
                    .is_err()
                {
                    return;
                }
            }
        });
    });
    ready_rx.recv().unwrap();
    (path, rx)
}

/// A path where no inbox is.
fn gone(dir: &Path) -> PathBuf {
    if cfg!(windows) {
        PathBuf::from(format!(
            r"\\.\pipe\cc-msg-{:032x}",
            0xdead_u32 ^ std::process::id()
        ))
    } else {
        dir.join("gone.sock")
    }
}

#[tokio::test]
async fn a_post_writes_the_auth_line_then_the_frame_and_half_closes() {
    let tmp = tempfile::tempdir().unwrap();
    let (path, rx) = host_socket(tmp.path());
    let token = "0123456789abcdef0123456789abcdef";
    let mut inbox = HostInbox {
        socket: path.clone(),
        token: Some(token.into()),
        host_pid: None,
    };
    assert!(inbox.probe().await);
    assert_eq!(inbox.host_pid(), Some(std::process::id()));
    let mut rx = rx;
    let mut recv = async || {
        tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .unwrap()
            .unwrap()
    };
    assert_eq!(recv().await, "", "a probe writes nothing");
    inbox.post(r#"{"type":"user"}"#).await.unwrap();
    let auth = json!({"type": "auth", "token": token}).to_string();
    assert_eq!(recv().await, format!("{auth}\n{{\"type\":\"user\"}}\n"));
    // Gone, or not a socket: an error, so the caller falls back.
    let mut gone = HostInbox {
        socket: gone(tmp.path()),
        token: None,
        host_pid: None,
    };
    assert!(!gone.probe().await);
    assert!(gone.post("{}").await.is_err());
    let file = tmp.path().join("file");
    std::fs::write(&file, "").unwrap();
    let not = HostInbox {
        socket: file,
        token: None,
        host_pid: None,
    };
    assert!(matches!(
        not.post("{}").await,
        Err(PostError::NotASocket(_))
    ));
    let long = "x".repeat(MAX_FRAME + 1);
    assert!(matches!(
        inbox.post(&long).await,
        Err(PostError::TooLong(_))
    ));
}

/// Writes `line` to the reply endpoint at `path`, as the host sends a receipt. The
/// endpoint may close a connection it ignores before the line is written.
async fn send_receipt(path: &Path, line: &str) -> std::io::Result<()> {
    let mut s = sock::connect(path, Duration::from_secs(5)).await.unwrap()?;
    s.write_all(format!("{line}\n").as_bytes()).await?;
    sock::finish(s, Duration::from_secs(1)).await.map(drop)
}

#[tokio::test]
async fn receipts_count_only_from_the_host_process() {
    let tmp = tempfile::tempdir().unwrap();
    let (host, _rx) = host_socket(tmp.path());
    let reply = ReplySocket::bind_beside(&host).unwrap();
    let path = reply.path().to_owned();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(
            path,
            tmp.path().join(format!("{}.sock", std::process::id()))
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    #[cfg(windows)]
    {
        // The only shape the host sends receipts to: cc-msg-<32 hex>, beside its own.
        let name = path
            .to_str()
            .unwrap()
            .strip_prefix(r"\\.\pipe\cc-msg-")
            .unwrap();
        assert!(
            name.len() == 32 && name.bytes().all(|b| b.is_ascii_hexdigit()),
            "{name}"
        );
    }
    assert!(sock::accepts(&path));
    // A second one cannot take the live name.
    let second = ReplySocket::bind_beside(&host).unwrap();
    assert_ne!(second.path(), path);
    drop(second);

    let line =
        r#"{"type":"control","action":"peer_message_status","status":"held","orig_msg_id":"f1"}"#;
    // This process as the host: the receipt counts.
    let (tx, mut rx) = mpsc::channel(4);
    let cancel = CancellationToken::new();
    tokio::spawn(reply.serve(std::process::id(), tx, cancel.clone()));
    send_receipt(&path, line).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.frames, ["f1"]);
    cancel.cancel();
    tokio::time::sleep(Duration::from_millis(50)).await;

    // Another pid as the host: ignored.
    let reply = ReplySocket::bind_beside(&host).unwrap();
    let path = reply.path().to_owned();
    let (tx, mut rx) = mpsc::channel(4);
    let cancel = CancellationToken::new();
    tokio::spawn(reply.serve(1, tx, cancel.clone()));
    let _ = send_receipt(&path, line).await;
    assert!(
        tokio::time::timeout(Duration::from_millis(300), rx.recv())
            .await
            .is_err(),
        "a receipt from a process other than the host was taken"
    );
    cancel.cancel();
    // Dropped with its task: the endpoint goes.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!sock::accepts(&path));
}

/// The second name is taken when a live endpoint has the first; on Unix a stale socket
/// file (its process gone) is replaced.
#[tokio::test]
async fn a_reply_endpoint_never_joins_a_live_one() {
    let tmp = tempfile::tempdir().unwrap();
    let (host, _rx) = host_socket(tmp.path());
    let names = sock::reply_names(&host).unwrap();
    let first = sock::bind(&names[0]).unwrap();
    assert!(sock::bind(&names[0]).is_err(), "a live endpoint was joined");
    drop(first);
    #[cfg(unix)]
    {
        // The file stays behind its listener; nothing accepts there now.
        assert!(names[0].exists());
        assert!(!sock::accepts(&names[0]));
        let _again = sock::bind(&names[0]).unwrap();
    }
}

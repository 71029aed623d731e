#![cfg(unix)] // the host's inbox is a Unix socket; elsewhere it is not built yet

use std::os::unix::fs::PermissionsExt as _;

use tokio::{io::AsyncWriteExt as _, net::UnixStream};

use super::*;

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
    let found = HostInbox::from_env(env(&[
        ("CLAUDE_CODE_MESSAGING_SOCKET", "/tmp/cc-socks/1.sock"),
        ("CLAUDE_CODE_MESSAGING_TOKEN", token),
    ]))
    .unwrap();
    assert_eq!(found.socket(), Path::new("/tmp/cc-socks/1.sock"));
    assert_eq!(found.token.as_deref(), Some(token));
    // A token of the wrong shape is not sent; a relative path is not a socket address.
    let odd = HostInbox::from_env(env(&[
        ("CLAUDE_CODE_MESSAGING_SOCKET", "/s.sock"),
        ("CLAUDE_CODE_MESSAGING_TOKEN", "x\ny"),
    ]))
    .unwrap();
    assert_eq!(odd.token, None);
    assert!(HostInbox::from_env(env(&[("CLAUDE_CODE_MESSAGING_SOCKET", "rel.sock")])).is_none());
    assert!(
        HostInbox::from_env(env(&[
            ("CLAUDE_CODE_MESSAGING_SOCKET", "/s.sock"),
            ("INTERLINK_HOST_INBOX", "0"),
        ]))
        .is_none()
    );

    // No variable: the parent's registry entry, which must name the parent.
    let tmp = tempfile::tempdir().unwrap();
    let sessions = tmp.path().join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let ppid = std::os::unix::process::parent_id();
    std::fs::write(
        sessions.join(format!("{ppid}.json")),
        json!({"pid": ppid, "messagingSocketPath": "/run/cc-socks/9.sock"}).to_string(),
    )
    .unwrap();
    let dir = tmp.path().to_str().unwrap();
    let found = HostInbox::from_env(env(&[("CLAUDE_CONFIG_DIR", dir)])).unwrap();
    assert_eq!(found.socket(), Path::new("/run/cc-socks/9.sock"));
    std::fs::write(
        sessions.join(format!("{ppid}.json")),
        json!({"pid": ppid + 1, "messagingSocketPath": "/run/cc-socks/9.sock"}).to_string(),
    )
    .unwrap();
    assert!(HostInbox::from_env(env(&[("CLAUDE_CONFIG_DIR", dir)])).is_none());
    // …unless another entry is Claude Code's session (a server behind a wrapper).
    std::fs::write(
        sessions.join("777.json"),
        json!({"pid": 777, "sessionId": "s-1", "messagingSocketPath": "/run/cc-socks/777.sock"})
            .to_string(),
    )
    .unwrap();
    let found = HostInbox::from_env(env(&[
        ("CLAUDE_CONFIG_DIR", dir),
        ("CLAUDE_CODE_SESSION_ID", "s-1"),
    ]))
    .unwrap();
    assert_eq!(found.socket(), Path::new("/run/cc-socks/777.sock"));
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

/// A stand-in for the host's socket in a private directory: returns what each
/// connection wrote.
fn host_socket(dir: &Path) -> (PathBuf, std::sync::mpsc::Receiver<String>) {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let path = dir.join("100.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let (tx, rx) = std::sync::mpsc::sync_channel(16);
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { return };
            let mut got = String::new();
            let _ = std::io::Read::read_to_string(&mut s, &mut got);
            let _ = tx.send(got);
        }
    });
    (path, rx)
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
    assert_eq!(rx.recv().unwrap(), "", "a probe writes nothing");
    inbox.post(r#"{"type":"user"}"#).await.unwrap();
    let auth = json!({"type": "auth", "token": token}).to_string();
    assert_eq!(
        rx.recv().unwrap(),
        format!("{auth}\n{{\"type\":\"user\"}}\n")
    );
    // Gone, or not a socket: an error, so the caller falls back.
    let mut gone = HostInbox {
        socket: tmp.path().join("gone.sock"),
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

#[tokio::test]
async fn receipts_count_only_from_the_host_process() {
    let tmp = tempfile::tempdir().unwrap();
    let (host, _rx) = host_socket(tmp.path());
    let reply = ReplySocket::bind_beside(&host).unwrap();
    let path = reply.path().to_owned();
    assert_eq!(
        path,
        tmp.path().join(format!("{}.sock", std::process::id()))
    );
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // A second one cannot take the live name.
    let second = ReplySocket::bind_beside(&host).unwrap();
    assert_ne!(second.path(), path);
    drop(second);

    let line =
        r#"{"type":"control","action":"peer_message_status","status":"held","orig_msg_id":"f1"}"#;
    let send = |p: PathBuf| async move {
        let mut s = UnixStream::connect(&p).await.unwrap();
        s.write_all(format!("{line}\n").as_bytes()).await.unwrap();
        s.shutdown().await.unwrap();
    };
    // This process as the host: the receipt counts.
    let (tx, mut rx) = mpsc::channel(4);
    let cancel = CancellationToken::new();
    tokio::spawn(reply.serve(std::process::id(), tx, cancel.clone()));
    send(path.clone()).await;
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
    send(path.clone()).await;
    assert!(
        tokio::time::timeout(Duration::from_millis(300), rx.recv())
            .await
            .is_err(),
        "a receipt from a process other than the host was taken"
    );
    cancel.cancel();
    // Dropped with its task: the socket file goes.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!path.exists());
}

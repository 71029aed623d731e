//! What a client's bad input gets from the real `interlink-p2p mcp`, byte for byte on
//! its stdin and stdout: every line that needs an answer gets a JSON-RPC error with the
//! right code and the request's id (before: lines that were not JSON vanished, and a
//! request with bad `params` was answered without its id, so the client waited
//! forever), and a client that pipelines thousands of calls is answered in full while
//! the server works on a bounded number at once (docs/MCP.md, "Stdio").
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{
    io::{BufRead, BufReader, Write},
    process::{Child, Stdio},
    sync::mpsc,
    time::Duration,
};

use interlink_e2e::{
    mcp_session::{LOOPBACK, STEADY},
    process::command,
};
use serde_json::{Value, json};

/// Server lines the reader thread holds before it waits for the test.
const STDOUT_LINES: usize = 256;

/// The server, its stdin, and its stdout lines arriving on a channel.
fn server(home: &std::path::Path) -> (Child, std::process::ChildStdin, mpsc::Receiver<String>) {
    let mut cmd = command(home, STEADY).unwrap();
    cmd.args(["mcp", "--session", "stdin-test"])
        .args(LOOPBACK)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(
            std::fs::File::create(home.join("stderr.log")).unwrap(),
        ));
    let mut child = cmd.spawn().unwrap();
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::sync_channel(STDOUT_LINES);
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, stdin, rx)
}

fn next(rx: &mpsc::Receiver<String>) -> Value {
    let line = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("an answer within 20 s");
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout not JSON-RPC: {e}: {line}"))
}

#[test]
fn every_bad_line_gets_its_jsonrpc_error_and_good_ones_still_work() {
    let home = tempfile::tempdir().unwrap();
    let (mut child, mut stdin, rx) = server(home.path());
    let garbage = "x".repeat(2 * 1024 * 1024);
    let deep = "[".repeat(300) + &"]".repeat(300);
    let lines: [(&str, i64, Value); 8] = [
        ("{not json", -32700, Value::Null),
        ("\u{1}\u{2}binary", -32700, Value::Null),
        ("null", -32600, Value::Null),
        ("[]", -32600, Value::Null),
        (&deep, -32700, Value::Null),
        (&garbage, -32700, Value::Null),
        (
            r#"{"jsonrpc":"2.0","id":"m3","method":"tools/call","params":"str"}"#,
            -32602,
            json!("m3"),
        ),
        (r#"{"jsonrpc":"2.0","id":9}"#, -32600, json!(9)),
    ];
    for (line, code, id) in &lines {
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
        let got = next(&rx);
        assert_eq!(
            got["error"]["code"],
            *code,
            "{}: {got}",
            &line[..line.len().min(40)]
        );
        assert_eq!(got.get("id").cloned().unwrap_or(Value::Null), *id, "{got}");
    }

    // The session still works: initialize, then calls.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    writeln!(stdin, "{init}").unwrap();
    assert_eq!(next(&rx)["id"], 1);
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .unwrap();
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": "u", "method": "no/such"})
    )
    .unwrap();
    let got = next(&rx);
    assert_eq!(
        (&got["id"], &got["error"]["code"]),
        (&json!("u"), &json!(-32601)),
        "{got}"
    );

    // Thousands of calls pipelined without waiting: each answered once.
    const CALLS: usize = 3000;
    let writer = std::thread::spawn(move || {
        for i in 0..CALLS {
            let call = json!({"jsonrpc": "2.0", "id": 1000 + i, "method": "tools/call",
                "params": {"name": "whoami", "arguments": {}}});
            if writeln!(stdin, "{call}").is_err() {
                break;
            }
        }
        stdin
    });
    let mut ids = std::collections::BTreeSet::new();
    while ids.len() < CALLS {
        let got = next(&rx);
        let id = got["id"].as_u64().unwrap_or_else(|| panic!("{got}"));
        assert!(got.get("result").is_some(), "{got}");
        assert!(ids.insert(id), "answered twice: {id}");
    }
    drop(writer.join().unwrap());
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    let stderr = std::fs::read_to_string(home.path().join("stderr.log")).unwrap();
    assert!(
        stderr.contains("input refused"),
        "each refusal is logged: {stderr}"
    );
}

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, duplex};

use super::*;

/// A transport over two in-memory pipes: (transport, client's writer, client's
/// reader of the server's lines).
fn pipes() -> (
    LineTransport<DuplexStream, DuplexStream>,
    DuplexStream,
    tokio::io::Lines<BufReader<DuplexStream>>,
) {
    let (client_out, server_in) = duplex(1 << 20);
    let (server_out, client_in) = duplex(1 << 20);
    (
        LineTransport::new(server_in, server_out),
        client_out,
        BufReader::new(client_in).lines(),
    )
}

async fn next_json(lines: &mut tokio::io::Lines<BufReader<DuplexStream>>) -> Value {
    let line = tokio::time::timeout(Duration::from_secs(5), lines.next_line())
        .await
        .expect("an answer")
        .unwrap()
        .unwrap();
    serde_json::from_str(&line).unwrap()
}

#[tokio::test]
async fn every_bad_line_that_needs_an_answer_gets_one_with_its_id() {
    let (mut transport, mut client, mut lines) = pipes();
    let deep = "[".repeat(200) + &"]".repeat(200);
    let input = [
        "{not json".to_owned(),
        "\u{0}\u{1}binary\u{ff}".to_owned(),
        "null".to_owned(),
        "[]".to_owned(),
        "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]".to_owned(),
        deep,
        r#"{"jsonrpc":"2.0","id":"m3","method":"tools/call","params":"str"}"#.to_owned(),
        r#"{"jsonrpc":"1.0","id":7,"method":"ping"}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":8}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}"#.to_owned(),
        // A notification that does not parse: no answer.
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":"x"}"#.to_owned(),
        // A good request after all that.
        r#"{"jsonrpc":"2.0","id":"ok","method":"ping"}"#.to_owned(),
    ];
    for line in &input {
        client.write_all(line.as_bytes()).await.unwrap();
        client.write_all(b"\n").await.unwrap();
    }
    let received = tokio::time::timeout(Duration::from_secs(5), transport.receive())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(&received, JsonRpcMessage::Request(r) if r.id == RequestId::String("ok".into())),
        "{received:?}"
    );
    let want = [
        (-32700, Value::Null),
        (-32700, Value::Null),
        (-32600, Value::Null),
        (-32600, Value::Null),
        (-32600, Value::Null),
        (-32700, Value::Null),
        (-32602, json!("m3")),
        (-32600, json!(7)),
        (-32600, json!(8)),
        (-32600, Value::Null),
    ];
    for (code, id) in want {
        let got = next_json(&mut lines).await;
        assert_eq!(got["jsonrpc"], "2.0", "{got}");
        assert_eq!(got["error"]["code"], code, "{got}");
        assert_eq!(
            got.get("id"),
            Some(&id),
            "the id member is always there: {got}"
        );
    }
}

#[tokio::test]
async fn an_over_long_line_is_answered_and_skipped_without_being_kept() {
    let (mut transport, mut client, mut lines) = pipes();
    tokio::spawn(async move {
        let chunk = vec![b'x'; 64 * 1024];
        for _ in 0..(MAX_LINE_BYTES / chunk.len() + 2) {
            client.write_all(&chunk).await.unwrap();
        }
        client
            .write_all(b"\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n")
            .await
            .unwrap();
        client
    });
    let received = tokio::time::timeout(Duration::from_secs(10), transport.receive())
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(&received, JsonRpcMessage::Request(r) if r.id == RequestId::Number(2)));
    assert!(transport.line.capacity() <= MAX_LINE_BYTES + 1);
    let got = next_json(&mut lines).await;
    assert_eq!(got["error"]["code"], -32700, "{got}");
    assert_eq!(got.get("id"), Some(&Value::Null), "no id to read: {got}");
}

#[tokio::test]
async fn a_huge_tool_call_is_answered_with_its_id() {
    let (mut transport, mut client, mut lines) = pipes();
    tokio::spawn(async move {
        client
                .write_all(
                    br#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"send_message"},"id":"big","x":{"text":""#,
                )
                .await
                .unwrap();
        let chunk = vec![b'y'; 64 * 1024];
        for _ in 0..(MAX_LINE_BYTES / chunk.len() + 2) {
            client.write_all(&chunk).await.unwrap();
        }
        client
            .write_all(b"\"}}\n{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}\n")
            .await
            .unwrap();
        client
    });
    let received = tokio::time::timeout(Duration::from_secs(10), transport.receive())
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(&received, JsonRpcMessage::Request(r) if r.id == RequestId::Number(3)));
    let got = next_json(&mut lines).await;
    assert_eq!(got["error"]["code"], -32700, "{got}");
    assert_eq!(got["id"], "big", "{got}");
    assert!(
        got["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains(&MAX_LINE_BYTES.to_string())),
        "{got}"
    );
}

#[test]
fn the_id_is_read_from_a_lines_start_only_where_it_is_there() {
    let id = |s: &str| leading_id(s.as_bytes());
    assert_eq!(
        id(r#" {"jsonrpc":"2.0","id":5,"method":"x""#),
        Some(RequestId::Number(5))
    );
    assert_eq!(
        id(r#"{"a":{"id":1,"b":[1,{"c":"}"}]},"s":"\"id\":2","id" : "k\"q","#),
        Some(RequestId::String("k\"q".into())),
        "nested members, strings with quotes and braces are skipped"
    );
    // The cut before the id, or within it: no id.
    assert_eq!(id(r#"{"jsonrpc":"2.0","params":{"text":"yyyy"#), None);
    assert_eq!(id(r#"{"id":12"#), None);
    assert_eq!(id(r#"{"id":"unterminated"#), None);
    // Not an object, or an id of the wrong kind.
    for bad in [
        "[1,2",
        "\"id\"",
        "{\"id\":null,",
        "{\"id\":{\"x\":1},",
        "{id:1,",
        "",
    ] {
        assert_eq!(id(bad), None, "{bad}");
    }
}

#[tokio::test]
async fn reading_stops_at_the_cap_until_an_answer_goes_out() {
    let (mut transport, mut client, _lines) = pipes();
    for i in 0..MAX_REQUESTS_IN_FLIGHT + 1 {
        let line = format!("{{\"jsonrpc\":\"2.0\",\"id\":{i},\"method\":\"ping\"}}\n");
        client.write_all(line.as_bytes()).await.unwrap();
    }
    for _ in 0..MAX_REQUESTS_IN_FLIGHT {
        transport.receive().await.unwrap();
    }
    // The next request is there, but not read while the cap is reached.
    let waited = tokio::time::timeout(Duration::from_millis(200), transport.receive()).await;
    assert!(waited.is_err(), "read past the cap");
    let response: TxJsonRpcMessage<RoleServer> =
        serde_json::from_value(json!({"jsonrpc": "2.0", "id": 3, "result": {}})).unwrap();
    transport.send(response).await.unwrap();
    let next = tokio::time::timeout(Duration::from_secs(5), transport.receive())
        .await
        .expect("read again after an answer")
        .unwrap();
    assert!(
        matches!(&next, JsonRpcMessage::Request(r) if r.id == RequestId::Number(MAX_REQUESTS_IN_FLIGHT as i64))
    );
}

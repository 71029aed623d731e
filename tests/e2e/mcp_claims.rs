//! Claims on files end to end: real `interlink-p2p mcp` processes on loopback, driven
//! over MCP stdio, working in two clones of one repository at different paths.
//!
//! Alice's session claims `src/api` (a directory: everything below it); Bob's session,
//! paired, in the other clone, sees her claim, and his claim of `src/api/auth.rs`
//! answers that it waits behind hers, naming her session, reason and time; Alice's next
//! tool result tells her; a session of Alice's in an unrelated repository sees none of
//! it; Bob's board view is on disk, and through the binary `interlink-p2p claims` lists
//! it, the Claude Code edit hook warns (or blocks) Bob's edit of the file, and the git
//! guard refuses his commit of it (overridden with INTERLINK_GUARD=off). When Alice's session
//! ends, Bob's claim holds with nothing done on his side; when Bob's session restarts,
//! its claim is announced again.
#![cfg(unix)] // Drives the real binaries with Unix signals, sockets or network namespaces.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use interlink_e2e::{
    mcp_session::{McpSession, deadline, loopback_addr, sees, start_on_loopback_in},
    user::User,
};
use serde_json::{Value, json};

const TEST_DEADLINE: Duration = Duration::from_secs(180);

use interlink_testkit::git::git;

/// A repository with `src/api/auth.rs`, and a clone of it at another path.
fn two_clones(root: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let first = interlink_testkit::git::repo(
        &root.join("alice-work/shop"),
        &[
            ("src/api/auth.rs", "pub fn login() {}\n"),
            ("README.md", "shop\n"),
        ],
    );
    let second = root.join("bob/src/shop-clone");
    std::fs::create_dir_all(second.parent().unwrap()).unwrap();
    git(
        root,
        &[
            "clone",
            "-q",
            first.to_str().unwrap(),
            second.to_str().unwrap(),
        ],
    );
    (first, second)
}

/// `git commit -m MESSAGE` in `repo` as `user` (so the guard reads `user`'s home), with
/// `env` added.
fn git_commit(
    user: &User,
    repo: &Path,
    message: &str,
    env: &[(&str, &str)],
) -> std::process::Output {
    let mut cmd = Command::new("git");
    cmd.arg("-C")
        .arg(repo)
        .args(["-c", "user.name=b", "-c", "user.email=b@example.com"])
        .args(["commit", "-q", "-m", message])
        .env("INTERLINK_HOME", user.home());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// Runs `interlink-p2p ARGS` as `user` in `dir` with `stdin`; (exit code, stdout,
/// stderr).
fn cli(
    user: &User,
    dir: &Path,
    args: &[&str],
    stdin: Option<&str>,
    env: &[(&str, &str)],
) -> (i32, String, String) {
    use std::io::Write as _;
    let mut cmd = interlink_e2e::process::command(user.home(), env).unwrap();
    cmd.current_dir(dir)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut pipe = child.stdin.take().unwrap();
    pipe.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(pipe);
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The text of `s`'s next tool results until one says `what` (the claims news rides
/// the next tool result).
async fn told(s: &McpSession, what: &str) -> String {
    for _ in 0..50 {
        let r = s.call("whoami", json!({})).await.unwrap();
        let t = interlink_e2e::mcp_session::text_of(&r);
        if t.contains(what) {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("never told {what:?}");
}

/// Checks the claims of `s` until `done` says so (one step's deadline); the last
/// result and every text seen on the way.
async fn until(s: &McpSession, done: impl Fn(&Value) -> bool) -> (Value, String) {
    let end = deadline();
    let mut texts = String::new();
    loop {
        let r = s.call("claim", json!({"check": true})).await.unwrap();
        texts.push_str(&interlink_e2e::mcp_session::text_of(&r));
        let v = r.structured_content.clone().unwrap_or_default();
        if done(&v) {
            return (v, texts);
        }
        assert!(Instant::now() < end, "never: {v}\n{texts}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The claims of a `claim` result.
fn claims(v: &Value) -> Vec<Value> {
    v["claims"].as_array().cloned().unwrap_or_default()
}

async fn check(s: &McpSession) -> Value {
    s.ok("claim", json!({"check": true})).await.unwrap().1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_earlier_claim_holds_both_sides_know_and_the_wait_ends_with_the_holder() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let tmp = tempfile::tempdir().unwrap();
        let (alice_repo, bob_repo) = two_clones(tmp.path());
        let elsewhere = interlink_testkit::git::repo(&tmp.path().join("unrelated"), &[("x", "")]);

        let alice = User::new("alice", &[]).unwrap();
        let bob = User::new("bob", &[]).unwrap();
        let a = start_on_loopback_in(&alice, "cl-a", None, &alice_repo)
            .await
            .unwrap();
        let boot = loopback_addr(&a).await;
        let b = start_on_loopback_in(&bob, "cl-b", Some(&boot), &bob_repo.join("src"))
            .await
            .unwrap();
        let other = start_on_loopback_in(&alice, "cl-other", Some(&boot), &elsewhere)
            .await
            .unwrap();
        for (s, o) in [(&a, &bob), (&b, &alice)] {
            s.ok("whoami", json!({})).await.unwrap();
            s.ok("add_peer", json!({"name": o.name, "key": o.key}))
                .await
                .unwrap();
        }
        sees(&b, "cl-a").await.unwrap();
        sees(&a, "cl-b").await.unwrap();
        sees(&other, "cl-a").await.unwrap();

        // Outside a repository there is nothing to claim, and the error says why.
        let plain = tempfile::tempdir().unwrap();
        let p = start_on_loopback_in(&alice, "cl-plain", Some(&boot), plain.path())
            .await
            .unwrap();
        let e = p.err("claim", json!({"paths": ["x"]})).await.unwrap();
        assert!(e.contains("not in a git repository"), "{e}");

        // Alice claims the directory: held.
        let (text, v) = a
            .ok(
                "claim",
                json!({"paths": ["src/api"], "reason": "moving auth to v2"}),
            )
            .await
            .unwrap();
        let claimed_at = Instant::now();
        assert!(text.contains("src/api/**"), "{text}");
        assert_eq!(claims(&v)[0]["held"], true, "{v}");

        // Bob (cwd: the clone's src/) sees it, then claims a file under it: waits.
        b.poll("claim", json!({"check": true}), deadline(), |v| {
            claims(v).iter().any(|c| c["pattern"] == "src/api/**")
        })
        .await
        .unwrap();
        eprintln!(
            "bob saw alice's claim {:?} after it was made",
            claimed_at.elapsed()
        );
        let (text, v) = b
            .ok(
                "claim",
                json!({"paths": ["api/auth.rs"], "reason": "fixing login"}),
            )
            .await
            .unwrap();
        let mine = &claims(&v)[0];
        assert_eq!(mine["pattern"], "src/api/auth.rs", "{v}");
        assert_eq!(mine["held"], false, "{v}");
        assert_eq!(mine["waits_behind"]["by"]["session"], "cl-a", "{v}");
        assert_eq!(mine["waits_behind"]["by"]["petname"], "alice", "{v}");
        assert_eq!(mine["waits_behind"]["reason"], "moving auth to v2", "{v}");
        assert!(
            text.contains("waits behind alice's session cl-a on src/api/**"),
            "{text}"
        );

        // Alice is told in a later tool result, once.
        let mut seen = String::new();
        for _ in 0..50 {
            let r = a.call("whoami", json!({})).await.unwrap();
            let t = interlink_e2e::mcp_session::text_of(&r);
            if t.contains("also claims src/api/auth.rs") {
                seen = t;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            seen.contains("bob's session cl-b also claims src/api/auth.rs"),
            "alice was never told: {seen}"
        );
        let again =
            interlink_e2e::mcp_session::text_of(&a.call("whoami", json!({})).await.unwrap());
        assert!(!again.contains("also claims"), "told twice: {again}");

        // discover and whoami show the repository's claims.
        let (text, d) = b.ok("discover", json!({})).await.unwrap();
        assert_eq!(d["claims"]["claims"].as_array().unwrap().len(), 2, "{d}");
        assert!(
            text.contains("claims on files of this repository:"),
            "{text}"
        );
        let (text, w) = b.ok("whoami", json!({})).await.unwrap();
        assert!(
            text.contains("claim your session cl-b (this session): src/api/auth.rs"),
            "{text}"
        );
        assert_eq!(w["claims"]["project"], d["claims"]["project"]);

        // An unrelated repository's session sees no claims.
        assert!(claims(&check(&other).await).is_empty());

        // Bob's board is on disk for his hooks and his guard.
        let board = bob.home().join("sessions/cl-b/board.json");
        let view: Value = serde_json::from_slice(&std::fs::read(&board).unwrap()).unwrap();
        assert_eq!(view["claims"].as_array().unwrap().len(), 2, "{view}");

        // The command line sees the same board: `claims`, the edit hook, the guard.
        let (code, out, _) = cli(&bob, &bob_repo, &["claims", "--json"], None, &[]);
        assert_eq!(code, 0, "{out}");
        let listed: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(listed["claims"].as_array().unwrap().len(), 2, "{listed}");
        let (code, out, _) = cli(&bob, &bob_repo, &["claims", "src/api/auth.rs"], None, &[]);
        assert_eq!(code, 1, "held by another session: {out}");
        assert!(
            out.contains("alice's session cl-a holds src/api/**"),
            "{out}"
        );
        let edit = json!({
            "session_id": "cl-b",
            "cwd": bob_repo,
            "hook_event_name": "PreToolUse",
            "tool_name": "Edit",
            "tool_input": {"file_path": bob_repo.join("src/api/auth.rs"),
                           "old_string": "login", "new_string": "sign_in"},
        })
        .to_string();
        let (code, out, _) = cli(&bob, &bob_repo, &["claims", "hook"], Some(&edit), &[]);
        assert_eq!(code, 0);
        let said: Value = serde_json::from_str(&out).unwrap();
        assert!(
            said["hookSpecificOutput"]["additionalContext"]
                .as_str()
                .unwrap()
                .contains("alice's session cl-a"),
            "{said}"
        );
        let (_, out, _) = cli(
            &bob,
            &bob_repo,
            &["claims", "hook"],
            Some(&edit),
            &[("INTERLINK_CLAIMS_HOOK", "block")],
        );
        let said: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            said["hookSpecificOutput"]["permissionDecision"], "deny",
            "{said}"
        );

        let (code, out, err) = cli(&bob, &bob_repo, &["guard", "install"], None, &[]);
        assert_eq!(code, 0, "{out}{err}");
        std::fs::write(bob_repo.join("src/api/auth.rs"), "pub fn sign_in() {}\n").unwrap();
        git(&bob_repo, &["add", "src/api/auth.rs"]);
        let commit = git_commit(&bob, &bob_repo, "sign in", &[]);
        let said = String::from_utf8_lossy(&commit.stderr);
        assert!(!commit.status.success(), "the guard let it through: {said}");
        assert!(
            said.contains("src/api/auth.rs: alice's session cl-a holds src/api/**"),
            "{said}"
        );
        let forced = git_commit(&bob, &bob_repo, "sign in", &[("INTERLINK_GUARD", "off")]);
        assert!(forced.status.success(), "{forced:?}");

        // Alice's session ends: Bob's claim holds, nothing done on his side.
        a.close(deadline()).await.unwrap();
        b.poll("claim", json!({"check": true}), deadline(), |v| {
            let c = claims(v);
            c.len() == 1 && c[0]["held"] == true
        })
        .await
        .unwrap();

        // Bob's session restarts: his claim comes back with it and others see it.
        b.close(deadline()).await.unwrap();
        let b = start_on_loopback_in(&bob, "cl-b", Some(&loopback_addr(&other).await), &bob_repo)
            .await
            .unwrap();
        b.ok("whoami", json!({})).await.unwrap();
        let a2 = start_on_loopback_in(&alice, "cl-a2", Some(&loopback_addr(&b).await), &alice_repo)
            .await
            .unwrap();
        a2.poll("claim", json!({"check": true}), deadline(), |v| {
            claims(v)
                .iter()
                .any(|c| c["pattern"] == "src/api/auth.rs" && c["by"]["session"] == "cl-b")
        })
        .await
        .unwrap();
        let e = a2
            .ok("claim", json!({"paths": ["src/api/auth.rs"]}))
            .await
            .unwrap()
            .0;
        assert!(e.contains("waits behind bob's session cl-b"), "{e}");
        for s in [a2, b, other, p] {
            s.close(deadline()).await.unwrap();
        }
    })
    .await
    .expect("the test took too long");
}

/// A partition: Alice's and Bob's sessions, paired but not connected, claim the same
/// file, Alice first. Each holds its claim alone. Then a session that reaches both joins
/// the overlay and the two sides meet: both are told, and both agree that Alice's claim
/// (the earlier) holds and Bob's waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_made_apart_agree_when_the_partition_heals() {
    tokio::time::timeout(TEST_DEADLINE, async {
        let tmp = tempfile::tempdir().unwrap();
        let (alice_repo, bob_repo) = two_clones(tmp.path());
        let alice = User::new("alice", &[]).unwrap();
        let bob = User::new("bob", &[]).unwrap();
        let a = start_on_loopback_in(&alice, "pt-a", None, &alice_repo)
            .await
            .unwrap();
        let b = start_on_loopback_in(&bob, "pt-b", None, &bob_repo)
            .await
            .unwrap();
        for (s, o) in [(&a, &bob), (&b, &alice)] {
            s.ok("whoami", json!({})).await.unwrap();
            s.ok("add_peer", json!({"name": o.name, "key": o.key}))
                .await
                .unwrap();
        }
        let (_, va) = a
            .ok(
                "claim",
                json!({"paths": ["README.md"], "reason": "docs pass"}),
            )
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        let (_, vb) = b
            .ok(
                "claim",
                json!({"paths": ["README.md"], "reason": "typo fixes"}),
            )
            .await
            .unwrap();
        assert_eq!(claims(&va)[0]["held"], true, "{va}");
        assert_eq!(claims(&vb)[0]["held"], true, "apart, each holds: {vb}");

        // Carol (a third user, paired with neither) bridges the two sides.
        let carol = User::new("carol", &[]).unwrap();
        let (boot_a, boot_b) = (loopback_addr(&a).await, loopback_addr(&b).await);
        let mut args: Vec<&str> = vec!["--session", "pt-c"];
        args.extend_from_slice(interlink_e2e::mcp_session::LOOPBACK);
        args.extend(["--bootstrap", &boot_a, "--bootstrap", &boot_b]);
        let c = McpSession::spawn(
            carol.home(),
            "pt-c",
            &args,
            interlink_e2e::mcp_session::STEADY,
        )
        .await
        .unwrap();
        c.ok("whoami", json!({})).await.unwrap();

        // Both sides come to the same board: Alice's claim holds, Bob's waits behind it.
        let agreed = |v: &Value| {
            let c = claims(v);
            c.len() == 2
                && c[0]["by"]["session"] == "pt-a"
                && c[0]["held"] == true
                && c[1]["by"]["session"] == "pt-b"
                && c[1]["waits_behind"]["by"]["session"] == "pt-a"
        };
        let healed = Instant::now();
        let (seen_a, texts_a) = until(&a, agreed).await;
        let (seen_b, texts_b) = until(&b, agreed).await;
        eprintln!(
            "both sides agreed {:?} after the bridge joined",
            healed.elapsed()
        );
        // The same claims and standings (each names the other by its own petname).
        let strip = |v: &Value| {
            let mut v = v["claims"].clone();
            for c in v.as_array_mut().unwrap() {
                c["by"]["petname"] = Value::Null;
                if c["waits_behind"].is_object() {
                    c["waits_behind"]["by"]["petname"] = Value::Null;
                }
            }
            v
        };
        assert_eq!(strip(&seen_a), strip(&seen_b));

        // And both were told, each its side of it, in a tool result (the checks above, or
        // the next one).
        let a_news = "bob's session pt-b also claims README.md";
        if !texts_a.contains(a_news) {
            told(&a, a_news).await;
        }
        let b_news = "your claim on README.md waits behind alice's session pt-a";
        if !texts_b.contains(b_news) {
            told(&b, b_news).await;
        }
        for s in [a, b, c] {
            s.close(deadline()).await.unwrap();
        }
    })
    .await
    .expect("the test took too long");
}

/// Two hosts (network namespaces joined by a link, `support/lab.rs`), a person on each
/// with a clone of the repository: Alice's claim reaches Bob's session across the link,
/// Bob's claim waits naming her, Bob's git guard refuses his commit of the file, and
/// when Alice's session ends Bob's claim holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn across_two_hosts_the_claim_reaches_the_other_clone() {
    let Some(lab) =
        interlink_e2e::lab::Lab::for_test("across_two_hosts_the_claim_reaches_the_other_clone")
    else {
        return;
    };
    tokio::time::timeout(TEST_DEADLINE, async {
        let tmp = tempfile::tempdir().unwrap();
        let (alice_repo, bob_repo) = two_clones(tmp.path());
        let alice = User::new("alice", &[]).unwrap();
        let bob = User::new("bob", &[]).unwrap();
        let (addr_a, addr_b) = (
            format!("/ip4/{}/tcp/0", lab.addr(1)),
            format!("/ip4/{}/tcp/0", lab.addr(2)),
        );
        let a = interlink_e2e::mcp_session::start_in_dir(
            alice.home(),
            "lab-a",
            None,
            &alice_repo,
            Some(&lab.a),
            &["--listen", &addr_a, "--no-mdns"],
        )
        .await
        .unwrap();
        let (_, who) = a.ok("whoami", json!({})).await.unwrap();
        let boot = who["listen_addrs"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .find(|s| s.contains(&lab.addr(1)))
            .unwrap()
            .to_owned();
        let b = interlink_e2e::mcp_session::start_in_dir(
            bob.home(),
            "lab-b",
            Some(&boot),
            &bob_repo,
            Some(&lab.b),
            &["--listen", &addr_b, "--no-mdns"],
        )
        .await
        .unwrap();
        for (s, o) in [(&a, &bob), (&b, &alice)] {
            s.ok("add_peer", json!({"name": o.name, "key": o.key}))
                .await
                .unwrap();
        }
        sees(&b, "lab-a").await.unwrap();
        sees(&a, "lab-b").await.unwrap();

        a.ok(
            "claim",
            json!({"paths": ["src/api/"], "reason": "auth rewrite"}),
        )
        .await
        .unwrap();
        let claimed = Instant::now();
        b.poll("claim", json!({"check": true}), deadline(), |v| {
            claims(v).iter().any(|c| c["pattern"] == "src/api/**")
        })
        .await
        .unwrap();
        eprintln!(
            "across the link, bob saw alice's claim after {:?}",
            claimed.elapsed()
        );
        let (text, _) = b
            .ok(
                "claim",
                json!({"paths": ["src/api/auth.rs"], "reason": "login fix"}),
            )
            .await
            .unwrap();
        assert!(
            text.contains("waits behind alice's session lab-a"),
            "{text}"
        );

        // Bob's guard refuses his commit of the file (the guard reads his home only).
        // His claim's own result wrote his board, with Alice's claim on it.
        let (code, out, _) = cli(&bob, &bob_repo, &["claims", "src/api/auth.rs"], None, &[]);
        assert_eq!(code, 1, "{out}");
        let (code, out, err) = cli(&bob, &bob_repo, &["guard", "install"], None, &[]);
        assert_eq!(code, 0, "{out}{err}");
        std::fs::write(bob_repo.join("src/api/auth.rs"), "pub fn login2() {}\n").unwrap();
        git(&bob_repo, &["add", "."]);
        let commit = git_commit(&bob, &bob_repo, "login fix", &[]);
        let board = std::fs::read_to_string(bob.home().join("sessions/lab-b/board.json"));
        let listed = cli(&bob, &bob_repo, &["claims"], None, &[]);
        let hooks = std::fs::read_dir(bob_repo.join(".git/hooks")).map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name())
                .collect::<Vec<_>>()
        });
        assert!(
            !commit.status.success(),
            "{commit:?}\n{board:?}\n{listed:?}\n{hooks:?}"
        );
        assert!(
            String::from_utf8_lossy(&commit.stderr)
                .contains("alice's session lab-a holds src/api/**"),
            "{commit:?}"
        );

        a.close(deadline()).await.unwrap();
        b.poll("claim", json!({"check": true}), deadline(), |v| {
            let c = claims(v);
            c.len() == 1 && c[0]["held"] == true
        })
        .await
        .unwrap();
        b.close(deadline()).await.unwrap();
    })
    .await
    .expect("the test took too long");
}

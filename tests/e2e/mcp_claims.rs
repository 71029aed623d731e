//! Claims on files end to end: real `interlink-p2p mcp` processes on loopback, driven
//! over MCP stdio, working in two clones of one repository at different paths.
//!
//! Alice's session claims `src/api` (a directory: everything below it); Bob's session,
//! paired, in the other clone, sees her claim, and his claim of `src/api/auth.rs`
//! answers that it waits behind hers, naming her session, reason and time; Alice's next
//! tool result tells her; a session of Alice's in an unrelated repository sees none of
//! it; Bob's board view is on disk for the hooks and the guard. When Alice's session
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

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// A repository with `src/api/auth.rs`, and a clone of it at another path.
fn two_clones(root: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let first = root.join("alice-work/shop");
    std::fs::create_dir_all(first.join("src/api")).unwrap();
    git(&first, &["init", "-q"]);
    std::fs::write(first.join("src/api/auth.rs"), "pub fn login() {}\n").unwrap();
    std::fs::write(first.join("README.md"), "shop\n").unwrap();
    git(&first, &["add", "."]);
    git(&first, &["commit", "-q", "-m", "first"]);
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
        let elsewhere = tmp.path().join("unrelated");
        std::fs::create_dir_all(&elsewhere).unwrap();
        git(&elsewhere, &["init", "-q"]);
        std::fs::write(elsewhere.join("x"), "").unwrap();
        git(&elsewhere, &["add", "."]);
        git(&elsewhere, &["commit", "-q", "-m", "other"]);

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

        // An unrelated repository's session sees no claims.
        assert!(claims(&check(&other).await).is_empty());

        // Bob's board is on disk for his hooks and his guard.
        let board = bob.home().join("sessions/cl-b/board.json");
        let view: Value = serde_json::from_slice(&std::fs::read(&board).unwrap()).unwrap();
        assert_eq!(view["claims"].as_array().unwrap().len(), 2, "{view}");

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

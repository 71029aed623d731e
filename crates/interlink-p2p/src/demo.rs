//! `interlink-p2p demo`: the whole system on loopback, narrated.
//!
//! Three throwaway identities (alice, bob, mallory) with their own homes; a relay if an
//! `interlink-relay` binary sits next to this one; two real `interlink-p2p run`
//! sessions; messages sent with `interlink-p2p send` both ways and read back from the
//! receivers' inboxes; a stranger refused; bob's process stopped (SIGSTOP, a sleeping
//! laptop; on Windows his session closes) while alice's message is queued, then resumed
//! (started again) to receive it. Every value
//! printed comes from the processes; nothing is canned. Nothing leaves 127.0.0.1
//! (mDNS is off).

use std::{
    io::Write,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use interlink_core::SessionId;
use interlink_process::{Child, Options};
use interlink_store::inbox;

use crate::paths;

/// Longest wait for a process to come up or a message to land.
const STEP_LIMIT: Duration = Duration::from_secs(30);
/// Lines of a child's stdout buffered before it is read.
const STDOUT_LINES: usize = 64;
/// How long a child gets to exit after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// A child process that is stopped (SIGTERM, then SIGKILL) when dropped.
struct Proc {
    child: Child,
}

impl Proc {
    fn spawn(cmd: Command) -> anyhow::Result<Self> {
        // Stderr goes nowhere: the transcript is the demo's own.
        let child = Child::spawn_with(cmd, Options::default().with_stdout_lines(STDOUT_LINES))?;
        Ok(Self { child })
    }

    fn next_line(&self) -> anyhow::Result<String> {
        self.child
            .next_line(Instant::now() + STEP_LIMIT)
            .ok()
            .flatten()
            .context("the process printed nothing in time")
    }

    fn signal(&self, sig: &str) -> anyhow::Result<()> {
        self.child
            .signal(sig)
            .with_context(|| format!("kill -{sig} failed"))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.child.stop(STOP_GRACE);
    }
}

/// One demo identity: a home directory and its key.
struct Party {
    name: &'static str,
    home: PathBuf,
    fingerprint: String,
    key: String,
}

struct Demo {
    exe: PathBuf,
    relay: Option<String>,
}

impl Demo {
    fn command(&self, home: &Path) -> Command {
        let mut cmd = Command::new(&self.exe);
        cmd.env(interlink_store::env::HOME, home)
            .env(interlink_store::env::MDNS, "0")
            // The demo's throwaway homes must neither take this host's well-known port
            // from the user's own sessions nor meet them through it.
            .env(interlink_store::env::PORT, "0")
            .env_remove(interlink_store::env::SESSION)
            .env_remove("CLAUDE_CODE_SESSION_ID")
            .env_remove(interlink_store::env::BOOTSTRAP)
            .env_remove(interlink_store::env::NETWORK);
        match &self.relay {
            Some(r) => cmd.env(crate::config::ENV_RELAY, r),
            None => cmd.env_remove(crate::config::ENV_RELAY),
        };
        cmd
    }

    fn party(&self, dir: &Path, name: &'static str) -> anyhow::Result<Party> {
        let home = dir.join(name);
        let out = self
            .command(&home)
            .args(["id", "--json"])
            .output()
            .context("interlink-p2p id")?;
        anyhow::ensure!(out.status.success(), "id failed for {name}");
        let id: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        Ok(Party {
            name,
            home,
            fingerprint: id["fingerprint"].as_str().unwrap_or_default().to_owned(),
            key: id["identity_key"].as_str().unwrap_or_default().to_owned(),
        })
    }

    fn peer_add(&self, who: &Party, other: &Party) -> anyhow::Result<()> {
        let out = self
            .command(&who.home)
            .args(["peer", "add", other.name, &other.key])
            .output()?;
        anyhow::ensure!(out.status.success(), "peer add failed for {}", who.name);
        Ok(())
    }

    /// Starts `run --session SESSION` on loopback; returns it and its first address.
    fn start_session(
        &self,
        who: &Party,
        session: &str,
        bootstrap: Option<&str>,
    ) -> anyhow::Result<(Proc, String)> {
        let mut cmd = self.command(&who.home);
        cmd.args([
            "run",
            "--session",
            session,
            "--listen",
            "/ip4/127.0.0.1/tcp/0",
        ]);
        if let Some(b) = bootstrap {
            cmd.args(["--bootstrap", b]);
        }
        let proc = Proc::spawn(cmd)?;
        let mut first = None;
        loop {
            let line = proc.next_line()?;
            if line == "ready" {
                break;
            }
            first.get_or_insert(line);
        }
        Ok((proc, first.context("the session printed no address")?))
    }

    /// `send --to TO TEXT` from `who`'s home; returns (success, stdout, stderr).
    fn send(
        &self,
        who: &Party,
        to: &str,
        text: &str,
        bootstrap: &str,
    ) -> anyhow::Result<(bool, String, String)> {
        let out = self
            .command(&who.home)
            .args([
                "send",
                "--to",
                to,
                "--wait",
                "10",
                "--listen",
                "/ip4/127.0.0.1/tcp/0",
            ])
            .args(["--bootstrap", bootstrap, text])
            .output()
            .context("interlink-p2p send")?;
        Ok((
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).trim().to_owned(),
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ))
    }
}

/// Waits until `session`'s inbox in `home` holds `count` entries; returns the last one
/// and how long it took.
fn wait_inbox(
    home: &Path,
    session: &str,
    count: usize,
) -> anyhow::Result<(serde_json::Value, Duration)> {
    let path = paths::Home::new(home)
        .session(&SessionId::new(session)?)?
        .inbox();
    let start = Instant::now();
    loop {
        if let Ok((entries, _)) = inbox::read_from(&path, 0)
            && entries.len() >= count
            && let Some(last) = entries.last()
        {
            return Ok((serde_json::to_value(last)?, start.elapsed()));
        }
        if start.elapsed() > STEP_LIMIT {
            bail!("{session}'s inbox never reached {count} message(s)");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// Runs the demo, writing the transcript to `out`.
pub fn run(out: &mut impl Write) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("locating this binary")?;
    let dir = tempfile::tempdir().context("creating the demo's homes")?;
    let relay_bin = exe.with_file_name(format!("interlink-relay{}", std::env::consts::EXE_SUFFIX));
    let mut demo = Demo { exe, relay: None };
    writeln!(
        out,
        "interlink-p2p demo: real processes on 127.0.0.1, throwaway homes in {}\n",
        dir.path().display()
    )?;

    let [alice, bob, mallory] = ["alice", "bob", "mallory"].map(|n| demo.party(dir.path(), n));
    let (alice, bob, mallory) = (alice?, bob?, mallory?);
    writeln!(
        out,
        "1. identities (Ed25519; each home has its own owner-only key file)"
    )?;
    for p in [&alice, &bob, &mallory] {
        writeln!(out, "   {:<8} {}", p.name, p.fingerprint)?;
    }

    let _relay = if relay_bin.exists() {
        let mut cmd = Command::new(&relay_bin);
        cmd.arg("--key")
            .arg(dir.path().join("relay.key"))
            .arg("--db")
            .arg(dir.path().join("relay.redb"))
            .args(["--listen", "/ip4/127.0.0.1/tcp/0"]);
        let relay = Proc::spawn(cmd)?;
        let addr = relay.next_line()?;
        writeln!(
            out,
            "\n2. a relay (durable mailboxes in relay.redb, circuit relay, bootstrap point)\n   {addr}"
        )?;
        demo.relay = Some(addr);
        Some(relay)
    } else {
        writeln!(
            out,
            "\n2. no interlink-relay next to this binary (build it with `cargo build \
             --workspace --bins`); sessions bootstrap to each other instead"
        )?;
        None
    };

    demo.peer_add(&alice, &bob)?;
    demo.peer_add(&bob, &alice)?;
    writeln!(
        out,
        "\n3. pairing: alice and bob add each other's key (`interlink-p2p peer add`); \
         mallory is nobody's peer"
    )?;

    let (alice_run, alice_addr) = demo.start_session(&alice, "alice-1", None)?;
    let boot = demo.relay.clone().unwrap_or_else(|| alice_addr.clone());
    let (bob_run, _) = demo.start_session(&bob, "bob-1", Some(&boot))?;
    writeln!(
        out,
        "\n4. sessions: `interlink-p2p run` for alice (alice-1) and bob (bob-1)\n   alice-1 listens on {alice_addr}"
    )?;

    writeln!(
        out,
        "\n5. messages both ways (`interlink-p2p send`, a short-lived session)"
    )?;
    for (from, to, session, text) in [
        (
            &alice,
            &bob,
            "bob-1",
            "which endpoint issues refresh tokens?",
        ),
        (
            &bob,
            &alice,
            "alice-1",
            "POST /auth/refresh, see auth/routes.rs",
        ),
    ] {
        let start = Instant::now();
        let (ok, stdout, stderr) = demo.send(from, to.name, text, &boot)?;
        anyhow::ensure!(ok, "{} -> {}: {stderr}", from.name, to.name);
        let (entry, _) = wait_inbox(&to.home, session, 1)?;
        writeln!(
            out,
            "   {} -> {}: {stdout} ({} including the sender's start-up)\n   {}'s inbox: {:?} from {} ({}, as {} paired them)",
            from.name,
            to.name,
            ms(start.elapsed()),
            to.name,
            entry["text"].as_str().unwrap_or_default(),
            from.name,
            entry["sender_fingerprint"].as_str().unwrap_or_default(),
            to.name
        )?;
    }

    // Mallory pairs on her side only: her message reaches bob's node, which decides.
    demo.peer_add(&mallory, &bob)?;
    let (ok, _, stderr) = demo.send(&mallory, "bob", "hi, I'm from IT", &boot)?;
    let reason = stderr.lines().last().unwrap_or_default();
    writeln!(
        out,
        "\n6. a stranger: mallory adds bob's key on her side only; bob's node {}\n   {reason}",
        if ok {
            "did NOT refuse her (unexpected)"
        } else {
            "refuses her message"
        }
    )?;

    // No SIGSTOP on Windows: there bob's session closes instead, and starts again.
    let sleeps = cfg!(unix);
    let (away, back) = if sleeps {
        ("bob's laptop sleeps (SIGSTOP)", "bob wakes (SIGCONT)")
    } else {
        ("bob's session closes", "bob's session starts again")
    };
    writeln!(out, "\n7. {away}; alice sends anyway")?;
    let paused = if sleeps {
        bob_run.signal("STOP")?;
        Some(bob_run)
    } else {
        drop(bob_run);
        None
    };
    let (ok, stdout, stderr) = demo.send(&alice, "bob", "ping me when you're back", &boot)?;
    anyhow::ensure!(ok, "alice -> bob while he is away: {stderr}");
    writeln!(out, "   alice: {stdout}")?;
    let started = Instant::now();
    let bob_run = match paused {
        Some(run) => {
            run.signal("CONT")?;
            run
        }
        None => demo.start_session(&bob, "bob-1", Some(&boot))?.0,
    };
    let (entry, took) = wait_inbox(&bob.home, "bob-1", 2)?;
    // A session that starts again counts its start-up too.
    let took = if sleeps { took } else { started.elapsed() };
    writeln!(
        out,
        "   {back}: {:?} is in his inbox {} later",
        entry["text"].as_str().unwrap_or_default(),
        ms(took)
    )?;
    drop((alice_run, bob_run));
    writeln!(out, "\ndone; the homes are removed.")?;
    Ok(())
}

/// Walk through the system with real processes on 127.0.0.1 and throwaway homes: a
/// relay, two paired sessions, a refused stranger, mail for a sleeping session.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  interlink-p2p demo")]
pub struct Args {}

/// `interlink-p2p demo`.
pub fn command(_: Args, _: &crate::Ctx) -> anyhow::Result<std::process::ExitCode> {
    run(&mut std::io::stdout())?;
    Ok(std::process::ExitCode::SUCCESS)
}

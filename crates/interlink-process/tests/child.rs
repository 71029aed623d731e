//! The harness against `sh`: lines, deadlines, exit, stderr, signals, runs to the end.
//! Unix only: the children are `sh` scripts and the stop is SIGTERM.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report

use std::{
    process::Command,
    time::{Duration, Instant},
};

use interlink_process::{Child, Error, Options, TryLine, run_with_input};

fn sh(script: &str) -> Command {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script]);
    cmd
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(10)
}

#[test]
fn reads_lines_then_the_end_and_captures_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Child::spawn(
        sh("echo one; echo two; echo oops >&2"),
        dir.path().join("e"),
    )
    .unwrap();
    assert_eq!(child.next_line(soon()).unwrap().as_deref(), Some("one"));
    assert!(child.wait(soon()).unwrap().success());
    // The reader thread may still be on its way with the last line: wait for it.
    assert_eq!(child.next_line(soon()).unwrap().as_deref(), Some("two"));
    assert_eq!(child.stderr(), "oops\n");
    assert_eq!(child.next_line(soon()).unwrap(), None);
    assert!(child.remaining_lines().is_empty());
    assert_eq!(child.try_next_line(), TryLine::Ended);
}

#[test]
fn a_silent_child_times_out_and_is_killed_at_the_deadline() {
    let mut child = Child::spawn_with(sh("sleep 30"), Options::default()).unwrap();
    let short = Instant::now() + Duration::from_millis(100);
    assert!(matches!(
        child.next_line(short),
        Err(Error::LineTimeout { .. })
    ));
    assert!(matches!(child.wait(short), Err(Error::ExitTimeout { .. })));
    assert!(child.wait(soon()).is_ok(), "killed at the deadline");
}

#[test]
fn stop_ends_a_child_with_sigterm() {
    let mut child = Child::spawn_with(sh("sleep 30"), Options::default()).unwrap();
    child.signal("STOP").unwrap();
    child.signal("CONT").unwrap();
    assert!(child.stop(Duration::from_secs(5)));
}

#[test]
fn runs_to_the_end_with_input_or_times_out() {
    let out = run_with_input(sh("cat; echo err >&2; exit 3"), Some("in\n"), soon()).unwrap();
    assert_eq!(
        (out.status.code(), out.stdout.as_str(), out.stderr.as_str()),
        (Some(3), "in\n", "err\n")
    );
    let late = run_with_input(
        sh("sleep 30"),
        None,
        Instant::now() + Duration::from_millis(100),
    );
    assert!(matches!(late, Err(Error::RunTimeout { .. })));
}

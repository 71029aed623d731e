//! Child processes with deadlines: the one harness that starts real `interlink-p2p`
//! (and `interlink-relay`) processes, for the `demo` command, the end-to-end tests
//! (`tests/`) and the bench (`crates/interlink-bench`).
//!
//! A [`Child`] is killed (SIGKILL) and reaped when dropped, so nothing outlives its
//! owner; its stdout is read line by line by a thread into a bounded channel (each
//! line stamped with the instant it was read); its stderr goes to a file (or nowhere);
//! every wait takes a deadline. [`run_with_input`] runs a short-lived command to the
//! end under a deadline. It is std-only: no runtime, usable from sync and async code.

use std::{
    fs::File,
    io::{BufRead as _, BufReader, Read as _, Write as _},
    path::PathBuf,
    process::{Command, ExitStatus, Stdio},
    sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError, TrySendError, sync_channel},
    time::{Duration, Instant},
};

/// How often a wait with a deadline looks at the child again.
const POLL: Duration = Duration::from_millis(20);

/// What went wrong with a child process.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Starting, signalling or waiting for the process failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// What the operating system reported.
        #[source]
        source: std::io::Error,
    },
    /// The process's stdout was not piped.
    #[error("no stdout pipe")]
    NoStdout,
    /// No stdout line came before the deadline.
    #[error("no stdout line in time; stderr:\n{stderr}")]
    LineTimeout {
        /// Whatever the process wrote to stderr so far.
        stderr: String,
    },
    /// The process did not exit before the deadline (it was killed).
    #[error("process did not exit in time; stderr:\n{stderr}")]
    ExitTimeout {
        /// Whatever the process wrote to stderr so far.
        stderr: String,
    },
    /// `kill -SIGNAL pid` exited unsuccessfully.
    #[error("kill -{signal} {pid} failed")]
    Signal {
        /// The signal name.
        signal: String,
        /// The process id.
        pid: u32,
    },
    /// A command run to the end did not finish before the deadline (it was killed).
    #[error("command did not finish in time: {command}")]
    RunTimeout {
        /// The command, as `Debug` prints it.
        command: String,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

/// What the stdout reader does when the channel of unread lines is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WhenFull {
    /// Waits for the reader (the child then blocks on a full pipe): no line is lost.
    Block,
    /// Drops the line and keeps draining, so the child never blocks (a bench that only
    /// looks at the first lines).
    Drop,
}

/// How a [`Child`] is started: builder of [`Child::spawn_with`].
#[derive(Debug)]
pub struct Options {
    stderr: Option<PathBuf>,
    stdout_lines: usize,
    when_full: WhenFull,
    what: Option<String>,
    stdin: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            stdin: false,
            stderr: None,
            stdout_lines: 256,
            when_full: WhenFull::Block,
            what: None,
        }
    }
}

impl Options {
    /// Writes the child's stderr to the file `path` (created or truncated); by default
    /// it goes to /dev/null.
    pub fn with_stderr_file(mut self, path: PathBuf) -> Self {
        self.stderr = Some(path);
        self
    }

    /// At most `lines` unread stdout lines are buffered (default 256).
    pub fn with_stdout_lines(mut self, lines: usize) -> Self {
        self.stdout_lines = lines;
        self
    }

    /// What the reader does when the buffer is full (default [`WhenFull::Block`]).
    pub fn with_when_full(mut self, when_full: WhenFull) -> Self {
        self.when_full = when_full;
        self
    }

    /// Keeps the child's stdin open for [`Child::write_stdin`] (default: closed), for a
    /// command that asks its user something.
    pub fn with_stdin(mut self) -> Self {
        self.stdin = true;
        self
    }

    /// Names the process in the error of a failed start (default: the command).
    pub fn with_name(mut self, what: impl Into<String>) -> Self {
        self.what = Some(what.into());
        self
    }
}

/// One stdout line and the instant the reader got it.
pub type Line = (Instant, String);

/// The answer of [`Child::try_next_line`].
#[derive(Debug, PartialEq, Eq)]
pub enum TryLine {
    Line(Line),
    /// No line yet.
    Empty,
    /// Stdout is closed and every line was read.
    Ended,
}

/// A running child process with stdin closed, stdout read line by line, stderr to a
/// file or nowhere; killed (SIGKILL) and reaped when dropped.
#[derive(Debug)]
pub struct Child {
    child: std::process::Child,
    started: Instant,
    lines: Receiver<Line>,
    stderr_path: Option<PathBuf>,
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Child {
    /// Spawns `cmd` with stdout read line by line and stderr written to `stderr_path`.
    pub fn spawn(cmd: Command, stderr_path: PathBuf) -> Result<Self, Error> {
        Self::spawn_with(
            cmd,
            Options::default()
                .with_stderr_file(stderr_path)
                .with_name("spawning interlink-p2p"),
        )
    }

    /// Spawns `cmd` as `options` say.
    pub fn spawn_with(mut cmd: Command, options: Options) -> Result<Self, Error> {
        let stderr = match &options.stderr {
            Some(path) => {
                Stdio::from(File::create(path).map_err(io(format!("creating {}", path.display())))?)
            }
            None => Stdio::null(),
        };
        let what = options
            .what
            .clone()
            .unwrap_or_else(|| format!("starting {cmd:?}"));
        cmd.stdin(if options.stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(stderr);
        let started = Instant::now();
        let mut child = cmd.spawn().map_err(io(what))?;
        let Some(out) = child.stdout.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Error::NoStdout);
        };
        let (tx, lines) = sync_channel(options.stdout_lines);
        let when_full = options.when_full;
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                let line = (Instant::now(), line);
                let gone = match when_full {
                    WhenFull::Block => tx.send(line).is_err(),
                    WhenFull::Drop => {
                        matches!(tx.try_send(line), Err(TrySendError::Disconnected(_)))
                    }
                };
                if gone {
                    break;
                }
            }
        });
        Ok(Self {
            child,
            started,
            lines,
            stderr_path: options.stderr,
        })
    }

    /// Writes `text` to the child's stdin (opened by [`Options::with_stdin`]).
    pub fn write_stdin(&mut self, text: &str) -> Result<(), Error> {
        use std::io::Write as _;
        let stdin = self.child.stdin.as_mut().ok_or_else(|| Error::Io {
            what: "writing to stdin: the child was spawned without one".into(),
            source: std::io::Error::from(std::io::ErrorKind::BrokenPipe),
        })?;
        stdin
            .write_all(text.as_bytes())
            .and_then(|()| stdin.flush())
            .map_err(io("writing to the child's stdin"))
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// When the process was started (just before the spawn).
    pub fn started(&self) -> Instant {
        self.started
    }

    /// The next stdout line, waiting until `deadline`. `None` at end of output.
    pub fn next_line(&self, deadline: Instant) -> Result<Option<String>, Error> {
        Ok(self.next_timed_line(deadline)?.map(|(_, line)| line))
    }

    /// Like [`Child::next_line`], with the instant the line was read.
    pub fn next_timed_line(&self, deadline: Instant) -> Result<Option<Line>, Error> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.lines.recv_timeout(left) {
            Ok(line) => Ok(Some(line)),
            Err(RecvTimeoutError::Disconnected) => Ok(None),
            Err(RecvTimeoutError::Timeout) => Err(Error::LineTimeout {
                stderr: self.stderr(),
            }),
        }
    }

    /// The next stdout line if one is there, without waiting (for async callers, which
    /// poll).
    pub fn try_next_line(&self) -> TryLine {
        match self.lines.try_recv() {
            Ok(line) => TryLine::Line(line),
            Err(TryRecvError::Empty) => TryLine::Empty,
            Err(TryRecvError::Disconnected) => TryLine::Ended,
        }
    }

    /// Stdout lines still unread (after the process exited: everything it wrote).
    pub fn remaining_lines(&self) -> Vec<String> {
        self.lines.try_iter().map(|(_, line)| line).collect()
    }

    /// Whatever the process wrote to its stderr file so far (empty without one).
    pub fn stderr(&self) -> String {
        self.stderr_path
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default()
    }

    /// Sends `signal` (a name `kill` understands, e.g. `TERM`, `STOP`): `kill` is the
    /// portable way to signal without unsafe code.
    pub fn signal(&self, signal: &str) -> Result<(), Error> {
        let pid = self.pid();
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(io("running kill"))?;
        if status.success() {
            Ok(())
        } else {
            Err(Error::Signal {
                signal: signal.to_owned(),
                pid,
            })
        }
    }

    /// Kills the process with SIGKILL (no goodbye) and reaps it.
    pub fn kill(&mut self) -> Result<(), Error> {
        self.child.kill().map_err(io("killing the process"))?;
        self.child.wait().map_err(io("reaping the process"))?;
        Ok(())
    }

    /// The exit status if the process has exited.
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>, Error> {
        self.child.try_wait().map_err(io("waiting for the process"))
    }

    /// Waits for the process to exit, killing it at `deadline`.
    pub fn wait(&mut self, deadline: Instant) -> Result<ExitStatus, Error> {
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                return Err(Error::ExitTimeout {
                    stderr: self.stderr(),
                });
            }
            std::thread::sleep(POLL);
        }
    }

    /// Stops the process: SIGTERM (so it can say goodbye), then SIGKILL if it has not
    /// exited after `grace`. Returns whether it exited on SIGTERM.
    pub fn stop(&mut self, grace: Duration) -> bool {
        // Windows has no SIGTERM to send a child: it is killed at once.
        if cfg!(not(unix)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
            return false;
        }
        let _ = self.signal("TERM");
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return true;
            }
            std::thread::sleep(POLL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        false
    }
}

/// What a command run to the end printed.
#[derive(Debug)]
pub struct Output {
    /// Its exit status.
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Runs a short-lived command to completion, writing `input` (if any) to its stdin
/// and then closing it, killing it at `deadline`.
pub fn run_with_input(
    mut cmd: Command,
    input: Option<&str>,
    deadline: Instant,
) -> Result<Output, Error> {
    let stdin = if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    };
    let mut child = cmd
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io(format!("starting {cmd:?}")))?;
    if let (Some(input), Some(mut pipe)) = (input, child.stdin.take()) {
        let input = input.to_owned();
        // A thread, so a child that stops reading cannot block the caller past its
        // deadline; dropping the pipe closes the child's stdin.
        std::thread::spawn(move || {
            let _ = pipe.write_all(input.as_bytes());
        });
    }
    // Each reader says when its pipe closed: the child has exited then (or handed the
    // pipes on), and waiting on that instead of polling keeps a run's duration exact.
    let (done_tx, done) = sync_channel::<()>(2);
    let reader = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        let done_tx = done_tx.clone();
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_string(&mut text);
            }
            let _ = done_tx.send(());
            text
        })
    };
    let out = reader(child.stdout.take().map(|p| Box::new(p) as _));
    let err = reader(child.stderr.take().map(|p| Box::new(p) as _));
    drop(done_tx);
    let timed_out = |child: &mut std::process::Child| {
        let _ = child.kill();
        let _ = child.wait();
        Error::RunTimeout {
            command: format!("{cmd:?}"),
        }
    };
    for _ in 0..2 {
        let left = deadline.saturating_duration_since(Instant::now());
        match done.recv_timeout(left) {
            Ok(()) => {}
            Err(RecvTimeoutError::Timeout) => return Err(timed_out(&mut child)),
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    let status = loop {
        if let Some(status) = child.try_wait().map_err(io("waiting for the command"))? {
            break status;
        }
        if Instant::now() >= deadline {
            return Err(timed_out(&mut child));
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    Ok(Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}

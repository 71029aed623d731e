//! What stops a long-running command from outside: SIGTERM, SIGINT and SIGHUP on Unix;
//! Ctrl-C, Ctrl-Break and the console closing on Windows. SIGHUP is the terminal
//! closing (and an agent host that dies with its terminal passes it on to its MCP
//! servers): left to its default action it killed the process before its goodbye, so
//! peers kept the session live for a whole live window, then away for days (issue 49). Installed first thing, so a signal
//! that comes right after start reaches the command (and its goodbye goes out) rather
//! than the default action.

use std::io;

/// The installed handlers.
#[cfg(unix)]
#[derive(Debug)]
pub struct StopSignals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

/// The installed handlers.
#[cfg(windows)]
#[derive(Debug)]
pub struct StopSignals {
    c: tokio::signal::windows::CtrlC,
    brk: tokio::signal::windows::CtrlBreak,
    close: tokio::signal::windows::CtrlClose,
}

impl StopSignals {
    /// Installs the handlers.
    pub fn install() -> io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Self {
                term: signal(SignalKind::terminate())?,
                int: signal(SignalKind::interrupt())?,
                hup: signal(SignalKind::hangup())?,
            })
        }
        #[cfg(windows)]
        {
            use tokio::signal::windows::{ctrl_break, ctrl_c, ctrl_close};
            Ok(Self {
                c: ctrl_c()?,
                brk: ctrl_break()?,
                close: ctrl_close()?,
            })
        }
    }

    /// Waits for the next one; its name, for the log.
    pub async fn recv(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.term.recv() => "SIGTERM",
                _ = self.int.recv() => "SIGINT",
                _ = self.hup.recv() => "SIGHUP",
            }
        }
        #[cfg(windows)]
        {
            tokio::select! {
                _ = self.c.recv() => "Ctrl-C",
                _ = self.brk.recv() => "Ctrl-Break",
                _ = self.close.recv() => "console closed",
            }
        }
    }
}

//! `interlink-p2p wait`: the Claude Code Stop hook ([`interlink_mcp::cli::stop_hook`]).
//!
//! Exit codes: 2 with a message no earlier wake-up announced (printed on stdout and
//! stderr — Claude Code shows the hook's stderr to the agent it wakes), 0 on timeout,
//! 0 at once when another waiter for the same session is running.

use std::{io::Read as _, process::ExitCode, time::Duration};

use anyhow::Context as _;
use interlink_core::SessionId;
use interlink_mcp::cli::stop_hook::{self as wait, Outcome};
use interlink_store::paths::Home;

/// Exit code that wakes the agent.
pub const EXIT_WAKE: u8 = 2;

/// Runs `wait`: the session id from `--session`, else from the hook JSON on stdin.
pub fn run(
    home: &Home,
    session: Option<String>,
    timeout: Option<Duration>,
) -> anyhow::Result<ExitCode> {
    let session = match session {
        // Given by hand: an id with no state directory here is a typo or another
        // home's, and waiting on it would time out as if all were well. (The hook's
        // id is the host's; its session may not have started its server yet.)
        Some(s) => {
            let id = SessionId::new(s)?;
            if !home.session(&id)?.path().is_dir() {
                anyhow::bail!(
                    "session {id} has no state directory under {}: {}",
                    home.sessions().display(),
                    crate::session_ids::named(home, None, "a state directory")
                );
            }
            id
        }
        None => {
            let mut input = String::new();
            std::io::stdin()
                .read_to_string(&mut input)
                .context("reading the hook input on stdin")?;
            wait::session_from_hook_input(&input)?
        }
    };
    Ok(match wait::wait(home, &session, timeout)? {
        Outcome::Messages { new, still_unread } => {
            let text = wait::render_messages(home, &new, still_unread);
            println!("{text}");
            eprintln!("{text}");
            ExitCode::from(EXIT_WAKE)
        }
        Outcome::TimedOut | Outcome::AlreadyWaiting => ExitCode::SUCCESS,
    })
}

/// Claude Code Stop hook: wait for an unread message of a session, print it, exit 2.
///
/// Reads the hook's JSON from stdin (its `session_id`). Exits 2 after printing the
/// unread messages (stdout and stderr), 0 on --timeout, and 0 at once when another
/// `wait` for the same session is running.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  echo '{\"session_id\":\"1b7c…\"}' | interlink-p2p wait\n  interlink-p2p wait --session reviewer --timeout 30\n\nExit status: 2 after printing unread messages, 0 on --timeout or when another wait runs."
)]
pub struct Args {
    /// Session id, instead of the hook JSON on stdin.
    #[arg(long)]
    session: Option<String>,
    /// Give up after this many seconds (exit 0) [default: wait indefinitely]
    #[arg(long, value_name = "SECS")]
    timeout: Option<f64>,
}

/// `interlink-p2p wait`.
pub fn command(args: Args, ctx: &crate::Ctx) -> anyhow::Result<ExitCode> {
    let timeout = args
        .timeout
        .map(|t| crate::ctx::seconds("--timeout", t))
        .transpose()?;
    run(&ctx.home()?, args.session, timeout)
}

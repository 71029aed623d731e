//! `interlink-p2p`: parses arguments, installs logging on stderr, calls the library.

use std::{io::IsTerminal as _, path::PathBuf, process::ExitCode, time::Duration};

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use interlink_p2p::{
    config, group, inbox, install, invite, mcp, pair, peer, peers, probe, run, send,
    settings::Settings, wait,
};
use libp2p::Multiaddr;

/// Coding-agent sessions that find each other and talk, peer to peer.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    /// Home directory for the identity and state [default: $INTERLINK_HOME, else
    /// $XDG_CONFIG_HOME/interlink-p2p, else ~/.config/interlink-p2p]
    #[arg(long, global = true)]
    home: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

/// Network settings shared by the commands that run a node (see docs/CONFIG.md).
///
/// clap reads each setting's variable too (and shows it in `--help`), but a value that
/// came from the environment is set aside after parsing ([`NetArgs::forget_env`]): the
/// library reads the environment itself, below the flags and above the settings
/// file, names the variable in its errors, and `install` writes only what was typed.
#[derive(Debug, Args)]
struct NetArgs {
    /// Overlay name [default: default]
    #[arg(long, value_name = "NAME", global = true, env = config::ENV_NETWORK)]
    network: Option<String>,
    /// Listen multiaddr; repeatable or comma-separated [default: all interfaces, TCP
    /// and QUIC, port 0]
    #[arg(long, value_name = "MULTIADDR", global = true, env = config::ENV_LISTEN)]
    listen: Vec<String>,
    /// Bootstrap peer multiaddr (`/p2p/<id>` suffix optional); repeatable or
    /// comma-separated
    #[arg(long, value_name = "MULTIADDR", global = true, env = config::ENV_BOOTSTRAP)]
    bootstrap: Vec<String>,
    /// Relay multiaddr ending in `/p2p/<id>`: bootstrap, circuit reservation, durable
    /// mailbox copies; repeatable or comma-separated
    #[arg(long, value_name = "MULTIADDR", global = true, env = config::ENV_RELAY)]
    relay: Vec<String>,
    /// Turn mDNS discovery off (the variable: 0 or 1)
    #[arg(
        long = "no-mdns",
        global = true,
        env = config::ENV_MDNS,
        action = clap::ArgAction::SetFalse,
        value_parser = mdns_value,
    )]
    mdns: bool,
}

/// `INTERLINK_MDNS`, as clap reads it for `--no-mdns`.
fn mdns_value(value: &str) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "on" | "yes" => Ok(true),
        "0" | "false" | "off" | "no" => Ok(false),
        _ => Err(format!(
            "{} expects 0 or 1 (also false/true, off/on, no/yes)",
            config::ENV_MDNS
        )),
    }
}

impl NetArgs {
    /// Sets aside every value clap took from the environment (see the type's doc).
    /// `levels` are the matches of each subcommand on the line: a global argument is
    /// seen at every level, and came from the environment if no level says otherwise.
    fn forget_env(&mut self, levels: &[&clap::ArgMatches]) {
        let from_env = |id: &str| {
            let mut sources = levels
                .iter()
                .filter(|m| m.ids().any(|i| i.as_str() == id))
                .map(|m| m.value_source(id));
            let first = sources.next();
            first == Some(Some(clap::parser::ValueSource::EnvVariable))
                && sources.all(|s| s == Some(clap::parser::ValueSource::EnvVariable))
        };
        if from_env("network") {
            self.network = None;
        }
        for (id, values) in [
            ("listen", &mut self.listen),
            ("bootstrap", &mut self.bootstrap),
            ("relay", &mut self.relay),
        ] {
            if from_env(id) {
                values.clear();
            }
        }
        if from_env("mdns") {
            self.mdns = true;
        }
    }

    /// The settings-file keys these flags set (a flag not given leaves its key alone).
    fn settings_changes(&self, name: Option<&str>) -> Vec<(&'static str, Option<toml_edit::Item>)> {
        let list = |v: &[String]| {
            let items = v
                .iter()
                .flat_map(|s| s.split(','))
                .map(str::trim)
                .filter(|s| !s.is_empty());
            toml_edit::value(toml_edit::Array::from_iter(items))
        };
        let mut changes = Vec::new();
        if let Some(n) = &self.network {
            changes.push(("network", Some(toml_edit::value(n.as_str()))));
        }
        for (key, values) in [
            ("listen", &self.listen),
            ("bootstrap", &self.bootstrap),
            ("relay", &self.relay),
        ] {
            if !values.is_empty() {
                changes.push((key, Some(list(values))));
            }
        }
        if !self.mdns {
            changes.push(("mdns", Some(toml_edit::value(false))));
        }
        if let Some(n) = name {
            changes.push(("name", Some(toml_edit::value(n))));
        }
        changes
    }

    /// The node configuration: these flags, then the environment, then `settings`.
    fn config(&self, settings: &Settings) -> anyhow::Result<interlink_net::Config> {
        let env = settings.layered(|k| std::env::var(k).ok());
        let flags = config::Flags {
            network: self.network.clone(),
            listen: self.listen.clone(),
            bootstrap: self.bootstrap.clone(),
            relay: self.relay.clone(),
            no_mdns: !self.mdns,
        };
        config::build(&flags, env).map_err(|e| settings.explain(e.into()))
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create this user's identity if missing; print its key and fingerprint.
    #[command(
        alias = "whoami",
        after_help = "Examples:\n  interlink-p2p id\n  interlink-p2p id --name alice"
    )]
    Id {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Set the name this user suggests to peers when pairing (written to the
        /// settings file, config.toml in the home) [default: INTERLINK_NAME, else <login>-<host>]
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
    },
    /// Walk through the system with real processes on 127.0.0.1 and throwaway homes: a
    /// relay, two paired sessions, a refused stranger, mail for a sleeping session.
    #[command(after_help = "Examples:\n  interlink-p2p demo")]
    Demo,
    /// Run a headless session (no MCP) until SIGTERM or Ctrl-C.
    ///
    /// Prints each listen address as a full multiaddr ending in /p2p/<peer id>, one per
    /// line, then `ready`; logs go to stderr.
    #[command(
        after_help = "Examples:\n  interlink-p2p run --session build-bot\n  interlink-p2p run --session lab --listen /ip4/0.0.0.0/tcp/4001 --no-mdns"
    )]
    Run {
        /// Session id [default: $INTERLINK_SESSION, else $CLAUDE_CODE_SESSION_ID, else random]
        #[arg(long)]
        session: Option<String>,
        /// What this session is doing, as announced to peers.
        #[arg(long, default_value = "", hide_default_value = true)]
        summary: String,
        #[command(flatten)]
        net: NetArgs,
    },
    /// Serve MCP on stdio for one agent session (started by Claude Code or Codex).
    ///
    /// Stdout carries only JSON-RPC; logs go to stderr. INTERLINK_CHANNELS=1 pushes each
    /// message as a notifications/claude/channel notification. Stdin closing, SIGTERM
    /// or SIGINT end the session (goodbye first).
    #[command(
        after_help = "Examples:\n  claude mcp add --scope user interlink -- interlink-p2p mcp   (or: interlink-p2p install claude)\n  interlink-p2p mcp --session reviewer --summary \"reviewing the parser\""
    )]
    Mcp {
        /// Session id [default: $INTERLINK_SESSION, else $CLAUDE_CODE_SESSION_ID, else random]
        #[arg(long)]
        session: Option<String>,
        /// The agent host: claude, codex or other [default: claude with
        /// $CLAUDE_CODE_SESSION_ID, else from the client's name at initialize]. A Codex
        /// server without --session/INTERLINK_SESSION waits for bind_codex_session.
        #[arg(long, value_name = "HOST", value_parser = mcp::parse_host)]
        host: Option<interlink_core::wire::HostKind>,
        /// What this session is doing, as announced to peers.
        #[arg(long, default_value = "", hide_default_value = true)]
        summary: String,
        #[command(flatten)]
        net: NetArgs,
    },
    /// Claude Code Stop hook: wait for an unread message of a session, print it, exit 2.
    ///
    /// Reads the hook's JSON from stdin (its `session_id`). Exits 2 after printing the
    /// unread messages (stdout and stderr), 0 on --timeout, and 0 at once when another
    /// `wait` for the same session is running.
    #[command(
        after_help = "Examples:\n  echo '{\"session_id\":\"1b7c…\"}' | interlink-p2p wait\n  interlink-p2p wait --session reviewer --timeout 30\n\nExit status: 2 after printing unread messages, 0 on --timeout or when another wait runs."
    )]
    Wait {
        /// Session id, instead of the hook JSON on stdin.
        #[arg(long)]
        session: Option<String>,
        /// Give up after this many seconds (exit 0) [default: wait indefinitely]
        #[arg(long, value_name = "SECS")]
        timeout: Option<f64>,
    },
    /// Join the overlay as an observer and show the sessions and network state; or,
    /// with --session, what a running session of this user sees of its network.
    #[command(
        after_help = "Examples:\n  interlink-p2p peers\n  interlink-p2p peers --watch\n  interlink-p2p peers --json --bootstrap /ip4/192.168.1.5/tcp/4001\n  interlink-p2p peers --session reviewer"
    )]
    Peers {
        /// Print one JSON object (one per line with --watch); shape in docs/CLI.md.
        #[arg(long)]
        json: bool,
        /// Show this running session's own connections (direct or relayed, transport,
        /// round trip), NAT status and external addresses, from the view it keeps
        /// current in its session directory.
        #[arg(long, value_name = "ID", conflicts_with = "watch")]
        session: Option<String>,
        /// Keep running and print again on every change, until Ctrl-C.
        #[arg(long)]
        watch: bool,
        /// Longest wait for the roster before printing, in seconds.
        #[arg(long, value_name = "SECS", default_value_t = 3.0)]
        wait: f64,
        #[command(flatten)]
        net: NetArgs,
    },
    /// Send messages to a peer's session, or to a group, signed as this user (the
    /// sender is on no roster; replies go to --reply-to).
    ///
    /// Prints one line per message: `delivered <msg_id>` (the recipient's node stored
    /// it and receipted it), `queued <msg_id>` (another node answered that it keeps it
    /// for the recipient's mailbox) or `not-kept <reason>` (no node took it: send it
    /// again later; the command then exits non-zero); to a group, one line per copy,
    /// `<outcome> <msg_id> <member>/<session>`.
    #[command(
        after_help = "Examples:\n  interlink-p2p send --to bob \"the parser tests pass\"\n  interlink-p2p send --to bob --session bob-2 --task t-7 --status result \"done\"\n  interlink-p2p send --to group:team \"standup in 5\"\n  git log -3 --oneline | interlink-p2p send --to self --stdin"
    )]
    Send {
        /// The recipient: a petname from peers.json, a fingerprint or key prefix,
        /// `self` (this user's other sessions), or `group:<name>` (every member session
        /// of one of this user's groups).
        #[arg(long, value_name = "TARGET")]
        to: String,
        /// The recipient session: an exact id or a unique prefix [default: chosen by
        /// the routing rules]
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// The message text.
        #[arg(required_unless_present = "stdin", conflicts_with = "stdin")]
        text: Option<String>,
        /// Read messages from stdin, one per line (empty lines skipped), sent in order.
        #[arg(long)]
        stdin: bool,
        /// Task the messages belong to.
        #[arg(long, value_name = "ID")]
        task: Option<String>,
        /// Task status: update, needs_input, result, failed or canceled.
        #[arg(long, value_name = "S", value_parser = send::parse_status)]
        status: Option<interlink_core::wire::TaskStatus>,
        /// Longest wait for the recipient to appear on the overlay, in seconds.
        #[arg(long, value_name = "SECS", default_value_t = 5.0)]
        wait: f64,
        /// The session of yours that replies go to [default: $INTERLINK_SESSION, else
        /// $CLAUDE_CODE_SESSION_ID, else none: replies wait in a mailbox nothing reads]
        #[arg(long, value_name = "ID")]
        reply_to: Option<String>,
        #[command(flatten)]
        net: NetArgs,
    },
    /// Print a session's inbox: the messages its node delivered.
    #[command(
        after_help = "Examples:\n  interlink-p2p inbox\n  interlink-p2p inbox --session reviewer --json\n  interlink-p2p inbox --from 4711\n\nUnread messages (not yet acknowledged by the session's agent) are marked *."
    )]
    Inbox {
        /// Session id [default: $INTERLINK_SESSION, else $CLAUDE_CODE_SESSION_ID, else
        /// the session whose inbox was written last]
        #[arg(long)]
        session: Option<String>,
        /// One JSON object per line (the inbox entry plus `petname` and `own`).
        #[arg(long)]
        json: bool,
        /// Start at this inbox offset (printed on stderr by the previous read).
        #[arg(long, value_name = "OFFSET", default_value_t = 0)]
        from: u64,
    },
    /// Show or change the peers (petname → identity key) allowed to message you.
    #[command(
        after_help = "Examples:\n  interlink-p2p peer list\n  interlink-p2p peer add bob 9f2d3fc9741d…  (his `interlink-p2p id`)\n  interlink-p2p peer rename peer-1a2b bob\n  interlink-p2p peer remove bob"
    )]
    Peer {
        #[command(subcommand)]
        action: peer::Action,
    },
    /// Show or change the named groups of peers (`send_message` to "group:<name>").
    #[command(
        after_help = "Examples:\n  interlink-p2p group create team bob carol/carol-2\n  interlink-p2p group add team dave\n  interlink-p2p group list"
    )]
    Group {
        #[command(subcommand)]
        action: group::Action,
    },
    /// Decide on pair requests: list them, accept one (pin the key, confirm to the
    /// requesting session) or reject one.
    #[command(
        after_help = "Examples:\n  interlink-p2p pair list\n  interlink-p2p pair accept 3f2a-9c41-77b0\n  interlink-p2p pair request 3f2a --name carol\n  interlink-p2p pair reject 3f2a"
    )]
    Pair {
        #[command(subcommand)]
        action: pair::Action,
        #[command(flatten)]
        net: NetArgs,
    },
    /// Print a one-line code that pairs one person with you, then wait for them to join.
    ///
    /// The code carries your identity and name, your relays, this command's addresses,
    /// an expiry and a one-time secret; they run `interlink-p2p join <code>`. Until it
    /// expires, your running MCP (agent) sessions admit it too; a headless `run`
    /// session holds the knock instead. The code goes to stdout, alone on its line;
    /// `paired <name> <fingerprint>` follows when they joined.
    #[command(
        after_help = "Examples:\n  interlink-p2p invite\n  interlink-p2p invite \
                            --expires 1d --no-wait\n  interlink-p2p invite --relay \
                            /dns4/relay.example.net/tcp/4001/p2p/12D3KooW…\n\nExit status: \
                            0 when someone joined (or --no-wait), 1 when the code expired \
                            unused."
    )]
    Invite {
        /// How long the code admits: 90s, 30m, 1h, 2d (at most 7 days) [default: 1h;
        /// with --device 5m, at most 15m].
        #[arg(long, value_name = "DURATION", value_parser = invite::parse_duration)]
        expires: Option<Duration>,
        /// Print the code and exit (your running MCP sessions admit the join; `run`
        /// sessions do not).
        #[arg(long, conflicts_with = "device")]
        no_wait: bool,
        /// Link another machine of yours instead of pairing with a person: the code hands
        /// this identity over, once, within minutes, after both screens confirmed the
        /// same comparison string (the supported alternative to copying identity.key).
        #[arg(long)]
        device: bool,
        #[command(flatten)]
        net: NetArgs,
    },
    /// Pair with the person whose invite code you were given, or take your identity
    /// from your other machine with a device code (`invite --device`).
    ///
    /// Verifies the code (its check and the inviter's signature), knocks with its
    /// secret and waits for their side to confirm; only then adds them to your peers
    /// and keeps the relays they signed into the code in your settings file. A device
    /// code (interlink3…) instead shows a comparison string to confirm on both
    /// machines, then writes the identity.
    #[command(
        after_help = "Examples:\n  interlink-p2p join interlink2…\n  interlink-p2p \
                            join interlink2… --name alice-laptop\n  interlink-p2p join \
                            interlink3…   (a device code from `invite --device`)\n\nExit \
                            status: 0 when confirmed; 1 when the code is refused (nothing \
                            changed) or no confirmation came within --wait."
    )]
    Join {
        /// The code (starts with interlink2, or interlink3 for a device code).
        code: String,
        /// The name to give them here [default: the name in the code]
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
        /// Longest wait for them to show on the overlay, then for the confirmation, in
        /// seconds.
        #[arg(long, value_name = "SECS", default_value_t = 60.0)]
        wait: f64,
        /// Device codes: confirm the comparison string here without asking (the
        /// identity received is still checked against the code's signed key; the other
        /// machine's user must still confirm).
        #[arg(long)]
        yes: bool,
        /// Device codes: replace this home's identity if it has another one (the old
        /// key is kept next to it as a backup).
        #[arg(long)]
        replace_identity: bool,
        #[command(flatten)]
        net: NetArgs,
    },
    /// Register the MCP server (and its wake-up hooks) in Claude Code's or Codex's user
    /// configuration; idempotent, keeps every other entry, prints what changed.
    #[command(
        after_help = "Examples:\n  interlink-p2p install claude\n  interlink-p2p install codex --dry-run\n  interlink-p2p install claude --relay /dns4/relay.example.net/tcp/4001/p2p/12D3KooW… --no-mdns"
    )]
    Install {
        /// claude or codex.
        #[arg(value_enum)]
        host: install::Host,
        /// Print what would change without writing anything.
        #[arg(long)]
        dry_run: bool,
        /// The interlink-p2p executable the entries run [default: this executable, or a
        /// copy of it in ~/.local/share/interlink-p2p/bin when it is in a build or npm
        /// directory]
        #[arg(long, value_name = "PATH")]
        command: Option<String>,
        /// Network settings to write to the settings file (config.toml in the home),
        /// which every command and session reads.
        #[command(flatten)]
        net: NetArgs,
        /// This user's name, suggested to peers when pairing (written to config.toml).
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
    },
    /// Remove what `install` added (other entries are kept).
    #[command(
        after_help = "Examples:\n  interlink-p2p uninstall claude\n  interlink-p2p uninstall codex --dry-run"
    )]
    Uninstall {
        /// claude or codex.
        #[arg(value_enum)]
        host: install::Host,
        /// Print what would change without writing anything.
        #[arg(long)]
        dry_run: bool,
    },
    /// Check whether an interlink-p2p session answers at an address (joins no roster).
    #[command(after_help = probe::HELP)]
    Probe {
        /// The address, e.g. /ip4/192.168.1.5/tcp/4001/p2p/12D3KooW… (the /p2p/ part is
        /// optional).
        multiaddr: Multiaddr,
        /// Give up after this many seconds.
        #[arg(long, value_name = "SECS", default_value_t = 10.0)]
        timeout: f64,
        /// Overlay name [default: default]
        #[arg(long, value_name = "NAME", env = config::ENV_NETWORK)]
        network: Option<String>,
    },
}

/// Exit code of a usage error (sysexits' EX_USAGE), distinct from probe's codes.
const EXIT_USAGE: u8 = 64;

/// The log filter when `RUST_LOG` is unset: warnings, except kad's "Failed to trigger
/// bootstrap: No known peers", which libp2p-kad 0.49 logs whenever a listen address
/// appears before any peer is in the routing table - on every normal start, since the
/// node joins the DHT only once presence settles (node::discovery). kad's only other
/// warning is about record replication, which this node does not use.
const DEFAULT_LOG_FILTER: &str = "warn,libp2p_kad::behaviour=error";

fn main() -> ExitCode {
    interlink_net::memory::return_large_buffers();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER)),
        )
        .init();
    let cli = match parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(EXIT_USAGE)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            if e.downcast_ref::<interlink_p2p::UsageError>().is_some() {
                ExitCode::from(EXIT_USAGE)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// The command line, with the network settings clap read from the environment set
/// aside ([`NetArgs::forget_env`]).
fn parse() -> Result<Cli, clap::Error> {
    use clap::{CommandFactory as _, FromArgMatches as _};
    let matches = Cli::command().try_get_matches()?;
    let mut cli = Cli::from_arg_matches(&matches)?;
    let levels: Vec<&clap::ArgMatches> =
        std::iter::successors(matches.subcommand().map(|(_, m)| m), |m| {
            m.subcommand().map(|(_, m)| m)
        })
        .collect();
    if let Some(net) = cli.command.net_mut() {
        net.forget_env(&levels);
    }
    if let Command::Probe { network, .. } = &mut cli.command
        && levels.first().and_then(|m| m.value_source("network"))
            == Some(clap::parser::ValueSource::EnvVariable)
    {
        // As for the other commands: the library names the variable.
        *network = None;
    }
    Ok(cli)
}

impl Command {
    /// The network settings of a command that runs a node.
    fn net_mut(&mut self) -> Option<&mut NetArgs> {
        match self {
            Command::Run { net, .. }
            | Command::Mcp { net, .. }
            | Command::Peers { net, .. }
            | Command::Send { net, .. }
            | Command::Pair { net, .. }
            | Command::Invite { net, .. }
            | Command::Join { net, .. }
            | Command::Install { net, .. } => Some(net),
            Command::Id { .. }
            | Command::Demo
            | Command::Wait { .. }
            | Command::Inbox { .. }
            | Command::Peer { .. }
            | Command::Group { .. }
            | Command::Uninstall { .. }
            | Command::Probe { .. } => None,
        }
    }
}

fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    let home_opt =
        || interlink_p2p::paths::Home::resolve(cli.home.clone(), |k| std::env::var(k).ok());
    let home =
        || home_opt().context("no home directory: set INTERLINK_HOME or HOME, or pass --home");
    // The settings file under the home; the environment overrides it, flags both.
    let settings = match home_opt() {
        Some(h) => Settings::load(h.path())?,
        None => Settings::default(),
    };
    let env = settings.layered(|k| std::env::var(k).ok());
    match cli.command {
        Command::Id { json, ref name } => {
            println!(
                "{}",
                interlink_p2p::cmd_id(&home()?, json, name.as_deref())?
            )
        }
        Command::Demo => interlink_p2p::demo::run(&mut std::io::stdout())?,
        Command::Run {
            ref session,
            ref summary,
            ref net,
        } => {
            let config = net.config(&settings)?;
            let options = run::Options {
                session: session.clone(),
                summary: summary.clone(),
                cwd: std::env::current_dir().context("reading the current directory")?,
            };
            let home = home()?;
            runtime()?.block_on(run::run(&home, config, options, &mut std::io::stdout()))?;
        }
        Command::Mcp {
            session,
            summary,
            host,
            ref net,
        } => {
            let config = net.config(&settings)?;
            let home = home()?;
            let rt = session_runtime()?;
            let name = interlink_store::pairing::own_name(&env);
            let result = rt.block_on(mcp::run(home, session, summary, host, config, name));
            // The stdin reader is a blocking read that only ends with stdin: after a
            // SIGTERM, waiting for it would keep the process alive.
            rt.shutdown_background();
            result?;
        }
        Command::Wait { session, timeout } => {
            let timeout = timeout.map(|t| seconds("--timeout", t)).transpose()?;
            return wait::run(&home()?, session, timeout);
        }
        Command::Peers {
            json,
            session: Some(session),
            ..
        } => {
            let clock = config::clock(&env).map_err(|e| settings.explain(e.into()))?;
            peers::session_view(&home()?, &session, json, clock, &mut std::io::stdout())?;
        }
        Command::Peers {
            json,
            watch,
            wait,
            ref net,
            session: None,
        } => {
            let config = net.config(&settings)?;
            let wait = seconds("--wait", wait)?;
            let options = peers::Options { json, watch, wait };
            let home = home_opt();
            runtime()?.block_on(peers::peers(
                home.as_ref(),
                config,
                options,
                &mut std::io::stdout(),
                &mut std::io::stderr(),
            ))?;
        }
        Command::Send {
            to,
            session,
            text,
            stdin,
            task,
            status,
            wait,
            reply_to,
            ref net,
        } => {
            let config = net.config(&settings)?;
            let options = send::Options {
                to,
                session,
                task_id: task,
                status,
                wait: seconds("--wait", wait)?,
                reply_to: send::reply_to(reply_to.as_deref(), |k| std::env::var(k).ok())?,
                cwd: std::env::current_dir().context("reading the current directory")?,
            };
            let home = home()?;
            let messages = match (text, stdin) {
                (Some(text), false) => send::Messages::One(text),
                _ => send::Messages::Lines(tokio::io::BufReader::new(tokio::io::stdin())),
            };
            let finished = runtime()?.block_on(send::send(
                &home,
                config,
                options,
                messages,
                &mut std::io::stdout(),
                &mut std::io::stderr(),
            ))?;
            if finished == send::Finished::UnseenSession {
                return Ok(ExitCode::from(send::EXIT_UNSEEN_SESSION));
            }
        }
        Command::Inbox {
            session,
            json,
            from,
        } => {
            let options = inbox::Options {
                session,
                json,
                from,
            };
            inbox::run(
                &home()?,
                &options,
                |k| std::env::var(k).ok(),
                &mut std::io::stdout(),
                &mut std::io::stderr(),
            )?;
        }
        Command::Peer { action } => {
            peer::run(
                &home()?,
                action,
                &mut std::io::stdout(),
                &mut std::io::stderr(),
            )?;
        }
        Command::Group { action } => {
            group::run(
                &home()?,
                action,
                &mut std::io::stdout(),
                &mut std::io::stderr(),
            )?;
        }
        Command::Install {
            host,
            dry_run,
            ref command,
            ref net,
            ref name,
        } => {
            // Checked before anything is written: a bad address changes nothing.
            net.config(&Settings::default())?;
            let changes = net.settings_changes(name.as_deref());
            if !changes.is_empty() {
                let home = home()?;
                for note in interlink_p2p::settings::write(home.path(), &changes, dry_run)? {
                    println!("{note}");
                }
            }
            let locations = install::Locations::from_env(|k| std::env::var(k).ok())?;
            let program = match command {
                Some(c) => install::Program::Given(c.clone()),
                None => install::Program::This(
                    std::env::current_exe()
                        .context("finding this executable (or pass --command)")?,
                ),
            };
            install::run(
                &locations,
                host,
                install::Action::Install,
                &program,
                dry_run,
                &mut std::io::stdout(),
            )?;
        }
        Command::Uninstall { host, dry_run } => {
            let locations = install::Locations::from_env(|k| std::env::var(k).ok())?;
            install::run(
                &locations,
                host,
                install::Action::Uninstall,
                &install::Program::Given("interlink-p2p".to_owned()),
                dry_run,
                &mut std::io::stdout(),
            )?;
        }
        Command::Pair { action, ref net } => {
            let config = net.config(&settings)?;
            let home = home()?;
            let name = interlink_store::pairing::own_name(&env);
            runtime()?.block_on(pair::run(
                &home,
                action,
                config,
                name,
                &mut std::io::stdout(),
            ))?;
        }
        Command::Invite {
            expires,
            no_wait,
            device,
            ref net,
        } => {
            let config = net.config(&settings)?;
            let home = home()?;
            let done = if device {
                let lifetime = interlink_p2p::device::device_lifetime(expires)
                    .map_err(interlink_p2p::UsageError)?;
                runtime()?.block_on(interlink_p2p::device::invite_device(
                    &home,
                    &config,
                    lifetime,
                    &mut std::io::stdout(),
                    &mut std::io::stderr(),
                ))?
            } else {
                let options = invite::InviteOptions {
                    expires: expires.unwrap_or(Duration::from_secs(3600)),
                    no_wait,
                    name: interlink_store::pairing::own_name(&env),
                };
                runtime()?.block_on(invite::invite(
                    &home,
                    config,
                    &options,
                    &mut std::io::stdout(),
                    &mut std::io::stderr(),
                ))?
            };
            return Ok(finished(done));
        }
        Command::Join {
            code,
            name,
            wait,
            yes,
            replace_identity,
            ref net,
        } => {
            let config = net.config(&settings)?;
            let home = home()?;
            let done = if interlink_core::wire::DeviceCode::is_device_code(&code) {
                if name.is_some() {
                    return Err(interlink_p2p::UsageError(
                        "--name is for a person's invite; a device code brings your own identity"
                            .into(),
                    )
                    .into());
                }
                let options = interlink_p2p::device::JoinDeviceOptions {
                    code,
                    yes,
                    replace_identity,
                };
                runtime()?.block_on(interlink_p2p::device::join_device(
                    &home,
                    &config,
                    &options,
                    &mut std::io::stdout(),
                    &mut std::io::stderr(),
                ))?
            } else {
                if yes || replace_identity {
                    return Err(interlink_p2p::UsageError(
                        "--yes and --replace-identity are for a device code (interlink3…) from \
                         `invite --device`"
                            .into(),
                    )
                    .into());
                }
                let options = invite::JoinOptions {
                    code,
                    petname: name,
                    wait: seconds("--wait", wait)?,
                    name: interlink_store::pairing::own_name(&env),
                };
                runtime()?.block_on(invite::join(
                    &home,
                    config,
                    &options,
                    &mut std::io::stdout(),
                    &mut std::io::stderr(),
                ))?
            };
            return Ok(finished(done));
        }
        Command::Probe {
            ref multiaddr,
            timeout,
            ref network,
        } => {
            let flags = config::Flags {
                network: network.clone(),
                ..Default::default()
            };
            let network = config::network(&flags, &env)?;
            let timeout = seconds("--timeout", timeout)?;
            let (line, code) =
                runtime()?.block_on(probe::run(multiaddr.clone(), &network, timeout));
            println!("{line}");
            return Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The runtime of an MCP session: one thread. A session is mostly waiting — for its
/// agent host, the network and its disk — and on a multi-threaded runtime every
/// message hopped between worker threads; one thread cut the MCP send → notification
/// p50 from 1.5 to 1.2 ms and raised sequential sends from 640 to 790/s
/// (docs/BENCHMARKS.md).
fn session_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn seconds(flag: &str, value: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(value).map_err(|_| {
        interlink_p2p::UsageError(format!(
            "{flag} {value}: expected a non-negative number of seconds"
        ))
        .into()
    })
}

/// The exit status of a command that waits for another side (`invite`, `join`): it
/// finished, or it ended without the other side's answer.
fn finished(done: bool) -> ExitCode {
    if done {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::*;

    /// Every command and subcommand a person can run shows an example in its --help.
    #[test]
    fn every_command_help_has_an_example() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for sub in cmd.get_subcommands() {
                let path = format!("{path} {}", sub.get_name());
                let help = sub
                    .get_after_help()
                    .map(ToString::to_string)
                    .unwrap_or_default();
                if !help.contains("Example") {
                    missing.push(path.clone());
                }
                walk(sub, &path, missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "interlink-p2p", &mut missing);
        assert!(missing.is_empty(), "no example in --help: {missing:?}");
    }
}

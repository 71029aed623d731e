//! `interlink-p2p send`: a message from a shell, as a short-lived sender.
//!
//! The command runs its own node under the user's identity, with a fresh session id
//! (`send-<uuid>`, never the id of a running session: two nodes with one PeerId would
//! steal each other's connections). The node is a **sender**
//! ([`interlink_net::Visibility::Sender`]): it signs and sends as that session but never
//! announces it, so it is on nobody's roster — never a candidate recipient, in
//! `discover`, in a hint or a "several sessions" choice — and leaves nothing behind
//! when it exits. Its messages name a reply-to session of the user (`--reply-to`, else
//! `INTERLINK_SESSION`, else `CLAUDE_CODE_SESSION_ID`), so replies go to a session that
//! reads them. It joins the overlay, resolves the target and
//! waits until its sessions are on the roster and settled, then picks one by the
//! routing rules — all through `interlink_mcp::cli::route`, as `send_message` does — and
//! sends each message in order. Every message gets one stdout
//! line, in input order: `delivered <msg_id>` (the recipient receipted it), `queued
//! <msg_id>` (a peer or relay answered that its copy of the recipient's mailbox keeps
//! it: this command has no outbox, so nothing less counts) or `not-kept <reason>` (no
//! holder took it; send it again later). A refusal stops the command with the reason;
//! any `not-kept` line makes it exit non-zero.

use std::{collections::VecDeque, io::Write, path::PathBuf, time::Duration};

use anyhow::{Context as _, bail};
use interlink_core::{
    IdentityKey, MsgId, SessionId,
    limits::MAX_GROUP_RECIPIENTS,
    presence::Presence,
    routing::{Hints, Route, RouteError, RouteReason, RouteRequest},
    trust::PeerPolicy,
    wire::{DeliveryMode, EnvelopeKind, GroupTag, HostKind, SessionAddr, TaskStatus},
};
use interlink_net::{
    Config, Delivery, Node, Outcome, OutgoingMessage, SendError, SendOutcome, Visibility,
};
use tokio::io::{AsyncBufRead, AsyncBufReadExt as _};

use interlink_mcp::cli::USER_SESSION_PREFIX;
use interlink_mcp::cli::{
    route::{self as sender, RouteWaitError, Target, TargetError},
    session::{Describe, session_spec, start_node},
};
use interlink_store::groups::GROUP_PREFIX;

use crate::{paths::Home, policy};

/// After the target's first session shows up, how long its sessions must stay
/// unchanged before routing (roster fetches and gossip from other peers may add more).
const SETTLE: Duration = Duration::from_millis(300);
/// Most messages handed to the node whose outcome is not printed yet.
const MAX_IN_FLIGHT: usize = 64;

/// Exit status of a `send` whose messages were queued for a `--session` id that
/// matched nothing on the roster and that no session of this user saw before: queued
/// as asked, but a typo is likely, so it is no plain success.
pub const EXIT_UNSEEN_SESSION: u8 = 3;

/// How a `send` that sent every message ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finished {
    /// Every message delivered or queued, to a session seen before.
    Sent,
    /// Queued for a session id nobody here has seen ([`EXIT_UNSEEN_SESSION`]).
    UnseenSession,
}

/// The messages to send.
#[derive(Debug)]
pub enum Messages<R> {
    /// One message, from the command line.
    One(String),
    /// One message per line (empty lines skipped), sent in order.
    Lines(R),
}

/// How `send` runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// The target: a petname, a fingerprint or key prefix, or `self`.
    pub to: String,
    /// The target session: an exact id or a unique prefix.
    pub session: Option<String>,
    /// Task the messages belong to.
    pub task_id: Option<String>,
    /// Task status reported with them.
    pub status: Option<TaskStatus>,
    /// The longest wait for the target to appear on the roster.
    pub wait: Duration,
    /// The working directory (the current directory).
    pub cwd: PathBuf,
    /// The session of this user that replies go to ([`reply_to`]).
    pub reply_to: Option<SessionId>,
    /// Sent by the user on their page (`interlink-p2p ui`): from a
    /// [`USER_SESSION_PREFIX`] session, which agents are shown as their user's words.
    pub from_user: bool,
}

/// The session replies to a shell `send` go to: `--reply-to`, else the session the
/// shell runs in (`INTERLINK_SESSION`, then `CLAUDE_CODE_SESSION_ID`: an agent's shell
/// tool), else none. A flag that is no session id is an error; an environment value
/// that is none is ignored.
pub fn reply_to(
    flag: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<Option<SessionId>> {
    if let Some(text) = flag {
        return SessionId::new(text.trim())
            .map(Some)
            .map_err(|e| anyhow::anyhow!("--reply-to {text:?} is not a session id: {e}"));
    }
    Ok([
        interlink_store::env::SESSION,
        interlink_store::env::CLAUDE_SESSION,
    ]
    .into_iter()
    .filter_map(env)
    .find_map(|v| SessionId::new(v.trim()).ok()))
}

/// Parses a `--status` value.
pub fn parse_status(text: &str) -> Result<TaskStatus, String> {
    serde_json::from_value(serde_json::Value::String(text.to_owned())).map_err(|_| {
        format!("{text:?} is not a status: use update, needs_input, result, failed or canceled")
    })
}

/// Runs `send`: one outcome line per message to `out`, progress to `progress`.
pub async fn send<R: AsyncBufRead + Unpin>(
    home: &Home,
    mut config: Config,
    options: Options,
    messages: Messages<R>,
    out: &mut impl Write,
    progress: &mut impl Write,
) -> anyhow::Result<Finished> {
    if let Some(group) = options.to.strip_prefix(GROUP_PREFIX) {
        send_group(home, config, &options, group, messages, out, progress).await?;
        return Ok(Finished::Sent);
    }
    let (identity, _) = crate::load_identity(home)?;
    let own_key = identity.public();
    let peers = policy::load(home)?;
    // Resolved before joining the overlay: a name that is no peer fails at once.
    let Target {
        key: target,
        name: target_name,
    } = sender::resolve_among_peers(&options.to, &peers, own_key).map_err(|e| match e {
        TargetError::NotAPeer { .. } => anyhow::anyhow!(
            "--to {:?} is not a peer ({e}; see `interlink-p2p peer list`). To pair: one of \
             you runs `interlink-p2p invite` and sends the code, the other runs \
             `interlink-p2p join CODE`; or both run `interlink-p2p peer add NAME KEY`, KEY from \
             `interlink-p2p id` on the other side",
            options.to
        ),
        e => anyhow::anyhow!("--to {:?}: {e}", options.to),
    })?;
    let alone_hint = crate::config::alone_hint(&config);
    let (node, own) = join(home, &mut config, &peers, own_key, &options, progress)?;
    let handle = node.handle();

    let mut queued = 0usize;
    let mut not_kept = 0usize;
    let mut unseen: Option<SessionId> = None;
    let result = async {
        let req = RouteRequest {
            target,
            session: options.session.as_deref(),
            own: &own,
            sticky: None,
            remembered: None,
        };
        let wait = sender::Wait {
            until: tokio::time::Instant::now() + options.wait,
            settle: SETTLE,
        };
        let chosen = match sender::route_when_seen(&handle, &req, wait).await {
            Ok(chosen) => chosen,
            Err(e) => {
                let alone = handle
                    .diagnostics()
                    .await
                    .is_ok_and(|d| d.connected.is_empty());
                let why = if alone {
                    format!("; {alone_hint}")
                } else {
                    String::new()
                };
                // The next step the user can take from here, not only what failed.
                let what = match e {
                    RouteWaitError::Route(RouteError::NoSession) if target == own.key => {
                        "no other session of yours is running, or none this command could \
                         reach: start one (an agent session, or `interlink-p2p run`) and send \
                         again"
                            .to_owned()
                    }
                    RouteWaitError::Route(RouteError::NoSession) => format!(
                        "{e}; if you know the id of a session of theirs that was on the \
                         overlay before, pass --session ID: the message waits in its mailbox \
                         until it comes back; {}",
                        sender::seen_sentence(
                            &sender::seen_sessions(home, Some(&handle), target).await
                        )
                    ),
                    e => e.to_string(),
                };
                anyhow::bail!(
                    "cannot route to {target_name} ({}): {what}{why}",
                    target.fingerprint()
                );
            }
        };
        describe_route(progress, &target_name, &target, &chosen);
        // An id given by hand that matches nothing on the roster is queued as asked
        // (it may be a session that is offline), but one nobody here has seen may be a
        // typo: the exit status says so.
        if chosen.reason == RouteReason::Literal
            && !sender::is_seen(home, Some(&handle), target, &chosen.session).await
        {
            unseen = Some(chosen.session.clone());
        }
        if chosen.presence == Presence::Gone {
            // Sealed with the identity's key from another of its sessions and queued in
            // the session's mailbox; the node refuses if it knows no such key.
            let _ = writeln!(
                progress,
                "send: session {} of {target_name} is gone (not seen within {:?}); the \
                 message waits in its mailbox for when it returns",
                chosen.session, options.wait
            );
        }
        let to = SessionAddr {
            key: target,
            session: chosen.session.clone(),
        };
        let make = |text: String| OutgoingMessage {
            to: to.clone(),
            kind: EnvelopeKind::Message,
            text: Some(text),
            task_id: options.task_id.clone(),
            status: options.status,
            in_reply_to: None,
            also_about: Vec::new(),
            name: None,
            group: None,
            invite: None,
        };
        // Messages are handed to the node as they are read and their outcomes printed in
        // order as they come: the node batches what waits (one delivery request, one
        // mailbox put for a sleeping recipient) instead of paying a round trip each.
        let mut in_flight: VecDeque<Outcome> = VecDeque::new();
        let mut failed: Option<anyhow::Error> = None;
        let mut report = async |outcome: Outcome| -> anyhow::Result<()> {
            let line = match outcome.await {
                Ok(SendOutcome::Delivered(sent)) => format!("delivered {}", sent.msg_id),
                Ok(SendOutcome::Queued { msg_id, .. }) => {
                    queued += 1;
                    format!("queued {msg_id}")
                }
                // Not kept is an answer for this message, not the end of the command.
                Err(SendError::NotKept(reason)) => {
                    not_kept += 1;
                    format!("not-kept {reason}")
                }
                Err(e) => return Err(e).context("message not sent"),
            };
            writeln!(out, "{line}")?;
            out.flush().context("writing the outcome")
        };
        let mut texts = Texts::new(messages);
        while failed.is_none() {
            let Some(text) = texts.next().await? else {
                break;
            };
            if in_flight.len() >= MAX_IN_FLIGHT
                && let Some(oldest) = in_flight.pop_front()
            {
                failed = report(oldest).await.err();
            }
            if failed.is_none() {
                in_flight.push_back(handle.submit(make(text)).await?);
            }
        }
        // Everything handed over gets its outcome printed, even after a failure.
        for outcome in in_flight {
            if let Err(e) = report(outcome).await {
                failed.get_or_insert(e);
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        anyhow::Ok(())
    }
    .await;
    let result = result.and_then(|()| {
        if queued > 0 {
            let _ = writeln!(
                progress,
                "send: {queued} message(s) queued: a peer or relay holds them in the \
                 recipient's mailbox, which it collects when it next fetches (at once on \
                 waking, else within 10 s)"
            );
        }
        if not_kept > 0 {
            bail!(
                "{not_kept} message(s) not kept (the not-kept lines say why): this command \
                 has no outbox, and no peer took them; send them again later"
            );
        }
        if let Some(session) = &unseen {
            let _ = writeln!(
                progress,
                "send: warning: session {session} of {target_name} is on no roster and \
                 none of your sessions saw it before: if it is a typo, the message waits \
                 for a session that never comes (exit status {EXIT_UNSEEN_SESSION}); \
                 check the id with them or `interlink-p2p peers`"
            );
            return Ok(Finished::UnseenSession);
        }
        Ok(Finished::Sent)
    });
    node.shutdown().await;
    result
}

/// Starts this command's short-lived session node under the user's identity: a fresh
/// session id, no inbox, the user's policy and pins.
fn join(
    home: &Home,
    config: &mut Config,
    peers: &PeerPolicy,
    own_key: IdentityKey,
    options: &Options,
    progress: &mut impl Write,
) -> anyhow::Result<(Node, SessionAddr)> {
    // The page's messages come from one session, so an agent sees one thread with its
    // user; the page sends one at a time ([`crate::ui`]).
    let session = if options.from_user {
        SessionId::new(format!("{USER_SESSION_PREFIX}page"))?
    } else {
        SessionId::new(format!("send-{}", SessionId::random(&mut crate::os_rng())))?
    };
    let own = SessionAddr {
        key: own_key,
        session: session.clone(),
    };
    // This session takes no messages: it has no inbox and leaves in seconds. It keeps
    // the policy and the pins file: they tell it which peers' mailbox passes to keep
    // and use, and which of its own to hand over (PROTOCOL §4.7).
    config.delivery = Delivery {
        inbox_dir: None,
        policy: peers.clone(),
        pins_file: Some(home.pins()),
        address_book: Some(home.addresses()),
    };
    let describe = Describe {
        summary: if options.from_user {
            "interlink-p2p ui".into()
        } else {
            "interlink-p2p send".into()
        },
        cwd: options.cwd.clone(),
        host: HostKind::Other,
        delivery: DeliveryMode::Poll,
    };
    let mut spec = session_spec(home, session, describe)?;
    // Never on a roster: the command leaves in seconds and takes no messages.
    spec.visibility = Visibility::Sender {
        reply_to: options.reply_to.clone(),
    };
    // Gone in seconds: it must not take the host's well-known port from the next
    // agent session (it still dials it, to meet this host's sessions).
    config.hold_well_known_port = false;
    let node = start_node(spec, config)?;
    let _ = writeln!(
        progress,
        "send: joining overlay {} as {} (a sender: on no roster)…",
        config.network.as_str(),
        own.session
    );
    match &options.reply_to {
        Some(r) => {
            let _ = writeln!(progress, "send: replies go to your session {r}");
        }
        None => {
            let _ = writeln!(
                progress,
                "send: replies wait in the mailbox of {} (`interlink-p2p run --session {}` \
                 collects them); --reply-to SESSION sends them to a session of yours",
                own.session, own.session
            );
        }
    }
    Ok((node, own))
}

/// `send --to group:<name>`: every message goes to every member session of the user's
/// group (docs/GROUPS.md), one sealed copy each, all under one group tag and thread.
/// One stdout line per copy, in order: `<outcome> <msg_id> <member>/<session>`, the
/// outcome as for a direct message (`delivered`, `queued`, or `not-kept <reason>` with
/// no id).
async fn send_group<R: AsyncBufRead + Unpin>(
    home: &Home,
    mut config: Config,
    options: &Options,
    name: &str,
    messages: Messages<R>,
    out: &mut impl Write,
    progress: &mut impl Write,
) -> anyhow::Result<()> {
    if options.session.is_some() {
        bail!(
            "--session names one session of one peer; a group's sessions are its members' (narrow a member with `interlink-p2p group add {name} <peer>/<session>`)"
        );
    }
    let groups = interlink_store::groups::load(home)?;
    let Some(group) = groups.get(name).cloned() else {
        let names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
        bail!(
            "no group is named {name:?}; this user's groups: {} (`interlink-p2p group create` makes one)",
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        );
    };
    let (identity, _) = crate::load_identity(home)?;
    let peers = policy::load(home)?;
    let (node, own) = join(
        home,
        &mut config,
        &peers,
        identity.public(),
        options,
        progress,
    )?;
    let handle = node.handle();
    let mut not_kept = 0usize;
    let result = async {
        let until = tokio::time::Instant::now() + options.wait;
        let routed = sender::route_group(
            &handle,
            &group,
            &peers,
            &own,
            |_| Hints::default(),
            until,
            SETTLE,
        )
        .await?;
        for s in &routed.skipped {
            let _ = writeln!(progress, "send: group {name}: no copy for {}: {}", s.member, s.why);
        }
        let recipients = routed.recipients;
        if recipients.is_empty() {
            bail!("nothing sent to group {name:?}: no member session to send to");
        }
        if recipients.len() > MAX_GROUP_RECIPIENTS {
            bail!(
                "nothing sent: {} recipient sessions; a group message goes to at most {MAX_GROUP_RECIPIENTS}",
                recipients.len()
            );
        }
        let tag = GroupTag {
            name: group.name.clone(),
            thread: MsgId::random(&mut crate::os_rng()),
            members: recipients.iter().map(|r| r.to.clone()).collect(),
        };
        let _ = writeln!(
            progress,
            "send: group {name}, thread {}: a copy to each of {}",
            tag.thread,
            recipients
                .iter()
                .map(|r| format!("{}/{} ({}; {})", r.name, r.to.session, r.route.presence, r.route.reason))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut texts = Texts::new(messages);
        while let Some(text) = texts.next().await? {
            // Every copy is handed to the node before any outcome is awaited: a sleeping
            // member delays nobody.
            let mut pending = Vec::with_capacity(recipients.len());
            for r in &recipients {
                let msg = OutgoingMessage {
                    to: r.to.clone(),
                    kind: EnvelopeKind::Message,
                    text: Some(text.clone()),
                    task_id: options.task_id.clone(),
                    status: options.status,
                    in_reply_to: None,
                    also_about: Vec::new(),
                    name: None,
                    group: Some(tag.clone()),
                    invite: None,
                };
                pending.push(handle.submit(msg).await?);
            }
            for (r, outcome) in recipients.iter().zip(pending) {
                let who = format!("{}/{}", r.name, r.to.session);
                let line = match outcome.await {
                    Ok(SendOutcome::Delivered(sent)) => format!("delivered {} {who}", sent.msg_id),
                    Ok(SendOutcome::Queued { msg_id, .. }) => format!("queued {msg_id} {who}"),
                    Err(SendError::NotKept(reason)) => {
                        not_kept += 1;
                        format!("not-kept {who} {reason}")
                    }
                    Err(e) => format!("failed {who} {e}"),
                };
                writeln!(out, "{line}")?;
                out.flush().context("writing the outcome")?;
            }
        }
        anyhow::Ok(())
    }
    .await;
    node.shutdown().await;
    result?;
    if not_kept > 0 {
        bail!(
            "{not_kept} cop(ies) not kept (the not-kept lines say why): this command has no \
             outbox, and no peer took them; send them again later"
        );
    }
    Ok(())
}

/// The message texts of [`Messages`], one at a time.
struct Texts<R> {
    messages: Option<Messages<R>>,
    line: String,
}

impl<R: AsyncBufRead + Unpin> Texts<R> {
    fn new(messages: Messages<R>) -> Self {
        Self {
            messages: Some(messages),
            line: String::new(),
        }
    }

    /// The next text: the one of the command line, or the next non-empty line.
    async fn next(&mut self) -> anyhow::Result<Option<String>> {
        match self.messages.take() {
            None => Ok(None),
            Some(Messages::One(text)) => Ok(Some(text)),
            Some(Messages::Lines(mut input)) => loop {
                self.line.clear();
                if input
                    .read_line(&mut self.line)
                    .await
                    .context("reading stdin")?
                    == 0
                {
                    return Ok(None);
                }
                let text = self.line.trim_end_matches(['\n', '\r']);
                if !text.is_empty() {
                    let text = text.to_owned();
                    self.messages = Some(Messages::Lines(input));
                    return Ok(Some(text));
                }
            },
        }
    }
}

fn describe_route(progress: &mut impl Write, name: &str, key: &IdentityKey, route: &Route) {
    let _ = writeln!(
        progress,
        "send: to {name} ({}) session {} ({}; {})",
        key.fingerprint(),
        route.session,
        route.presence,
        route.reason
    );
    if let Some(note) = route.others_note() {
        let _ = writeln!(progress, "send: {name}: {note}");
    }
}

/// Send messages to a peer's session, or to a group, signed as this user (the
/// sender is on no roster; replies go to --reply-to).
///
/// Prints one line per message: `delivered <msg_id>` (the recipient's node stored
/// it and receipted it), `queued <msg_id>` (another node answered that it keeps it
/// for the recipient's mailbox) or `not-kept <reason>` (no node took it: send it
/// again later; the command then exits non-zero); to a group, one line per copy,
/// `<outcome> <msg_id> <member>/<session>`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  interlink-p2p send --to bob \"the parser tests pass\"\n  interlink-p2p send --to bob --session bob-2 --task t-7 --status result \"done\"\n  interlink-p2p send --to group:team \"standup in 5\"\n  git log -3 --oneline | interlink-p2p send --to self --stdin"
)]
pub struct Args {
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
    #[arg(long, value_name = "S", value_parser = parse_status)]
    status: Option<TaskStatus>,
    /// Longest wait for the recipient to appear on the overlay, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 5.0)]
    wait: f64,
    /// The session of yours that replies go to [default: $INTERLINK_SESSION, else
    /// $CLAUDE_CODE_SESSION_ID, else none: replies wait in a mailbox nothing reads]
    #[arg(long, value_name = "ID")]
    reply_to: Option<String>,
    #[command(flatten)]
    net: crate::config::NetArgs,
}

/// `interlink-p2p send`.
pub fn command(args: Args, ctx: &crate::Ctx) -> anyhow::Result<std::process::ExitCode> {
    let config = args.net.config(&ctx.settings)?;
    let options = Options {
        to: args.to,
        session: args.session,
        task_id: args.task,
        status: args.status,
        wait: crate::ctx::seconds("--wait", args.wait)?,
        reply_to: reply_to(args.reply_to.as_deref(), |k| std::env::var(k).ok())?,
        cwd: std::env::current_dir().context("reading the current directory")?,
        from_user: false,
    };
    let home = ctx.home()?;
    let messages = match (args.text, args.stdin) {
        (Some(text), false) => Messages::One(text),
        _ => Messages::Lines(tokio::io::BufReader::new(tokio::io::stdin())),
    };
    let finished = crate::ctx::runtime()?.block_on(send(
        &home,
        config,
        options,
        messages,
        &mut std::io::stdout(),
        &mut std::io::stderr(),
    ))?;
    Ok(if finished == Finished::UnseenSession {
        std::process::ExitCode::from(EXIT_UNSEEN_SESSION)
    } else {
        std::process::ExitCode::SUCCESS
    })
}

#[cfg(test)]
#[path = "send_tests.rs"]
mod tests;

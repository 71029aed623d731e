//! `interlink-p2p invite` and `interlink-p2p join CODE`: pairing two users by a
//! one-line code passed out of band, with no key copying (the code's format and
//! threat model: [`interlink_core::wire::Invite`], docs/SECURITY.md).
//!
//! `invite` issues a one-time secret ([`interlink_store::invites`]), prints the code —
//! this user's identity and name, its relays, the addresses of a session that waits
//! for the join, the expiry and the secret — and waits. `join` pins the inviter (the
//! person who pasted the code decided that), keeps the inviter's relays in its settings
//! file, and knocks with the secret sealed to the inviter; the waiting session — or
//! any running session of the inviter's, until the code expires — admits that one
//! knock and confirms, so each side ends up with the other as a peer.

use std::{collections::HashSet, io::Write, time::Duration};

use anyhow::Context as _;
use interlink_core::{
    IdentityKey, SessionId,
    limits::KNOCK_QUEUE_CAPACITY,
    wire::{
        EnvelopeKind, INVITE_VERSION, Invite, MAX_INVITE_ADDR_BYTES, MAX_INVITE_ADDRS, SessionAddr,
    },
};
use interlink_net::Config;
use interlink_store::{
    invites,
    pairing::{self, AutoAdmit},
    paths::Home,
    policy,
};
use libp2p::{Multiaddr, multiaddr::Protocol};
use serde_bytes::ByteBuf;

use crate::pairing_session::{PAIR_SESSION, PairingSession};

/// How often `invite` looks at the knocks its session holds.
const POLL: Duration = Duration::from_millis(200);
/// Most of the waiting session's own addresses a code carries (relays come first).
const MAX_DIRECT_ADDRS: usize = 3;

/// `invite`'s options.
#[derive(Clone, Debug)]
pub struct InviteOptions {
    /// How long the code admits.
    pub expires: Duration,
    /// Print the code and exit instead of waiting for the join.
    pub no_wait: bool,
    /// The name this user suggests for itself.
    pub name: String,
}

/// Parses `30m`, `1h`, `2d`, `90s` (a bare number is minutes).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (digits, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?}: expected a duration such as 30m, 1h or 2d"))?;
    let secs = match unit {
        "s" => n,
        "" | "m" => n.saturating_mul(60),
        "h" => n.saturating_mul(3600),
        "d" => n.saturating_mul(86_400),
        _ => return Err(format!("{text:?}: the unit is one of s, m, h, d")),
    };
    if secs == 0 {
        return Err(format!("{text:?}: an invite must last longer than that"));
    }
    Ok(Duration::from_secs(secs))
}

/// Runs `invite`: prints the code on `out` (alone on its line), then — unless
/// `no_wait` — waits for the join and prints `paired <name> <fingerprint>`.
/// Explanations go to `progress`. Returns whether someone joined (or `no_wait`).
pub async fn invite(
    home: &Home,
    config: Config,
    options: &InviteOptions,
    out: &mut impl Write,
    progress: &mut impl Write,
) -> anyhow::Result<bool> {
    let mut stop =
        crate::stop_signal::StopSignals::install().context("installing the signal handlers")?;
    let session = SessionId::new(format!(
        "inv-{}",
        &SessionId::random(&mut crate::os_rng()).as_str()[..8]
    ))?;
    let relays = config.relays.clone();
    let port = config.well_known_port;
    let ps = PairingSession::start(home, config, session.clone(), "waiting for an invite").await?;
    let result = async {
        let now = ps.clock.now_ms();
        let ttl = u64::try_from(options.expires.as_millis()).unwrap_or(u64::MAX);
        let (secret, expires) = invites::issue(home, &session, ttl, now, &mut crate::os_rng())?;
        let invite = Invite {
            v: INVITE_VERSION,
            key: ps.own.key,
            name: options.name.clone(),
            session: session.clone(),
            secret: serde_bytes::ByteArray::new(secret),
            expires,
            relays: relays
                .iter()
                .filter(|a| a.len() <= MAX_INVITE_ADDR_BYTES)
                .take(MAX_INVITE_ADDRS)
                .map(|a| ByteBuf::from(a.to_vec()))
                .collect(),
            addrs: direct_addrs(
                &ps.addrs_with_well_known().await?,
                port,
                MAX_DIRECT_ADDRS.min(MAX_INVITE_ADDRS.saturating_sub(relays.len())),
            )
            .iter()
            .map(|a| ByteBuf::from(a.to_vec()))
            .collect(),
        };
        let until = expires_text(expires, now);
        writeln!(
            progress,
            "invite: this code pairs one person with you, once, until {until}. Send it to them \
             over a channel you trust; they run:\n\n    interlink-p2p join <code>\n\n\
             The code is signed by your key, fingerprint {} — `join` shows them the \
             fingerprint of the key that signed it.\n",
            ps.own.key.fingerprint()
        )?;
        let (identity, _) = crate::load_identity(home)?;
        writeln!(out, "{}", invite.encode(&identity)?)?;
        out.flush()?;
        if relays.is_empty() {
            writeln!(
                progress,
                "invite: no relay is configured, so the code carries only this machine's \
                 addresses: they must be reachable from theirs (same LAN or tailnet)"
            )?;
        }
        if options.no_wait {
            writeln!(
                progress,
                "invite: not waiting; your running agent sessions (Claude Code, Codex) admit the \
                 join until {until}: keep one running until they have joined"
            )?;
            return Ok(true);
        }
        writeln!(
            progress,
            "invite: waiting for them to join (Ctrl-C stops waiting; your running agent sessions \
             still admit the code until {until})"
        )?;
        let deadline = tokio::time::Instant::now() + options.expires;
        let mut handled = HashSet::new();
        loop {
            if let Some((name, key)) =
                admit_held(home, &ps, &options.name, &mut handled, progress).await?
            {
                writeln!(out, "paired {name} {}", key.fingerprint())?;
                writeln!(
                    progress,
                    "invite: {name} joined; write to them with: interlink-p2p send --to {name} \
                     \"hello\""
                )?;
                return Ok(true);
            }
            tokio::select! {
                () = tokio::time::sleep(POLL) => {}
                () = tokio::time::sleep_until(deadline) => {
                    let _ = invites::revoke(home, &session, ps.clock.now_ms());
                    writeln!(progress, "invite: the code expired unused")?;
                    return Ok(false);
                }
                _ = stop.recv() => break,
            }
        }
        writeln!(
            progress,
            "invite: stopped waiting; your running agent sessions admit the code until {until}"
        )?;
        Ok::<_, anyhow::Error>(true)
    }
    .await;
    let dir = ps.dir.clone();
    ps.shutdown().await;
    // The waiting session is not one to come back to.
    let _ = std::fs::remove_dir_all(dir.path());
    result
}

/// Decides the knocks the invite's session holds that it has not decided before (ids
/// in `handled`, which keeps only the knocks still held, at most
/// [`KNOCK_QUEUE_CAPACITY`]): one with an invite of this user's pairs and is confirmed
/// (returns the new peer); any other waits for the operator in `pairing.json`, as it
/// would at any session. So each knock costs its file work once, not on every poll.
async fn admit_held(
    home: &Home,
    ps: &PairingSession,
    own_name: &str,
    handled: &mut HashSet<String>,
    progress: &mut impl Write,
) -> anyhow::Result<Option<(String, IdentityKey)>> {
    let held = ps.held_knocks();
    handled.retain(|id| held.iter().any(|k| k.msg_id == *id));
    let fresh: Vec<_> = held
        .into_iter()
        .filter(|k| !handled.contains(&k.msg_id))
        .take(KNOCK_QUEUE_CAPACITY)
        .collect();
    if fresh.is_empty() {
        return Ok(None);
    }
    let policy = policy::load(home)?;
    for k in fresh {
        handled.insert(k.msg_id.clone());
        let Ok(key) = k.sender.parse::<IdentityKey>() else {
            continue;
        };
        if policy.contains(&key) {
            continue;
        }
        match pairing::auto_admit(home, &k, ps.clock.now_ms())? {
            Some((accepted, why)) => {
                ps.admit_edited_peers().await?;
                let to = SessionAddr {
                    key,
                    session: SessionId::new(&accepted.request.session)?,
                };
                let status = ps
                    .send(to, EnvelopeKind::PairAccept, own_name, None)
                    .await?;
                if let AutoAdmit::Mutual(_) = why {
                    writeln!(
                        progress,
                        "invite: {} had asked to pair too",
                        accepted.petname
                    )?;
                }
                writeln!(progress, "invite: confirmation {status}")?;
                return Ok(Some((accepted.petname, key)));
            }
            None => {
                if pairing::record_knock(home, &k, &ps.own.session)? {
                    writeln!(
                        progress,
                        "invite: {} knocked without this code; it waits for you: \
                         interlink-p2p pair accept {}",
                        k.sender_fingerprint, k.sender_fingerprint
                    )?;
                }
            }
        }
    }
    Ok(None)
}

/// The waiting session's addresses worth putting in a code: at most `max`, routable
/// ones first (loopback only when there is nothing else), those on the host's
/// well-known port `port` first (they still reach the host after this session ends),
/// TCP before QUIC.
fn direct_addrs(addrs: &[Multiaddr], port: u16, max: usize) -> Vec<Multiaddr> {
    let loopback = |a: &Multiaddr| {
        a.iter().any(|p| match p {
            Protocol::Ip4(ip) => ip.is_loopback(),
            Protocol::Ip6(ip) => ip.is_loopback(),
            _ => false,
        })
    };
    let quic = |a: &Multiaddr| a.iter().any(|p| matches!(p, Protocol::QuicV1));
    let circuit = |a: &Multiaddr| a.iter().any(|p| matches!(p, Protocol::P2pCircuit));
    let mut chosen: Vec<Multiaddr> = addrs
        .iter()
        .filter(|a| !circuit(a) && !loopback(a))
        .cloned()
        .collect();
    if chosen.is_empty() {
        chosen = addrs.iter().filter(|a| !circuit(a)).cloned().collect();
    }
    let well_known = |a: &Multiaddr| {
        port != 0
            && a.iter()
                .any(|p| matches!(p, Protocol::Tcp(n) | Protocol::Udp(n) if n == port))
    };
    chosen.sort_by_key(|a| (!well_known(a), quic(a)));
    chosen.truncate(max);
    chosen
}

fn expires_text(expires: u64, now: u64) -> String {
    let mins = expires.saturating_sub(now) / 60_000;
    if mins >= 120 {
        format!("{} hours from now", mins / 60)
    } else {
        format!("{mins} minutes from now")
    }
}

/// `join`'s options.
#[derive(Clone, Debug)]
pub struct JoinOptions {
    #[allow(missing_docs)]
    pub code: String,
    /// The petname for the inviter [default: the name the code suggests].
    pub petname: Option<String>,
    /// Longest wait for the inviter to show and then to confirm.
    pub wait: Duration,
    /// The name this user suggests for itself.
    pub name: String,
}

/// Runs `join`: verifies the code whole, knocks with its secret through the addresses
/// and relays it carries, and waits for the confirmation; only then pins the inviter
/// and keeps its signed relays in the settings file. Prints `paired <name>
/// <fingerprint>` on `out` once confirmed; returns whether it was.
///
/// A code that fails any check changes nothing in the home. A genuine code whose
/// inviter does not answer in time leaves what `pair request` leaves: a request sent
/// (`interlink-p2p pair list`), which lets their later confirmation in.
pub async fn join(
    home: &Home,
    mut config: Config,
    options: &JoinOptions,
    out: &mut impl Write,
    progress: &mut impl Write,
) -> anyhow::Result<bool> {
    let invite = Invite::decode(&options.code).map_err(|e| anyhow::anyhow!("{e}"))?;
    let now = config.clock.now_ms();
    if invite.expires <= now {
        anyhow::bail!(
            "this invite expired {} minutes ago; ask {} for a new one (interlink-p2p invite)",
            (now - invite.expires) / 60_000,
            invite.name
        );
    }
    let (identity, _) = crate::load_identity(home)?;
    if identity.public() == invite.key {
        anyhow::bail!("this is your own invite: give it to the person you want to pair with");
    }
    let key = invite.key;
    let petname = options.petname.as_deref().unwrap_or(&invite.name);
    if !interlink_core::wire::is_valid_name(petname) {
        return Err(crate::UsageError(format!(
            "--name {petname:?}: use 1-32 characters from A-Z a-z 0-9 . _ -"
        ))
        .into());
    }
    let peer_already = policy::load(home)?.name_of(&key).map(str::to_owned);
    let name = peer_already.clone().unwrap_or_else(|| petname.to_owned());
    writeln!(
        progress,
        "join: the code is signed by {} (fingerprint {}); if it reached you over a channel \
         you do not trust, compare that fingerprint with theirs",
        invite.name,
        key.fingerprint()
    )?;
    if peer_already.is_some() {
        writeln!(
            progress,
            "join: {name} is a peer already; asking it to confirm again"
        )?;
    }
    let relays = invite.relay_addrs();
    for r in &relays {
        if !config.relays.contains(r) {
            config.relays.push(r.clone());
        }
    }
    // The waiting session's addresses are dialled for this run; once the inviter
    // confirmed, they go into the address book (where the one on the host's
    // well-known port keeps reaching the inviter's sessions).
    config.bootstrap.extend(invite.direct_addrs());
    // Gone in seconds: the host's well-known port is for the sessions that stay.
    config.hold_well_known_port = false;
    let well_known = config.well_known_port;
    let ps = PairingSession::start(
        home,
        config,
        SessionId::new(PAIR_SESSION)?,
        "joining by invite",
    )
    .await?;
    let result = async {
        writeln!(progress, "join: looking for {name} on the overlay…")?;
        let left = |now: u64| invite.expires.saturating_sub(now) / 60_000;
        let session = ps
            .live_session(key, Some(&invite.session), options.wait)
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "{e:#}. Nothing was changed; run this again when `interlink-p2p invite` or \
                     one of {name}'s sessions is running (the code is valid for {} more \
                     minutes)",
                    left(ps.clock.now_ms())
                )
            })?;
        pairing::record_outgoing(home, &key, &session, Some(name.clone()), ps.clock.now_ms())?;
        let to = SessionAddr {
            key,
            session: session.clone(),
        };
        let status = ps
            .send(to, EnvelopeKind::Knock, &options.name, Some(*invite.secret))
            .await?;
        writeln!(
            progress,
            "join: knock {status} to session {session}; waiting for the confirmation…"
        )?;
        match ps.wait_accept(&key, options.wait).await? {
            Some(confirmed) => {
                keep_relays(home, &relays, progress)?;
                keep_addresses(
                    home,
                    &key,
                    &invite.direct_addrs(),
                    well_known,
                    ps.clock.now_ms(),
                );
                writeln!(out, "paired {confirmed} {}", key.fingerprint())?;
                writeln!(
                    progress,
                    "join: done; write to them with: interlink-p2p send --to {confirmed} \"hello\""
                )?;
                Ok(true)
            }
            None => {
                writeln!(
                    progress,
                    "join: no confirmation within {} s. {name} is not in your peers yet: your \
                     request waits (interlink-p2p pair list), and their side admits you when \
                     one of its sessions takes the knock. Run this command again to finish \
                     (the code is valid for {} more minutes).",
                    options.wait.as_secs(),
                    left(ps.clock.now_ms())
                )?;
                Ok::<_, anyhow::Error>(false)
            }
        }
    }
    .await;
    ps.shutdown().await;
    result
}

/// Keeps the code's addresses of the inviter (now a peer) in the address book, so the
/// sessions of this home dial them at start: without them two machines with no mDNS
/// between them and no relay would not meet again.
fn keep_addresses(home: &Home, key: &IdentityKey, addrs: &[Multiaddr], well_known: u16, now: u64) {
    use interlink_store::address_book::{AddressBook, Source};
    let stable_port = if well_known == 0 {
        interlink_net::config::WELL_KNOWN_PORT
    } else {
        well_known
    };
    let mut book = AddressBook::load(Some(home.addresses()));
    for addr in addrs {
        if addr.iter().any(|p| p == Protocol::P2pCircuit) {
            continue;
        }
        let bare: Multiaddr = addr
            .iter()
            .filter(|p| !matches!(p, Protocol::P2p(_)))
            .collect();
        let stable = bare
            .iter()
            .any(|p| matches!(p, Protocol::Tcp(n) | Protocol::Udp(n) if n == stable_port));
        book.remember_with(*key, &bare.to_string(), Source::Invite, stable, now);
    }
    // Not fatal: the pairing is done, and the next connection teaches the addresses
    // again (identify, announcements).
    if let Err(e) = book.save(now) {
        tracing::warn!("keeping the inviter's addresses: {e}");
    }
}

/// Adds the invite's relays — the inviter's signed choice — to the `relay` list of
/// the settings file (keeping the ones there), so every later command and session
/// reaches the inviter's overlay; says which were added.
fn keep_relays(home: &Home, relays: &[Multiaddr], progress: &mut impl Write) -> anyhow::Result<()> {
    let settings = crate::settings::Settings::load(home.path())?;
    let mut list: Vec<String> = settings
        .get(crate::config::ENV_RELAY)
        .map(|v| {
            v.split(',')
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let before = list.len();
    for r in relays {
        let text = r.to_string();
        if !list.contains(&text) {
            list.push(text);
        }
    }
    if list.len() == before {
        return Ok(());
    }
    let value = toml_edit::value(toml_edit::Array::from_iter(list.iter().map(String::as_str)));
    for note in crate::settings::write(home.path(), &[("relay", Some(value))], false)? {
        writeln!(progress, "join: {note}")?;
    }
    for added in &list[before..] {
        writeln!(
            progress,
            "join: your sessions now also use {added}, the relay the inviter signed into the \
             code (delete it from the relay list of the settings file to stop)"
        )?;
    }
    Ok(())
}

/// Print a one-line code that pairs one person with you, then wait for them to join.
///
/// The code carries your identity and name, your relays, this command's addresses,
/// an expiry and a one-time secret; they run `interlink-p2p join <code>`. Until it
/// expires, your running MCP (agent) sessions admit it too; a headless `run`
/// session holds the knock instead. The code goes to stdout, alone on its line;
/// `paired <name> <fingerprint>` follows when they joined.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  interlink-p2p invite\n  interlink-p2p invite \
                        --expires 1d --no-wait\n  interlink-p2p invite --relay \
                        /dns4/relay.example.net/tcp/4001/p2p/12D3KooW…\n\nExit status: \
                        0 when someone joined (or --no-wait), 1 when the code expired \
                        unused."
)]
pub struct Args {
    /// How long the code admits: 90s, 30m, 1h, 2d (at most 7 days) [default: 1h;
    /// with --device 5m, at most 15m].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
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
    net: crate::config::NetArgs,
}

/// `interlink-p2p invite`.
pub fn command(args: Args, ctx: &crate::Ctx) -> anyhow::Result<std::process::ExitCode> {
    let config = args.net.config(&ctx.settings)?;
    let home = ctx.home()?;
    let (mut out, mut progress) = (std::io::stdout(), std::io::stderr());
    let done = if args.device {
        let lifetime = crate::device::device_lifetime(args.expires).map_err(crate::UsageError)?;
        crate::ctx::runtime()?.block_on(crate::device::invite_device(
            &home,
            &config,
            lifetime,
            &mut out,
            &mut progress,
        ))?
    } else {
        let options = InviteOptions {
            expires: args.expires.unwrap_or(Duration::from_secs(3600)),
            no_wait: args.no_wait,
            name: ctx.own_name(),
        };
        crate::ctx::runtime()?.block_on(invite(&home, config, &options, &mut out, &mut progress))?
    };
    Ok(crate::ctx::finished(done))
}

#[cfg(test)]
#[path = "invite_tests.rs"]
mod tests;

//! `interlink-p2p invite --device` and `interlink-p2p join <device code>`: one person's
//! second machine takes the identity of the first, so `send --to self` reaches the
//! sessions of both — with no key file copied by hand (PROTOCOL.md §4.11, §8.8; the
//! threat model is in docs/SECURITY.md).
//!
//! `invite --device` starts a node of its own (not a session: a random transport key,
//! one protocol), prints a code valid for minutes and waits for one joiner. `join`
//! dials it, both screens show a six-digit comparison string, and only when both users
//! confirmed does the identity leave, sealed to a key the joiner made for this. Each
//! side then remembers the other machine's addresses in the address book
//! (`Source::Device`): its IPs at the host's well-known port, where the sessions of that
//! machine can be reached later.
//!
//! Only the identity travels. The peers policy, pins, settings and mailboxes stay on
//! each machine: the policy is the user's decision per machine (a work laptop may allow
//! fewer peers than a desktop), and the sessions of the user's own identity reach each
//! other without being anyone's peer.

use std::{io::Write, net::IpAddr, time::Duration};

use anyhow::Context as _;
use interlink_core::{
    device_link::{
        CONFIRM_WINDOW_MS, DEFAULT_CODE_LIFETIME_MS, Inviter, Joiner, LinkError,
        MAX_CODE_LIFETIME_MS, Outcome, Reply,
    },
    wire::{
        DEVICE_CODE_VERSION, DeviceCode, INVITE_SECRET_BYTES, MAX_DEVICE_ADDRS,
        MAX_INVITE_ADDR_BYTES, MAX_LINK_ADDRS, link_step,
    },
};
use interlink_net::{Config, device_link::LinkNode};
use interlink_store::{
    address_book::{ADDRESS_BOOK_FILE, AddressBook, Source},
    keyfile::{self, KeyFileError},
    paths::Home,
};
use libp2p::{Multiaddr, multiaddr::Protocol};
use rand_core::Rng as _;
use serde_bytes::{ByteArray, ByteBuf};
use zeroize::Zeroizing;

/// How long the node waits for its listeners to report their addresses.
const LISTEN_SETTLE: Duration = Duration::from_secs(2);
/// How long `join` waits for the answer to `hello` and `reveal`.
const STEP_TIMEOUT: Duration = Duration::from_secs(20);
/// Longest the waiting side keeps driving its node after the last answer, until the
/// joiner hangs up, so the answer leaves before the process exits.
const FLUSH: Duration = Duration::from_secs(5);

/// The lifetime `--expires` gives a device code: at most [`MAX_CODE_LIFETIME_MS`].
pub fn device_lifetime(expires: Option<Duration>) -> Result<Duration, String> {
    let d = expires.unwrap_or(Duration::from_millis(DEFAULT_CODE_LIFETIME_MS));
    if d > Duration::from_millis(MAX_CODE_LIFETIME_MS) {
        return Err(format!(
            "a device code lasts at most {} minutes: whoever reads it within its lifetime \
             can take your identity",
            MAX_CODE_LIFETIME_MS / 60_000
        ));
    }
    Ok(d)
}

/// Runs `invite --device`: prints the code on `out`, then waits for one machine to
/// join and both users to confirm. Returns whether the identity was handed over.
pub async fn invite_device(
    home: &Home,
    config: &Config,
    lifetime: Duration,
    out: &mut impl Write,
    progress: &mut impl Write,
) -> anyhow::Result<bool> {
    let mut stop =
        crate::stop_signal::StopSignals::install().context("installing the signal handlers")?;
    let (identity, _) = crate::load_identity(home)?;
    let key = identity.public();
    let mut node = LinkNode::new(&config.network, true)?;
    let listen = node.listen(&config.listen, LISTEN_SETTLE).await?;
    let mut secret = Zeroizing::new([0u8; INVITE_SECRET_BYTES]);
    crate::os_rng().fill_bytes(secret.as_mut_slice());
    let now = config.clock.now_ms();
    let mut code = DeviceCode {
        v: DEVICE_CODE_VERSION,
        key,
        secret: ByteArray::new(*secret),
        expires: now.saturating_add(u64::try_from(lifetime.as_millis()).unwrap_or(u64::MAX)),
        addrs: code_addrs(&listen)
            .into_iter()
            .map(|a| a.to_vec())
            .filter(|a| a.len() <= MAX_INVITE_ADDR_BYTES)
            .take(MAX_DEVICE_ADDRS)
            .map(ByteBuf::from)
            .collect(),
    };
    let text = Zeroizing::new(code.encode(&identity)?);
    let port = config.well_known_port;
    let own_addrs = host_addrs(&listen, port);
    let mut inviter = Inviter::new(identity, &code, &own_addrs);
    // The inviter keeps only keys derived from the secret.
    zeroize::Zeroize::zeroize(&mut *code.secret);
    drop(code);
    let minutes = lifetime.as_secs().div_ceil(60);
    writeln!(
        progress,
        "invite --device: this code gives your identity ({}) to ONE machine of yours, within \
         {minutes} minutes. Anyone who reads it in that time could take it: paste it only \
         where you alone see it. On the other machine run:\n\n    interlink-p2p join <code>\n\n\
         Both screens will then show a comparison string; confirm here only if they match.\n",
        key.fingerprint()
    )?;
    writeln!(out, "{}", text.as_str())?;
    out.flush()?;
    drop(text);

    let mut rng = crate::os_rng();
    let mut held = None;
    let mut joiner = None;
    let (tx, mut decision) = tokio::sync::mpsc::channel::<bool>(1);
    let mut asked = false;
    // When the code was spent: the exchange ends within the confirmation window of it.
    let mut spent_at = None;
    // Whether the joiner's `confirm` got its answer (then nothing is left to tell it).
    let mut confirm_answered = false;
    while inviter.outcome().is_none() {
        let wake = inviter.poll_timeout().map_or(Duration::from_secs(1), |t| {
            Duration::from_millis(t.saturating_sub(config.clock.now_ms()))
        });
        tokio::select! {
            incoming = node.next_request() => {
                let reply = inviter.handle(
                    incoming.peer,
                    &incoming.request,
                    config.clock.now_ms(),
                    &mut rng,
                );
                match reply {
                    Reply::Respond(r) => {
                        confirm_answered |= r.step == link_step::CONFIRM && Some(incoming.peer) == joiner;
                        node.respond(incoming.channel, r);
                    }
                    Reply::Hold => held = Some(incoming.channel),
                }
                if spent_at.is_none() && inviter.spent() {
                    spent_at = Some(tokio::time::Instant::now());
                    // The joiner's connection is kept whatever strangers open.
                    node.protect(incoming.peer);
                }
                if !asked && let Some(sas) = inviter.comparison() {
                    asked = true;
                    joiner = Some(incoming.peer);
                    writeln!(
                        progress,
                        "invite --device: a machine took the code (the code is now used up).\n\
                         \n    comparison: {sas}\n\nType yes if the other screen shows the same \
                         string, anything else to refuse (within {} s):",
                        CONFIRM_WINDOW_MS / 1000
                    )?;
                    progress.flush()?;
                    ask(sas.to_owned(), tx.clone());
                }
            }
            Some(yes) = decision.recv(), if asked => {
                if let Some(r) = inviter.decide(yes, &mut rng)
                    && let Some(channel) = held.take()
                {
                    confirm_answered = true;
                    node.respond(channel, r);
                }
                if yes && inviter.outcome().is_none() {
                    writeln!(progress, "invite --device: confirmed here; waiting for the other machine's confirmation…")?;
                }
            }
            () = tokio::time::sleep(wake) => inviter.handle_timeout(config.clock.now_ms()),
            signal = stop.recv() => {
                writeln!(progress, "invite --device: stopped ({signal}); nothing was sent")?;
                return Ok(false);
            }
        }
    }
    match inviter.outcome() {
        Some(Outcome::Linked { addrs }) => {
            // Where the joiner came from, read before it hangs up (its entry goes then).
            let mut learned: Vec<String> = joiner
                .and_then(|p| node.remote_of(&p))
                .map(|r| observed_addrs(r, port))
                .unwrap_or_default();
            learned.extend(addrs.iter().cloned());
            if let Some(joiner) = joiner {
                node.linger(joiner, FLUSH).await;
            }
            remember(home, key, &learned, config.clock.now_ms())?;
            writeln!(out, "linked {}", key.fingerprint())?;
            writeln!(
                progress,
                "invite --device: the other machine now has your identity; `send --to self` \
                 reaches the sessions of both (restart the sessions running there)"
            )?;
            Ok(true)
        }
        Some(Outcome::Failed(e)) => {
            writeln!(progress, "invite --device: {e}")?;
            // Declined before the joiner confirmed: wait (within the window) for its
            // confirm to tell it so, rather than leave it waiting for an answer that
            // never comes. Any other end drops held requests with the node.
            if *e == LinkError::Declined
                && !confirm_answered
                && let (Some(joiner), Some(at)) = (joiner, spent_at)
            {
                let until = at + Duration::from_millis(CONFIRM_WINDOW_MS);
                writeln!(
                    progress,
                    "invite --device: telling the other machine once it answers (Ctrl-C stops now)"
                )?;
                loop {
                    tokio::select! {
                        incoming = node.next_request() => {
                            let from = incoming.peer;
                            let step = incoming.request.step;
                            if let Reply::Respond(r) = inviter.handle(
                                from,
                                &incoming.request,
                                config.clock.now_ms(),
                                &mut rng,
                            ) {
                                node.respond(incoming.channel, r);
                            }
                            if from == joiner && step == link_step::CONFIRM {
                                node.linger(joiner, FLUSH).await;
                                break;
                            }
                        }
                        () = tokio::time::sleep_until(until) => break,
                        _ = stop.recv() => break,
                    }
                }
            } else if confirm_answered && let Some(joiner) = joiner {
                node.linger(joiner, FLUSH).await;
            }
            Ok(false)
        }
        None => Ok(false),
    }
}

/// `join`'s options for a device code.
#[derive(Clone, Debug)]
pub struct JoinDeviceOptions {
    /// The code.
    pub code: String,
    /// Confirm the comparison string without asking (the identity received is still
    /// checked against the code's signed key).
    pub yes: bool,
    /// Replace this home's identity if it has another one.
    pub replace_identity: bool,
}

/// Runs `join` with a device code: checks everything it can before dialling, runs the
/// exchange, and only then writes the identity. Returns whether it was written.
pub async fn join_device(
    home: &Home,
    config: &Config,
    options: &JoinDeviceOptions,
    out: &mut impl Write,
    progress: &mut impl Write,
) -> anyhow::Result<bool> {
    let mut code = DeviceCode::decode(&options.code).map_err(|e| anyhow::anyhow!("{e}"))?;
    let now = config.clock.now_ms();
    if code.expires <= now {
        anyhow::bail!(
            "this device code expired {} minutes ago: run `interlink-p2p invite --device` on \
             the other machine again",
            (now - code.expires).div_ceil(60_000)
        );
    }
    let path = home.identity();
    let existing = match keyfile::load(&path) {
        Ok(id) => Some(id),
        Err(KeyFileError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            None
        }
        Err(e) if options.replace_identity => {
            writeln!(
                progress,
                "join: the current key file is unreadable ({e}); replacing it"
            )?;
            None
        }
        Err(e) => return Err(e).context("reading this home's identity before replacing it"),
    };
    if let Some(current) = &existing {
        if current.public() == code.key {
            writeln!(
                progress,
                "join: this home already has that identity ({}); nothing to do",
                code.key.fingerprint()
            )?;
            writeln!(out, "linked {}", code.key.fingerprint())?;
            return Ok(true);
        }
        if !options.replace_identity {
            anyhow::bail!(
                "this home ({}) already has another identity, {}; the code brings {}. Replacing \
                 it ends this machine's pairings under the old key (peers who paired with it \
                 will not know the new one). To replace it run `interlink-p2p join \
                 --replace-identity <code>` (the old key is kept next to it as a backup), or \
                 join into another home (INTERLINK_HOME=<dir>). The code was not used",
                home.path().display(),
                current.public().fingerprint(),
                code.key.fingerprint()
            );
        }
    }
    writeln!(
        progress,
        "join: the code hands over identity {}; contacting the other machine…",
        code.key.fingerprint()
    )?;
    let peer = code
        .peer()
        .context("the code names no node (it verified, so this is a bug)")?;
    let dial = code.direct_addrs();
    let mut node = LinkNode::new(&config.network, false)?;
    // Listening only tells this machine its own addresses (to hand to the other one).
    let own = match node.listen(&config.listen, Duration::from_secs(1)).await {
        Ok(listen) => host_addrs(&listen, config.well_known_port),
        Err(_) => Vec::new(),
    };
    let mut rng = crate::os_rng();
    let (mut joiner, hello) = Joiner::new(&code, now, &mut rng)?;
    // The joiner keeps only keys derived from the secret.
    zeroize::Zeroize::zeroize(&mut *code.secret);
    let resp = node.request(peer, &dial, hello, STEP_TIMEOUT).await?;
    let (reveal, sas) = joiner.accepted(&resp)?;
    let resp = node.request(peer, &dial, reveal, STEP_TIMEOUT).await?;
    joiner.revealed(&resp)?;
    writeln!(progress, "\n    comparison: {sas}\n")?;
    if options.yes {
        writeln!(
            progress,
            "join: --yes: confirmed here without asking; the other machine's user must still \
             confirm the same string"
        )?;
    } else {
        writeln!(
            progress,
            "Type yes if the other screen shows the same string, anything else to refuse:"
        )?;
        progress.flush()?;
        let (tx, mut rx) = tokio::sync::mpsc::channel(1);
        ask(sas.clone(), tx);
        let yes = node
            .while_running(async { rx.recv().await.unwrap_or(false) })
            .await;
        if !yes {
            writeln!(progress, "join: not confirmed: nothing was written")?;
            return Ok(false);
        }
    }
    writeln!(
        progress,
        "join: waiting for the other machine's confirmation…"
    )?;
    progress.flush()?;
    let confirm = joiner.confirm(&own)?;
    let timeout = Duration::from_millis(CONFIRM_WINDOW_MS) + STEP_TIMEOUT;
    let resp = node.request(peer, &dial, confirm, timeout).await?;
    let (identity, their_addrs) = joiner.finish(&resp)?;
    if let Some(old) = &existing {
        let backup = path.with_extension(format!("key.replaced-{}", config.clock.now_ms()));
        keyfile::store(&backup, old, false)
            .with_context(|| format!("keeping the old key in {}", backup.display()))?;
        writeln!(
            progress,
            "join: the old identity {} is kept in {}",
            old.public().fingerprint(),
            backup.display()
        )?;
    }
    keyfile::store(&path, &identity, existing.is_some()).with_context(|| {
        format!(
            "writing {} (another process created one meanwhile? nothing was replaced)",
            path.display()
        )
    })?;
    let mut learned: Vec<String> = node
        .remote_of(&peer)
        .map(|r| observed_addrs(r, config.well_known_port))
        .unwrap_or_default();
    learned.extend(their_addrs);
    remember(home, code.key, &learned, config.clock.now_ms())?;
    writeln!(out, "linked {}", code.key.fingerprint())?;
    writeln!(
        progress,
        "join: this machine now has identity {} ({}); `send --to self` reaches the sessions of \
         both machines. Restart the sessions running here so they take it",
        code.key.fingerprint(),
        path.display()
    )?;
    Ok(true)
}

/// Reads the user's answer from standard input on a thread of its own (a blocking read
/// cannot be cancelled; the process exits after the exchange anyway): `yes`, or the
/// comparison string itself, confirms; anything else, or the end of input, refuses.
fn ask(sas: String, tx: tokio::sync::mpsc::Sender<bool>) {
    std::thread::spawn(move || {
        let mut line = String::new();
        let read = std::io::stdin().read_line(&mut line);
        let answer = line.trim().to_ascii_lowercase();
        let digits = |s: &str| s.chars().filter(char::is_ascii_digit).collect::<String>();
        let yes = read.is_ok_and(|n| n > 0)
            && (answer == "yes" || (!answer.is_empty() && digits(&answer) == digits(&sas)));
        let _ = tx.blocking_send(yes);
    });
}

/// The addresses a code carries: loopback ones only when there is nothing else (two
/// homes on one host), since a code's reader is another machine and every address
/// makes the code longer to paste.
fn code_addrs(addrs: &[Multiaddr]) -> Vec<Multiaddr> {
    let lo = |a: &Multiaddr| ip_of(a).is_some_and(|ip| ip.is_loopback());
    if addrs.iter().all(lo) {
        return addrs.to_vec();
    }
    addrs.iter().filter(|a| !lo(a)).cloned().collect()
}

fn ip_of(addr: &Multiaddr) -> Option<IpAddr> {
    addr.iter().find_map(|p| match p {
        Protocol::Ip4(ip) => Some(IpAddr::V4(ip)),
        Protocol::Ip6(ip) => Some(IpAddr::V6(ip)),
        _ => None,
    })
}

/// `ip` at the host's well-known port, TCP and QUIC: where a session of that machine
/// listens whatever sessions run there (the address book keeps no port of a session
/// that will be gone).
/// The port is this machine's setting (`port`, 7385 unless changed): one person's
/// machines share their settings far more often than not, and with `0` (no well-known
/// port) there is nothing lasting to remember.
fn well_known(ip: IpAddr, port: u16) -> Vec<String> {
    if port == 0 {
        return Vec::new();
    }
    let base = match ip {
        IpAddr::V4(ip) => format!("/ip4/{ip}"),
        IpAddr::V6(ip) => format!("/ip6/{ip}"),
    };
    vec![
        format!("{base}/tcp/{port}"),
        format!("{base}/udp/{port}/quic-v1"),
    ]
}

/// This machine's addresses to hand the other one: the IPs it listens on (not
/// unspecified; loopback only when there is nothing else) at the well-known port.
fn host_addrs(listen: &[Multiaddr], port: u16) -> Vec<String> {
    let ips: Vec<IpAddr> = listen
        .iter()
        .filter_map(ip_of)
        .filter(|ip| !ip.is_unspecified())
        .collect();
    let routable = ips.iter().any(|ip| !ip.is_loopback());
    let mut out = Vec::new();
    for ip in ips {
        if routable && ip.is_loopback() {
            continue;
        }
        for a in well_known(ip, port) {
            if !out.contains(&a) && out.len() < MAX_LINK_ADDRS {
                out.push(a);
            }
        }
    }
    out
}

/// The other machine's address as this connection saw it, at the well-known port.
fn observed_addrs(remote: &Multiaddr, port: u16) -> Vec<String> {
    ip_of(remote)
        .filter(|ip| !ip.is_unspecified())
        .map(|ip| well_known(ip, port))
        .unwrap_or_default()
}

/// Keeps the other machine's addresses under the shared identity: the sessions of
/// both machines dial them at start (`node::addresses`), so `self` spans the two with
/// nothing typed.
fn remember(
    home: &Home,
    key: interlink_core::IdentityKey,
    addrs: &[String],
    now: u64,
) -> anyhow::Result<()> {
    let mut book = AddressBook::load(Some(home.path().join(ADDRESS_BOOK_FILE)));
    for a in addrs.iter().take(MAX_LINK_ADDRS * 2) {
        book.remember(key, a, Source::Device, now);
    }
    book.save(now).context("saving the address book")?;
    Ok(())
}

#[cfg(test)]
#[path = "device_tests.rs"]
mod tests;

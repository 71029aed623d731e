//! The hostile node: a paired peer that misuses what it can see.

use interlink_core::{
    Identity, MsgId,
    limits::{MAX_DELIVER_BATCH, MINUTE_MS},
    mailbox::Mailbox,
    wire::{Envelope, EnvelopeKind, Receipt, ReceiptState, SessionAddr, Signed, VERSION},
};
use rand_core::Rng;

use super::{
    schedule::Attack,
    world::{Ev, Net, World, dummy_sealed},
};

pub(super) fn attack_at(a: &Attack) -> u64 {
    match a {
        Attack::CopyFromDht { at }
        | Attack::BadDates { at, .. }
        | Attack::Flood { at, .. }
        | Attack::StrangerFlood { at, .. } => *at,
    }
}

fn me(w: &World) -> Option<usize> {
    w.sched.hostile.then_some(w.sched.honest)
}

/// An envelope of the hostile identity to `to`, with this id and timestamp.
fn forge(
    w: &World,
    h: usize,
    to: &SessionAddr,
    msg_id: MsgId,
    ts: u64,
) -> Option<Signed<Envelope>> {
    let hn = &w.nodes[h];
    forge_as(
        &Identity::from_seed(&hn.seed),
        &hn.addr.session,
        to,
        msg_id,
        ts,
    )
}

/// A passless message envelope of `signer` (session `session`) to `to`.
fn forge_as(
    signer: &Identity,
    session: &interlink_core::SessionId,
    to: &SessionAddr,
    msg_id: MsgId,
    ts: u64,
) -> Option<Signed<Envelope>> {
    let body = Envelope {
        v: VERSION,
        sender: signer.public(),
        sender_session: session.clone(),
        recipient: to.key,
        recipient_session: to.session.clone(),
        msg_id,
        ts,
        kind: EnvelopeKind::Message,
        in_reply_to: None,
        also_about: Vec::new(),
        name: None,
        sealed: Some(dummy_sealed()),
        pass: None,
        reply_pass: None,
    };
    Signed::sign(body, signer).ok()
}

/// Sends `envs` (all to node `to`) live in batches and puts them into its mailbox.
fn deliver(w: &mut World, h: usize, to: usize, envs: Vec<Signed<Envelope>>) {
    if envs.is_empty() {
        return;
    }
    let addr = w.nodes[to].addr.clone();
    let mut mb = Mailbox::new(addr.key, addr.session.clone());
    let now = w.local(h);
    let cfg = w.cfg.mailbox.clone();
    for e in &envs {
        let _ = mb.insert(e.clone(), now, &cfg);
    }
    if w.link_up(h, to) {
        for (i, batch) in envs.chunks(MAX_DELIVER_BATCH).enumerate() {
            let at = w.now + w.latency(h, to) + i as u64;
            let msg = Net::Request {
                from: h,
                from_inc: 0,
                req: interlink_reqid(i),
                envelopes: batch.to_vec(),
            };
            w.push(at, Ev::Net { from: h, to, msg });
        }
    }
    w.dht_put(h, crate::PutToken(0), &mb);
}

fn interlink_reqid(i: usize) -> crate::ReqId {
    crate::ReqId(i as u64)
}

/// Races a copy of a genuine message's id to its recipient, live and into the mailbox.
pub(super) fn race(w: &mut World, genuine: &Signed<Envelope>) {
    let Some(h) = me(w) else { return };
    let b = genuine.body();
    let Some(to) = (0..w.sched.honest).find(|&i| w.nodes[i].addr == b.recipient_addr()) else {
        return;
    };
    let ts = w.local(h);
    if let Some(env) = forge(w, h, &b.recipient_addr(), b.msg_id, ts) {
        deliver(w, h, to, vec![env]);
    }
}

pub(super) fn attack(w: &mut World, i: usize) {
    let Some(h) = me(w) else { return };
    match w.sched.attacks[i].clone() {
        Attack::CopyFromDht { .. } => {
            // Read every copy any holder has and copy every other sender's id.
            for to in 0..w.sched.honest {
                let key = w.nodes[to].addr.clone();
                let rk = interlink_core::mailbox::record_key(&key.key, &key.session);
                let mut ids: Vec<(MsgId, u64, usize)> = Vec::new();
                for n in 0..w.sched.honest {
                    if let Some(copy) = w.nodes[n].holder.get(&rk) {
                        for e in copy.pending() {
                            let b = e.body();
                            let sender =
                                (0..w.sched.honest).find(|&i| w.nodes[i].addr.key == b.sender);
                            if let Some(sender) = sender
                                && !ids.iter().any(|(x, _, _)| *x == b.msg_id)
                            {
                                ids.push((b.msg_id, b.ts, sender));
                            }
                        }
                    }
                }
                let now = w.local(h);
                let envs: Vec<Signed<Envelope>> = ids
                    .iter()
                    .filter_map(|(id, _, _)| forge(w, h, &key, *id, now))
                    .collect();
                deliver(w, h, to, envs);
                // And tell each sender its message arrived: receipts signed by the
                // hostile identity, one naming itself, one naming the real session id.
                for (id, _, sender) in ids {
                    for session in [w.nodes[h].addr.session.clone(), key.session.clone()] {
                        let body = Receipt {
                            v: VERSION,
                            recipient: w.nodes[h].addr.key,
                            recipient_session: session,
                            sender: w.nodes[sender].addr.key,
                            msg_ids: vec![id],
                            state: ReceiptState::Delivered,
                            ts: now,
                            pass: None,
                        };
                        let Ok(receipt) =
                            Signed::sign(body, &Identity::from_seed(&w.nodes[h].seed))
                        else {
                            continue;
                        };
                        if w.link_up(h, sender) {
                            let at = w.now + w.latency(h, sender);
                            let msg = Net::Receipt { receipt };
                            w.push(
                                at,
                                Ev::Net {
                                    from: h,
                                    to: sender,
                                    msg,
                                },
                            );
                        }
                    }
                }
            }
        }
        Attack::BadDates { to, .. } => {
            let addr = w.nodes[to].addr.clone();
            let now = w.local(h);
            let mut envs = Vec::new();
            for ts in [
                now.saturating_sub(30 * 24 * 60 * MINUTE_MS),
                now + 30 * MINUTE_MS,
            ] {
                let mut id = [0u8; 16];
                w.rng.fill_bytes(&mut id);
                envs.extend(forge(w, h, &addr, MsgId::from_bytes(id), ts));
            }
            deliver(w, h, to, envs);
        }
        Attack::StrangerFlood { to, strangers, .. } => {
            // Only into the mailbox: strangers are refused on the live path anyway.
            let addr = w.nodes[to].addr.clone();
            let backdated = w.local(h).saturating_sub(6 * 24 * 60 * MINUTE_MS);
            let cfg = w.cfg.mailbox.clone();
            let mut mb = Mailbox::new(addr.key, addr.session.clone());
            for s in 0..strangers {
                let mut seed = w.nodes[h].seed;
                seed[..8].copy_from_slice(&(s as u64).to_be_bytes());
                let stranger = Identity::from_seed(&seed);
                for k in 0..8u64 {
                    let mut id = [0u8; 16];
                    w.rng.fill_bytes(&mut id);
                    let session = &w.nodes[h].addr.session;
                    if let Some(env) = forge_as(
                        &stranger,
                        session,
                        &addr,
                        MsgId::from_bytes(id),
                        backdated + k,
                    ) {
                        let _ = mb.insert(env, w.local(h), &cfg);
                    }
                }
            }
            w.dht_put(h, crate::PutToken(0), &mb);
        }
        Attack::Flood { to, count, .. } => {
            let addr = w.nodes[to].addr.clone();
            let now = w.local(h);
            let mut envs = Vec::new();
            for k in 0..count {
                let mut id = [0u8; 16];
                w.rng.fill_bytes(&mut id);
                envs.extend(forge(w, h, &addr, MsgId::from_bytes(id), now + k as u64));
            }
            deliver(w, h, to, envs);
        }
    }
}

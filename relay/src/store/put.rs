//! The put path: staging verified puts in one write transaction.

use std::collections::{HashMap, HashSet};

use interlink_core::{
    IdentityKey, MsgId,
    mailbox::{self, Mailbox},
};

use super::{
    DbError, Key, MailboxStore, PutOutcome, Refusal, RejectReason, State, Stats, Summary, Tables,
    add_summary, is_vacant, open_tables, read_summary, sub_summary, write_record,
};

impl MailboxStore {
    /// Opens a write transaction and stages every verified put in it.
    pub(super) fn stage(
        &self,
        state: &mut State,
        decoded: &[Result<Mailbox, Refusal>],
        now_ms: u64,
    ) -> Result<Batch, DbError> {
        let txn = self.db.begin_write()?;
        let mut totals = state.totals;
        let mut results = Vec::with_capacity(decoded.len());
        // The batch's current copy of each mailbox it touched (None: none held), with
        // its encoded size: what goes back into the cache after the commit.
        let mut touched: HashMap<Key, (Option<Mailbox>, usize)> = HashMap::new();
        {
            let mut t = open_tables(&txn)?;
            for put in decoded {
                let incoming = match put {
                    Ok(mb) => mb,
                    Err(refusal) => {
                        results.push(Err(refusal.clone()));
                        continue;
                    }
                };
                let key = incoming.record_key();
                let old = read_summary(&t, &key)?;
                let held = match touched.remove(&key) {
                    Some((mb, _)) => mb,
                    None => self.held(state, &t, &key, now_ms)?,
                };
                let staged =
                    self.merge_one(&mut t, &mut totals, key, old, held, incoming, now_ms)?;
                results.push(staged.result);
                touched.insert(key, (staged.current, staged.bytes));
            }
        }
        Ok(Batch {
            txn,
            results,
            touched: touched.into_iter().collect(),
            totals,
        })
    }

    /// Merges `incoming` into `held`, checks the store caps and writes the result into
    /// the open transaction.
    #[allow(clippy::too_many_arguments)]
    fn merge_one(
        &self,
        t: &mut Tables<'_>,
        totals: &mut Stats,
        key: Key,
        old: Option<Summary>,
        held: Option<Mailbox>,
        incoming: &Mailbox,
        now_ms: u64,
    ) -> Result<Staged, DbError> {
        let cfg = &self.caps.mailbox;
        let old_bytes = old.map_or(0, |o| o.bytes);
        let unchanged = |held: Option<Mailbox>, result| Staged {
            result,
            bytes: if held.is_some() {
                old_bytes as usize
            } else {
                0
            },
            current: held,
        };
        // Merging is commutative: start from the incoming copy (usually one envelope)
        // so the held one is kept intact for the comparison and for a refusal.
        let mut merged = incoming.clone();
        match &held {
            Some(h) => {
                // Same owner and session (the record key matched), so this cannot
                // fail; if it did, the put is refused rather than the copy replaced.
                if let Err(e) = merged.merge(h, now_ms, cfg) {
                    return Ok(unchanged(held, Err(Refusal::from_mailbox(&e))));
                }
            }
            None => {
                merged.sweep(now_ms, cfg);
            }
        }
        let mut outcome = diff(held.as_ref(), &merged);
        if held.as_ref() == Some(&merged) || (held.is_none() && is_vacant(&merged)) {
            return Ok(unchanged(held, Ok(outcome)));
        }
        outcome.changed = true;
        if is_vacant(&merged) {
            // Only when everything held expired and the put brought nothing live.
            if let Some(old) = old {
                t.records.remove(&key)?;
                t.summary.remove(&key)?;
                sub_summary(totals, old);
                totals.mailboxes = totals.mailboxes.saturating_sub(1);
            }
            return Ok(Staged {
                result: Ok(outcome),
                current: None,
                bytes: 0,
            });
        }
        let encoded = merged.encode();
        let new = Summary::of(&merged, encoded.len(), cfg);
        if old.is_none() && totals.mailboxes >= self.caps.max_mailboxes as u64 {
            let refusal = Refusal::new(
                RejectReason::StoreFullMailboxes,
                format!("the store holds {} mailboxes", totals.mailboxes),
            );
            return Ok(unchanged(held, Err(refusal)));
        }
        let total_after = totals
            .bytes
            .saturating_sub(old_bytes)
            .saturating_add(new.bytes);
        // A put that does not grow the store is let through even when it is full, so
        // owners can always ack (and so shrink) their mailboxes.
        if new.bytes > old_bytes && total_after > self.caps.max_total_bytes {
            let refusal = Refusal::new(
                RejectReason::StoreFullBytes,
                format!(
                    "the store would hold {total_after} bytes; the cap is {}",
                    self.caps.max_total_bytes
                ),
            );
            return Ok(unchanged(held, Err(refusal)));
        }
        write_record(t, &key, &encoded, new)?;
        match old {
            Some(old) => sub_summary(totals, old),
            None => totals.mailboxes += 1,
        }
        add_summary(totals, new);
        Ok(Staged {
            result: Ok(outcome),
            current: Some(merged),
            bytes: encoded.len(),
        })
    }
}

/// One put staged in a batch.
struct Staged {
    result: Result<PutOutcome, Refusal>,
    /// The mailbox's copy after this put (staged, or unchanged).
    current: Option<Mailbox>,
    /// Its encoded size.
    bytes: usize,
}

/// A staged, uncommitted batch of puts.
pub(super) struct Batch {
    pub(super) txn: redb::WriteTransaction,
    pub(super) results: Vec<Result<PutOutcome, Refusal>>,
    pub(super) touched: Vec<(Key, (Option<Mailbox>, usize))>,
    pub(super) totals: Stats,
}

/// Decodes and verifies a put and checks that `key` is its mailbox's key.
pub(super) fn verify_put(
    key: &[u8; 32],
    bytes: &[u8],
    now_ms: u64,
    cfg: &mailbox::Config,
) -> Result<Mailbox, Refusal> {
    let (mb, rejected) =
        Mailbox::decode(bytes, now_ms, cfg).map_err(|e| Refusal::from_mailbox(&e))?;
    // A holder refuses a put with any invalid entry (PROTOCOL §7.2): storing the
    // valid rest would make the relay a laundering point for forged copies.
    if let Some(refusal) = Refusal::from_rejected(&rejected) {
        return Err(refusal);
    }
    if &mb.record_key() != key {
        return Err(Refusal::new(
            RejectReason::WrongMailbox,
            format!("record key does not match the mailbox of {}", mb.address()),
        ));
    }
    Ok(mb)
}

/// What changed from `held` to `merged`.
fn diff(held: Option<&Mailbox>, merged: &Mailbox) -> PutOutcome {
    let held_envs: HashSet<(MsgId, IdentityKey)> = held
        .into_iter()
        .flat_map(|h| h.pending())
        .map(|e| (e.body().msg_id, e.body().sender))
        .collect();
    let merged_envs: HashSet<(MsgId, IdentityKey)> = merged
        .pending()
        .map(|e| (e.body().msg_id, e.body().sender))
        .collect();
    let held_acks: HashSet<[u8; 64]> = held
        .into_iter()
        .flat_map(|h| h.acks())
        .map(|a| *a.signature())
        .collect();
    PutOutcome {
        changed: false,
        new_envelopes: merged_envs.difference(&held_envs).count(),
        new_acks: merged
            .acks()
            .filter(|a| !held_acks.contains(a.signature()))
            .count(),
        removed: held_envs.difference(&merged_envs).count(),
        held: merged.len(),
    }
}

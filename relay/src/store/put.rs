//! The put path: staging verified puts in one write transaction.

use std::collections::{HashMap, HashSet};

use interlink_core::{
    IdentityKey, MsgId,
    mailbox::{self, HandedCopyError, Mailbox},
    wire::SessionAddr,
};

use super::{
    DbError, Key, MailboxStore, PutOutcome, Refusal, RejectReason, State, Stats, Summary, Tables,
    add_summary, is_vacant, open_tables, read_summary, remove_record, sub_summary, write_record,
};

/// What the batch knows of a mailbox after staging a put of it.
#[derive(Debug)]
pub(super) enum Current {
    /// This copy (staged or unchanged), with its encoded size.
    Held(Mailbox, usize),
    /// No record (never held, or deleted by this put).
    Absent,
    /// The decoded copy was spent on a merge that was then refused: the record in the
    /// transaction is still the truth and is decoded again if needed.
    Unknown,
}

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
        // Owners' usage as this batch leaves it (applied to the state on commit).
        let mut owners: HashMap<IdentityKey, u64> = HashMap::new();
        let mut results = Vec::with_capacity(decoded.len());
        // What goes back into the cache after the commit.
        let mut touched: HashMap<Key, Current> = HashMap::new();
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
                let owner = *incoming.owner();
                if let Some(served) = &self.caps.served
                    && !served.contains(&owner)
                {
                    results.push(Err(Refusal::new(
                        RejectReason::NotServed,
                        format!(
                            "this relay holds mail only for the identities it serves, not {}",
                            owner.fingerprint()
                        ),
                    )));
                    continue;
                }
                let used = *owners
                    .entry(owner)
                    .or_insert_with(|| state.owner_bytes(&owner));
                let old = read_summary(&t, &key)?;
                let held = match touched.remove(&key) {
                    Some(Current::Held(mb, _)) => Some(mb),
                    Some(Current::Absent) => None,
                    Some(Current::Unknown) | None => self.held(state, &t, &key, now_ms)?,
                };
                let (result, current) =
                    self.merge_one(&mut t, &mut totals, key, old, held, incoming, used, now_ms)?;
                // What the record holds now, whatever happened to this put.
                let old_bytes = old.map_or(0, |o| o.bytes);
                let now_bytes = match &current {
                    Current::Held(_, bytes) => *bytes as u64,
                    Current::Absent => 0,
                    Current::Unknown => old_bytes,
                };
                owners.insert(
                    owner,
                    used.saturating_sub(old_bytes).saturating_add(now_bytes),
                );
                results.push(result);
                touched.insert(key, current);
            }
        }
        Ok(Batch {
            txn,
            results,
            touched: touched.into_iter().collect(),
            totals,
            owners: owners.into_iter().collect(),
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
        owner_used: u64,
        now_ms: u64,
    ) -> Result<(Result<PutOutcome, Refusal>, Current), DbError> {
        let cfg = &self.caps.mailbox;
        let old_bytes = old.map_or(0, |o| o.bytes);
        let before = Entries::of(held.as_ref());
        let was_held = held.is_some();
        // The incoming copy is merged into the held one in place: a held mailbox can
        // hold hundreds of envelopes, a put usually brings one.
        let merged = match held {
            Some(mut mb) => {
                // Same owner and session (the record key matched), so this cannot fail.
                if let Err(e) = mb.merge(incoming, now_ms, cfg) {
                    return Ok((Err(Refusal::from_mailbox(&e)), Current::Unknown));
                }
                mb
            }
            None => {
                let mut mb = incoming.clone();
                mb.sweep(now_ms, cfg);
                mb
            }
        };
        let after = Entries::of(Some(&merged));
        let mut outcome = before.diff(&after, merged.len());
        outcome.kept = merged.kept_of(incoming);
        if before == after {
            let current = if was_held {
                Current::Held(merged, usize::try_from(old_bytes).unwrap_or(usize::MAX))
            } else {
                Current::Absent // nothing held, and the put brought nothing live
            };
            return Ok((Ok(outcome), current));
        }
        outcome.changed = true;
        if is_vacant(&merged) {
            // Everything held expired and the put brought nothing live.
            if let Some(old) = old {
                remove_record(t, &key)?;
                sub_summary(totals, old);
                totals.mailboxes = totals.mailboxes.saturating_sub(1);
            }
            return Ok((Ok(outcome), Current::Absent));
        }
        // Refused from here on, the merged copy is dropped: the record is the truth.
        let refused = |refusal| (Err(refusal), Current::Unknown);
        if old.is_none() && totals.mailboxes >= self.caps.max_mailboxes as u64 {
            return Ok(refused(Refusal::new(
                RejectReason::StoreFullMailboxes,
                format!("the store holds {} mailboxes", totals.mailboxes),
            )));
        }
        let encoded = merged.encode();
        let new = Summary::of(&merged, encoded.len(), cfg);
        let total_after = totals
            .bytes
            .saturating_sub(old_bytes)
            .saturating_add(new.bytes);
        // A put that does not grow the store is let through even when it is full, so
        // owners can always ack (and so shrink) their mailboxes.
        if new.bytes > old_bytes && total_after > self.caps.max_total_bytes {
            return Ok(refused(Refusal::new(
                RejectReason::StoreFullBytes,
                format!(
                    "the store would hold {total_after} bytes; the cap is {}",
                    self.caps.max_total_bytes
                ),
            )));
        }
        let owner_after = owner_used
            .saturating_sub(old_bytes)
            .saturating_add(new.bytes);
        if new.bytes > old_bytes && owner_after > self.caps.max_owner_bytes {
            return Ok(refused(Refusal::new(
                RejectReason::OwnerFull,
                format!(
                    "the store would hold {owner_after} bytes for {}; the cap per identity is {}",
                    incoming.owner().fingerprint(),
                    self.caps.max_owner_bytes
                ),
            )));
        }
        write_record(t, &key, incoming.owner(), &encoded, new)?;
        match old {
            Some(old) => sub_summary(totals, old),
            None => totals.mailboxes += 1,
        }
        add_summary(totals, new);
        outcome.grew_by = new.bytes.saturating_sub(old_bytes);
        Ok((Ok(outcome), Current::Held(merged, encoded.len())))
    }
}

/// A staged, uncommitted batch of puts.
pub(super) struct Batch {
    pub(super) txn: redb::WriteTransaction,
    pub(super) results: Vec<Result<PutOutcome, Refusal>>,
    pub(super) touched: Vec<(Key, Current)>,
    pub(super) totals: Stats,
    /// Each touched owner's usage after the batch.
    pub(super) owners: Vec<(IdentityKey, u64)>,
}

/// Decodes and verifies a put and checks that `key` is its mailbox's key.
pub(super) fn verify_put(
    key: &[u8; 32],
    bytes: &[u8],
    now_ms: u64,
    cfg: &mailbox::Config,
) -> Result<Mailbox, Refusal> {
    Mailbox::decode_handed(bytes, key, now_ms, cfg).map_err(|e| match e {
        HandedCopyError::Record(e) => Refusal::from_mailbox(&e),
        HandedCopyError::InvalidEntries { count, first } => {
            Refusal::from_invalid_entries(count, &first)
        }
        HandedCopyError::WrongKey { mailbox } => Refusal::new(
            RejectReason::WrongMailbox,
            format!("record key does not match the mailbox of {mailbox}"),
        ),
    })
}

/// One envelope version: `(ts, msg_id, sender, signature, reply-to hint)` determines
/// its wire bytes, hence its place in the mailbox.
type EnvelopeId = (u64, MsgId, IdentityKey, [u8; 64], Option<SessionAddr>);

/// The entries of a mailbox copy, to tell what a merge changed without keeping (or
/// comparing) whole copies.
#[derive(Debug, PartialEq, Eq)]
struct Entries {
    envelopes: HashSet<EnvelopeId>,
    /// `(msg_id, sender)` of each envelope: an entry, whatever its version.
    entries: HashSet<(MsgId, IdentityKey)>,
    acks: HashSet<(u64, [u8; 64])>,
}

impl Entries {
    fn of(mb: Option<&Mailbox>) -> Self {
        let mut e = Entries {
            envelopes: HashSet::new(),
            entries: HashSet::new(),
            acks: HashSet::new(),
        };
        if let Some(mb) = mb {
            for env in mb.pending() {
                let b = env.body();
                e.envelopes.insert((
                    b.ts,
                    b.msg_id,
                    b.sender,
                    *env.signature(),
                    env.raw_reply_to().cloned(),
                ));
                e.entries.insert((b.msg_id, b.sender));
            }
            for ack in mb.acks() {
                e.acks.insert((ack.body().ts, *ack.signature()));
            }
        }
        e
    }

    /// What changed from `self` (held) to `after` (merged, holding `held` envelopes).
    fn diff(&self, after: &Entries, held: usize) -> PutOutcome {
        PutOutcome {
            changed: false,
            new_envelopes: after.entries.difference(&self.entries).count(),
            new_acks: after.acks.difference(&self.acks).count(),
            removed: self.entries.difference(&after.entries).count(),
            held,
            kept: Vec::new(),
            grew_by: 0,
        }
    }
}

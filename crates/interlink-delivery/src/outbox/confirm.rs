//! `queued` from a session without an outbox: only on a holder's word.
//!
//! A session with an outbox says `queued` once the message is durable in it: the
//! outbox retries until a receipt, whatever the holders did. A shell command
//! (`interlink-p2p send`) has no outbox and exits once its messages are answered, so
//! its promise rests on other nodes alone. A holder merges every copy it is handed and
//! keeps the oldest mail, so a copy can be taken without its newest messages (the
//! sender's quota is full of older mail the recipient has not acked yet). Hence such a
//! session follows each publication ([`Followed`]) until holders answer: a message a
//! holder says it keeps is `queued` ([`HeldBy::Mailbox`]); one the copy itself could
//! not take is `not kept` at once ([`NotKept::MailboxFull`]); one no holder confirmed
//! by the time the publication ended is `not kept` too ([`NotKept::Unconfirmed`]).

use std::collections::BTreeSet;

use interlink_core::MsgId;

use super::Sender;
use crate::{
    config::PUTS_FOLLOWED,
    engine::Ctx,
    types::{EntryKey, HeldBy, NotKept, Outcome, Output, PutToken},
};

/// A publication whose holders' answers a session without an outbox waits for.
#[derive(Debug)]
pub(crate) struct Followed {
    /// The messages it carries.
    ids: BTreeSet<MsgId>,
    /// When it counts as ended if the shell has not said so.
    pub(super) deadline: u64,
}

impl Sender {
    /// Follows publication `put`, which carries `ids`. Every message still waiting for
    /// a holder's answer that it carries now waits for this one (the latest copy).
    pub(super) fn follow(&mut self, ctx: &mut Ctx<'_>, put: PutToken, ids: &BTreeSet<MsgId>) {
        if self.followed.len() >= PUTS_FOLLOWED
            && let Some((&oldest, _)) = self.followed.first_key_value()
        {
            self.put_ended(ctx, oldest);
        }
        for id in ids {
            if let Some(p) = self.entries.get_mut(id)
                && p.awaiting.is_some()
            {
                p.awaiting = Some(put);
            }
        }
        self.followed.insert(
            put,
            Followed {
                ids: ids.clone(),
                deadline: ctx.now.saturating_add(ctx.cfg.put_timeout_ms),
            },
        );
    }

    /// A waiting caller's message was published in `put` (or, if `None`, the copy did
    /// not take it): it waits for a holder, or is not kept.
    pub(super) fn await_holders(&mut self, ctx: &mut Ctx<'_>, id: MsgId, put: Option<PutToken>) {
        match put {
            Some(put) => {
                if let Some(p) = self.entries.get_mut(&id) {
                    p.awaiting = Some(put);
                }
            }
            None => {
                // A copy refuses mail without the recipient's pass beyond the small
                // room it keeps for strangers: say which it was.
                let why = match self.entries.get(&id) {
                    Some(p) if !p.entry.envelope.body().is_admitted() => NotKept::NotAdmitted,
                    _ => NotKept::MailboxFull,
                };
                self.not_kept(ctx, id, why)
            }
        }
    }

    /// A holder answered `put`: the messages of ours it keeps are `queued`.
    pub(crate) fn put_answered(&mut self, ctx: &mut Ctx<'_>, put: PutToken, kept: &[EntryKey]) {
        let Some(f) = self.followed.get(&put) else {
            return;
        };
        let me = ctx.me.key;
        let confirmed: Vec<MsgId> = kept
            .iter()
            .filter(|(sender, id)| *sender == me && f.ids.contains(id))
            .map(|(_, id)| *id)
            .collect();
        for id in confirmed {
            let Some(p) = self.entries.get_mut(&id) else {
                continue;
            };
            if p.awaiting.take().is_none() {
                continue;
            }
            if let Some(caller) = p.caller.take() {
                ctx.out.push_back(Output::Reply {
                    caller,
                    outcome: Ok(Outcome::Queued {
                        held_by: HeldBy::Mailbox,
                    }),
                });
            }
        }
    }

    /// No more answers come for `put`: what still waits for it is not kept.
    pub(crate) fn put_ended(&mut self, ctx: &mut Ctx<'_>, put: PutToken) {
        let Some(f) = self.followed.remove(&put) else {
            return;
        };
        for id in f.ids {
            if self
                .entries
                .get(&id)
                .is_some_and(|p| p.awaiting == Some(put))
            {
                self.not_kept(ctx, id, NotKept::Unconfirmed);
            }
        }
    }

    /// Ends the followed publications past their deadline.
    pub(super) fn end_late_puts(&mut self, ctx: &mut Ctx<'_>) {
        let late: Vec<PutToken> = self
            .followed
            .iter()
            .filter(|(_, f)| f.deadline <= ctx.now)
            .map(|(put, _)| *put)
            .collect();
        for put in late {
            self.put_ended(ctx, put);
        }
    }

    /// Tells the caller the message is not kept, and forgets it: nothing here could
    /// keep it.
    fn not_kept(&mut self, ctx: &mut Ctx<'_>, id: MsgId, why: NotKept) {
        let caller = self.entries.get_mut(&id).and_then(|p| p.caller.take());
        self.forget(&id);
        if let Some(caller) = caller {
            ctx.out.push_back(Output::Reply {
                caller,
                outcome: Ok(Outcome::NotKept { why }),
            });
        }
    }
}

//! The promises, checked on a finished run.

use std::collections::BTreeMap;

use super::world::Report;
use crate::types::{HeldBy, Outcome};

/// A broken promise.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Violation {
    /// Something the engine did during the run (checked as it happened).
    During(String),
    /// A message the sender was told is queued or delivered is not in the inbox.
    Lost {
        /// Index in [`Report::sent`].
        msg: usize,
        /// Copies found.
        copies: usize,
    },
    /// A message is in the inbox more than once.
    Duplicated {
        /// Index in [`Report::sent`].
        msg: usize,
        /// Copies found.
        copies: usize,
    },
    /// A sender's messages are in the inbox out of send order.
    OutOfOrder {
        /// Sending node.
        from: usize,
        /// Receiving node.
        to: usize,
        /// The message indices in inbox order.
        got: Vec<usize>,
    },
    /// An honest message was refused, or a sender that never crashed got no answer.
    Unanswered {
        /// Index in [`Report::sent`].
        msg: usize,
    },
    /// An honest message was refused for good.
    Refused {
        /// Index in [`Report::sent`].
        msg: usize,
    },
}

/// Checks every promise on `report`; all violations found.
pub fn check(report: &Report) -> Result<(), Vec<Violation>> {
    let mut v: Vec<Violation> = report
        .violations
        .iter()
        .cloned()
        .map(Violation::During)
        .collect();
    // Inbox positions of each honest message.
    let mut positions: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (to, inbox) in report.inboxes.iter().enumerate() {
        for (pos, line) in inbox.iter().enumerate() {
            if let Some(&msg) = report.index.get(&(line.sender, line.msg_id))
                && report.sent[msg].to == to
            {
                positions.entry(msg).or_default().push(pos);
            }
        }
    }
    for (msg, s) in report.sent.iter().enumerate() {
        let copies = positions.get(&msg).map_or(0, Vec::len);
        if copies > 1 {
            v.push(Violation::Duplicated { msg, copies });
        }
        let claimed = matches!(
            s.reply,
            Some(Ok(Outcome::Queued { .. } | Outcome::Delivered { .. }))
        );
        // A shell command's `queued` rests on the holders that said they keep it: if
        // every one of them lost its copies afterwards (a crash, a clock step back),
        // the promise went with them. Sessions with an outbox promise more.
        let holders_lost = matches!(
            s.reply,
            Some(Ok(Outcome::Queued {
                held_by: HeldBy::Mailbox
            }))
        ) && !s.held_at.is_empty()
            && s.held_at.iter().all(|(h, at)| {
                report
                    .holder_losses
                    .iter()
                    .any(|(node, when)| node == h && when >= at)
            });
        if claimed && !s.expired && copies != 1 && !(holders_lost && copies == 0) {
            v.push(Violation::Lost { msg, copies });
        }
        if matches!(s.reply, Some(Ok(Outcome::Refused { .. }))) || s.refused {
            v.push(Violation::Refused { msg });
        }
        if s.reply.is_none() && !s.sender_crashed {
            v.push(Violation::Unanswered { msg });
        }
    }
    // Per (sending session, recipient): inbox order equals send order (sent is in send
    // order). Each run of a shell command is a session of its own, and a message its
    // sender was told is not kept promises nothing, its place included.
    let mut pairs: BTreeMap<(usize, u64, usize), Vec<(usize, usize)>> = BTreeMap::new();
    for (msg, s) in report.sent.iter().enumerate() {
        if matches!(s.reply, Some(Ok(Outcome::NotKept { .. }))) {
            continue;
        }
        if let Some(p) = positions.get(&msg).and_then(|p| p.first()) {
            pairs
                .entry((s.from, s.run, s.to))
                .or_default()
                .push((*p, msg));
        }
    }
    for ((from, _, to), mut got) in pairs {
        let in_send_order: Vec<usize> = got.iter().map(|(_, m)| *m).collect();
        got.sort();
        let in_inbox_order: Vec<usize> = got.iter().map(|(_, m)| *m).collect();
        if in_inbox_order != in_send_order {
            v.push(Violation::OutOfOrder {
                from,
                to,
                got: in_inbox_order,
            });
        }
    }
    if v.is_empty() { Ok(()) } else { Err(v) }
}

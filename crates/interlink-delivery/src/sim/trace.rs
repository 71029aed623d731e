//! One-line summaries of inputs and outputs, for `World::trace`.

use interlink_core::wire::{Envelope, Signed};

use crate::types::{Input, Output};

fn ids<'a>(envs: impl IntoIterator<Item = &'a Signed<Envelope>>) -> String {
    envs.into_iter()
        .map(|e| {
            let b = e.body();
            format!(
                "{:02x}/{:02x}@{}",
                b.sender.as_bytes()[0],
                b.msg_id.as_bytes()[0],
                b.ts % 1_000_000
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

pub(super) fn brief_in(i: &Input) -> String {
    match i {
        Input::Send { envelope, .. } => format!("Send {}", ids([envelope])),
        Input::DeliverRequest { envelopes, .. } => format!("DeliverRequest {}", ids(envelopes)),
        Input::MailboxFetched { copy } => format!("MailboxFetched {}", ids(copy.pending())),
        Input::DeliverResponse { req, result } => format!(
            "DeliverResponse {req:?} {:?}",
            result.as_ref().map(|r| &r.results)
        ),
        Input::OutboxStored { key, result } => {
            format!("OutboxStored {:02x} {result:?}", key.as_bytes()[0])
        }
        Input::InboxStored { token, result, .. } => format!("InboxStored {token:?} {result:?}"),
        Input::Timer => String::new(),
        other => format!("{other:?}").chars().take(80).collect(),
    }
}

pub(super) fn brief_out(o: &Output) -> String {
    match o {
        Output::SendRequest {
            req,
            peer,
            envelopes,
        } => format!("SendRequest {req:?} {peer:?} {}", ids(envelopes)),
        Output::DhtPut { put, mailbox } => {
            format!(
                "DhtPut#{} {} {}",
                put.0,
                mailbox.session(),
                ids(mailbox.pending())
            )
        }
        Output::AppendInbox { token, entries } => format!("AppendInbox {token:?} {}", ids(entries)),
        Output::Respond { req, response } => format!("Respond {req:?} {:?}", response.results),
        Output::PersistOutbox { entry } => format!("PersistOutbox {}", ids([&entry.envelope])),
        other => format!("{other:?}").chars().take(100).collect(),
    }
}

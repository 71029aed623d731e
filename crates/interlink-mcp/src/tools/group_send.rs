//! Group messages (docs/GROUPS.md): `send_message(to: "group:<name>")` and
//! `send_message(in_reply_to, reply_all: true)`.
//!
//! A group message is one sealed, signed envelope per recipient session, each sent on
//! the same path as a direct message (live, else the outbox and the mailbox): the
//! node's `Handle::submit`, all submitted before any outcome is awaited, so a sleeping
//! member does not hold the others up. Every copy carries the same sealed
//! [`GroupTag`]: the group's name, a thread id and every recipient session, so each
//! recipient sees who else got it, and a reply keeps the thread. Holders see one
//! envelope from the sender to one session, as for a direct message.
//!
//! Who gets a copy ([`crate::group_route`]): for a member of one of this user's groups,
//! the session a direct message to it would be routed to — each of its sessions when
//! several fit equally well — or exactly the sessions it is narrowed to; for
//! `reply_all`, the replied message's sender (at its reply address) and every session
//! its tag lists. This user's own sessions are never among them (they are where the
//! message is written or was received). A member that is not a peer any more, or that
//! routing finds no session for, is skipped with the reason.

use interlink_core::{
    IdentityKey, MsgId,
    wire::{EnvelopeKind, GroupTag, SessionAddr},
};
use interlink_store::inbox::{InboxEntry, read_newest};
use serde_json::{Value, json};

use super::send::{
    Answer, Fields, ROUTE_WAIT, Recipient, Sent, gone_warning, outgoing, route_error,
};
use crate::{
    context::{Ready, ToolError},
    group_route,
    groups::{self, GROUP_PREFIX, MAX_GROUP_RECIPIENTS},
    policy, render,
    sent_log::HeldBy,
    server::Server,
    tools::tasks::MAX_HISTORY_SCAN_LINES,
};

/// What a reply needs of the message it answers.
#[derive(Clone, Debug)]
pub(crate) struct Replied {
    /// Where replies to it go: its sender's reply address (a message this session
    /// received; `None` for one it sent).
    pub(crate) from: Option<SessionAddr>,
    /// The group and thread it belongs to, if it was a group message.
    pub(crate) thread: Option<(String, MsgId)>,
    /// The sessions its group tag lists (a received group message).
    pub(crate) members: Vec<SessionAddr>,
}

/// A member that gets no copy, and why.
#[derive(Clone, Debug)]
struct Skipped {
    /// How it is called.
    member: String,
    /// Its identity.
    key: IdentityKey,
    /// Why it was left out.
    reason: String,
}

/// `"<64 hex>#<session>"` (an inbox line's `reply_to`) as an address.
fn parse_addr(text: &str) -> Option<SessionAddr> {
    let (key, session) = text.split_once('#')?;
    Some(SessionAddr {
        key: key.parse().ok()?,
        session: interlink_core::SessionId::new(session).ok()?,
    })
}

fn members_of(e: &InboxEntry) -> Vec<SessionAddr> {
    e.group
        .iter()
        .flat_map(|g| &g.members)
        .filter_map(|m| {
            Some(SessionAddr {
                key: m.identity_key.parse().ok()?,
                session: interlink_core::SessionId::new(&m.session_id).ok()?,
            })
        })
        .collect()
}

impl Server {
    /// The message `id` answers, as far as this session knows it: one it received
    /// (its newest match in the inbox and archive, at most
    /// [`MAX_HISTORY_SCAN_LINES`] lines back), else one it sent.
    pub(crate) fn replied_to(&self, id: MsgId) -> Result<Option<Replied>, ToolError> {
        let ctx = &self.ctx;
        let hex = id.to_string();
        let dir = ctx.session_dir()?;
        let (found, _) = read_newest(&dir.inbox(), 2, MAX_HISTORY_SCAN_LINES, None, |e| {
            e.kind == EnvelopeKind::Message && e.msg_id == hex
        })?;
        if let [a, b] = found.as_slice()
            && a.sender != b.sender
        {
            return Err(ToolError(format!(
                "in_reply_to {id}: messages of two senders in this session's inbox have this \
                 id; give `to` (and leave reply_all out)"
            )));
        }
        if let Some(e) = found.last() {
            let thread = e.group.as_ref().and_then(|g| {
                let thread = g.thread.parse::<MsgId>().ok()?;
                Some((g.name.clone(), thread))
            });
            return Ok(Some(Replied {
                from: parse_addr(&e.reply_to),
                thread,
                members: members_of(e),
            }));
        }
        let shared = ctx.shared();
        Ok(shared.sent.get(&hex).map(|e| Replied {
            from: None,
            thread: match (&e.group, e.thread.as_deref().map(str::parse::<MsgId>)) {
                (Some(name), Some(Ok(thread))) => Some((name.clone(), thread)),
                _ => None,
            },
            members: Vec::new(),
        }))
    }

    /// `to: "group:<name>"`: a copy for every member session of this user's group
    /// `name`, in `thread` when the message replies in one, else in a new thread.
    pub(crate) async fn send_to_group(
        &self,
        name: &str,
        fields: Fields,
        thread: Option<(String, MsgId)>,
    ) -> Result<Answer, ToolError> {
        let ctx = &self.ctx;
        let groups = groups::load(&ctx.home)?;
        let Some(group) = groups.get(name) else {
            let names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
            return Err(ToolError(format!(
                "no group is named {name:?}; this user's groups: {} (the group tool makes one)",
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            )));
        };
        let own = ctx.own()?;
        let policy = policy::load(&ctx.home)?;
        let ready = ctx.ready().await?;
        // A node that just joined waits up to ROUTE_WAIT for members to show.
        let until = tokio::time::Instant::now() + ROUTE_WAIT.saturating_sub(ready.since.elapsed());
        let routed = group_route::route_group(
            &ready.handle,
            group,
            &policy,
            &own,
            |key| self.ctx.shared().routes.get(key),
            until,
            std::time::Duration::ZERO,
        )
        .await
        .map_err(|e| ToolError(e.to_string()))?;
        let recipients: Vec<Recipient> = routed
            .recipients
            .into_iter()
            .map(|r| Recipient {
                to: r.to,
                name: r.name,
                route: r.route,
            })
            .collect();
        let skipped = routed
            .skipped
            .into_iter()
            .map(|s| Skipped {
                reason: match s.why {
                    group_route::SkipReason::NotAPeer => {
                        "not a peer any more (removed from peers.json): no copy".into()
                    }
                    group_route::SkipReason::Route(e) => {
                        route_error(e, s.key, &s.member, ctx.key()).0
                    }
                },
                member: s.member,
                key: s.key,
            })
            .collect();
        let thread = thread.map_or_else(
            || MsgId::random(&mut crate::session_node::os_rng()),
            |(_, t)| t,
        );
        self.fan_out(&ready, &group.name, thread, recipients, skipped, fields)
            .await
    }

    /// `reply_all`: a copy for the replied group message's sender and every other
    /// session its tag lists, in its group and thread.
    pub(crate) async fn reply_all(
        &self,
        fields: Fields,
        replied: Option<Replied>,
    ) -> Result<Answer, ToolError> {
        let ctx = &self.ctx;
        let id = fields.in_reply_to.ok_or_else(|| {
            ToolError("reply_all needs in_reply_to: the group message to answer".into())
        })?;
        let (Some(replied), Some(from)) = (replied.clone(), replied.and_then(|r| r.from)) else {
            return Err(ToolError(format!(
                "reply_all: {id} is not a message in this session's inbox"
            )));
        };
        let Some((name, thread)) = replied.thread.clone() else {
            return Err(ToolError(format!(
                "reply_all: {id} was not sent to a group; answer its sender with in_reply_to \
                 alone (or give `to`)"
            )));
        };
        let own = ctx.own()?;
        let policy = policy::load(&ctx.home)?;
        let ready = ctx.ready().await?;
        let mut targets: Vec<SessionAddr> = Vec::new();
        for a in std::iter::once(from).chain(replied.members) {
            // This user's own sessions got the message (or wrote it): no copy to them.
            if a.key != own.key && !targets.contains(&a) {
                targets.push(a);
            }
        }
        let mut recipients = Vec::new();
        let mut skipped = Vec::new();
        for a in targets {
            let Some(member) = policy.name_of(&a.key).map(str::to_owned) else {
                skipped.push(Skipped {
                    member: format!("{}/{}", a.key.fingerprint(), a.session),
                    key: a.key,
                    reason: "not a peer of this user: no copy (pairing is the operator's \
                             decision)"
                        .into(),
                });
                continue;
            };
            let route = self.exact_route(&ready, &a).await?;
            recipients.push(Recipient {
                to: a,
                name: member,
                route,
            });
        }
        self.fan_out(&ready, &name, thread, recipients, skipped, fields)
            .await
    }

    /// Sends one copy per recipient, all under one tag, and words what became of each.
    async fn fan_out(
        &self,
        ready: &Ready,
        group: &str,
        thread: MsgId,
        recipients: Vec<Recipient>,
        skipped: Vec<Skipped>,
        fields: Fields,
    ) -> Result<Answer, ToolError> {
        let skipped_text = || {
            skipped
                .iter()
                .map(|s| format!("\n  {}: {}", s.member, s.reason))
                .collect::<String>()
        };
        if recipients.is_empty() {
            return Err(ToolError(format!(
                "nothing sent to group {group:?}: no member session to send to{}",
                skipped_text()
            )));
        }
        if recipients.len() > MAX_GROUP_RECIPIENTS {
            return Err(ToolError(format!(
                "nothing sent: {} recipient sessions; a group message goes to at most \
                 {MAX_GROUP_RECIPIENTS}",
                recipients.len()
            )));
        }
        let tag = GroupTag {
            name: group.to_owned(),
            thread,
            members: recipients.iter().map(|r| r.to.clone()).collect(),
        };
        // Every copy is handed to the node before any outcome is awaited: the node
        // tries them all at once, so a sleeping member's live attempt delays no one.
        let mut pending = Vec::with_capacity(recipients.len());
        for r in &recipients {
            let msg = outgoing(&r.to, &fields, Some(tag.clone()));
            pending.push(ready.handle.submit(msg).await);
        }
        let status = if pending.iter().any(Result::is_ok) {
            Some(self.ctx.status_in_flight().await)
        } else {
            None
        };
        let mut copies: Vec<(Recipient, Result<Sent, ToolError>)> = Vec::new();
        for (r, submitted) in recipients.into_iter().zip(pending) {
            let outcome = match submitted {
                Ok(outcome) => outcome.await,
                Err(e) => Err(e),
            };
            let sent = self.finish_copy(&r, outcome, &fields, Some(&tag));
            copies.push((r, sent));
        }
        let ok = copies.iter().filter(|(_, s)| s.is_ok()).count();
        if ok == 0 {
            let why: String = copies
                .iter()
                .map(|(r, s)| {
                    let e = s.as_ref().err().map(|e| e.0.as_str()).unwrap_or_default();
                    format!("\n  {}/{}: {e}", r.name, r.to.session)
                })
                .collect();
            return Err(ToolError(format!(
                "nothing sent to group {group:?}: every copy failed{why}{}",
                skipped_text()
            )));
        }
        let delivered = copies
            .iter()
            .filter(|(_, s)| s.as_ref().is_ok_and(|s| s.delivered))
            .count();
        let outcome = if ok < copies.len() || !skipped.is_empty() {
            "partial"
        } else if delivered == copies.len() {
            "delivered"
        } else {
            "queued"
        };
        let mut text = format!(
            "group {group:?}, thread {thread}: {ok} of {} cop{} sent ({delivered} delivered, {} \
             queued)",
            copies.len(),
            if copies.len() == 1 { "y" } else { "ies" },
            ok - delivered
        );
        let mut items = Vec::new();
        for (r, sent) in &copies {
            let warning = gone_warning(r);
            let line = match sent {
                Ok(s) if s.delivered => {
                    format!("delivered ({}); msg_id {}", r.route.presence, s.msg_id)
                }
                Ok(s) => format!(
                    "queued ({}): it did not answer now; kept in this machine's outbox and sent \
                     to its mailbox, delivered when the session is back; msg_id {}",
                    r.route.presence, s.msg_id
                ),
                Err(e) => format!("not sent: {}", e.0),
            };
            text.push_str(&format!("\n  {} session {}: {line}", r.name, r.to.session));
            if let Some(w) = &warning {
                text.push_str(&format!("\n    warning: {w}"));
            }
            items.push(json!({
                "to": r.name,
                "identity_key": r.to.key.to_hex(),
                "session_id": r.to.session.as_str(),
                "status": match sent { Ok(s) => s.status(), Err(_) => "failed" },
                "msg_id": sent.as_ref().ok().map(|s| s.msg_id.to_string()),
                "presence": r.route.presence.to_string(),
                "route": r.route.reason.to_string(),
                "warning": warning,
                "held_by": sent.as_ref().ok().and_then(|s| s.held).map(HeldBy::from),
                "error": sent.as_ref().err().map(|e| e.0.clone()),
            }));
        }
        if !skipped.is_empty() {
            text.push_str(&format!("\nskipped:{}", skipped_text()));
        }
        text.push_str(&format!(
            "\nmessage_status({thread}) shows where every copy stands; a recipient sees the \
             group, the thread and every recipient, and may reply to the sender or to all"
        ));
        let skipped_json: Vec<Value> = skipped
            .iter()
            .map(|s| {
                json!({
                    "member": s.member,
                    "identity_key": s.key.to_hex(),
                    "reason": s.reason,
                })
            })
            .collect();
        Ok(Answer {
            text,
            structured: json!({
                "status": outcome,
                "group": group,
                "thread": thread.to_string(),
                "to": format!("{GROUP_PREFIX}{group}"),
                "recipients": items,
                "skipped": skipped_json,
            }),
            status,
        })
    }
}

/// The copies this session sent in `thread`, as `message_status` shows them.
pub(crate) fn thread_status(
    entries: &[crate::sent_log::SentEntry],
    names: &render::Names<'_>,
    thread: &str,
) -> (String, Value) {
    let group = entries.iter().find_map(|e| e.group.clone());
    let mut text = format!(
        "group {:?}, thread {thread}: {} cop{} sent by this session",
        group.as_deref().unwrap_or(""),
        entries.len(),
        if entries.len() == 1 { "y" } else { "ies" }
    );
    let mut items = Vec::new();
    for e in entries {
        let name = names.of_hex(&e.to_key);
        text.push_str(&format!(
            "\n  {} session {} (msg_id {}): {}",
            name.as_deref().unwrap_or(&e.to_key),
            e.to_session,
            e.msg_id,
            super::messaging::state_text(e)
        ));
        items.push(super::messaging::sent_json(e, name.as_deref()));
    }
    (
        text,
        json!({ "thread": thread, "group": group, "copies": items }),
    )
}

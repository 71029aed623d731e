//! What `send_message` does: resolving the target and routing to one of its sessions
//! (with the sticky and remembered hints) through [`crate::sender`], as
//! `interlink-p2p send` does, then sending and the result's wording. A group target
//! (`group:<name>`) and a reply to every recipient of a group message (`reply_all`)
//! fan out over the same path, one copy per session ([`super::group_send`]).

use std::time::Duration;

use interlink_core::{
    IdentityKey, MsgId,
    limits::MAX_BODY_BYTES,
    presence::Presence,
    routing::{Route, RouteError, RouteRequest},
    trust::PeerPolicy,
    wire::{EnvelopeKind, GroupTag, RefusalCode, SessionAddr, TaskStatus},
};
use interlink_net::{OutgoingMessage, SendError, SendOutcome};
use serde_json::json;

use crate::{
    context::{Status, ToolError},
    groups::GROUP_PREFIX,
    policy, sender,
    sent_log::{HeldBy, SentEntry, State},
    server::Server,
    tools::{group_send::Replied, messaging::SendMessageArgs},
};

/// How long `send_message` waits for a target with no session on the roster yet (the
/// node may have just joined).
pub(crate) const ROUTE_WAIT: Duration = Duration::from_secs(3);

/// What every copy of one `send_message` says, checked once.
#[derive(Clone, Debug)]
pub(crate) struct Fields {
    pub(crate) text: String,
    pub(crate) task_id: Option<String>,
    /// Its task status.
    pub(crate) status: Option<TaskStatus>,
    /// The message it answers.
    pub(crate) in_reply_to: Option<MsgId>,
}

impl Fields {
    fn check(args: &SendMessageArgs) -> Result<Self, ToolError> {
        if args.text.trim().is_empty() {
            return Err(ToolError("text is empty".into()));
        }
        if args.text.len() > MAX_BODY_BYTES {
            return Err(ToolError(format!(
                "text is {} bytes; a message may be at most {MAX_BODY_BYTES} bytes (64 KiB): \
                 shorten it or split it into several messages",
                args.text.len()
            )));
        }
        let in_reply_to = args
            .in_reply_to
            .as_deref()
            .filter(|t| !t.trim().is_empty())
            .map(|t| {
                t.parse::<MsgId>()
                    .map_err(|e| ToolError(format!("in_reply_to {t:?}: {e}")))
            })
            .transpose()?;
        Ok(Self {
            text: args.text.clone(),
            task_id: args.task_id.clone().filter(|t| !t.is_empty()),
            status: args.status.map(Into::into),
            in_reply_to,
        })
    }

    /// The task status as the sent log spells it.
    fn status_text(&self) -> Option<String> {
        self.status
            .and_then(|s| serde_json::to_value(s).ok())
            .and_then(|v| v.as_str().map(str::to_owned))
    }
}

/// One session a copy goes to, as routed.
#[derive(Clone, Debug)]
pub(crate) struct Recipient {
    /// The session.
    pub(crate) to: SessionAddr,
    /// How to call its identity (petname, `self`, fingerprint).
    pub(crate) name: String,
    /// How it was chosen.
    pub(crate) route: Route,
}

/// A copy that went out: delivered, or queued (and where it is held).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sent {
    pub(crate) msg_id: MsgId,
    /// The recipient's node receipted it (else it is queued).
    pub(crate) delivered: bool,
    /// Where a queued copy is held.
    pub(crate) held: Option<interlink_net::HeldBy>,
}

impl Sent {
    pub(crate) fn status(&self) -> &'static str {
        if self.delivered {
            "delivered"
        } else {
            "queued"
        }
    }
}

/// What a send tells the agent: the text, its structuredContent, and the session's
/// status as read while the message was on its way (`None`: the result reads it).
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) text: String,
    pub(crate) structured: serde_json::Value,
    pub(crate) status: Option<Status>,
}

impl Server {
    /// Sends one message (or one copy per recipient session of a group); the readable
    /// result and its structuredContent.
    pub(crate) async fn send(&self, args: SendMessageArgs) -> Result<Answer, ToolError> {
        let fields = Fields::check(&args)?;
        let replied = match fields.in_reply_to {
            Some(id) => self.replied_to(id)?,
            None => None,
        };
        let to = args.to.as_deref().map(str::trim).filter(|t| !t.is_empty());
        let direct = to.is_some_and(|t| !t.starts_with(GROUP_PREFIX));
        if !direct
            && args
                .session
                .as_deref()
                .is_some_and(|s| !s.trim().is_empty())
        {
            return Err(ToolError(
                "`session` picks a session of the one identity `to` names: a group message \
                 or a reply goes to the sessions it was addressed to (narrow a group's \
                 member with the group tool instead)"
                    .into(),
            ));
        }
        match (to, args.reply_all.unwrap_or(false)) {
            (Some(_), true) => Err(ToolError(
                "reply_all sends to the replied message's sender and every other session it \
                 went to: leave `to` out (or set reply_all false to send to `to` alone)"
                    .into(),
            )),
            (None, true) => self.reply_all(fields, replied).await,
            (Some(to), false) => match to.strip_prefix(GROUP_PREFIX) {
                Some(group) => {
                    let thread = replied.as_ref().and_then(|r| r.thread.clone());
                    self.send_to_group(group.trim(), fields, thread).await
                }
                None => {
                    let thread = replied.and_then(|r| r.thread);
                    self.send_direct(to, args.session.as_deref(), fields, thread)
                        .await
                }
            },
            (None, false) => self.reply_to_sender(fields, replied).await,
        }
    }

    /// A message to one identity, routed to one of its sessions; in a group thread it
    /// carries the thread's tag naming its one recipient.
    async fn send_direct(
        &self,
        to: &str,
        session: Option<&str>,
        fields: Fields,
        thread: Option<(String, MsgId)>,
    ) -> Result<Answer, ToolError> {
        let ctx = &self.ctx;
        let own = ctx.own()?;
        let policy = policy::load(&ctx.home)?;
        let ready = ctx.ready().await?;
        let (target, name) = self.resolve_target(to, &policy, &ready.handle).await?;
        let route = match self.route_for(&ready, target, session, &own).await? {
            Ok(route) => route,
            // The next step names the ids a message could still be queued for.
            Err(RouteError::NoSession) if target != own.key => {
                let seen = sender::seen_sessions(&ctx.home, Some(&ready.handle), target).await;
                return Err(no_session_error(&name, &seen));
            }
            Err(e) => return Err(route_error(e, target, &name, ctx.key())),
        };
        let recipient = Recipient {
            to: SessionAddr {
                key: target,
                session: route.session.clone(),
            },
            name,
            route,
        };
        self.send_single(&ready.handle, recipient, fields, thread)
            .await
    }

    /// Sends `fields` to `recipient` alone and words the result.
    pub(crate) async fn send_single(
        &self,
        handle: &interlink_net::Handle,
        recipient: Recipient,
        fields: Fields,
        thread: Option<(String, MsgId)>,
    ) -> Result<Answer, ToolError> {
        let group = thread.map(|(name, thread)| GroupTag {
            name,
            thread,
            members: vec![recipient.to.clone()],
        });
        let msg = outgoing(&recipient.to, &fields, group.clone());
        let (outcome, status) = match handle.submit(msg).await {
            Ok(outcome) => {
                let status = self.ctx.status_in_flight().await;
                (outcome.await, Some(status))
            }
            Err(e) => (Err(e), None),
        };
        let sent = self.finish_copy(&recipient, outcome, &fields, group.as_ref())?;
        let Recipient { name, route, .. } = &recipient;
        let msg_id = sent.msg_id;
        let text = if sent.delivered {
            format!(
                "delivered to {name}, session {} ({}); msg_id {msg_id}",
                route.session, route.presence
            )
        } else {
            format!(
                "queued for {name}, session {} ({}): it did not answer now; the message is kept \
                 in this machine's outbox and sent to its mailbox, and is delivered when the \
                 session is back; msg_id {msg_id}",
                route.session, route.presence
            )
        };
        let warning = gone_warning(&recipient);
        let mut text = match &warning {
            Some(w) => format!("{text}\nwarning: {w}"),
            None => text,
        };
        if let Some(g) = &group {
            text.push_str(&format!(
                "\nin the thread {} of group {:?} (a reply to one of its messages; reply_all \
                 reaches every recipient)",
                g.thread, g.name
            ));
        }
        Ok(Answer {
            text,
            structured: json!({
                "status": sent.status(),
                "msg_id": msg_id.to_string(),
                "to": name,
                "identity_key": recipient.to.key.to_hex(),
                "session_id": route.session.as_str(),
                "presence": route.presence.to_string(),
                "route": route.reason.to_string(),
                "warning": warning,
                "held_by": sent.held.map(HeldBy::from),
                "group": group.as_ref().map(|g| g.name.clone()),
                "thread": group.as_ref().map(|g| g.thread.to_string()),
            }),
            status,
        })
    }

    /// Routes to a session of `target` as a direct message would be ([`ROUTE_WAIT`]
    /// for a node that has just joined), with this session's hints for it.
    pub(crate) async fn route_for(
        &self,
        ready: &crate::context::Ready,
        target: IdentityKey,
        session: Option<&str>,
        own: &SessionAddr,
    ) -> Result<Result<Route, RouteError>, ToolError> {
        // Make sure the roster has had a chance to see the target: a node that just
        // started may not have heard of it yet. One that has been up for longer has, so a
        // target that is not on it (a closed session, addressed by its id) is not waited for.
        let wait = sender::Wait {
            until: tokio::time::Instant::now() + ROUTE_WAIT.saturating_sub(ready.since.elapsed()),
            settle: Duration::ZERO,
        };
        let hints = self.ctx.shared().routes.get(&target);
        let req = RouteRequest {
            target,
            session,
            own,
            sticky: hints.sticky.as_ref(),
            remembered: hints.remembered.as_ref(),
        };
        match sender::route_when_seen(&ready.handle, &req, wait).await {
            Ok(route) => Ok(Ok(route)),
            Err(sender::RouteWaitError::Route(e)) => Ok(Err(e)),
            Err(e) => Err(ToolError(e.to_string())),
        }
    }

    /// Routes to exactly `addr`: the session as the roster shows it, or — not on the
    /// roster — addressed literally (presence gone), never a session whose id merely
    /// starts with it. For addresses that came from a message (a reply address, a group
    /// tag) or a group's narrowed session, which are full ids. A node that has just
    /// joined waits up to [`ROUTE_WAIT`] for the session to show.
    pub(crate) async fn exact_route(
        &self,
        ready: &crate::context::Ready,
        addr: &SessionAddr,
    ) -> Result<Route, ToolError> {
        let until = tokio::time::Instant::now() + ROUTE_WAIT.saturating_sub(ready.since.elapsed());
        Ok(crate::group_route::exact_route(&ready.handle, addr, until).await?)
    }

    /// What became of one copy: records it in the sent log (with its group and thread)
    /// and the routing hints, or says why it did not go.
    pub(crate) fn finish_copy(
        &self,
        recipient: &Recipient,
        outcome: Result<SendOutcome, SendError>,
        fields: &Fields,
        group: Option<&GroupTag>,
    ) -> Result<Sent, ToolError> {
        let ctx = &self.ctx;
        let Recipient { to, name, route } = recipient;
        let outcome = outcome.map_err(|e| send_error(e, name, route, ctx.key()))?;
        ctx.shared().routes.outbound(to.key, route.session.clone());
        let sent = match outcome {
            SendOutcome::Delivered(sent) => Sent {
                msg_id: sent.msg_id,
                delivered: true,
                held: None,
            },
            SendOutcome::Queued { msg_id, held_by } => Sent {
                msg_id,
                delivered: false,
                held: Some(held_by),
            },
        };
        let now = ctx.clock.now_ms();
        let mut entry = SentEntry {
            msg_id: sent.msg_id.to_string(),
            to_key: to.key.to_hex(),
            to_session: route.session.to_string(),
            state: if sent.delivered {
                State::Delivered
            } else {
                State::Queued
            },
            task_id: fields.task_id.clone(),
            status: fields.status_text(),
            in_reply_to: fields.in_reply_to.map(|m| m.to_string()),
            text: String::new(),
            truncated: false,
            sent_at: now,
            delivered_at: sent.delivered.then_some(now),
            read_at: None,
            not_kept: None,
            held_by: sent.held.map(Into::into),
            group: group.map(|g| g.name.clone()),
            thread: group.map(|g| g.thread.to_string()),
        };
        entry.set_text(&fields.text);
        ctx.shared().sent.record(entry);
        Ok(sent)
    }

    /// The identity `to` names among the peers (or `self`), and how to call it.
    pub(crate) async fn resolve_target(
        &self,
        to: &str,
        policy: &PeerPolicy,
        handle: &interlink_net::Handle,
    ) -> Result<(IdentityKey, String), ToolError> {
        let ctx = &self.ctx;
        match sender::resolve(to, policy, ctx.key(), handle).await {
            Ok(t) => Ok((t.key, t.name)),
            Err(sender::TargetError::NotAPeer {
                stranger: Some(key),
                ..
            }) => Err(ToolError(format!(
                "{:?} matches {} on the overlay, which is not a peer. Pairing is your \
                 operator's decision, not yours: if they want it, they run \
                 `interlink-p2p peer add NAME {}` (or tell you to call add_peer), and the \
                 other side adds this user's key {} the same way.",
                to.trim(),
                key.fingerprint(),
                key.to_hex(),
                ctx.key().to_hex()
            ))),
            Err(sender::TargetError::NotAPeer { reason, .. }) => Err(ToolError(format!(
                "{reason}. Known peers: {}. To pair with someone new, the operator runs \
                 `interlink-p2p invite` and sends them the code, which they pass to \
                 `interlink-p2p join`; or `interlink-p2p peer add NAME KEY` on both sides \
                 (KEY from `interlink-p2p id` or whoami there). A group is named \
                 group:<name> (the group tool lists them).",
                if policy.is_empty() {
                    "none".to_owned()
                } else {
                    policy.iter().map(|(n, _)| n).collect::<Vec<_>>().join(", ")
                }
            ))),
            Err(e) => Err(ToolError(e.to_string())),
        }
    }

    /// A reply to the sender of the message `in_reply_to` names, at the session it
    /// asked replies to go to; in its group thread if it had one.
    async fn reply_to_sender(
        &self,
        fields: Fields,
        replied: Option<Replied>,
    ) -> Result<Answer, ToolError> {
        let ctx = &self.ctx;
        let Some(id) = fields.in_reply_to else {
            return Err(ToolError(
                "`to` is empty: give a petname, a fingerprint, `self` or group:<name> (or \
                 in_reply_to alone to answer a received message's sender)"
                    .into(),
            ));
        };
        let Some(from) = replied.as_ref().and_then(|r| r.from.clone()) else {
            return Err(ToolError(format!(
                "in_reply_to {id} is not a message in this session's inbox, so it names no \
                 sender to answer: give `to`"
            )));
        };
        let own = ctx.own()?;
        let policy = policy::load(&ctx.home)?;
        let name = match crate::render::petname(&policy, &own.key, &from.key) {
            Some(n) => n,
            None => {
                return Err(ToolError(format!(
                    "the sender of {id}, {}, is not a peer any more (removed from peers.json)",
                    from.key.fingerprint()
                )));
            }
        };
        if from == own {
            return Err(ToolError(format!(
                "{id} came from this session itself; give `to`"
            )));
        }
        let ready = ctx.ready().await?;
        let route = self.exact_route(&ready, &from).await?;
        let recipient = Recipient {
            to: SessionAddr {
                key: from.key,
                session: route.session.clone(),
            },
            name,
            route,
        };
        let thread = replied.and_then(|r| r.thread);
        self.send_single(&ready.handle, recipient, fields, thread)
            .await
    }
}

/// The envelope request of one copy.
pub(crate) fn outgoing(
    to: &SessionAddr,
    fields: &Fields,
    group: Option<GroupTag>,
) -> OutgoingMessage {
    OutgoingMessage {
        to: to.clone(),
        kind: EnvelopeKind::Message,
        text: Some(fields.text.clone()),
        task_id: fields.task_id.clone(),
        status: fields.status,
        in_reply_to: fields.in_reply_to,
        also_about: Vec::new(),
        name: None,
        group,
        invite: None,
    }
}

/// A session not on the roster is addressed literally: say so, the id may be a typo.
pub(crate) fn gone_warning(r: &Recipient) -> Option<String> {
    (r.route.presence == Presence::Gone).then(|| {
        let mut warning = format!(
            "session {} of {} is not on the roster (closed, away too long, or never \
             seen here); the message waits for a session by exactly that id and reaches it \
             if it comes back within 7 days",
            r.route.session, r.name
        );
        if let Some(note) = r.route.others_note() {
            warning.push_str(&format!("; {note}"));
        }
        warning
    })
}

/// Why no session of `target` (called `name`) could be chosen, in words.
pub(crate) fn route_error(
    e: RouteError,
    target: IdentityKey,
    name: &str,
    own: IdentityKey,
) -> ToolError {
    match e {
        RouteError::NoSession if target == own => ToolError(
            "this user has no other session on the overlay (to = \"self\" reaches this \
             user's other sessions)"
                .into(),
        ),
        RouteError::NoSession => no_session_error(name, &[]),
        other => ToolError(format!("cannot route to {name}: {other}")),
    }
}

/// `name` has no session to route to: the next step is a session id of theirs, and
/// `seen` ([`sender::seen_sessions`]) the ids known here.
pub(crate) fn no_session_error(name: &str, seen: &[interlink_core::SessionId]) -> ToolError {
    ToolError(format!(
        "{name} has no session on the overlay and none was written to before; see \
         discover, or pass `session` with the id of a session of theirs that was on the \
         overlay before: the message waits in its mailbox until it comes back; {}",
        sender::seen_sentence(seen)
    ))
}

/// Why a copy to `name` did not go, in words.
fn send_error(e: SendError, name: &str, route: &Route, own: IdentityKey) -> ToolError {
    match e {
        SendError::NotOnRoster(_) => ToolError(format!(
            "session {} of {name} cannot be written to yet ({}): no session of {name} has \
             been seen by this user's sessions, so its sealing key is unknown — see \
             discover once one of its sessions is on the overlay",
            route.session, route.reason
        )),
        SendError::Refused(reason) if reason.code == RefusalCode::NotPaired => {
            ToolError(format!(
                "{name} refused the message: {} (the other side has not added this \
                 user's key yet: its operator runs `interlink-p2p peer add NAME {}`)",
                // The detail is the peer's words: one escaped line.
                crate::render::framing::inline(&reason.detail),
                own.to_hex()
            ))
        }
        SendError::Refused(reason) => ToolError(format!(
            "{name} refused the message: {}",
            crate::render::framing::inline(&reason.detail)
        )),
        other => ToolError(format!("message to {name} not sent: {other}")),
    }
}

#[cfg(test)]
#[path = "send_tests.rs"]
mod tests;

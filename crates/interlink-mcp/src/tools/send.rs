//! What `send_message` does: resolving the target and routing to one of its sessions
//! (with the sticky and remembered hints) through [`crate::sender`], as
//! `interlink-p2p send` does, then sending and the result's wording.

use std::time::Duration;

use interlink_core::{
    IdentityKey, MsgId,
    limits::MAX_BODY_BYTES,
    presence::Presence,
    routing::{RouteError, RouteRequest},
    trust::PeerPolicy,
    wire::{EnvelopeKind, RefusalCode, SessionAddr, TaskStatus},
};
use interlink_net::{OutgoingMessage, SendError, SendOutcome};
use serde_json::json;

use crate::{
    context::ToolError,
    policy, sender,
    sent_log::{HeldBy, SentEntry, State},
    server::Server,
    tools::messaging::SendMessageArgs,
};

/// How long `send_message` waits for a target with no session on the roster yet (the
/// node may have just joined).
const ROUTE_WAIT: Duration = Duration::from_secs(3);

impl Server {
    /// Sends one message; the readable result and its structuredContent.
    pub(crate) async fn send(
        &self,
        args: SendMessageArgs,
    ) -> Result<(String, serde_json::Value), ToolError> {
        let ctx = &self.ctx;
        let own = ctx.own()?;
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
        let policy = policy::load(&ctx.home)?;
        let ready = ctx.ready().await?;
        let (target, name) = self
            .resolve_target(&args.to, &policy, &ready.handle)
            .await?;
        // Make sure the roster has had a chance to see the target: a node that just
        // started may not have heard of it yet. One that has been up for longer has, so a
        // target that is not on it (a closed session, addressed by its id) is not waited for.
        let wait = sender::Wait {
            until: tokio::time::Instant::now() + ROUTE_WAIT.saturating_sub(ready.since.elapsed()),
            settle: Duration::ZERO,
        };
        let hints = ctx.shared().routes.get(&target);
        let req = RouteRequest {
            target,
            session: args.session.as_deref(),
            own: &own,
            sticky: hints.sticky.as_ref(),
            remembered: hints.remembered.as_ref(),
        };
        let route = match sender::route_when_seen(&ready.handle, &req, wait).await {
            Ok(route) => Ok(route),
            Err(sender::RouteWaitError::Route(e)) => Err(e),
            Err(e) => return Err(ToolError(e.to_string())),
        };
        let route = route.map_err(|e| match e {
            RouteError::NoSession if target == ctx.key() => ToolError(
                "this user has no other session on the overlay (to = \"self\" reaches this \
                 user's other sessions)"
                    .into(),
            ),
            RouteError::NoSession => ToolError(format!(
                "{name} has no session on the overlay and none was written to before; see \
                 discover"
            )),
            other => ToolError(format!("cannot route to {name}: {other}")),
        })?;
        let to = SessionAddr {
            key: target,
            session: route.session.clone(),
        };
        let task_id = args.task_id.filter(|t| !t.is_empty());
        let task_status = args
            .status
            .and_then(|s| serde_json::to_value(TaskStatus::from(s)).ok())
            .and_then(|v| v.as_str().map(str::to_owned));
        let text = args.text;
        let msg = OutgoingMessage {
            to: to.clone(),
            kind: EnvelopeKind::Message,
            text: Some(text.clone()),
            task_id: task_id.clone(),
            status: args.status.map(Into::into),
            in_reply_to,
            name: None,
            group: None,
        };
        let outcome = ready.handle.send(msg).await.map_err(|e| match e {
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
                    ctx.key().to_hex()
                ))
            }
            SendError::Refused(reason) => ToolError(format!(
                "{name} refused the message: {}",
                crate::render::framing::inline(&reason.detail)
            )),
            other => ToolError(format!("message to {name} not sent: {other}")),
        })?;
        ctx.shared().routes.outbound(target, route.session.clone());
        let mut held = None;
        let (status, msg_id) = match outcome {
            SendOutcome::Delivered(sent) => ("delivered", sent.msg_id),
            SendOutcome::Queued { msg_id, held_by } => {
                held = Some(held_by);
                ("queued", msg_id)
            }
        };
        let now = interlink_net::now_ms();
        let mut entry = SentEntry {
            msg_id: msg_id.to_string(),
            to_key: target.to_hex(),
            to_session: route.session.to_string(),
            state: if status == "delivered" {
                State::Delivered
            } else {
                State::Queued
            },
            task_id: task_id.clone(),
            status: task_status,
            in_reply_to: in_reply_to.map(|m| m.to_string()),
            text: String::new(),
            truncated: false,
            sent_at: now,
            delivered_at: (status == "delivered").then_some(now),
            read_at: None,
            not_kept: None,
            held_by: held.map(Into::into),
        };
        entry.set_text(&text);
        ctx.shared().sent.record(entry);
        let text = match status {
            "delivered" => format!(
                "delivered to {name}, session {} ({}); msg_id {msg_id}",
                route.session, route.presence
            ),
            _ => format!(
                "queued for {name}, session {} ({}): it did not answer now; the message is kept \
                 in this machine's outbox and sent to its mailbox, and is delivered when the \
                 session is back; msg_id {msg_id}",
                route.session, route.presence
            ),
        };
        // A session not on the roster is addressed literally: say so, the id may be a typo.
        let warning = (route.presence == Presence::Gone).then(|| {
            format!(
                "session {} of {name} is not on the roster (closed, away too long, or never \
                 seen here); the message waits for a session by exactly that id and reaches it \
                 if it comes back within 7 days",
                route.session
            )
        });
        let text = match &warning {
            Some(w) => format!("{text}\nwarning: {w}"),
            None => text,
        };
        Ok((
            text,
            json!({
                "status": status,
                "msg_id": msg_id.to_string(),
                "to": name,
                "identity_key": target.to_hex(),
                "session_id": route.session.as_str(),
                "presence": route.presence.to_string(),
                "route": route.reason.to_string(),
                "warning": warning,
                "held_by": held.map(HeldBy::from),
            }),
        ))
    }

    /// The identity `to` names among the peers (or `self`), and how to call it.
    async fn resolve_target(
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
                 `interlink-p2p peer add NAME KEY` on both sides (KEY from \
                 `interlink-p2p id` or whoami there).",
                if policy.is_empty() {
                    "none".to_owned()
                } else {
                    policy.iter().map(|(n, _)| n).collect::<Vec<_>>().join(", ")
                }
            ))),
            Err(e) => Err(ToolError(e.to_string())),
        }
    }
}

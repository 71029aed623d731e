//! The engine: one per session node; dispatches inputs to the two sides.

use std::{collections::VecDeque, sync::Arc};

use interlink_core::{Identity, IdentityKey, MsgId, trust::Gate, wire::SessionAddr};

use crate::{
    config::Config,
    inbox::Recipient,
    outbox::Sender,
    routes::Routes,
    types::{Input, OutboxEntry, Output, PutToken},
};

/// What a handler needs besides its own side's state.
pub(crate) struct Ctx<'a> {
    pub(crate) cfg: &'a Config,
    pub(crate) identity: &'a Identity,
    pub(crate) me: &'a SessionAddr,
    pub(crate) routes: &'a mut Routes,
    pub(crate) out: &'a mut VecDeque<Output>,
    pub(crate) now: u64,
    /// The last [`PutToken`] handed out (both sides publish).
    pub(crate) last_put: &'a mut u64,
}

impl Ctx<'_> {
    /// Emits a mailbox publication; returns its token.
    pub(crate) fn put(&mut self, mailbox: interlink_core::mailbox::Mailbox) -> PutToken {
        *self.last_put += 1;
        let put = PutToken(*self.last_put);
        self.out.push_back(Output::DhtPut { put, mailbox });
        put
    }
}

/// How full every bounded structure is (for tests and diagnostics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Sizes {
    /// Outbox entries in all.
    pub outbox: usize,
    /// Most outbox entries for one recipient session.
    pub outbox_per_recipient: usize,
    /// Live requests in flight.
    pub requests_in_flight: usize,
    /// Inbox index entries.
    pub inbox_index: usize,
    /// Inbound requests waiting for a write.
    pub inbound_waiting: usize,
    /// Envelopes queued for the next append.
    pub append_queue: usize,
    /// Collected-mail receipts waiting.
    pub collected_receipts: usize,
    /// Routes held.
    pub routes: usize,
    /// Publications followed until holders answer (a session without an outbox).
    pub puts_followed: usize,
    /// Outputs not drained yet.
    pub outputs: usize,
}

/// The IO-free delivery engine of one session. See the crate docs.
#[derive(Debug)]
pub struct Engine {
    cfg: Config,
    identity: Arc<Identity>,
    me: SessionAddr,
    routes: Routes,
    out: VecDeque<Output>,
    sender: Sender,
    recipient: Recipient,
    timer: Option<u64>,
    last_put: u64,
}

impl Engine {
    /// A fresh session with nothing durable yet.
    pub fn new(
        config: Config,
        identity: impl Into<Arc<Identity>>,
        me: SessionAddr,
        now: u64,
    ) -> Self {
        Self::restore(config, identity, me, Vec::new(), std::iter::empty(), now)
    }

    /// A session restored from its durable state: the outbox entries and the inbox
    /// index (sender, id, stored at). Everything else starts empty. Emits the start-up
    /// outputs: a mailbox drain, a mailbox copy for every recipient with pending mail,
    /// and the timer.
    pub fn restore(
        config: Config,
        identity: impl Into<Arc<Identity>>,
        me: SessionAddr,
        outbox: Vec<OutboxEntry>,
        inbox_index: impl IntoIterator<Item = (IdentityKey, MsgId, u64)>,
        now: u64,
    ) -> Self {
        let gate = Gate::new(config.policy.clone());
        let mut e = Engine {
            sender: Sender::restore(outbox, now),
            recipient: Recipient::restore(gate, inbox_index, now),
            cfg: config,
            identity: identity.into(),
            me,
            routes: Routes::default(),
            out: VecDeque::new(),
            timer: None,
            last_put: 0,
        };
        let (mut ctx, sender, recipient) = e.split(now);
        recipient.drain(&mut ctx);
        sender.start(&mut ctx);
        e.arm(now);
        e
    }

    /// This session's address.
    pub fn me(&self) -> &SessionAddr {
        &self.me
    }

    /// The trust gate (its policy, held knocks, pair requests sent).
    pub fn gate(&self) -> &Gate {
        self.recipient.gate()
    }

    /// The trust gate, to note a pair request this session sent.
    pub fn gate_mut(&mut self) -> &mut Gate {
        self.recipient.gate_mut()
    }

    /// The timestamp for the next envelope: strictly increasing, and after every
    /// timestamp in the outbox even if the clock is behind after a restart.
    pub fn next_ts(&mut self, now: u64) -> u64 {
        self.sender.next_ts(now)
    }

    /// Handles one input at `now` (ms since the epoch); outputs queue for
    /// [`Engine::poll_output`].
    pub fn handle(&mut self, input: Input, now: u64) {
        if matches!(input, Input::Timer) {
            // The shell's timer is spent; arm again whatever is due next.
            self.timer = None;
        }
        let (mut ctx, sender, recipient) = self.split(now);
        match input {
            Input::Send {
                caller,
                envelope,
                route,
            } => sender.send(&mut ctx, caller, envelope, route),
            Input::OutboxStored { key, result } => sender.outbox_stored(&mut ctx, key, result),
            Input::DeliverResponse { req, result } => sender.response(&mut ctx, req, result),
            Input::ReceiptCollected { receipt } => sender.receipt_collected(&mut ctx, &receipt),
            Input::PeerAlive { peer } => {
                ctx.routes.alive(peer);
                sender.alive(&mut ctx, peer);
                recipient.alive(&mut ctx, peer);
            }
            Input::Connected { peer, connected } => {
                ctx.routes.set_connected(peer, connected);
                if connected {
                    ctx.routes.alive(peer);
                    sender.alive(&mut ctx, peer);
                    recipient.alive(&mut ctx, peer);
                } else {
                    sender.disconnected(&mut ctx, peer);
                }
            }
            Input::Route { session, peer } => {
                ctx.routes.set(session, peer);
                if let Some(peer) = peer {
                    ctx.routes.alive(peer);
                    sender.alive(&mut ctx, peer);
                    recipient.alive(&mut ctx, peer);
                }
            }
            Input::DeliverRequest {
                from,
                req,
                envelopes,
            } => recipient.deliver_request(&mut ctx, from, req, envelopes),
            Input::MailboxFetched { copy } => recipient.mailbox_fetched(&mut ctx, &copy),
            Input::InboxStored {
                token,
                result,
                refused,
            } => recipient.inbox_stored(&mut ctx, token, result, &refused),
            Input::Spare => recipient.presign(&ctx),
            Input::ReceiptSent { id, result } => recipient.receipt_sent(id, result),
            Input::PutAnswered { put, kept } => sender.put_answered(&mut ctx, put, &kept),
            Input::PutEnded { put } => sender.put_ended(&mut ctx, put),
            Input::SetPolicy(policy) => recipient.gate_mut().set_policy(policy),
            Input::Wake => {
                recipient.drain(&mut ctx);
                sender.republish(&mut ctx);
            }
            Input::Timer => {
                sender.timer(&mut ctx);
                recipient.timer(&mut ctx);
            }
        }
        self.arm(now);
    }

    /// The next output, if any.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// How full every bounded structure is.
    pub fn sizes(&self) -> Sizes {
        let (outbox, outbox_per_recipient, requests_in_flight, puts_followed) = self.sender.sizes();
        let (inbox_index, inbound_waiting, append_queue, collected_receipts) =
            self.recipient.sizes();
        Sizes {
            outbox,
            outbox_per_recipient,
            requests_in_flight,
            inbox_index,
            inbound_waiting,
            append_queue,
            collected_receipts,
            routes: self.routes.len(),
            puts_followed,
            outputs: self.out.len(),
        }
    }

    fn split(&mut self, now: u64) -> (Ctx<'_>, &mut Sender, &mut Recipient) {
        (
            Ctx {
                cfg: &self.cfg,
                identity: &self.identity,
                me: &self.me,
                routes: &mut self.routes,
                out: &mut self.out,
                now,
                last_put: &mut self.last_put,
            },
            &mut self.sender,
            &mut self.recipient,
        )
    }

    /// Emits a timer output when the earliest deadline moved.
    fn arm(&mut self, now: u64) {
        let next = [
            self.sender.deadline(self.cfg.retention_ms()),
            self.recipient.deadline(),
        ]
        .into_iter()
        .flatten()
        .min();
        if let Some(at) = next
            && self.timer != Some(at)
        {
            self.timer = Some(at);
            self.out.push_back(Output::SetTimer { at: at.max(now) });
        }
    }
}

//! What the engines' outputs do in the simulated world: storage, network, DHT.

use interlink_core::{MsgId, mailbox::Mailbox};

use super::{
    schedule::{below, chance},
    world::{Ev, Line, Net, StoreOp, T0, World},
};
use crate::{
    Engine,
    config::{
        APPEND_QUEUE, COLLECTED_RECEIPTS_PENDING, INBOUND_WAITING, INBOX_INDEX_CAPACITY,
        OUTBOX_CAPACITY, OUTBOX_PER_RECIPIENT, PUTS_FOLLOWED, REQUESTS_IN_FLIGHT, ROUTES_CAPACITY,
    },
    types::{Event, InboundId, Input, Outcome, Output, PeerRef, PutToken, SendFailure, StoreError},
};

impl World {
    pub(super) fn store(&mut self, node: usize, op: StoreOp) {
        let n = &self.nodes[node];
        let full = n.disk_full > 0;
        let short = chance(&mut self.rng, self.sched.short_write_pct[node]);
        let result = if full {
            Err(StoreError::DiskFull)
        } else if short {
            Err(StoreError::ShortWrite)
        } else {
            Ok(())
        };
        let input = match &op {
            StoreOp::Outbox(e) => Input::OutboxStored {
                key: e.key(),
                result: result.clone(),
            },
            StoreOp::Inbox(token, _) => Input::InboxStored {
                token: *token,
                result: result.clone(),
                refused: Vec::new(),
            },
        };
        // A failed write is rolled back: nothing of it stays.
        if result.is_ok() {
            self.apply(node, op);
        }
        self.feed(node, input);
    }

    pub(super) fn apply(&mut self, node: usize, op: StoreOp) {
        let n = &mut self.nodes[node];
        match op {
            StoreOp::Outbox(e) => {
                n.outbox.insert(e.key(), *e);
            }
            StoreOp::Inbox(_, entries) => {
                for env in entries {
                    let b = env.body();
                    n.inbox.push(Line {
                        sender: b.sender,
                        sender_session: b.sender_session.clone(),
                        msg_id: b.msg_id,
                        ts: b.ts,
                    });
                }
            }
        }
    }

    pub(super) fn net(&mut self, to: usize, msg: Net) {
        if to >= self.sched.honest {
            return; // the hostile node ignores answers
        }
        let inc = self.nodes[to].inc;
        match msg {
            Net::Request {
                from,
                from_inc,
                req,
                envelopes,
            } => {
                let n = &mut self.nodes[to];
                let id = InboundId(n.next_inbound);
                n.next_inbound += 1;
                n.inbound.insert(id, (from, from_inc, req));
                self.feed(
                    to,
                    Input::DeliverRequest {
                        from: PeerRef(from as u64),
                        req: id,
                        envelopes,
                    },
                );
            }
            Net::Response {
                inc: i,
                req,
                response,
            } if i == inc => {
                for r in response.results.iter().flatten() {
                    self.retryable_refusals += u64::from(!r.is_final());
                    *self.refusals.entry(format!("{r:?}")).or_default() += 1;
                }
                self.feed(
                    to,
                    Input::DeliverResponse {
                        req,
                        result: Ok(response),
                    },
                )
            }
            Net::Receipt { receipt } => self.feed(to, Input::ReceiptCollected { receipt }),
            Net::ReceiptAck { inc: i, id, ok } if i == inc => {
                let result = if ok {
                    Ok(())
                } else {
                    Err(SendFailure::Unreachable)
                };
                self.feed(to, Input::ReceiptSent { id, result });
            }
            Net::Fetched { inc: i, copy } if i == inc => {
                self.feed(to, Input::MailboxFetched { copy });
            }
            Net::Held {
                inc: i,
                put,
                kept,
                holder,
                at,
            } if i == inc => {
                let key = self.nodes[to].addr.key;
                for (sender, id) in &kept {
                    if *sender == key
                        && let Some(&m) = self.index.get(&(key, *id))
                    {
                        self.sent[m].held_at.push((holder, at));
                    }
                }
                self.feed(to, Input::PutAnswered { put, kept });
            }
            Net::PutEnded { inc: i, put } if i == inc => {
                self.feed(to, Input::PutEnded { put });
            }
            _ => {}
        }
    }

    /// Merges `mb` into up to three reachable holders' copies; each other honest holder
    /// answers what of it its merged copy keeps, then the put ends.
    pub(crate) fn dht_put(&mut self, from: usize, put: PutToken, mb: &Mailbox) {
        let inc = self.nodes[from].inc;
        let mut ends = self.now + 1;
        let mut candidates: Vec<usize> = (0..self.sched.nodes())
            .filter(|&h| {
                (h == from || self.link_up(from, h)) && self.nodes[h].paused_until <= self.now
            })
            .collect();
        for _ in 0..3 {
            if candidates.is_empty() {
                break;
            }
            let h = candidates.remove(below(&mut self.rng, candidates.len() as u64) as usize);
            if h >= self.sched.honest {
                continue; // the hostile holder drops what it is given
            }
            let local = self.local(h);
            let cfg = self.cfg.mailbox.clone();
            let copy = self.nodes[h]
                .holder
                .entry(mb.record_key())
                .or_insert_with(|| Mailbox::new(*mb.owner(), mb.session().clone()));
            let _ = copy.merge(mb, local, &cfg);
            if h == from {
                continue; // our own copy: it leaves with us
            }
            let kept = copy.kept_of(mb).into_iter().map(|e| (e.0, e.1)).collect();
            let at = self.now + 2 * self.latency(from, h);
            ends = ends.max(at + 1);
            let msg = Net::Held {
                inc,
                put,
                kept,
                holder: h,
                at: self.now,
            };
            self.push(
                at,
                Ev::Net {
                    from: h,
                    to: from,
                    msg,
                },
            );
        }
        // Known locally (the requests ended): not lost with a link.
        let msg = Net::PutEnded { inc, put };
        self.push(
            ends,
            Ev::Net {
                from,
                to: from,
                msg,
            },
        );
    }

    pub(super) fn pump(&mut self, node: usize) {
        while let Some(out) = self.nodes[node]
            .engine
            .as_mut()
            .and_then(Engine::poll_output)
        {
            self.output(node, out);
        }
        if let Some(e) = &self.nodes[node].engine {
            let s = e.sizes();
            let caps = [
                (s.outbox, OUTBOX_CAPACITY, "outbox"),
                (
                    s.outbox_per_recipient,
                    OUTBOX_PER_RECIPIENT,
                    "outbox per recipient",
                ),
                (
                    s.requests_in_flight,
                    REQUESTS_IN_FLIGHT,
                    "requests in flight",
                ),
                (s.inbox_index, INBOX_INDEX_CAPACITY, "inbox index"),
                (s.inbound_waiting, INBOUND_WAITING, "inbound waiting"),
                (s.append_queue, APPEND_QUEUE, "append queue"),
                (
                    s.collected_receipts,
                    COLLECTED_RECEIPTS_PENDING,
                    "collected receipts",
                ),
                (s.routes, ROUTES_CAPACITY, "routes"),
                (s.puts_followed, PUTS_FOLLOWED, "puts followed"),
            ];
            for (got, cap, what) in caps {
                if got > cap {
                    self.violations
                        .push(format!("node {node}: {what} holds {got}, cap {cap}"));
                }
            }
        }
    }

    fn output(&mut self, node: usize, out: Output) {
        if self.trace {
            eprintln!(
                "{} n{node} -> {}",
                self.now - T0,
                super::trace::brief_out(&out)
            );
        }
        let inc = self.nodes[node].inc;
        let disk = 1 + below(&mut self.rng, 5);
        match out {
            Output::PersistOutbox { entry } if self.sched.is_shell(node) => {
                // Nothing to keep it in (like the net shell without a store).
                self.feed(
                    node,
                    Input::OutboxStored {
                        key: entry.key(),
                        result: Ok(()),
                    },
                );
            }
            Output::PersistOutbox { entry } => self.push(
                self.now + disk,
                Ev::Store {
                    node,
                    inc,
                    op: StoreOp::Outbox(Box::new(entry)),
                },
            ),
            Output::RemoveOutbox { key } => {
                self.nodes[node].outbox.remove(&key);
            }
            Output::SendRequest {
                req,
                peer,
                envelopes,
            } => {
                let to = peer.0 as usize;
                if self.link_up(node, to) {
                    let at = self.now + self.latency(node, to);
                    let msg = Net::Request {
                        from: node,
                        from_inc: inc,
                        req,
                        envelopes,
                    };
                    self.push(
                        at,
                        Ev::Net {
                            from: node,
                            to,
                            msg,
                        },
                    );
                }
            }
            Output::DhtPut { put, mailbox } => self.dht_put(node, put, &mailbox),
            // A shell command collects no mail.
            Output::DhtGet { .. } if self.sched.is_shell(node) => {}
            Output::DhtGet { key } => {
                for h in 0..self.sched.honest {
                    let reachable = h == node || self.link_up(node, h);
                    if !reachable || self.nodes[h].paused_until > self.now {
                        continue;
                    }
                    if let Some(copy) = self.nodes[h].holder.get(&key).cloned() {
                        let at = self.now + 2 * self.latency(node, h);
                        let msg = Net::Fetched { inc, copy };
                        self.push(
                            at,
                            Ev::Net {
                                from: h,
                                to: node,
                                msg,
                            },
                        );
                    }
                }
            }
            Output::AppendInbox { token, .. } if self.sched.is_shell(node) => self.feed(
                node,
                Input::InboxStored {
                    token,
                    result: Err(StoreError::Other("a shell command has no inbox".into())),
                    refused: Vec::new(),
                },
            ),
            Output::AppendInbox { token, entries } => {
                self.push(
                    self.now + disk,
                    Ev::Store {
                        node,
                        inc,
                        op: StoreOp::Inbox(token, entries),
                    },
                );
                // The node's shell signs receipts while its disk writes; most of the
                // time here too, so both ways of answering are checked.
                if chance(&mut self.rng, 75) {
                    self.feed(node, Input::Spare);
                }
            }
            Output::Respond { req, response } => {
                if let Some((from, from_inc, req)) = self.nodes[node].inbound.remove(&req)
                    && self.link_up(node, from)
                {
                    let at = self.now + self.latency(node, from);
                    let msg = Net::Response {
                        inc: from_inc,
                        req,
                        response,
                    };
                    self.push(
                        at,
                        Ev::Net {
                            from: node,
                            to: from,
                            msg,
                        },
                    );
                }
            }
            Output::SendReceipt { id, peer, receipt } => {
                let to = peer.0 as usize;
                let ok = self.link_up(node, to);
                let lat = self.latency(node, to);
                if ok {
                    self.push(
                        self.now + lat,
                        Ev::Net {
                            from: node,
                            to,
                            msg: Net::Receipt { receipt },
                        },
                    );
                }
                let msg = Net::ReceiptAck { inc, id, ok };
                // The outcome is known locally: it is not lost with the link.
                self.push(
                    self.now + 2 * lat,
                    Ev::Net {
                        from: node,
                        to: node,
                        msg,
                    },
                );
            }
            Output::SetTimer { at } => {
                let n = &mut self.nodes[node];
                n.tgen += 1;
                let tgen = n.tgen;
                let global = (at as i64 - n.skew - n.step) as u64;
                self.push(global, Ev::Timer { node, inc, tgen });
            }
            Output::Reply { caller, outcome } => {
                if let Some(m) = self.nodes[node].callers.remove(&caller) {
                    if let Ok(Outcome::Delivered { .. }) = &outcome {
                        self.check_delivered(m);
                    }
                    if let Ok(Outcome::NotKept { .. }) = &outcome {
                        self.sent[m].expired = true;
                    }
                    self.sent[m].reply = Some(outcome);
                }
                if self.sched.is_shell(node) && self.nodes[node].callers.is_empty() {
                    // Every message answered: the command exits.
                    self.push(self.now + 1, Ev::Exit { node, inc });
                }
            }
            Output::Event(ev) => self.event(node, ev),
        }
    }

    fn event(&mut self, node: usize, ev: Event) {
        let key = self.nodes[node].addr.key;
        let msg = |id: &MsgId| self.index.get(&(key, *id)).copied();
        match ev {
            Event::Delivered { msg_id, .. } => {
                if let Some(m) = msg(&msg_id) {
                    self.check_delivered(m);
                }
            }
            Event::Expired { msg_id, .. } => {
                if let Some(m) = msg(&msg_id) {
                    self.sent[m].expired = true;
                }
            }
            Event::Refused { msg_id, .. } => {
                if let Some(m) = msg(&msg_id) {
                    self.sent[m].refused = true;
                }
            }
            _ => {}
        }
    }

    /// `Delivered` may be said only for a message durably in the recipient's inbox.
    fn check_delivered(&mut self, m: usize) {
        let s = &self.sent[m];
        let key = self.nodes[s.from].addr.key;
        let held = self.nodes[s.to]
            .inbox
            .iter()
            .any(|l| l.sender == key && l.msg_id == s.msg_id);
        if !held {
            self.violations.push(format!(
                "message {m} ({} → {}) said delivered but is not in the inbox",
                s.from, s.to
            ));
        }
    }
}

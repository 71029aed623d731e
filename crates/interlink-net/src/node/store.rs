//! The session's disk, off the task that owns the Swarm.
//!
//! One thread owns the inbox (`interlink_store::inbox`) and the outbox (`interlink_store::outbox`) and
//! does what the delivery engine asks of them: outbox puts and removes, inbox appends
//! (opening each sealed body first, so the X25519 and AEAD work is off the network
//! task too), compactions. A fsync takes milliseconds; on the network task it would
//! stall every connection of the node for that long.
//!
//! Requests go through one bounded channel and are done in order; answers come back
//! through another, which the node task reads in its select loop. Outbox operations
//! waiting together are committed in one transaction, and a put whose remove is in the
//! same batch (a message receipted before its write came up) is not written at all. (The
//! engine asks for a write only for a message that cannot go live at once, so on the
//! happy path the outbox is not touched.)

use std::{
    collections::HashSet,
    io,
    thread::{self, JoinHandle},
};

use interlink_core::{
    IdentityKey, MsgId,
    identity::SealingSecret,
    wire::{Body, Envelope, EnvelopeKind, OpenError, Signed},
};
use interlink_delivery::{EntryKey, Refusal, StoreError, StoreToken};
use tokio::sync::mpsc;
use tracing::warn;

use super::sealing::OpenContexts;
use interlink_store::{
    inbox::{Appended, Inbox, InboxEntry, InboxError, InboxGroup},
    outbox::{Outbox, OutboxError},
};

/// Requests waiting for the store thread. The engine bounds what it asks for (its
/// outbox capacity, one inbox append at a time), so this is never reached in
/// practice; a request that does not fit is answered as a failed write.
pub(crate) const STORE_QUEUE: usize = 4096;
/// Answers waiting for the node task.
const DONE_QUEUE: usize = 4096;
/// Most requests taken off the queue for one batch.
const BATCH: usize = 256;

/// What the node asks of the store thread.
#[derive(Debug)]
pub(crate) enum Op {
    /// Commit this outbox entry; answered with [`Done::OutboxStored`].
    Persist(Box<Signed<Envelope>>),
    /// Remove this outbox entry (not answered).
    Remove(MsgId),
    /// Open and append these envelopes to the inbox, all or nothing; answered with
    /// [`Done::InboxStored`].
    Append {
        token: StoreToken,
        entries: Vec<Signed<Envelope>>,
    },
    /// Compact the inbox if it is due (not answered).
    Compact,
}

/// What the store thread did.
#[derive(Debug)]
pub(crate) enum Done {
    OutboxStored {
        key: MsgId,
        result: Result<(), StoreError>,
    },
    InboxStored {
        token: StoreToken,
        result: Result<(), StoreError>,
        /// Entries not written because their body does not open.
        refused: Vec<(EntryKey, Refusal)>,
        /// Entries written now (not duplicates): the agent side's news.
        new: Vec<(MsgId, IdentityKey, EnvelopeKind)>,
    },
}

/// The node's end of the store thread.
#[derive(Debug)]
pub(crate) struct Store {
    ops: Option<mpsc::Sender<Op>>,
    thread: Option<JoinHandle<()>>,
}

impl Store {
    /// Starts the thread with the session's inbox, outbox and sealing secret; its
    /// answers arrive on the returned receiver.
    pub(crate) fn spawn(
        inbox: Inbox,
        outbox: Outbox,
        sealing: SealingSecret,
        clock: crate::Clock,
    ) -> io::Result<(Self, mpsc::Receiver<Done>)> {
        let (ops, rx) = mpsc::channel(STORE_QUEUE);
        let (done_tx, done) = mpsc::channel(DONE_QUEUE);
        let mut worker = Worker {
            inbox,
            outbox,
            sealing,
            clock,
            open: OpenContexts::default(),
            done: done_tx,
        };
        let thread = thread::Builder::new()
            .name("interlink-store".into())
            .spawn(move || worker.run(rx))?;
        Ok((
            Self {
                ops: Some(ops),
                thread: Some(thread),
            },
            done,
        ))
    }

    /// Queues `op`; gives it back if the queue is full or the thread is gone.
    pub(crate) fn send(&self, op: Op) -> Result<(), Op> {
        let Some(ops) = &self.ops else {
            return Err(op);
        };
        ops.try_send(op).map_err(|e| match e {
            mpsc::error::TrySendError::Full(op) | mpsc::error::TrySendError::Closed(op) => op,
        })
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        // Closing the queue ends the thread once it has done what was asked (a batch
        // at most: milliseconds). Waiting for it closes the files before whoever
        // dropped the node opens them again (redb refuses a second open). The answers'
        // receiver is dropped before this (field order), so the thread never blocks
        // on a full answer queue here.
        self.ops = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Worker {
    inbox: Inbox,
    outbox: Outbox,
    sealing: SealingSecret,
    clock: crate::Clock,
    open: OpenContexts,
    done: mpsc::Sender<Done>,
}

impl Worker {
    fn run(&mut self, mut rx: mpsc::Receiver<Op>) {
        let mut batch = Vec::with_capacity(BATCH);
        loop {
            let first = match rx.try_recv() {
                Ok(op) => op,
                Err(mpsc::error::TryRecvError::Disconnected) => return,
                Err(mpsc::error::TryRecvError::Empty) => {
                    // Nothing waits: the time to grow the inbox's padding, whose sync
                    // would otherwise fall inside an append.
                    self.inbox.pad(self.clock.now_ms());
                    match rx.blocking_recv() {
                        Some(op) => op,
                        None => return,
                    }
                }
            };
            batch.push(first);
            while batch.len() < BATCH {
                match rx.try_recv() {
                    Ok(op) => batch.push(op),
                    Err(_) => break,
                }
            }
            if self.handle(std::mem::take(&mut batch)).is_err() {
                return; // the node is gone
            }
        }
    }

    /// Does one batch: outbox operations in one transaction, then the rest in order.
    /// Outbox and inbox operations do not depend on each other, so moving the outbox
    /// commit first only makes `queued` answers sooner.
    fn handle(&mut self, batch: Vec<Op>) -> Result<(), ()> {
        let removed: HashSet<MsgId> = batch
            .iter()
            .filter_map(|op| match op {
                Op::Remove(id) => Some(*id),
                _ => None,
            })
            .collect();
        let mut puts: Vec<&Signed<Envelope>> = Vec::new();
        let mut cancelled: Vec<MsgId> = Vec::new();
        for op in &batch {
            if let Op::Persist(env) = op {
                let id = env.body().msg_id;
                if removed.contains(&id) {
                    // Settled before it was written: nothing to keep.
                    cancelled.push(id);
                } else {
                    puts.push(env);
                }
            }
        }
        let removes: Vec<MsgId> = removed
            .iter()
            .filter(|id| !cancelled.contains(id))
            .copied()
            .collect();
        if !puts.is_empty() || !removes.is_empty() {
            let put_ids: Vec<MsgId> = puts.iter().map(|e| e.body().msg_id).collect();
            let result = self
                .outbox
                .apply(&puts, &removes)
                .map(|_| ())
                .map_err(|e| outbox_error(&e));
            if let Err(e) = &result {
                warn!("outbox write failed: {e}");
            }
            for key in put_ids {
                self.answer(Done::OutboxStored {
                    key,
                    result: result.clone(),
                })?;
            }
        }
        for key in cancelled {
            self.answer(Done::OutboxStored {
                key,
                result: Ok(()),
            })?;
        }
        for op in batch {
            match op {
                Op::Persist(_) | Op::Remove(_) => {}
                Op::Append { token, entries } => {
                    let done = self.append(token, &entries);
                    self.answer(done)?;
                }
                Op::Compact => self.inbox.compact_if_due(self.clock.now_ms()),
            }
        }
        Ok(())
    }

    fn answer(&self, done: Done) -> Result<(), ()> {
        self.done.blocking_send(done).map_err(|_| ())
    }

    fn append(&mut self, token: StoreToken, envelopes: &[Signed<Envelope>]) -> Done {
        let mut refused = Vec::new();
        let mut lines: Vec<(MsgId, IdentityKey, EnvelopeKind, InboxEntry)> = Vec::new();
        for env in envelopes {
            let b = env.body();
            if b.kind == EnvelopeKind::Pass {
                // Its one content, the reply pass, was taken before the engine saw it
                // (`node::admission`); the inbox is for what the agent and the
                // follower read. Counted as stored, so it is receipted.
                continue;
            }
            let body = match b.kind {
                EnvelopeKind::Message => match self.open_body(env) {
                    Ok(body) => Some(body),
                    Err(e) => {
                        warn!(msg_id = %b.msg_id, "a sealed body does not open: {e}");
                        refused.push(((b.sender, b.msg_id), Refusal::Unopenable));
                        continue;
                    }
                },
                _ => None,
            };
            lines.push((
                b.msg_id,
                b.sender,
                b.kind,
                inbox_entry(env, body, self.clock.now_ms()),
            ));
        }
        let result = self
            .inbox
            .append_many(lines.iter().map(|(id, _, _, e)| (*id, e)));
        match result {
            Ok(outcomes) => Done::InboxStored {
                token,
                result: Ok(()),
                refused,
                new: lines
                    .iter()
                    .zip(outcomes)
                    .filter(|(_, o)| *o == Appended::New)
                    .map(|((id, from, kind, _), _)| (*id, *from, *kind))
                    .collect(),
            },
            Err(e) => {
                warn!("inbox write failed: {e}");
                Done::InboxStored {
                    token,
                    result: Err(inbox_error(&e)),
                    refused: Vec::new(),
                    new: Vec::new(),
                }
            }
        }
    }

    fn open_body(&mut self, env: &Signed<Envelope>) -> Result<Body, OpenError> {
        let b = env.body();
        let enc = b.sealed_enc().ok_or(OpenError::NoBody)?;
        let ctx = self.open.for_enc(enc, &self.sealing)?;
        b.open_body_in(ctx)
    }
}

/// The inbox line of `env`: its signed header and, for a message, what its opened
/// body says (text, task, status, what it answers).
fn inbox_entry(env: &Signed<Envelope>, body: Option<Body>, received_at: u64) -> InboxEntry {
    let b = env.body();
    let (text, task_id, status, answers, group) = match body {
        Some(body) => (
            Some(body.text),
            body.task_id,
            body.status,
            body.in_reply_to,
            body.group.as_ref().map(InboxGroup::from),
        ),
        None => (None, None, None, b.in_reply_to, None),
    };
    InboxEntry {
        msg_id: b.msg_id.to_string(),
        sender: b.sender.to_hex(),
        sender_fingerprint: b.sender.fingerprint().to_string(),
        sender_session: b.sender_session.to_string(),
        reply_to: env.reply_address().to_string(),
        kind: b.kind,
        task_id,
        status,
        in_reply_to: answers.map(|m| m.to_string()),
        also_about: b.also_about.iter().map(ToString::to_string).collect(),
        sent_at: b.ts,
        received_at,
        text,
        name: b.name.clone(),
        group,
    }
}

fn io_kind_error(kind: io::ErrorKind, text: String) -> StoreError {
    use io::ErrorKind as K;
    match kind {
        K::StorageFull | K::QuotaExceeded => StoreError::DiskFull,
        K::WriteZero | K::Interrupted | K::UnexpectedEof => StoreError::ShortWrite,
        _ => StoreError::Other(text),
    }
}

fn inbox_error(e: &InboxError) -> StoreError {
    match e {
        InboxError::Io { source, .. } | InboxError::Write { source, .. } => {
            io_kind_error(source.kind(), e.to_string())
        }
        _ => StoreError::Other(e.to_string()),
    }
}

fn outbox_error(e: &OutboxError) -> StoreError {
    let text = e.to_string();
    // redb reports a full disk only in its message.
    if text.contains("No space left") || text.contains("Disk quota") {
        StoreError::DiskFull
    } else {
        StoreError::Other(text)
    }
}

//! A thread of its own for blocking or CPU-heavy calls, fed through a bounded queue.
//!
//! The task that owns the Swarm must never wait for a disk or spend milliseconds on
//! signatures: every connection of the node waits with it. A [`Worker`] runs one call at
//! a time on its thread, in order, and hands each result back on a bounded channel the
//! node polls beside the Swarm. A call that does not fit in the queue is given back at
//! once, so the node decides what a full worker means (a retryable refusal, a backlog).
//! Used by a relay's durable store (`node::relay_store`) and by a session's checks of
//! the mailbox copies handed to it (`node::hold_check`).

use std::thread::{self, JoinHandle};

use tokio::sync::mpsc;

/// The node's end of a worker thread: calls of type `I` in, results of type `O` out.
#[derive(Debug)]
pub(crate) struct Worker<I, O> {
    /// The results, in the order the calls were queued.
    done: mpsc::Receiver<O>,
    ops: Option<mpsc::Sender<I>>,
    thread: Option<JoinHandle<()>>,
}

impl<I: Send + 'static, O: Send + 'static> Worker<I, O> {
    /// Starts the thread `name`, which answers each call with `call`; at most `queue`
    /// calls wait for it, and as many results for the node.
    pub(crate) fn spawn(
        name: &str,
        queue: usize,
        mut call: impl FnMut(I) -> O + Send + 'static,
    ) -> std::io::Result<Self> {
        let (ops, mut rx) = mpsc::channel::<I>(queue);
        let (tx, done) = mpsc::channel(queue);
        let thread = thread::Builder::new().name(name.into()).spawn(move || {
            while let Some(input) = rx.blocking_recv() {
                if tx.blocking_send(call(input)).is_err() {
                    return; // the node is gone
                }
            }
        })?;
        Ok(Self {
            done,
            ops: Some(ops),
            thread: Some(thread),
        })
    }

    /// The next result (`None` once the thread is gone).
    pub(crate) async fn next_done(&mut self) -> Option<O> {
        self.done.recv().await
    }

    /// Queues a call; gives it back if the queue is full.
    pub(crate) fn send(&self, input: I) -> Result<(), I> {
        let Some(ops) = &self.ops else {
            return Err(input);
        };
        ops.try_send(input).map_err(|e| match e {
            mpsc::error::TrySendError::Full(i) | mpsc::error::TrySendError::Closed(i) => i,
        })
    }
}

impl<I, O> Drop for Worker<I, O> {
    fn drop(&mut self) {
        // No more results are read: the thread's next send fails and it ends; closing
        // the queue ends it once idle. Waiting for it lets whatever the thread owns (a
        // relay's store) close before whoever dropped the node opens it again.
        self.done.close();
        self.ops = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

//! Live delivery on one kept stream per peer (PROTOCOL §8.3, `deliver-stream`).
//!
//! A request-response exchange opens a stream for every delivery: a protocol proposal,
//! the listener's two negotiation frames (written before it reads the request), and a
//! close each way, with the connection task polling every behaviour's handler on each
//! of those wake-ups. Measured between two swarms with the node's sixteen behaviours,
//! that round trip took 163 µs p50 against 76 µs for the same request and response on
//! a stream kept open (docs/BENCHMARKS.md). So a session keeps one stream to each peer
//! it delivers to and writes its requests on it, one CBOR item after another; the peer
//! answers each, in order, on the same stream.
//!
//! What the kept stream cannot carry goes as a request on the `deliver` protocol: the
//! requests of a peer that does not speak this protocol (an older session), and those
//! beyond [`PIPELINE`] unanswered ones. A request lost with its stream is reported lost,
//! as a request lost with its connection is; the engine sends it again, and the
//! recipient receipts a message it already holds without storing it twice.
//!
//! The streams' reads and writes run in tasks of their own (one per stream); they talk
//! to the node task through one bounded channel of [`LiveEvent`]s.

use std::{
    collections::{HashMap, HashSet, hash_map::Entry},
    sync::Arc,
};
use tokio_util::sync::CancellationToken;

use futures::{AsyncReadExt as _, StreamExt as _};
use interlink_core::wire::{DeliverRequest, DeliverResponse};
use libp2p::{PeerId, StreamProtocol};
use tokio::{
    sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot},
    task::JoinSet,
};
use tracing::debug;

use crate::cbor::{ItemReader, write_item};

/// Requests one kept stream carries unanswered. The sender writes at most this many
/// ahead of the answers; the recipient reads no further ahead than this.
pub(crate) const PIPELINE: usize = 4;
/// Peers this node keeps an outbound stream to at once (beyond: requests).
pub(crate) const MAX_OUTBOUND_STREAMS: usize = 256;
/// Inbound kept streams served at once, all peers together.
/// (Each may hold up to [`MAX_REQUEST_BYTES`] of one request being read, for at most
/// the live stream timeout.)
pub(crate) const MAX_INBOUND_STREAMS: usize = 64;
/// Events from the stream tasks waiting for the node task.
const EVENT_QUEUE: usize = 64;

/// Most bytes of one request item on a kept stream; a larger request (a batch past it)
/// goes on the `deliver` protocol instead. So the inbound streams hold at most
/// [`MAX_INBOUND_STREAMS`] × this (8 MiB) while they read, where the `deliver`
/// protocol's item limit (1.1 MB) would let 64 strangers' streams hold 70 MB, on top of
/// what the `deliver` and `hold` budgets already let strangers fill. The largest
/// envelope fits.
pub(crate) const MAX_REQUEST_BYTES: usize = 128 * 1024;
const _: () = assert!(interlink_core::limits::MAX_ENVELOPE_BYTES + 1024 <= MAX_REQUEST_BYTES);
/// Most bytes of one response item, as on the `deliver` protocol.
pub(crate) const MAX_RESPONSE_BYTES: usize = crate::behaviour::MAX_DELIVER_RESPONSE_ITEM_BYTES;

/// What the stream tasks tell the node task.
#[derive(Debug)]
pub(crate) enum LiveEvent {
    /// A request read from `peer`'s kept stream; its answer goes through `answer`.
    Request {
        peer: PeerId,
        request: DeliverRequest,
        answer: oneshot::Sender<DeliverResponse>,
    },
    /// The answer to the request sent as `id`, or why none will come.
    Answered {
        peer: PeerId,
        id: u64,
        result: Result<DeliverResponse, Lost>,
    },
    /// Requests that go as requests instead: the stream could not be opened, or the
    /// peer declined the protocol or closed the stream before its first answer
    /// (`declined`: its requests go as requests while it stays connected). A request
    /// the peer did take is receipted again, not stored twice.
    Unsent {
        peer: PeerId,
        requests: Vec<(u64, DeliverRequest)>,
        declined: bool,
    },
}

/// Why a request sent on a kept stream has no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lost {
    /// The stream failed or closed before the answer (the connection may be gone).
    Stream,
    /// No answer within the live stream timeout.
    Timeout,
}

/// The node's kept streams: the outbound ones by peer, and the channel their tasks and
/// the inbound ones report on.
pub(crate) struct Streams {
    control: libp2p_stream::Control,
    protocol: StreamProtocol,
    /// Each peer's stream: its queue, and what resets it.
    outbound: HashMap<PeerId, (mpsc::Sender<(u64, DeliverRequest)>, CancellationToken)>,
    /// Connected peers that declined the protocol (bounded by the connected peers:
    /// forgotten when a peer disconnects).
    declined: HashSet<PeerId>,
    next_id: u64,
    events_tx: mpsc::Sender<LiveEvent>,
    events: mpsc::Receiver<LiveEvent>,
    /// The task accepting inbound streams (none when this node takes no deliveries).
    accepting: Option<tokio::task::JoinHandle<()>>,
}

impl Streams {
    /// What the streams' tasks report next.
    pub(crate) async fn next_event(&mut self) -> Option<LiveEvent> {
        self.events.recv().await
    }

    /// Kept streams over `control` speaking `protocol`; inbound ones are served only
    /// when `accept` (a session with an inbox).
    pub(crate) fn new(
        mut control: libp2p_stream::Control,
        protocol: StreamProtocol,
        accept: bool,
    ) -> Self {
        let (events_tx, events) = mpsc::channel(EVENT_QUEUE);
        let accepting = accept
            .then(|| control.accept(protocol.clone()).ok())
            .flatten()
            .map(|incoming| tokio::spawn(accept_streams(incoming, events_tx.clone())));
        Self {
            control,
            protocol,
            outbound: HashMap::new(),
            declined: HashSet::new(),
            next_id: 0,
            events_tx,
            events,
            accepting,
        }
    }

    /// Sends `request` to `peer` on its kept stream (opened now if there is none), and
    /// returns the id its answer will carry; gives the request back when it has to go
    /// as a request instead.
    pub(crate) fn send(
        &mut self,
        peer: PeerId,
        request: DeliverRequest,
    ) -> Result<u64, DeliverRequest> {
        if self.declined.contains(&peer) || encoded_len_bound(&request) > MAX_REQUEST_BYTES {
            return Err(request);
        }
        // A stream whose task ended (it failed) is replaced by a new one.
        if self
            .outbound
            .get(&peer)
            .is_some_and(|(tx, _)| tx.is_closed())
        {
            self.outbound.remove(&peer);
        }
        let full = self.outbound.len() >= MAX_OUTBOUND_STREAMS;
        let tx = match self.outbound.entry(peer) {
            Entry::Occupied(open) => &open.into_mut().0,
            Entry::Vacant(_) if full => return Err(request),
            Entry::Vacant(slot) => {
                let (tx, rx) = mpsc::channel(PIPELINE);
                let reset = CancellationToken::new();
                tokio::spawn(send_on_stream(
                    self.control.clone(),
                    peer,
                    self.protocol.clone(),
                    rx,
                    self.events_tx.clone(),
                    reset.clone(),
                ));
                &slot.insert((tx, reset)).0
            }
        };
        let id = self.next_id;
        match tx.try_send((id, request)) {
            Ok(()) => {
                self.next_id += 1;
                Ok(id)
            }
            // Enough unanswered on that stream already (or it ended just now).
            Err(
                mpsc::error::TrySendError::Full((_, request))
                | mpsc::error::TrySendError::Closed((_, request)),
            ) => Err(request),
        }
    }

    /// `peer` declined the protocol: its requests go as requests while it stays
    /// connected.
    pub(crate) fn note_declined(&mut self, peer: PeerId) {
        self.outbound.remove(&peer);
        self.declined.insert(peer);
    }

    /// Some of `peer`'s connections are closing while others stay (relayed ones, for a
    /// direct one): its stream may be on one of them, where an answer would never come
    /// (a closed circuit's stream is not failed, it is abandoned). The stream ends now:
    /// what it took unanswered is reported lost — sent again on a new stream, which a
    /// message the peer had received already answers as delivered (the peer's inbox
    /// takes it once).
    pub(crate) fn reset(&mut self, peer: &PeerId) {
        if let Some((_, reset)) = self.outbound.remove(peer) {
            reset.cancel();
        }
    }

    /// `peer` disconnected: its stream's task ends once what it sent is answered or
    /// lost, and a new connection may speak the protocol after all.
    pub(crate) fn forget(&mut self, peer: &PeerId) {
        self.outbound.remove(peer);
        self.declined.remove(peer);
    }
}

/// At least the length of `request`'s CBOR item: the map with its two keys and the
/// version, and each envelope behind a byte-string head of at most 9 bytes.
fn encoded_len_bound(request: &DeliverRequest) -> usize {
    32 + request.envelopes.iter().map(|e| e.len() + 9).sum::<usize>()
}

impl std::fmt::Debug for Streams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Streams")
            .field("protocol", &self.protocol)
            .field("outbound", &self.outbound.len())
            .field("declined", &self.declined.len())
            .finish_non_exhaustive()
    }
}

impl Drop for Streams {
    fn drop(&mut self) {
        if let Some(task) = self.accepting.take() {
            task.abort();
        }
    }
}

/// The outbound stream to `peer`: opens it, then [`drive_outbound`].
async fn send_on_stream(
    mut control: libp2p_stream::Control,
    peer: PeerId,
    protocol: StreamProtocol,
    mut requests: mpsc::Receiver<(u64, DeliverRequest)>,
    events: mpsc::Sender<LiveEvent>,
    reset: CancellationToken,
) {
    let opened = tokio::time::timeout(
        crate::behaviour::LIVE_ATTEMPT_TIMEOUT,
        control.open_stream(peer, protocol),
    )
    .await;
    match opened {
        Ok(Ok(stream)) => drive_outbound(peer, stream, requests, events, reset).await,
        Ok(Err(e)) => {
            let declined = matches!(e, libp2p_stream::OpenStreamError::UnsupportedProtocol(_));
            debug!(%peer, error = %e, "live stream not opened");
            give_back(peer, Vec::new(), &mut requests, declined, &events).await;
        }
        Err(_) => {
            debug!(%peer, "live stream not opened in time");
            give_back(peer, Vec::new(), &mut requests, false, &events).await;
        }
    }
}

/// How the writing half of an outbound stream ended.
enum WriteEnd {
    /// The node closed the stream's queue (the peer left, or the node replaced the
    /// stream): nothing more to write, but what was written is still answered.
    Closed,
    /// A write failed (`declined`: the peer refused the protocol).
    Failed { declined: bool },
}

/// How the reading half of an outbound stream ended.
enum ReadEnd {
    /// Every request written was answered, and the writer is done.
    Done,
    /// The peer declined the protocol, or closed the stream before its first answer:
    /// what is unanswered goes as requests.
    Declined,
    /// No answer to the oldest request unanswered, for this reason.
    Failed(Lost),
    /// The node task is gone.
    NodeGone,
}

/// The requests written on a stream and not yet answered, oldest first (at most a
/// pipeline and the one being written). Kept apart from both halves so that however
/// the stream ends, each is reported: answered, lost or given back — never dropped
/// silently. (A request dropped with the reading half, when the node replaced the
/// stream because another connection to the peer closed, was never answered and its
/// message went `queued` on the engine's timeout while the peer stayed connected.)
type Unanswered = std::sync::Mutex<std::collections::VecDeque<(u64, DeliverRequest)>>;

fn unanswered(
    u: &Unanswered,
) -> std::sync::MutexGuard<'_, std::collections::VecDeque<(u64, DeliverRequest)>> {
    // Never held across an await; a panic while held cannot leave it inconsistent.
    u.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Writes each request the node hands to the stream and reports each answer in order.
/// When the node closes the queue, the answers of what was written are still read
/// (the stream may be healthy: another connection to the peer closed); whatever ends
/// the stream, every request it took is reported.
pub(crate) async fn drive_outbound<S>(
    peer: PeerId,
    stream: S,
    mut requests: mpsc::Receiver<(u64, DeliverRequest)>,
    events: mpsc::Sender<LiveEvent>,
    reset: CancellationToken,
) where
    S: futures::AsyncRead + futures::AsyncWrite + Unpin,
{
    let (mut reader, mut writer) = stream.split();
    let mut items = ItemReader::default();
    let waiting: Unanswered = std::sync::Mutex::new(std::collections::VecDeque::new());
    // One token per request written: the reader waits for one before reading an
    // answer, and the writer waits for room before writing more than a pipeline ahead.
    let (written_tx, mut written) = mpsc::channel::<()>(PIPELINE);
    let write = async {
        // Owned here: dropped when the writer ends, so the reader sees the end.
        let written_tx = written_tx;
        while let Some((id, request)) = requests.recv().await {
            // Kept until answered: a request the peer turns out to decline goes again
            // as a request.
            unanswered(&waiting).push_back((id, request.clone()));
            if written_tx.send(()).await.is_err() {
                return WriteEnd::Failed { declined: false };
            }
            if let Err(e) = write_item(&mut writer, request).await {
                debug!(%peer, error = %e, "live stream write failed");
                return WriteEnd::Failed {
                    declined: crate::swarm::protocol_declined(&e),
                };
            }
        }
        WriteEnd::Closed
    };
    let read = async {
        let mut answered_any = false;
        while written.recv().await.is_some() {
            let answer = tokio::time::timeout(
                crate::behaviour::LIVE_STREAM_TIMEOUT,
                items.next::<DeliverResponse, _>(&mut reader, MAX_RESPONSE_BYTES),
            )
            .await;
            let response = match answer {
                Ok(Ok(response)) => response,
                Ok(Err(e)) if crate::swarm::protocol_declined(&e) => return ReadEnd::Declined,
                // Closed before its first answer: the peer served no stream of ours
                // (all its places taken, say). Requests it is, while it stays
                // connected; a request-response stream is not taken from a shared
                // pool.
                Ok(Err(e)) if !answered_any => {
                    debug!(%peer, error = %e, "live stream closed before its first answer");
                    return ReadEnd::Declined;
                }
                Ok(Err(e)) => {
                    debug!(%peer, error = %e, "live stream read failed");
                    return ReadEnd::Failed(Lost::Stream);
                }
                Err(_) => return ReadEnd::Failed(Lost::Timeout),
            };
            answered_any = true;
            let Some((id, _)) = unanswered(&waiting).pop_front() else {
                return ReadEnd::Done;
            };
            let answered = LiveEvent::Answered {
                peer,
                id,
                result: Ok(response),
            };
            if events.send(answered).await.is_err() {
                return ReadEnd::NodeGone;
            }
        }
        ReadEnd::Done
    };
    let end = {
        tokio::pin!(write, read);
        let ended = async {
            tokio::select! {
                end = &mut write => match end {
                    // The queue closed: the answers of what was written still come.
                    WriteEnd::Closed => read.await,
                    WriteEnd::Failed { declined: true } => ReadEnd::Declined,
                    WriteEnd::Failed { declined: false } => ReadEnd::Failed(Lost::Stream),
                },
                end = &mut read => end,
            }
        };
        tokio::select! {
            biased;
            () = reset.cancelled() => {
                debug!(%peer, "live stream reset");
                ReadEnd::Failed(Lost::Stream)
            }
            end = ended => end,
        }
    };
    // Nothing more goes on this stream: what the node hands it now is given back.
    requests.close();
    let left: Vec<(u64, DeliverRequest)> = unanswered(&waiting).drain(..).collect();
    let (lost, unsent, declined) = match end {
        ReadEnd::NodeGone => return,
        ReadEnd::Declined => (Vec::new(), left, true),
        ReadEnd::Failed(first) => {
            let lost = left
                .into_iter()
                .enumerate()
                .map(|(i, (id, _))| (id, if i == 0 { first } else { Lost::Stream }))
                .collect();
            (lost, Vec::new(), false)
        }
        // Nothing can be left here; were something, it is reported lost.
        ReadEnd::Done => (
            left.into_iter().map(|(id, _)| (id, Lost::Stream)).collect(),
            Vec::new(),
            false,
        ),
    };
    for (id, why) in lost {
        let lost = LiveEvent::Answered {
            peer,
            id,
            result: Err(why),
        };
        if events.send(lost).await.is_err() {
            return;
        }
    }
    give_back(peer, unsent, &mut requests, declined, &events).await;
}

/// Reports `unsent` and every request still queued for the stream as unsent.
async fn give_back(
    peer: PeerId,
    mut unsent: Vec<(u64, DeliverRequest)>,
    queued: &mut mpsc::Receiver<(u64, DeliverRequest)>,
    declined: bool,
    events: &mpsc::Sender<LiveEvent>,
) {
    queued.close();
    while let Ok(item) = queued.try_recv() {
        unsent.push(item);
    }
    if unsent.is_empty() && !declined {
        return;
    }
    let _ = events
        .send(LiveEvent::Unsent {
            peer,
            requests: unsent,
            declined,
        })
        .await;
}

/// Serves inbound kept streams: one per peer, the newest (a sender opens another when
/// its connection changed, before the old stream has noticed it is gone), and
/// [`MAX_INBOUND_STREAMS`] in all; a stream beyond that is dropped unread (its sender
/// sees it closed and sends requests instead).
async fn accept_streams(
    mut incoming: libp2p_stream::IncomingStreams,
    events: mpsc::Sender<LiveEvent>,
) {
    let mut serving: JoinSet<PeerId> = JoinSet::new();
    let mut by_peer: HashMap<PeerId, tokio::task::AbortHandle> = HashMap::new();
    loop {
        tokio::select! {
            next = incoming.next() => {
                let Some((peer, stream)) = next else { break };
                if let Some(older) = by_peer.remove(&peer) {
                    older.abort();
                } else if serving.len() >= MAX_INBOUND_STREAMS {
                    debug!(%peer, "inbound live stream refused: over the cap");
                    continue;
                }
                let task = serving.spawn(serve(peer, stream, events.clone()));
                by_peer.insert(peer, task);
            }
            Some(done) = serving.join_next_with_id() => {
                let (id, peer) = match done {
                    Ok((id, peer)) => (id, Some(peer)),
                    Err(e) => (e.id(), None),
                };
                // Only the peer's current stream leaves the map with its task.
                if let Some(peer) = peer
                    && by_peer.get(&peer).is_some_and(|t| t.id() == id)
                {
                    by_peer.remove(&peer);
                }
            }
        }
    }
}

/// A request read from an inbound stream: where its answer comes from, and the place
/// in the pipeline it holds until that answer is written.
type Pending = (oneshot::Receiver<DeliverResponse>, OwnedSemaphorePermit);

/// One inbound kept stream: reads requests (at most [`PIPELINE`] ahead of the
/// answers), hands each to the node task, and writes the answers in order.
pub(crate) async fn serve<S>(peer: PeerId, stream: S, events: mpsc::Sender<LiveEvent>) -> PeerId
where
    S: futures::AsyncRead + futures::AsyncWrite + Unpin,
{
    let (mut reader, mut writer) = stream.split();
    let mut items = ItemReader::default();
    // A request is read only with one of the pipeline's places, given back once its
    // answer is written.
    let places = Arc::new(Semaphore::new(PIPELINE));
    let (pending_tx, mut pending) = mpsc::channel::<Pending>(PIPELINE);
    let read = async move {
        loop {
            let Ok(place) = places.clone().acquire_owned().await else {
                return;
            };
            let next = items.next_within::<DeliverRequest, _>(
                &mut reader,
                MAX_REQUEST_BYTES,
                crate::behaviour::LIVE_STREAM_TIMEOUT,
            );
            let request = match next.await {
                Ok(request) => request,
                Err(e) => {
                    debug!(%peer, error = %e, "inbound live stream ended");
                    return;
                }
            };
            let (answer, answered) = oneshot::channel();
            // First the place in line, then the request: the answers go out in the
            // order the requests came.
            if pending_tx.send((answered, place)).await.is_err() {
                return;
            }
            let event = LiveEvent::Request {
                peer,
                request,
                answer,
            };
            if events.send(event).await.is_err() {
                return;
            }
        }
    };
    let write = async move {
        while let Some((answered, place)) = pending.recv().await {
            // The node task dropped the request unanswered (it stopped): so does the
            // stream.
            let Ok(response) = answered.await else { return };
            if let Err(e) = write_item(&mut writer, response).await {
                debug!(%peer, error = %e, "inbound live stream write failed");
                return;
            }
            drop(place);
        }
    };
    tokio::pin!(read, write);
    // The reader's end (the sender closed its half) still lets the answers already
    // due go out; the writer's end ends the stream.
    tokio::select! {
        () = &mut write => {}
        () = &mut read => write.await,
    }
    peer
}

#[cfg(test)]
mod tests;

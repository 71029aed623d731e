//! The relay's libp2p node — **not built yet (phase 2 of the relay issue)**.
//!
//! [`start`] is the seam: [`crate::start`] calls it with everything the node needs and
//! runs what it returns until shutdown. Today it starts nothing, returns no address
//! and logs an error saying so; a relay built from this code stores nothing from the
//! network. Phase 2 replaces its body; the signature should not need to change.
//!
//! # What phase 2 must build here
//!
//! One task owns a `Swarm` (SwarmBuilder: identity → tokio → tcp → quic → dns →
//! behaviour → swarm config with an idle-connection timeout well above 10 s, so
//! presence connections stay up). It listens on [`NetworkContext::listen`], adds every
//! [`NetworkContext::external`] address with `Swarm::add_external_address` (since
//! libp2p-relay 0.22 the relay server stays disabled until it has a confirmed external
//! address; call `set_status(Some(Status::Enable))` too, so a relay reachable only on a
//! LAN or tailnet serves reservations), and returns the dialable addresses — listen
//! addresses as reported by `NewListenAddr` (0.0.0.0 expanded to interfaces) plus the
//! external ones, each ending in `/p2p/<peer id>` — once the listeners are up; the
//! binary prints them to stdout, one per line. The behaviour:
//!
//! - **Circuit relay v2 server** (`libp2p::relay::Behaviour`) with documented limits
//!   in docs/RELAY.md. The library defaults (128 reservations, circuits of 2 min and
//!   128 KiB) are too tight for a session that listens only through the relay: raise
//!   circuit duration and bytes, keep per-peer caps. Count reservations from
//!   `ReservationReqAccepted` / `ReservationClosed` / `ReservationTimedOut` into
//!   [`Metrics::set_reservations`]; connections from `ConnectionEstablished/Closed`
//!   into [`Metrics::set_connected_peers`].
//! - **Identify** with `Network::identify_version`, feeding Kademlia the listen
//!   addresses of peers that speak its protocol.
//! - **Kademlia server** on `Network::kad_protocol`, `set_mode(Some(Mode::Server))`,
//!   `set_record_filtering(StoreInserts::FilterBoth)`, max packet size raised to carry
//!   a full record (`MAX_MAILBOX_RECORD_BYTES`), record TTL and re-publication off for
//!   records it holds (the store's retention governs them). An inbound
//!   `InboundRequest::PutRecord { record: Some(r) }` goes to
//!   [`MailboxStore::put`] in `spawn_blocking` (or a bounded writer thread batching
//!   with [`MailboxStore::put_many`]); refusals are counted with
//!   [`Metrics::record_reject`] and logged, accepted puts with [`Metrics::record_put`].
//!   Kademlia answers inbound *gets* synchronously from its `RecordStore` (it calls
//!   `store.get(key)` inside the swarm task): either a `RecordStore` whose `get` reads
//!   [`MailboxStore::get`] (a short redb read; records ≤ 4 MiB) and whose `records()`
//!   is empty so nothing is re-published from the relay, or a bounded in-memory mirror.
//!   The kad put ack is sent *before* the application decides, so it promises nothing.
//! - **Mailbox protocol** (request-response `hold` / `fetch`; its wire types belong in
//!   interlink-core next to the other overlay messages, and PROTOCOL.md): `hold`
//!   carries `(record key, encoded record)` and is answered only after
//!   [`MailboxStore::put`] returned, i.e. after the redb commit — the answer is what a
//!   session may treat as "the relay has it" (kill -9 safe); a refusal answers with its
//!   [`crate::store::RejectReason::label`]. `fetch` is answered with
//!   [`MailboxStore::get`], so a session reaches its mailbox on the relay without
//!   depending on Kademlia routing.
//! - **Gossipsub** on `Network::announce_topic` with `validate_messages()`: validate
//!   each announcement/goodbye with the core (signature, freshness, size), report
//!   Accept/Reject so valid ones are forwarded, keep a roster in memory
//!   (`interlink_core::presence`), and answer roster fetches on
//!   `Network::roster_protocol` with the signed announcements held. The relay never
//!   announces itself as a session.
//! - **Ping**, and connection limits (`memory-connection-limits` or a named cap on
//!   established connections per peer and in total).
//! - Per-peer rate limiting of puts (a named budget per peer per minute) so one peer
//!   cannot make the relay fsync in a loop; refusals count as a reject reason.
//!
//! Store calls block (a commit waits for the disk, ~ms): make them from
//! `spawn_blocking` or one writer thread fed by a bounded channel (which can batch with
//! [`MailboxStore::put_many`]: one fsync per batch), never inside the swarm task, or
//! every connection stalls while the disk syncs.
//!
//! # If interlink-net provides the node
//!
//! The session crate may grow a relay role that runs all of the above itself and
//! calls a durable-store trait for `hold` / `get` / `keys` (work in progress there at
//! the time of writing). Then this function shrinks to: wrap the store in an adapter
//! implementing that trait (refusal label = [`crate::store::RejectReason::label`],
//! database errors = `io`; count them in [`Metrics`]), start the node with the relay
//! role, print its listen addresses, and copy its diagnostics (connected peers,
//! reservations) into [`Metrics`] on a timer.
//!
//! Shutdown: when the token is cancelled, stop accepting requests, let in-flight store
//! writes finish (their blocking tasks are awaited), then drop the swarm.

use std::{future::Future, pin::Pin, sync::Arc};

use interlink_core::names::Network;
use libp2p::{Multiaddr, PeerId, identity::Keypair};
use tokio_util::sync::CancellationToken;
use tracing::error;

use crate::{metrics::Metrics, store::MailboxStore};

/// Everything the network part needs.
#[derive(Debug)]
pub struct NetworkContext {
    /// The relay's transport key (its PeerId).
    pub keypair: Keypair,
    /// Addresses to listen on.
    pub listen: Vec<Multiaddr>,
    /// Addresses to advertise.
    pub external: Vec<Multiaddr>,
    /// The overlay served.
    pub network: Network,
    /// The durable mailbox store.
    pub store: Arc<MailboxStore>,
    /// Metrics to update.
    pub metrics: Metrics,
}

/// The network's future: runs until the shutdown token is cancelled.
pub type NetworkTask = Pin<Box<dyn Future<Output = Result<(), NetworkError>> + Send>>;

/// A started network part.
pub struct Started {
    /// The relay's dialable addresses, each ending in `/p2p/<peer id>`.
    pub addrs: Vec<Multiaddr>,
    /// Its task, for [`crate::Relay`] to run.
    pub task: NetworkTask,
}

impl std::fmt::Debug for Started {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Started")
            .field("addrs", &self.addrs)
            .finish_non_exhaustive()
    }
}

/// The network part failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetworkError {
    /// A listen address could not be bound.
    #[error("cannot listen on {addr}: {reason}")]
    Listen {
        /// The address.
        addr: Multiaddr,
        /// Why.
        reason: String,
    },
    /// The swarm could not be built.
    #[error("cannot build the libp2p node: {0}")]
    Build(String),
}

/// Starts the relay's libp2p node. **Phase 1: starts nothing** (see the module docs
/// for what phase 2 builds here); it returns no address and a task that only waits
/// for shutdown.
pub async fn start(
    ctx: NetworkContext,
    shutdown: CancellationToken,
) -> Result<Started, NetworkError> {
    let peer_id = PeerId::from(ctx.keypair.public());
    error!(
        %peer_id,
        listen = ?ctx.listen,
        "the relay's network part is not built yet: it listens on nothing and serves \
         no peer (store and metrics only)"
    );
    Ok(Started {
        addrs: Vec::new(),
        task: Box::pin(async move {
            shutdown.cancelled().await;
            Ok(())
        }),
    })
}

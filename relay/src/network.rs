//! The relay's libp2p node.
//!
//! The node is `interlink-net`'s, in its relay role (`Role::Relay`): it never announces
//! itself; forwards valid presence on the overlay's gossipsub topic and answers roster
//! fetches, so a session that knows only the relay sees the whole overlay; runs the
//! circuit relay v2 server (limits in `interlink_net::behaviour::relay_limits`,
//! documented in docs/RELAY.md); is a Kademlia server; and answers the mailbox protocol
//! (`hold` answered only after the redb commit, `fetch` from the store). This module
//! plugs the redb [`MailboxStore`] into that node through
//! [`interlink_net::DurableMailboxes`], counts puts and refusals in [`Metrics`], and
//! copies the node's connection and reservation counts into [`Metrics`] every second.
//!
//! Store calls block for a commit (an fsync, ~ms). The node makes them on a thread of
//! their own, one at a time, and answers a `hold` when the commit is done, so no
//! connection waits for the disk; batching with [`MailboxStore::put_many`] is the way
//! on if a relay ever serves enough sessions for one commit per hold to matter.

use std::{future::Future, pin::Pin, sync::Arc, time::Duration};

use interlink_core::names::Network;
use interlink_net::{DurableMailboxes, HeldCopy, Node, Refusal, RelaySpec, Role};
use libp2p::{Multiaddr, identity::Keypair};
use tokio_util::sync::CancellationToken;

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
    /// The node's clock.
    pub clock: interlink_net::Clock,
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
        /// The transport's error text.
        reason: String,
    },
    /// The swarm could not be built.
    #[error("cannot build the libp2p node: {0}")]
    Build(String),
}

/// How often the node's counts are copied into the metrics.
const METRICS_EVERY: Duration = Duration::from_secs(1);
/// How long start-up waits for the listeners to come up.
const LISTEN_WAIT: Duration = Duration::from_secs(10);
/// Most mailboxes served to the DHT from memory (the store may hold more on disk; they
/// are still held and fetched with the mailbox protocol).
const MAX_SERVED_MAILBOXES: usize = 16_384;

/// The redb store as the node's durable mailbox holder, counting into the metrics.
#[derive(Debug)]
struct Durable {
    store: Arc<MailboxStore>,
    metrics: Metrics,
}

impl DurableMailboxes for Durable {
    fn hold(&self, key: &[u8; 32], record: &[u8], now_ms: u64) -> Result<HeldCopy, Refusal> {
        match self.store.put(*key, record, now_ms) {
            Ok(outcome) => {
                self.metrics.record_put(&outcome);
                self.metrics.set_store(self.store.stats());
                match self.store.get(key) {
                    Ok(Some(merged)) => Ok(HeldCopy {
                        record: merged,
                        kept: outcome.kept,
                        grew_by: outcome.grew_by,
                    }),
                    Ok(None) => Err(Refusal {
                        label: "io",
                        reason: "the record vanished after its commit".into(),
                    }),
                    Err(e) => Err(Refusal {
                        label: "io",
                        reason: e.to_string(),
                    }),
                }
            }
            Err(e) => match e.reason() {
                Some(reason) => {
                    self.metrics.record_reject(reason);
                    Err(Refusal {
                        label: reason.label(),
                        reason: e.to_string(),
                    })
                }
                None => Err(Refusal {
                    label: "io",
                    reason: e.to_string(),
                }),
            },
        }
    }

    fn get(&self, key: &[u8; 32]) -> Option<Vec<u8>> {
        self.store.get(key).ok().flatten()
    }

    fn keys(&self) -> Vec<[u8; 32]> {
        self.store.keys().unwrap_or_default()
    }
}

/// Starts the relay's libp2p node; returns its dialable addresses once its listeners
/// are up, and the task that runs it until `shutdown`.
pub async fn start(
    ctx: NetworkContext,
    shutdown: CancellationToken,
) -> Result<Started, NetworkError> {
    let config = interlink_net::Config {
        network: ctx.network.clone(),
        listen: ctx.listen.clone(),
        mdns: false,
        relay_server: true,
        external_addrs: ctx.external.clone(),
        max_mailbox_records: MAX_SERVED_MAILBOXES,
        swarm_metrics: Some(ctx.metrics.swarm()),
        clock: ctx.clock,
        ..interlink_net::Config::default()
    };
    let store: Arc<dyn DurableMailboxes> = Arc::new(Durable {
        store: ctx.store.clone(),
        metrics: ctx.metrics.clone(),
    });
    let swarm = interlink_net::build_swarm(ctx.keypair, &config)
        .map_err(|e| NetworkError::Build(e.to_string()))?;
    let node = Node::spawn(swarm, config, Role::Relay(RelaySpec { store }))
        .map_err(|e| NetworkError::Build(e.to_string()))?;
    let handle = node.handle();
    let addrs = match listening(&handle, ctx.listen.len(), &ctx.external).await {
        Ok(addrs) => addrs,
        Err(e) => {
            node.shutdown().await;
            return Err(e);
        }
    };
    let metrics = ctx.metrics;
    let task = async move {
        let mut every = tokio::time::interval(METRICS_EVERY);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => break,
                _ = every.tick() => {
                    if let Ok(d) = handle.diagnostics().await {
                        metrics.set_connected_peers(d.connected.len() as u64);
                        metrics.set_reservations(d.served_reservations as u64);
                        metrics.set_fetches_refused(d.mailbox_fetches_refused);
                        metrics.set_network_refused(d.holds_refused_network);
                    }
                }
            }
        }
        node.shutdown().await;
        Ok(())
    };
    Ok(Started {
        addrs,
        task: Box::pin(task),
    })
}

/// Waits until the node listens on as many addresses as it was asked to (or at least
/// one, once [`LISTEN_WAIT`] passed); returns them and the external ones, with
/// `/p2p/<id>`.
async fn listening(
    handle: &interlink_net::Handle,
    wanted: usize,
    external: &[Multiaddr],
) -> Result<Vec<Multiaddr>, NetworkError> {
    let deadline = tokio::time::Instant::now() + LISTEN_WAIT;
    loop {
        let listen = handle
            .diagnostics()
            .await
            .map_err(|e| NetworkError::Build(e.to_string()))?
            .listen_addrs;
        let done = listen.len() >= wanted.max(1);
        if done || (tokio::time::Instant::now() >= deadline && !listen.is_empty()) {
            let me = handle.peer_id();
            // An external address may also be one the node listens on (or already
            // counts among its addresses): each is printed once.
            let mut addrs: Vec<Multiaddr> = Vec::new();
            for a in listen.iter().chain(external) {
                let a = interlink_net::dialable(a, me);
                if !addrs.contains(&a) {
                    addrs.push(a);
                }
            }
            return Ok(addrs);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(NetworkError::Listen {
                addr: Multiaddr::empty(),
                reason: format!("no listener came up within {LISTEN_WAIT:?}"),
            });
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

//! Starting and stopping the relay: key, store, sweeper, metrics server, network.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use interlink_core::{Identity, SessionId};
use interlink_store::keyfile;
use libp2p::{Multiaddr, PeerId, identity::Keypair};
use tokio::{net::TcpListener, task::JoinSet};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::{
    config::{Config, ConfigError},
    http,
    metrics::Metrics,
    network::{self, NetworkContext, NetworkError},
    store::{MailboxStore, OpenError},
};

/// The session id under which the relay derives its transport key from its identity
/// key (like a session does), so the identity key itself is never a transport key and
/// the PeerId is the same on every start.
pub const RELAY_TRANSPORT_LABEL: &str = "interlink-relay";
/// Most blocking threads the relay's runtime runs (store calls, key file I/O).
pub const MAX_BLOCKING_THREADS: usize = 32;
/// How long shutdown waits for the tasks before giving up on them.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Starting the relay failed; nothing is left running.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The configuration cannot run.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The key file could not be loaded or created.
    #[error(transparent)]
    Key(#[from] keyfile::KeyFileError),
    /// The transport key could not be derived.
    #[error("cannot derive the transport key: {0}")]
    TransportKey(String),
    /// The mailbox store could not be opened.
    #[error(transparent)]
    Store(#[from] OpenError),
    /// The metrics address could not be bound.
    #[error("cannot listen for metrics on {addr}: {source}")]
    Metrics {
        /// The address.
        addr: SocketAddr,
        /// What the operating system reported.
        source: std::io::Error,
    },
    /// The network part did not start.
    #[error(transparent)]
    Network(#[from] NetworkError),
    /// A blocking start-up step panicked or was cancelled.
    #[error("start-up task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// The relay stopped because a part of it failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The network part failed.
    #[error(transparent)]
    Network(#[from] NetworkError),
    /// A part stopped before shutdown was asked for.
    #[error("the relay's {0} stopped unexpectedly")]
    Stopped(&'static str),
    /// A task panicked.
    #[error("a relay task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// A running relay. Dropping it aborts its tasks; [`Relay::wait`] stops it cleanly.
#[derive(Debug)]
pub struct Relay {
    peer_id: PeerId,
    addrs: Vec<Multiaddr>,
    metrics_addr: Option<SocketAddr>,
    metrics: Metrics,
    store: Arc<MailboxStore>,
    shutdown: CancellationToken,
    /// Each task names its part, for [`RunError::Stopped`].
    tasks: JoinSet<(&'static str, Result<(), RunError>)>,
}

impl Relay {
    /// The relay's PeerId.
    pub fn peer_id(&self) -> PeerId {
        self.peer_id
    }

    /// Its dialable addresses (each ending in `/p2p/<peer id>`); what the binary prints.
    pub fn addrs(&self) -> &[Multiaddr] {
        &self.addrs
    }

    /// Where metrics are served (the bound address, useful with port 0).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The metrics handle.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The mailbox store.
    pub fn store(&self) -> &Arc<MailboxStore> {
        &self.store
    }

    /// Runs until `shutdown` is cancelled (then stops every part and returns `Ok`) or a
    /// part fails (then stops the others and returns its error).
    pub async fn wait(mut self) -> Result<(), RunError> {
        let mut outcome = Ok(());
        tokio::select! {
            // Shutdown first: once it is cancelled the parts end on their own, and a
            // part that ended because of it has not failed.
            biased;
            () = self.shutdown.cancelled() => {}
            Some(joined) = self.tasks.join_next() => {
                outcome = match joined {
                    Ok((_, Err(e))) => Err(e),
                    Ok(_) if self.shutdown.is_cancelled() => Ok(()),
                    Ok((part, Ok(()))) => Err(RunError::Stopped(part)),
                    Err(e) => Err(RunError::Join(e)),
                };
                self.shutdown.cancel();
            }
        }
        let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
            while let Some(joined) = self.tasks.join_next().await {
                match joined {
                    Ok((part, Err(e))) => warn!("relay {part} failed while stopping: {e}"),
                    Ok((part, Ok(()))) => debug!("relay {part} stopped"),
                    Err(e) => warn!("relay task failed while stopping: {e}"),
                }
            }
        })
        .await;
        if drained.is_err() {
            warn!("relay tasks still running after {SHUTDOWN_GRACE:?}; aborting them");
            self.tasks.shutdown().await;
        }
        outcome
    }
}

/// Starts the relay: loads (or creates) its key, opens the store, starts the sweeper,
/// the metrics server and the network part. Cancel `shutdown` to stop it, then await
/// [`Relay::wait`].
pub async fn start(config: Config, shutdown: CancellationToken) -> Result<Relay, StartError> {
    config.validate()?;
    let key_path = config.key_path.clone();
    let (identity, created) = tokio::task::spawn_blocking(move || {
        keyfile::load_or_create(&key_path, &mut rand_core::UnwrapErr(getrandom::SysRng))
    })
    .await??;
    if created {
        info!(path = %config.key_path.display(), "created a new relay key");
    }
    let keypair = transport_keypair(&identity)?;
    let peer_id = PeerId::from(keypair.public());

    let (db_path, caps) = (config.db_path.clone(), config.caps.clone());
    let store = tokio::task::spawn_blocking(move || MailboxStore::open(&db_path, caps)).await??;
    let store = Arc::new(store);
    let metrics = Metrics::new(peer_id.to_string(), config.network.as_str());
    metrics.set_store(store.stats());
    info!(%peer_id, db = %config.db_path.display(), stats = ?store.stats(), "mailbox store open");

    let mut tasks = JoinSet::new();
    let metrics_addr = match config.metrics_addr {
        Some(addr) => {
            let listener = TcpListener::bind(addr)
                .await
                .map_err(|source| StartError::Metrics { addr, source })?;
            let bound = listener
                .local_addr()
                .map_err(|source| StartError::Metrics { addr, source })?;
            let (m, token) = (metrics.clone(), shutdown.clone());
            tasks.spawn(async move {
                http::run(listener, m, token).await;
                ("metrics server", Ok(()))
            });
            info!(%bound, "serving /metrics and /probe");
            Some(bound)
        }
        None => None,
    };
    let (s, m, token, every, clock) = (
        store.clone(),
        metrics.clone(),
        shutdown.clone(),
        config.sweep_interval,
        config.clock,
    );
    tasks.spawn(async move {
        sweeper(s, m, every, clock, token).await;
        ("sweeper", Ok(()))
    });

    let ctx = NetworkContext {
        keypair,
        listen: config.listen.clone(),
        external: config.external.clone(),
        network: config.network.clone(),
        clock: config.clock,
        store: store.clone(),
        metrics: metrics.clone(),
    };
    let started = match network::start(ctx, shutdown.child_token()).await {
        Ok(started) => started,
        Err(e) => {
            shutdown.cancel();
            tasks.shutdown().await;
            return Err(e.into());
        }
    };
    metrics.set_addrs(started.addrs.iter().map(ToString::to_string));
    let network_task = started.task;
    tasks.spawn(async move { ("network", network_task.await.map_err(RunError::from)) });

    Ok(Relay {
        peer_id,
        addrs: started.addrs,
        metrics_addr,
        metrics,
        store,
        shutdown,
        tasks,
    })
}

/// [`start`], then [`Relay::wait`].
pub async fn run(config: Config, shutdown: CancellationToken) -> Result<(), RelayError> {
    let relay = start(config, shutdown).await?;
    Ok(relay.wait().await?)
}

/// Errors of [`run`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RelayError {
    /// It did not start.
    #[error(transparent)]
    Start(#[from] StartError),
    /// It stopped on a failure.
    #[error(transparent)]
    Run(#[from] RunError),
}

/// The relay's libp2p key, derived from its identity (see [`RELAY_TRANSPORT_LABEL`]).
pub fn transport_keypair(identity: &Identity) -> Result<Keypair, StartError> {
    let label = SessionId::new(RELAY_TRANSPORT_LABEL)
        .map_err(|e| StartError::TransportKey(e.to_string()))?;
    identity
        .transport_keypair(&label)
        .map_err(|e| StartError::TransportKey(e.to_string()))
}

/// Sweeps the store at start and then every `every` by `clock`, until shutdown.
async fn sweeper(
    store: Arc<MailboxStore>,
    metrics: Metrics,
    every: Duration,
    clock: interlink_net::Clock,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(every);
    // A sweep is idempotent: after a stall, one is enough.
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            () = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let s = store.clone();
        // Not cancellable once started; a sweep commits in small batches, so shutdown
        // waits at most one batch.
        match tokio::task::spawn_blocking(move || s.sweep(clock.now_ms())).await {
            Ok(Ok(report)) => {
                metrics.record_sweep();
                metrics.set_store(store.stats());
                if report.mailboxes_checked > 0 {
                    info!(?report, "swept the mailbox store");
                }
            }
            Ok(Err(e)) => warn!("sweep failed: {e}"),
            Err(e) => warn!("sweep task failed: {e}"),
        }
    }
}

//! What each role adds to the node. Every node runs presence, discovery and mailbox
//! holding; a session adds delivery (its engine, inbox and outbox) and the passes its
//! peers issued it, a relay adds its durable store, and both sessions and observers
//! check the mailbox copies handed to them on a thread of their own.
//!
//! One value per role instead of an optional field per part: a part that exists only
//! for one role cannot be half-present, and what a role runs is read in one place.

use std::time::Duration;

use interlink_core::wire::SessionAddr;
use interlink_delivery::{Engine, OutboxEntry};
use interlink_store::{inbox::Inbox, passes::MailboxPasses};
use tracing::{info, warn};

use super::{
    LIVE_RETRY, REPUBLISH, delivery,
    delivery::Delivery,
    hold_check,
    hold_check::{Checked, HoldChecker},
    mailbox, relay_store,
    relay_store::{Held, RelayStore},
    store,
};
use crate::{Config, NetError, Role};

/// The role-specific parts of a running node.
pub(super) enum Parts {
    Session {
        delivery: Box<Delivery>,
        hold_checker: HoldChecker,
        passes: MailboxPasses,
    },
    Observer {
        hold_checker: HoldChecker,
    },
    Relay {
        store: RelayStore,
    },
}

/// A result from one of the role's threads.
pub(super) enum WorkDone {
    /// The session's store thread finished an operation.
    Store(store::Done),
    /// A mailbox copy handed to this node was checked.
    Checked(Checked),
    /// The relay's durable store committed (or refused) a hold.
    Held(Held),
    /// A kept live-delivery stream brought a request or an answer.
    Live(super::live_stream::LiveEvent),
}

impl Parts {
    pub(super) fn delivery(&self) -> Option<&Delivery> {
        match self {
            Self::Session { delivery, .. } => Some(delivery),
            Self::Observer { .. } | Self::Relay { .. } => None,
        }
    }

    pub(super) fn delivery_mut(&mut self) -> Option<&mut Delivery> {
        match self {
            Self::Session { delivery, .. } => Some(delivery),
            Self::Observer { .. } | Self::Relay { .. } => None,
        }
    }

    pub(super) fn passes(&self) -> Option<&MailboxPasses> {
        match self {
            Self::Session { passes, .. } => Some(passes),
            Self::Observer { .. } | Self::Relay { .. } => None,
        }
    }

    pub(super) fn passes_mut(&mut self) -> Option<&mut MailboxPasses> {
        match self {
            Self::Session { passes, .. } => Some(passes),
            Self::Observer { .. } | Self::Relay { .. } => None,
        }
    }

    pub(super) fn hold_checker(&self) -> Option<&HoldChecker> {
        match self {
            Self::Session { hold_checker, .. } | Self::Observer { hold_checker } => {
                Some(hold_checker)
            }
            Self::Relay { .. } => None,
        }
    }

    pub(super) fn relay_store(&self) -> Option<&RelayStore> {
        match self {
            Self::Relay { store } => Some(store),
            Self::Session { .. } | Self::Observer { .. } => None,
        }
    }

    /// The next result from the role's threads; pending forever when none can come.
    /// A session's store results go first: they release the receipts and acks that
    /// peers wait on.
    pub(super) async fn next_done(&mut self) -> WorkDone {
        match self {
            Self::Session {
                delivery,
                hold_checker,
                ..
            } => {
                let (done, streams) = delivery.receivers();
                let store = async {
                    match done {
                        Some(done) => done.recv().await,
                        None => std::future::pending().await,
                    }
                };
                let live = async {
                    match streams {
                        Some(streams) => streams.next_event().await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    biased;
                    Some(done) = store => WorkDone::Store(done),
                    Some(event) = live => WorkDone::Live(event),
                    Some(checked) = hold_checker.next_done() => WorkDone::Checked(checked),
                    else => std::future::pending().await,
                }
            }
            Self::Observer { hold_checker } => match hold_checker.next_done().await {
                Some(checked) => WorkDone::Checked(checked),
                None => std::future::pending().await,
            },
            Self::Relay { store } => match store.next_done().await {
                Some(held) => WorkDone::Held(held),
                None => std::future::pending().await,
            },
        }
    }
}

/// The parts `role` runs: a session's delivery (its inbox and outbox opened) and the
/// passes its peers issued it, a relay's store thread; sessions and observers, which
/// hold copies for others, check them on a thread of their own (a relay's store thread
/// does it for the relay).
pub(super) fn role_parts(config: &Config, role: &Role) -> Result<Parts, NetError> {
    let hold_checker = || {
        hold_check::spawn(config.clock)
            .map_err(|e| NetError::Setup(format!("hold check thread: {e}")))
    };
    Ok(match role {
        Role::Session(spec) => {
            let delivery = open_delivery(config, spec, config.delivery.inbox_dir.as_deref())?;
            // Kept beside the pins: both are what this user knows per identity.
            let path = config
                .delivery
                .pins_file
                .as_ref()
                .map(|p| p.with_file_name(interlink_store::passes::PASSES_FILE));
            Parts::Session {
                delivery: Box::new(delivery),
                hold_checker: hold_checker()?,
                passes: interlink_store::passes::MailboxPasses::load(path, spec.identity.public()),
            }
        }
        Role::Observer => Parts::Observer {
            hold_checker: hold_checker()?,
        },
        Role::Relay(spec) => Parts::Relay {
            store: relay_store::spawn(spec.store.clone(), config.clock)
                .map_err(|e| NetError::Setup(format!("relay store thread: {e}")))?,
        },
    })
}

/// A session's delivery: its inbox and outbox opened, the engine restored from them
/// (what the outbox kept, what the inbox holds, the pair requests sent), the store
/// thread started. A session without an inbox directory gets an engine and no store.
fn open_delivery(
    config: &Config,
    spec: &crate::SessionSpec,
    dir: Option<&std::path::Path>,
) -> Result<delivery::Delivery, NetError> {
    let setup = |e: &dyn std::fmt::Display| NetError::Setup(e.to_string());
    let now = config.clock.now_ms();
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let engine_config = interlink_delivery::Config::default()
        .with_policy(config.delivery.policy.clone())
        .with_timing(
            ms(crate::behaviour::LIVE_ATTEMPT_TIMEOUT),
            ms(mailbox::MAILBOX_POLL),
            ms(REPUBLISH),
            ms(LIVE_RETRY),
        );
    let me = SessionAddr {
        key: spec.identity.public(),
        session: spec.session.clone(),
    };
    let Some(dir) = dir else {
        // Nothing keeps what it sends: `queued` only on a holder's word.
        let engine_config = engine_config
            .without_outbox()
            .with_put_timeout(ms(crate::behaviour::MAILBOX_REQUEST_TIMEOUT) + 5_000);
        let engine = Engine::new(engine_config, spec.identity.clone(), me, now);
        return Ok(delivery::Delivery::new(engine, None, now));
    };
    let inbox = Inbox::open(dir, now).map_err(|e| setup(&e))?;
    let mut outbox = interlink_store::outbox::Outbox::open(dir).map_err(|e| setup(&e))?;
    let kept = outbox.load(now).unwrap_or_else(|e| {
        warn!("reading the outbox: {e}");
        Vec::new()
    });
    if !kept.is_empty() {
        info!(
            messages = kept.len(),
            "outbox: messages still waiting for their recipients"
        );
    }
    let mut engine = Engine::restore(
        engine_config,
        spec.identity.clone(),
        me,
        kept.into_iter()
            .map(|envelope| OutboxEntry { envelope })
            .collect(),
        inbox.received(),
        now,
    );
    for key in interlink_store::pair_requests::load(dir) {
        engine.gate_mut().note_pair_request(key);
    }
    let store = store::Store::spawn(inbox, outbox, spec.identity.sealing_secret(), config.clock)
        .map_err(|e| setup(&e))?;
    Ok(delivery::Delivery::new(engine, Some(store), now))
}

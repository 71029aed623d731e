//! What each role adds to the node. Every node runs presence, discovery and mailbox
//! holding; a session adds delivery (its engine, inbox and outbox) and the passes its
//! peers issued it, a relay adds its durable store, and both sessions and observers
//! check the mailbox copies handed to them on a thread of their own.
//!
//! One value per role instead of an optional field per part: a part that exists only
//! for one role cannot be half-present, and what a role runs is read in one place.

use interlink_store::passes::MailboxPasses;

use super::{
    delivery::Delivery,
    hold_check::{Checked, HoldChecker},
    relay_store::{Held, RelayStore},
    store,
};

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

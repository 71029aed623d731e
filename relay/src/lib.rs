//! The interlink-p2p relay node, `interlink-relay`.
//!
//! An optional always-on node that adds durability and reachability to the overlay:
//! a libp2p circuit-relay v2 server, a Kademlia server whose mailbox records live in
//! redb (keep-until-ack, merged with [`interlink_core::mailbox`]), a bootstrap point
//! for tailnets, and a metrics and probe endpoint. docs/RELAY.md is the operator's
//! guide.
//!
//! Layers:
//! - [`store`] — the durable mailbox store (blocking; callers use `spawn_blocking`).
//! - [`metrics`] — counters, gauges (prometheus-client) and the probe identity, shared
//!   by every task.
//! - [`http`] — the HTTP server (hyper) for `GET /metrics` and `GET /probe`.
//! - [`network`] — the libp2p node: `interlink-net`'s in its relay role, with the
//!   redb store plugged in.
//! - [`config`], [`cli`] — what to run; [`start`] / [`run`] — running it: key, store,
//!   sweeper, metrics server and network, stopped by one cancellation token.
#![deny(missing_docs)]

pub mod cli;
pub mod config;
pub mod http;
pub mod metrics;
pub mod network;
mod node;
pub mod store;

pub use config::Config;
pub use node::{
    MAX_BLOCKING_THREADS, RELAY_TRANSPORT_LABEL, Relay, RelayError, RunError, SHUTDOWN_GRACE,
    StartError, run, start, transport_keypair,
};

#[cfg(test)]
mod node_tests;

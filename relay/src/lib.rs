//! The interlink-p2p relay node, `interlink-relay`.
//!
//! An optional always-on node that adds durability and reachability to the overlay:
//! a libp2p circuit-relay v2 server, a Kademlia server whose mailbox records live in
//! redb (keep-until-ack, merged with [`interlink_core::mailbox`]), a bootstrap point
//! for tailnets, and a metrics and probe endpoint.
//!
//! - [`store`] — the durable mailbox store (blocking; callers use `spawn_blocking`).
//! - [`metrics`] — counters, gauges and the probe identity, shared by every task.
//! - [`http`] — the tiny HTTP server for `GET /metrics` and `GET /probe`.
#![deny(missing_docs)]

pub mod http;
pub mod metrics;
pub mod store;
#[cfg(any(test, feature = "test-utils"))]
pub mod testkit;

//! The libp2p node of an interlink-p2p session.
//!
//! This crate will hold the network actor: one task that owns the libp2p `Swarm`
//! (gossipsub presence on [`interlink_core::names::Network::announce_topic`], Kademlia
//! mailboxes, mDNS, identify, relay client, request-response for live delivery and
//! roster fetches) and a cheap cloneable handle that talks to it over bounded
//! channels. It is built by the overlay and delivery issues; nothing here yet.
#![deny(missing_docs)]

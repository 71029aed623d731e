#![warn(missing_docs)]
//! The IO-free core of interlink-p2p.
//!
//! Everything a session needs to decide — who it is, what bytes go on the wire, whether
//! a message is genuine, fresh and allowed, who is present, where a message is routed,
//! how mailbox copies merge — lives here as plain functions and state machines. Time
//! (`now_ms`, milliseconds since the Unix epoch) and randomness (`&mut impl CryptoRng`)
//! are passed in by the caller, so every rule is testable without a network or a clock.
//!
//! Nothing here touches the file system, the environment or the operating system: the
//! key file and every other file are `interlink-store`'s.
//!
//! Layers, bottom up:
//! - [`limits`] — every size, count and time bound, by name.
//! - [`identity`], [`session`] — keys, fingerprints, derived transport and sealing keys,
//!   session ids.
//! - [`sign`], [`seal`] — domain-separated Ed25519 signatures; HPKE sealing of bodies.
//! - [`wire`] — the versioned CBOR wire types and their verified decoders; [`names`] —
//!   topic and protocol ids per overlay.
//! - [`replay`] — freshness and the bounded replay set.
//! - [`presence`], [`routing`], [`trust`], [`mailbox`], [`collected`], [`claims`] — the
//!   state machines and rules built on the verified wire types.

pub mod bounded;
pub mod claims;
pub mod collected;
pub mod dates;
pub mod device_link;
pub mod identity;
pub mod limits;
pub mod mailbox;
pub mod names;
pub mod presence;
pub mod replay;
pub mod routing;
pub mod seal;
pub mod session;
pub mod sign;
pub mod trust;
pub mod wire;

pub use identity::{Fingerprint, Identity, IdentityKey, SealingKey};
pub use session::SessionId;
pub use wire::MsgId;

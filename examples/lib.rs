//! Runnable examples of interlink-p2p; see the `[[example]]` targets:
//!
//! - `sealed_envelope` — two identities exchange one signed, sealed message and a
//!   receipt, entirely in memory: `cargo run -p interlink-examples --example sealed_envelope`.

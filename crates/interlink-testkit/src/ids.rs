//! Deterministic identities and ids: the same number gives the same key or id in
//! every run.

use interlink_core::{Identity, MsgId, SessionId, wire::SessionAddr};

/// A deterministic identity numbered `n`.
pub fn identity(n: u64) -> Identity {
    let mut seed = [0x5a; 32];
    seed[..8].copy_from_slice(&n.to_be_bytes());
    Identity::from_seed(&seed)
}

/// The identity of the seed `[seed; 32]` (the form the node tests use).
pub fn seeded(seed: u8) -> Identity {
    Identity::from_seed(&[seed; 32])
}

/// A session id (panics on an invalid one: test input).
pub fn session(s: &str) -> SessionId {
    SessionId::new(s).expect("valid test session id")
}

/// `identity#session` as a session address.
pub fn addr(identity: &Identity, s: &str) -> SessionAddr {
    SessionAddr {
        key: identity.public(),
        session: session(s),
    }
}

/// A deterministic message id numbered `n` (big-endian in the first eight bytes).
pub fn msg_id(n: u64) -> MsgId {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&n.to_be_bytes());
    MsgId::from_bytes(b)
}

/// A deterministic message id numbered `n`, little-endian in the first eight bytes
/// (the delivery engine tests' numbering).
pub fn msg_id_le(n: u64) -> MsgId {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&n.to_le_bytes());
    MsgId::from_bytes(b)
}

/// A random message id from the system's generator.
pub fn random_msg_id() -> MsgId {
    MsgId::random(&mut sys_rng())
}

/// The system's random generator, as the node uses it.
pub fn sys_rng() -> rand_core::UnwrapErr<getrandom::SysRng> {
    rand_core::UnwrapErr(getrandom::SysRng)
}

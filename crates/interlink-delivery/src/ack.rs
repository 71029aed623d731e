//! The one place that knows the shape of [`Ack`].
//!
//! Acks name `(sender, msg_id)` pairs on the wire (protocol version 2); the engine
//! builds and reads them only through these functions, so a change of their shape is
//! made here.

use interlink_core::{
    Identity, IdentityKey, MsgId,
    limits::MAX_ACK_IDS,
    wire::{Ack, AckEntry, SessionAddr, Signed, VERSION, WireError},
};

use crate::types::EntryKey;

/// Signed acks of `me`'s mailbox for these entries, [`MAX_ACK_IDS`] per ack.
pub(crate) fn make_acks(
    identity: &Identity,
    me: &SessionAddr,
    entries: &[EntryKey],
    now: u64,
) -> Result<Vec<Signed<Ack>>, WireError> {
    let mut out = Vec::new();
    for chunk in entries.chunks(MAX_ACK_IDS) {
        let mut entries: Vec<AckEntry> = chunk.iter().map(|(s, id)| AckEntry(*s, *id)).collect();
        entries.sort_unstable();
        entries.dedup();
        let body = Ack {
            v: VERSION,
            owner: me.key,
            owner_session: me.session.clone(),
            entries,
            ts: now,
        };
        out.push(Signed::sign(body, identity)?);
    }
    Ok(out)
}

/// The entries an ack names, as `(Some(sender), id)`; `None` would mean "this id from
/// every sender", which only protocol version 1 acks said.
pub fn ack_entries(ack: &Signed<Ack>) -> Vec<(Option<IdentityKey>, MsgId)> {
    ack.body()
        .entries
        .iter()
        .map(|e| (Some(*e.sender()), *e.msg_id()))
        .collect()
}

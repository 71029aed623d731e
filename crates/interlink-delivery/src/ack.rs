//! The one place that knows the shape of [`Ack`].
//!
//! Acks are about to be keyed by `(sender, msg_id)` on the wire (today they list ids
//! alone); the engine builds and reads them only through these two functions, so the
//! change is made here.

use interlink_core::{
    Identity, IdentityKey, MsgId,
    limits::MAX_ACK_IDS,
    wire::{Ack, SessionAddr, Signed, VERSION, WireError},
};

use crate::types::EntryKey;

/// Whether the wire's acks name the sender of each id. While they do not, an ack of
/// one sender's id drops every sender's envelope with that id from mailbox copies.
pub const ACKS_NAME_SENDER: bool = false;

/// Signed acks of `me`'s mailbox for these entries, [`MAX_ACK_IDS`] per ack.
pub(crate) fn make_acks(
    identity: &Identity,
    me: &SessionAddr,
    entries: &[EntryKey],
    now: u64,
) -> Result<Vec<Signed<Ack>>, WireError> {
    let mut out = Vec::new();
    for chunk in entries.chunks(MAX_ACK_IDS) {
        let mut msg_ids: Vec<MsgId> = chunk.iter().map(|(_, id)| *id).collect();
        msg_ids.sort_unstable();
        msg_ids.dedup();
        let body = Ack {
            v: VERSION,
            owner: me.key,
            owner_session: me.session.clone(),
            msg_ids,
            ts: now,
        };
        out.push(Signed::sign(body, identity)?);
    }
    Ok(out)
}

/// The entries an ack names: `(Some(sender), id)`, or `(None, id)` while the wire
/// lists ids alone (then the ack names that id from every sender).
pub fn ack_entries(ack: &Signed<Ack>) -> Vec<(Option<IdentityKey>, MsgId)> {
    ack.body().msg_ids.iter().map(|id| (None, *id)).collect()
}

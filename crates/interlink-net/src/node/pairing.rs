//! Pairing on the node: the identities this session knocked go to
//! [`interlink_store::pair_requests`] (so a late acceptance is let in after a restart;
//! identities that became peers are pruned by the gate and leave the file with the next
//! knock), and the knocks it holds for its operator to [`interlink_store::knocks`].

use interlink_core::IdentityKey;
use interlink_store::pair_requests;
use tracing::warn;

use super::Actor;

impl Actor {
    /// Mirrors the gate's held knocks to [`interlink_store::knocks::KNOCKS_FILE`].
    pub(super) fn save_held_knocks(&self) {
        let (Some(d), Some(dir)) = (
            self.parts.delivery(),
            self.config.delivery.inbox_dir.as_deref(),
        ) else {
            return;
        };
        let sealing = match &self.role {
            crate::Role::Session(spec) => Some(spec.identity.sealing_secret()),
            _ => None,
        };
        let held: Vec<interlink_store::knocks::HeldKnock> = d
            .engine()
            .gate()
            .knocks()
            .list()
            .map(|k| interlink_store::knocks::HeldKnock {
                invite: sealing
                    .as_ref()
                    .and_then(|s| k.open_invite(s))
                    .map(|secret| interlink_core::identity::hex_encode(&secret)),
                ..k.into()
            })
            .collect();
        if let Err(e) = interlink_store::knocks::save(dir, &held) {
            warn!("saving the held knocks: {e}");
        }
    }

    /// Records that this session knocked `key`: its acceptance will be let in, also
    /// after a restart.
    pub(super) fn note_knock_sent(&mut self, key: IdentityKey) {
        let Some(gate) = self.parts.delivery_mut().map(|d| d.engine_mut().gate_mut()) else {
            return;
        };
        gate.note_pair_request(key);
        let keys: Vec<IdentityKey> = gate.pending_pair_requests().copied().collect();
        if let Some(dir) = self.config.delivery.inbox_dir.as_deref()
            && let Err(e) = pair_requests::save(dir, &keys)
        {
            warn!("saving the pair requests sent: {e}");
        }
    }
}

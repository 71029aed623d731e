//! Pairing on the node: the identities this session knocked go to
//! [`interlink_store::pair_requests`] (so a late acceptance is let in after a restart;
//! identities that became peers are pruned by the gate and leave the file with the next
//! knock), and the knocks it holds for its operator to [`interlink_store::knocks`].

use interlink_core::{
    IdentityKey, MsgId, bounded::LruMap, limits::KNOCK_QUEUE_CAPACITY, trust::Knock,
};
use interlink_store::pair_requests;
use tracing::warn;

use super::Actor;

/// How often, at most, the held knocks are written: a burst of knocks is written once
/// at the end of each interval rather than once per knock.
pub(super) const KNOCKS_WRITE_EVERY_MS: u64 = 250;

/// Opened invite secrets kept: one per held knock (the queue holds
/// [`KNOCK_QUEUE_CAPACITY`]), and the knocks no longer held are pruned at each write.
const OPENED_INVITES: usize = 2 * KNOCK_QUEUE_CAPACITY;

/// The held-knocks file's state on the node: each knock's invite secret opened once,
/// when it was held, and when the file is next due.
#[derive(Debug)]
pub(super) struct HeldKnocksFile {
    /// (sender, knock id) → the invite secret it carries, opened (hex), or none. An
    /// HPKE open is paid once per knock held, never again on later writes: a wrong
    /// secret costs one open, not one per knock that arrives while it is held.
    opened: LruMap<(IdentityKey, MsgId), Option<String>>,
    /// The gate's queue changed since the last write.
    dirty: bool,
    /// When the file was last written (ms since the epoch).
    written_at: Option<u64>,
}

impl Default for HeldKnocksFile {
    fn default() -> Self {
        Self {
            opened: LruMap::new(OPENED_INVITES),
            dirty: false,
            written_at: None,
        }
    }
}

impl HeldKnocksFile {
    /// When a write is due (ms since the epoch), if one is owed.
    pub(super) fn due_at(&self) -> Option<u64> {
        self.dirty.then(|| {
            self.written_at
                .map_or(0, |at| at.saturating_add(KNOCKS_WRITE_EVERY_MS))
        })
    }
}

/// The invite secret `knock` carries, opened with the session's sealing key (hex), if
/// it carries one that opens: one HPKE open.
fn open_invite(role: &crate::Role, knock: &Knock) -> Option<String> {
    let crate::Role::Session(spec) = role else {
        return None;
    };
    knock
        .open_invite(&spec.identity.sealing_secret())
        .map(|secret| interlink_core::identity::hex_encode(&secret))
}

impl Actor {
    /// A knock was held: its invite secret is opened now (once), and the held knocks
    /// are written now or, after a write within the last [`KNOCKS_WRITE_EVERY_MS`],
    /// when that interval is over (the run loop wakes for it).
    pub(super) fn on_knock_held(&mut self, knock: &Knock) {
        let invite = open_invite(&self.role, knock);
        let Some(d) = self.parts.delivery_mut() else {
            return;
        };
        d.held_file()
            .opened
            .entry((knock.sender, knock.msg_id), || invite);
        d.held_file().dirty = true;
        self.save_held_knocks(false);
    }

    /// Mirrors the gate's held knocks to [`interlink_store::knocks::KNOCKS_FILE`] if
    /// they changed and a write is due (`force`: due now, at shutdown).
    pub(super) fn save_held_knocks(&mut self, force: bool) {
        let now = self.now_ms();
        let Some(dir) = self.config.delivery.inbox_dir.clone() else {
            return;
        };
        let Some(d) = self.parts.delivery_mut() else {
            return;
        };
        match d.held_file_due() {
            Some(at) if force || at <= now => {}
            _ => return,
        }
        let knocks: Vec<Knock> = d.engine().gate().knocks().list().cloned().collect();
        // Only the knocks still held keep their opened secrets.
        d.held_file().opened.retain(|(sender, id), _| {
            knocks
                .iter()
                .any(|k| k.sender == *sender && k.msg_id == *id)
        });
        let role = &self.role;
        let file = d.held_file();
        let held: Vec<interlink_store::knocks::HeldKnock> = knocks
            .iter()
            .map(|k| {
                // Opened when it was held; a knock held before this state existed (none
                // should be) is opened here, once.
                let (invite, _) = file
                    .opened
                    .entry((k.sender, k.msg_id), || open_invite(role, k));
                interlink_store::knocks::HeldKnock {
                    invite: invite.clone(),
                    ..k.into()
                }
            })
            .collect();
        file.written_at = Some(now);
        match interlink_store::knocks::save(&dir, &held) {
            Ok(()) => file.dirty = false,
            // Still owed: tried again an interval later.
            Err(e) => warn!("saving the held knocks: {e}"),
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

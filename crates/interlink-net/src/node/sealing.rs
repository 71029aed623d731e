//! Sealing contexts kept between messages (see `interlink_core::seal`): a sender keeps
//! one per recipient key and replaces it after [`CONTEXT_LIFETIME`] or
//! [`CONTEXT_USES`] bodies; a recipient keeps the opening context of each sender
//! context it has seen. Either way the X25519 operation is paid once per context, not
//! once per message.

use std::time::{Duration, Instant};

use interlink_core::{
    bounded::LruMap,
    identity::{SealingKey, SealingSecret},
    seal::{OpenContext, SealContext, SealError},
};

/// Sender contexts kept at once (one per recipient identity).
const MAX_SEAL_CONTEXTS: usize = 256;
/// Opening contexts kept at once (one per sender context seen).
const MAX_OPEN_CONTEXTS: usize = 1024;
/// A sender context is replaced after this long…
const CONTEXT_LIFETIME: Duration = Duration::from_secs(600);
/// …or after sealing this many bodies, whichever comes first.
const CONTEXT_USES: u32 = 10_000;

#[derive(Debug)]
struct Sending {
    ctx: SealContext,
    created: Instant,
    uses: u32,
}

/// What this node knows and has issued per peer identity: sealing keys learned
/// (pins), the HPKE contexts in use, the mailbox passes signed for peers, and the
/// peers offered one this run.
pub(super) struct Keys {
    /// Sealing keys of peers, for sessions not on the roster.
    pins: interlink_store::pins::SealingPins,
    seal_contexts: SealContexts,
    /// This user's passes for its peers, each signed once.
    issued: interlink_core::wire::IssuedPasses,
    /// Peer sessions offered this user's pass this run ([`super::admission`]), at most
    /// [`super::admission::MAX_PASSES_OFFERED`].
    offered: std::collections::HashSet<interlink_core::wire::SessionAddr>,
}

impl Keys {
    pub(super) fn new(pins: interlink_store::pins::SealingPins) -> Self {
        Self {
            pins,
            seal_contexts: SealContexts::default(),
            issued: interlink_core::wire::IssuedPasses::default(),
            offered: std::collections::HashSet::new(),
        }
    }

    /// The sealing key pinned for `key`.
    pub(super) fn pinned(&self, key: &interlink_core::IdentityKey) -> Option<SealingKey> {
        self.pins.get(key)
    }

    /// The context to seal the next body to `to` in (see [`SealContexts::for_key`]).
    pub(super) fn seal_context(
        &mut self,
        to: &SealingKey,
        rng: &mut impl rand_core::CryptoRng,
    ) -> Result<&SealContext, SealError> {
        self.seal_contexts.for_key(to, rng)
    }

    pub(super) fn issued(&mut self) -> &mut interlink_core::wire::IssuedPasses {
        &mut self.issued
    }

    /// Whether `to` was offered this user's pass this run.
    pub(super) fn was_offered(&self, to: &interlink_core::wire::SessionAddr) -> bool {
        self.offered.contains(to)
    }

    /// `to` was offered this user's pass (past the bound the count starts over rather
    /// than grow: a repeat costs one small request).
    pub(super) fn offered(&mut self, to: &interlink_core::wire::SessionAddr) {
        if self.offered.len() >= super::admission::MAX_PASSES_OFFERED {
            self.offered.clear();
        }
        self.offered.insert(to.clone());
    }
}

/// A sender's contexts, by recipient sealing key; the least recently used goes first
/// (its recipient gets a new context next time).
#[derive(Debug)]
pub(crate) struct SealContexts {
    by_key: LruMap<SealingKey, Sending>,
}

impl Default for SealContexts {
    fn default() -> Self {
        Self {
            by_key: LruMap::new(MAX_SEAL_CONTEXTS),
        }
    }
}

impl SealContexts {
    /// The context to seal the next body to `to` in: the current one, or a new one when
    /// there is none or it is spent.
    pub(crate) fn for_key(
        &mut self,
        to: &SealingKey,
        rng: &mut impl rand_core::CryptoRng,
    ) -> Result<&SealContext, SealError> {
        let now = Instant::now();
        let fresh =
            |s: &Sending| now.duration_since(s.created) < CONTEXT_LIFETIME && s.uses < CONTEXT_USES;
        if !self.by_key.get(to).is_some_and(fresh) {
            let ctx = SealContext::new(to, rng)?;
            self.by_key.remove(to);
            self.by_key.entry(*to, || Sending {
                ctx,
                created: now,
                uses: 0,
            });
        }
        let entry = self.by_key.touch(to).ok_or(SealError::Seal)?;
        entry.uses += 1;
        Ok(&entry.ctx)
    }
}

/// A recipient's opening contexts, by the sender context's `enc`; the least recently
/// used go first.
#[derive(Debug)]
pub(crate) struct OpenContexts {
    by_enc: LruMap<[u8; 32], OpenContext>,
}

impl Default for OpenContexts {
    fn default() -> Self {
        Self {
            by_enc: LruMap::new(MAX_OPEN_CONTEXTS),
        }
    }
}

impl OpenContexts {
    /// The opening context of `enc`, set up with `secret` the first time.
    pub(crate) fn for_enc(
        &mut self,
        enc: [u8; 32],
        secret: &SealingSecret,
    ) -> Result<&OpenContext, SealError> {
        if !self.by_enc.contains_key(&enc) {
            let ctx = OpenContext::new(&enc, secret)?;
            self.by_enc.entry(enc, || ctx);
        }
        self.by_enc.touch(&enc).map(|c| &*c).ok_or(SealError::Open)
    }
}

impl super::Actor {
    /// Pins the sealing key of `key` from the roster if it is this user's own identity
    /// or a peer, so mail to its sessions can still be sealed once none is on the
    /// roster ([`interlink_store::pins`]).
    pub(super) fn pin_sealing_key(&mut self, key: interlink_core::IdentityKey) {
        let own = self.own_addr().map(|a| a.key);
        let peer = self
            .parts
            .delivery()
            .is_some_and(|d| d.engine().gate().policy().contains(&key));
        if own != Some(key) && !peer {
            return;
        }
        if let Some(binding) = self.presence.roster().sealing_binding_of(&key)
            && self.keys.pins.learn(key, binding)
        {
            // A peer's sealing key, newly known: our details can be sealed for it.
            self.reannounce_if_readers_changed();
        }
    }

    /// Tells the roster whom this session trusts (its own identity and its peers): a
    /// flood of strangers' presence never evicts them. At start and on every policy
    /// change.
    pub(super) fn refresh_trusted(&mut self) {
        let own = self.own_addr().map(|a| a.key);
        let peers: Vec<_> = match self.parts.delivery() {
            Some(d) => d.engine().gate().policy().iter().map(|(_, k)| *k).collect(),
            None => Vec::new(),
        };
        self.presence
            .roster_mut()
            .set_trusted(own.into_iter().chain(peers));
        // A peer removed reads no announcement from now on; one added reads the next.
        self.reannounce_if_readers_changed();
    }

    /// Pins every peer on the roster (after the policy changed: a key just added).
    pub(super) fn pin_roster_peers(&mut self) {
        let keys: Vec<_> = match self.parts.delivery() {
            Some(d) => d.engine().gate().policy().iter().map(|(_, k)| *k).collect(),
            None => return,
        };
        for key in keys {
            self.pin_sealing_key(key);
        }
    }
}

//! Mailbox passes: a mailbox owner's admission of one sender.
//!
//! Holders of a mailbox cannot know whom its owner paired with, yet must keep a paired
//! sender's mail safe from strangers (PROTOCOL §4.7, §7.2). A pass is what tells them: the
//! owner identity's signature, in its own domain, over the 64 bytes
//! `owner key || sender key`. A sender puts the pass it was given into each envelope
//! it sends the owner ([`super::Envelope::pass`]); a holder verifies it against the
//! envelope's recipient and sender and keeps the envelope among the owner's admitted
//! mail. Nothing else is needed: the pass names both keys, so it admits one sender to
//! one owner's mailboxes and is useless to anyone else, and a holder learns from it
//! only that the owner admitted a sender whose mail it holds anyway.
//!
//! An owner hands its passes out on what it signs for a peer anyway: each envelope
//! carries the sender's pass for its recipient ([`super::Envelope::reply_pass`]) and
//! each receipt the signer's pass for the message's sender ([`super::Receipt::pass`]).
//! Ed25519 signatures are deterministic, so an owner issues the same pass to the same
//! sender every time; [`IssuedPasses`] keeps them so it signs each once.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_bytes::ByteArray;

use crate::{
    Identity,
    identity::IdentityKey,
    sign::{self, Domain, SignatureError},
};

/// An owner's admission of one sender into its mailboxes: 64 bytes of signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MailboxPass(ByteArray<64>);

impl MailboxPass {
    /// `owner`'s pass for `sender`.
    pub fn issue(owner: &Identity, sender: &IdentityKey) -> Self {
        Self(ByteArray::new(owner.sign(
            Domain::MailboxPass,
            &payload(&owner.public(), sender),
        )))
    }

    /// Verifies that `owner` issued this pass to `sender`, strictly.
    pub fn verify(&self, owner: &IdentityKey, sender: &IdentityKey) -> Result<(), SignatureError> {
        sign::verify(
            owner,
            Domain::MailboxPass,
            &payload(owner, sender),
            self.0.as_slice(),
        )
    }

    /// The signature bytes.
    pub fn as_bytes(&self) -> &[u8; 64] {
        &self.0
    }

    /// A pass from its signature bytes (verify before trusting it).
    pub fn from_bytes(bytes: [u8; 64]) -> Self {
        Self(ByteArray::new(bytes))
    }
}

/// Most (owner, sender, pass) triples [`MailboxPass::admits`] remembers as verified, per
/// thread, before it starts over.
pub const MAX_VERIFIED_PASSES: usize = 4096;

thread_local! {
    // Verified triples: a pass is checked once per thread, not on every re-insert of the
    // same envelope (a sender re-publishes its whole pending copy on every change, and a
    // holder merges copies of the same envelopes again and again). Verification is a
    // pure function of the triple, so remembering a success is exact.
    static VERIFIED: std::cell::RefCell<std::collections::HashSet<[u8; 128]>> =
        std::cell::RefCell::new(std::collections::HashSet::new());
}

impl MailboxPass {
    /// Whether this is `owner`'s pass for `sender`: [`MailboxPass::verify`], with
    /// successes remembered (bounded, per thread).
    pub fn admits(&self, owner: &IdentityKey, sender: &IdentityKey) -> bool {
        let mut triple = [0u8; 128];
        triple[..64].copy_from_slice(&payload(owner, sender));
        triple[64..].copy_from_slice(self.as_bytes());
        if VERIFIED.with(|v| v.borrow().contains(&triple)) {
            return true;
        }
        let ok = self.verify(owner, sender).is_ok();
        if ok {
            VERIFIED.with(|v| {
                let mut v = v.borrow_mut();
                if v.len() >= MAX_VERIFIED_PASSES {
                    v.clear();
                }
                v.insert(triple);
            });
        }
        ok
    }
}

fn payload(owner: &IdentityKey, sender: &IdentityKey) -> [u8; 64] {
    let mut p = [0u8; 64];
    p[..32].copy_from_slice(owner.as_bytes());
    p[32..].copy_from_slice(sender.as_bytes());
    p
}

/// Most passes [`IssuedPasses`] remembers before it starts over.
pub const MAX_ISSUED_PASSES: usize = 1024;

/// The passes one owner issued, so each is signed once (a signature costs about as
/// much as the rest of building an envelope). Bounded: past [`MAX_ISSUED_PASSES`]
/// it forgets them all and signs again on demand.
#[derive(Debug, Default)]
pub struct IssuedPasses {
    issued: HashMap<IdentityKey, MailboxPass>,
}

impl IssuedPasses {
    /// `owner`'s pass for `sender`, signed now or remembered.
    pub fn get(&mut self, owner: &Identity, sender: &IdentityKey) -> MailboxPass {
        if let Some(p) = self.issued.get(sender) {
            return *p;
        }
        if self.issued.len() >= MAX_ISSUED_PASSES {
            self.issued.clear();
        }
        let pass = MailboxPass::issue(owner, sender);
        self.issued.insert(*sender, pass);
        pass
    }
}

#[cfg(test)]
#[path = "pass_tests.rs"]
mod tests;

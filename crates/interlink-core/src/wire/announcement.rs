//! Presence announcements: who a session is and where it listens.

use serde::{Deserialize, Serialize};
use serde_bytes::{ByteArray, ByteBuf};

use super::{Signed, SignedBody, Unverified, WireError, check_text, invalid};
use crate::{
    identity::{Identity, IdentityKey, SealingKey},
    limits::{MAX_ADDR_BYTES, MAX_ANNOUNCEMENT_BYTES, MAX_LISTEN_ADDRS},
    session::SessionId,
    sign::{self, Domain},
};

/// Which agent host runs the session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HostKind {
    /// Claude Code.
    Claude,
    /// Codex CLI.
    Codex,
    /// Anything else (a shell, a test, an example).
    Other,
}

/// How delivered messages reach the agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryMode {
    /// The local inbox file plus the Stop-hook waiter (Claude Code's default).
    Inbox,
    /// Pushed as MCP channel notifications.
    Channel,
    /// A notice queued into the bound Codex thread.
    Codex,
    /// Written into the agent host's own inbox socket (Claude Code's cross-session
    /// inbox): read mid-turn, or starts a turn when idle (protocol version 6).
    #[serde(rename = "host_inbox")]
    HostInbox,
    /// Only when the agent calls `receive_messages`.
    Poll,
}

/// A sealing key bound to an identity: `sig` signs, in the sealing-key domain, the 64
/// bytes `identity || sealing key`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SealingBinding {
    /// The X25519 sealing key.
    pub key: SealingKey,
    /// The identity's signature over it.
    pub sig: ByteArray<64>,
}

impl SealingBinding {
    /// Binds `identity`'s own sealing key.
    pub fn new(identity: &Identity) -> Self {
        let key = identity.sealing_secret().public();
        let sig = identity.sign(Domain::SealingKey, &Self::payload(&identity.public(), &key));
        Self {
            key,
            sig: ByteArray::new(sig),
        }
    }

    /// Verifies the binding for `identity`.
    pub fn verify(&self, identity: &IdentityKey) -> Result<(), sign::SignatureError> {
        sign::verify(
            identity,
            Domain::SealingKey,
            &Self::payload(identity, &self.key),
            self.sig.as_slice(),
        )
    }

    fn payload(identity: &IdentityKey, key: &SealingKey) -> [u8; 64] {
        let mut p = [0u8; 64];
        p[..32].copy_from_slice(identity.as_bytes());
        p[32..].copy_from_slice(key.as_bytes());
        p
    }
}

/// A session's signed presence announcement.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Announcement {
    /// Protocol version, [`super::VERSION`].
    #[serde(deserialize_with = "crate::wire::decode_version")]
    pub v: u8,
    /// The announcing identity (the signer).
    pub identity: IdentityKey,
    /// Its sealing key, bound by signature.
    pub sealing: SealingBinding,
    #[allow(missing_docs)]
    pub session_id: SessionId,
    /// The session's libp2p PeerId, as bytes (multihash).
    pub peer_id: ByteBuf,
    /// Listen multiaddrs, text form.
    pub addrs: Vec<String>,
    /// Working directory, git label, summary, host and delivery mode, sealed for the
    /// identities that may read them (protocol version 13; [`super::Details`]).
    pub details: super::SealedDetails,
    /// The longest the session waits before announcing again, in milliseconds
    /// (protocol version 7): receivers stretch the live window by it
    /// ([`crate::presence::Config::live_window_for`]), so a session on a large overlay
    /// can announce less often and stay live.
    pub heartbeat_ms: u64,
    /// Milliseconds since the Unix epoch.
    pub ts: u64,
    /// Increases with every announcement of this session; orders two with equal `ts`.
    pub seq: u64,
}

impl SignedBody for Announcement {
    const KIND: &'static str = "announcement";
    const DOMAIN: Domain = Domain::Announcement;
    const MAX_BYTES: usize = MAX_ANNOUNCEMENT_BYTES;

    fn signer(&self) -> &IdentityKey {
        &self.identity
    }
    fn version(&self) -> u8 {
        self.v
    }
    fn ts(&self) -> u64 {
        self.ts
    }

    fn check_fields(&self) -> Result<(), WireError> {
        self.check_fields_but_binding()?;
        self.sealing
            .verify(&self.identity)
            .map_err(|e| invalid::<Self>("sealing", format!("binding rejected: {e}")))
    }
}

impl Announcement {
    /// The field rules apart from the sealing binding's signature.
    fn check_fields_but_binding(&self) -> Result<(), WireError> {
        if libp2p_identity::PeerId::from_bytes(&self.peer_id).is_err() {
            return Err(invalid::<Self>("peer_id", "is not a PeerId"));
        }
        if self.addrs.len() > MAX_LISTEN_ADDRS {
            return Err(invalid::<Self>(
                "addrs",
                format!(
                    "has {} entries; the limit is {MAX_LISTEN_ADDRS}",
                    self.addrs.len()
                ),
            ));
        }
        for a in &self.addrs {
            check_text::<Self>("addrs", a, MAX_ADDR_BYTES, false)?;
            if !a.starts_with('/') {
                return Err(invalid::<Self>("addrs", "entries must be multiaddrs"));
            }
        }
        self.details
            .check_shape()
            .map_err(|reason| invalid::<Self>("details", reason))
    }
}

impl Unverified<Announcement> {
    /// [`Unverified::verify`], except that a sealing binding byte for byte `known` —
    /// one already verified for this identity, as the roster holds it — is not checked
    /// again: every session of an identity carries the same binding, and its signature
    /// check was half the cost of learning a roster (the convergence bench, 200 nodes).
    pub fn verify_knowing(
        self,
        known: Option<&SealingBinding>,
    ) -> Result<Signed<Announcement>, WireError> {
        let skip = known.is_some_and(|k| *k == self.claimed().sealing);
        self.verify_checking(|a| {
            if skip {
                a.check_fields_but_binding()
            } else {
                a.check_fields()
            }
        })
    }
}

impl Announcement {
    /// The announced session's address.
    pub fn session_addr(&self) -> super::SessionAddr {
        super::SessionAddr {
            key: self.identity,
            session: self.session_id.clone(),
        }
    }

    /// The PeerId it claims.
    pub fn peer_id(&self) -> Option<libp2p_identity::PeerId> {
        libp2p_identity::PeerId::from_bytes(&self.peer_id).ok()
    }

    /// Its details, if `wrap` (what the viewer shares with this identity) opens them.
    pub fn open_details(&self, wrap: &super::ReaderKey) -> Option<super::Details> {
        self.details.open(&self.identity, &self.session_id, wrap)
    }
}

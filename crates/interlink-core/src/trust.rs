//! Who may reach this session: the peers policy, pending knocks and the inbound gate.
//!
//! Trust is deny-by-default and pinned per identity, never per session:
//! - [`PeerPolicy`] maps petnames to identity keys. Every session of a user shares it
//!   (the agent layer stores it as `peers.json` through its serde form).
//! - A stranger can only knock. A [`Knock`] carries who is asking and the name it claims,
//!   never text; it waits in the bounded [`KnockQueue`] until a human decides.
//! - [`Gate::decide`] runs every verified inbound envelope through recipient, freshness,
//!   replay and pairing checks before anything reaches the inbox.

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{
    identity::{Fingerprint, IdentityKey, KeyError, SealingSecret, hex_encode},
    limits::{
        KNOCK_MIN_HOLD_MS, KNOCK_QUEUE_CAPACITY, MAILBOX_RETENTION_MS, MAX_FUTURE_SKEW_MS,
        MAX_PEERS, MAX_PENDING_PAIR_REQUESTS, REPLAY_SET_CAPACITY,
    },
    replay::{ReplaySet, TimeError, check_time},
    session::SessionId,
    wire::{
        Envelope, EnvelopeKind, INVITE_SECRET_BYTES, MsgId, Refusal, RefusalCode, Sealed,
        SessionAddr, Signed, is_valid_name,
    },
};

/// Version of the serialized peers policy.
pub const PEERS_FILE_VERSION: u32 = 1;
/// Fewest hex digits accepted as a key or fingerprint prefix; shorter ones match too
/// much to be a deliberate choice.
pub const MIN_KEY_PREFIX: usize = 4;

/// Why the peers policy refused a change or a stored file.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum TrustError {
    /// The petname breaks the naming rule.
    #[error("invalid petname {0:?}: use 1-32 characters from A-Z a-z 0-9 . _ -")]
    InvalidName(String),
    /// The key is already pinned under another petname.
    #[error("key {key} is already a peer, named {name:?}")]
    KeyAlreadyPeer {
        /// The key's fingerprint.
        key: Fingerprint,
        /// The name it has.
        name: String,
    },
    /// The petname already names another key.
    #[error("the name {name:?} is already used for key {key}")]
    NameTaken {
        #[allow(missing_docs)]
        name: String,
        /// The fingerprint of the key it names.
        key: Fingerprint,
    },
    /// The policy holds [`MAX_PEERS`] peers.
    #[error("the peers list is full ({MAX_PEERS} peers)")]
    Full,
    /// A stored policy with a version this node does not read.
    #[error("peers file version {got} is not supported; this node reads {PEERS_FILE_VERSION}")]
    UnsupportedVersion {
        /// The version found.
        got: u32,
    },
    /// A stored key is not a key.
    #[error("peer {name:?} has an invalid key: {source}")]
    BadKey {
        /// The petname it was stored under.
        name: String,
        /// What is wrong with it.
        source: KeyError,
    },
}

/// A name, fingerprint or key prefix did not pick exactly one identity.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResolveError {
    /// Nothing matches.
    #[error(
        "nothing matches {text:?}: give a petname, a fingerprint (a1b2-c3d4-e5f6) or at \
         least {MIN_KEY_PREFIX} hex digits of a key"
    )]
    Unknown {
        /// What was asked for.
        text: String,
    },
    /// More than one identity matches.
    #[error("{text:?} is ambiguous; it matches {}", .candidates.join(", "))]
    Ambiguous {
        /// What was asked for.
        text: String,
        /// The matching identities, described for a human.
        candidates: Vec<String>,
    },
}

/// Who may send to this user: petnames mapped to pinned identity keys. Any key not
/// listed is refused.
///
/// Serialized as `{ "version": 1, "peers": { "<name>": "<64 hex digits>" } }`; a stored
/// file is validated with the same rules as [`PeerPolicy::add`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "PolicyFile", into = "PolicyFile")]
pub struct PeerPolicy {
    by_name: BTreeMap<String, IdentityKey>,
    // Reverse index: every inbound envelope asks whether its sender is a peer.
    by_key: HashMap<IdentityKey, String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    version: u32,
    peers: BTreeMap<String, String>,
}

impl TryFrom<PolicyFile> for PeerPolicy {
    type Error = TrustError;

    fn try_from(file: PolicyFile) -> Result<Self, TrustError> {
        if file.version != PEERS_FILE_VERSION {
            return Err(TrustError::UnsupportedVersion { got: file.version });
        }
        let mut policy = PeerPolicy::new();
        for (name, hex) in file.peers {
            let key = hex.parse().map_err(|source| TrustError::BadKey {
                name: name.clone(),
                source,
            })?;
            policy.add(name, key)?;
        }
        Ok(policy)
    }
}

impl From<PeerPolicy> for PolicyFile {
    fn from(policy: PeerPolicy) -> Self {
        Self {
            version: PEERS_FILE_VERSION,
            peers: policy
                .by_name
                .into_iter()
                .map(|(name, key)| (name, key.to_hex()))
                .collect(),
        }
    }
}

impl PeerPolicy {
    /// An empty policy: nobody but the user's own sessions may send.
    pub fn new() -> Self {
        Self::default()
    }

    /// Pins `key` under `name`. Adding the same pair again is a no-op; a key already
    /// pinned under another name, or a name already naming another key, is refused so a
    /// peer is never silently renamed or replaced.
    pub fn add(&mut self, name: impl Into<String>, key: IdentityKey) -> Result<(), TrustError> {
        let name = name.into();
        if !is_valid_name(&name) {
            return Err(TrustError::InvalidName(name));
        }
        if let Some(existing) = self.by_key.get(&key) {
            if *existing == name {
                return Ok(());
            }
            return Err(TrustError::KeyAlreadyPeer {
                key: key.fingerprint(),
                name: existing.clone(),
            });
        }
        if let Some(other) = self.by_name.get(&name) {
            return Err(TrustError::NameTaken {
                name,
                key: other.fingerprint(),
            });
        }
        if self.by_name.len() >= MAX_PEERS {
            return Err(TrustError::Full);
        }
        self.by_key.insert(key, name.clone());
        self.by_name.insert(name, key);
        Ok(())
    }

    /// Unpins the peer named `name`, returning its key.
    pub fn remove(&mut self, name: &str) -> Option<IdentityKey> {
        let key = self.by_name.remove(name)?;
        self.by_key.remove(&key);
        Some(key)
    }

    /// Renames the peer `old` to `new`, keeping its key (and so every group it is in,
    /// which name members by key). `Ok(None)`: no peer is named `old`. Renaming to the
    /// same name is a no-op; a `new` that names another peer is refused.
    pub fn rename(&mut self, old: &str, new: &str) -> Result<Option<IdentityKey>, TrustError> {
        let Some(key) = self.by_name.get(old).copied() else {
            return Ok(None);
        };
        if old == new {
            return Ok(Some(key));
        }
        if !is_valid_name(new) {
            return Err(TrustError::InvalidName(new.to_owned()));
        }
        if let Some(other) = self.by_name.get(new) {
            return Err(TrustError::NameTaken {
                name: new.to_owned(),
                key: other.fingerprint(),
            });
        }
        self.by_name.remove(old);
        self.by_name.insert(new.to_owned(), key);
        self.by_key.insert(key, new.to_owned());
        Ok(Some(key))
    }

    /// Whether `key` is a peer.
    pub fn contains(&self, key: &IdentityKey) -> bool {
        self.by_key.contains_key(key)
    }

    /// The petname of `key`, if it is a peer.
    pub fn name_of(&self, key: &IdentityKey) -> Option<&str> {
        self.by_key.get(key).map(String::as_str)
    }

    /// The key pinned under `name`.
    pub fn get(&self, name: &str) -> Option<&IdentityKey> {
        self.by_name.get(name)
    }

    /// Peers in petname order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &IdentityKey)> + '_ {
        self.by_name.iter().map(|(n, k)| (n.as_str(), k))
    }

    /// Number of peers.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// Whether there are no peers.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Finds the one peer `text` designates: an exact petname, else a petname differing
    /// only in ASCII case, else a fingerprint (with or without dashes, or a prefix of
    /// it), else a prefix of the hex key. Prefixes need [`MIN_KEY_PREFIX`] hex digits.
    /// Only peers are searched: a stranger's key never resolves.
    pub fn resolve(&self, text: &str) -> Result<IdentityKey, ResolveError> {
        let text = text.trim();
        if let Some(key) = self.by_name.get(text) {
            return Ok(*key);
        }
        let folded: Vec<_> = self
            .by_name
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(text))
            .collect();
        let candidates = if folded.is_empty() {
            match KeyPattern::parse(text) {
                Some(p) => self.by_name.iter().filter(|(_, k)| p.matches(k)).collect(),
                None => Vec::new(),
            }
        } else {
            folded
        };
        exactly_one(text, candidates, |(n, k)| {
            format!("{n} ({})", k.fingerprint())
        })
        .map(|(_, k)| *k)
    }
}

/// A fingerprint or key prefix as a person types it: hex digits, any case, dashes
/// optional, at least [`MIN_KEY_PREFIX`] digits. One rule for every place that finds
/// an identity by it (peers, the roster, pair requests).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPattern {
    hex: String,
    // Dashes only appear in fingerprints, so a dashed pattern never matches a key prefix.
    dashed: bool,
}

impl KeyPattern {
    /// The pattern in `text` (surrounding whitespace ignored), or `None` if it is not
    /// one: too short, or not hex.
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        let hex: String = text
            .chars()
            .filter(|c| *c != '-')
            .map(|c| c.to_ascii_lowercase())
            .collect();
        if hex.len() < MIN_KEY_PREFIX || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        Some(Self {
            hex,
            dashed: text.contains('-'),
        })
    }

    /// Whether `key`'s fingerprint, or (for a pattern without dashes) its hex form,
    /// starts with the pattern.
    pub fn matches(&self, key: &IdentityKey) -> bool {
        hex_encode(key.fingerprint().as_bytes()).starts_with(&self.hex)
            || (!self.dashed && key.to_hex().starts_with(&self.hex))
    }
}

fn exactly_one<T>(
    text: &str,
    mut candidates: Vec<T>,
    describe: impl Fn(&T) -> String,
) -> Result<T, ResolveError> {
    match candidates.len() {
        0 => Err(ResolveError::Unknown { text: text.into() }),
        1 => candidates
            .pop()
            .ok_or(ResolveError::Unknown { text: text.into() }),
        _ => Err(ResolveError::Ambiguous {
            text: text.into(),
            candidates: candidates.iter().map(describe).collect(),
        }),
    }
}

/// A pairing request from a stranger, held for a human to accept or reject.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Knock {
    /// The identity asking to pair.
    pub sender: IdentityKey,
    /// The session that knocked (where an acceptance goes).
    pub sender_session: SessionId,
    /// The name it suggests for itself. Unverified: show it, never trust it.
    pub name: Option<String>,
    /// The knock envelope's id.
    pub msg_id: MsgId,
    /// When it was signed (ms since the Unix epoch).
    pub ts: u64,
    /// The identity knocked (what a sealed invite secret is bound to).
    pub recipient: IdentityKey,
    /// The invite secret the knock carries, still sealed to the recipient.
    pub sealed_invite: Option<Sealed>,
}

impl Knock {
    /// The knock an envelope represents (its kind is not checked).
    pub fn from_envelope(env: &Envelope) -> Self {
        Self {
            sender: env.sender,
            sender_session: env.sender_session.clone(),
            name: env.name.clone(),
            msg_id: env.msg_id,
            ts: env.ts,
            recipient: env.recipient,
            sealed_invite: env.sealed.clone(),
        }
    }

    /// The invite secret this knock carries, opened with the recipient's sealing
    /// secret; `None` without one or when it does not open.
    pub fn open_invite(&self, secret: &SealingSecret) -> Option<[u8; INVITE_SECRET_BYTES]> {
        let sealed = self.sealed_invite.as_ref()?;
        let aad = crate::wire::seal_aad(&self.msg_id, &self.sender, &self.recipient);
        let plain = crate::seal::open(sealed, secret, &aad).ok()?;
        plain.try_into().ok()
    }

    /// The sender's fingerprint, for a human to compare out of band.
    pub fn fingerprint(&self) -> Fingerprint {
        self.sender.fingerprint()
    }
}

/// What [`KnockQueue::push`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Queued {
    /// Added as a new entry.
    Added,
    /// Replaced an older knock from the same identity.
    Replaced,
    /// Added; the queue was full, so its oldest knock, held at least
    /// [`KNOCK_MIN_HOLD_MS`], was dropped.
    Evicted(Knock),
    /// Not added: a newer knock from the same identity is already held.
    Ignored,
    /// Not added: the queue is full of knocks held less than [`KNOCK_MIN_HOLD_MS`].
    Full,
}

/// Pending knocks, at most one per identity, oldest first, bounded.
///
/// When full, a new identity's knock displaces the oldest only once that one has been
/// held [`KNOCK_MIN_HOLD_MS`]; until then it is refused. So a flood of fresh
/// identities cannot flush a waiting knock out within seconds: it is refused instead,
/// and (refused as retryable) its sender knocks again later.
#[derive(Clone, Debug)]
pub struct KnockQueue {
    capacity: usize,
    /// Each knock with when it was held (ms since the epoch, this node's clock).
    knocks: VecDeque<(Knock, u64)>,
}

impl Default for KnockQueue {
    fn default() -> Self {
        Self::new(KNOCK_QUEUE_CAPACITY)
    }
}

impl KnockQueue {
    /// A queue holding at most `capacity` knocks (at least one).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            knocks: VecDeque::new(),
        }
    }

    /// Whether [`KnockQueue::push`] would refuse `knock` at `now_ms` as [`Queued::Full`].
    pub fn is_full_for(&self, knock: &Knock, now_ms: u64) -> bool {
        self.knocks.len() >= self.capacity
            && self.position(&knock.sender).is_none()
            && self
                .knocks
                .front()
                .is_some_and(|(_, at)| now_ms < at.saturating_add(KNOCK_MIN_HOLD_MS))
    }

    /// Holds `knock`, arriving at `now_ms`. A knock from an identity already queued
    /// replaces the held one unless the held one is newer; a full queue drops its
    /// oldest knock if that was held at least [`KNOCK_MIN_HOLD_MS`], and else refuses
    /// this one ([`Queued::Full`]).
    pub fn push(&mut self, knock: Knock, now_ms: u64) -> Queued {
        if let Some(i) = self.position(&knock.sender) {
            if self.knocks[i].0.ts > knock.ts {
                return Queued::Ignored;
            }
            self.knocks.remove(i);
            self.knocks.push_back((knock, now_ms));
            return Queued::Replaced;
        }
        if self.is_full_for(&knock, now_ms) {
            return Queued::Full;
        }
        let evicted = if self.knocks.len() >= self.capacity {
            self.knocks.pop_front().map(|(k, _)| k)
        } else {
            None
        };
        self.knocks.push_back((knock, now_ms));
        evicted.map_or(Queued::Added, Queued::Evicted)
    }

    /// Drops the knocks `keep` says no to (from identities that became peers).
    pub fn retain(&mut self, mut keep: impl FnMut(&Knock) -> bool) {
        self.knocks.retain(|(k, _)| keep(k));
    }

    /// Held knocks, oldest first.
    pub fn list(&self) -> impl ExactSizeIterator<Item = &Knock> + '_ {
        self.knocks.iter().map(|(k, _)| k)
    }

    /// The knock held from `sender`.
    pub fn get(&self, sender: &IdentityKey) -> Option<&Knock> {
        self.list().find(|k| k.sender == *sender)
    }

    /// Removes and returns the knock from `sender` (to accept it).
    pub fn take(&mut self, sender: &IdentityKey) -> Option<Knock> {
        let i = self.position(sender)?;
        self.knocks.remove(i).map(|(k, _)| k)
    }

    /// Discards the knock from `sender` (to reject it); true if one was held.
    pub fn remove(&mut self, sender: &IdentityKey) -> bool {
        self.take(sender).is_some()
    }

    /// The one held knock whose sender matches a fingerprint (dashes optional, a
    /// prefix of at least [`MIN_KEY_PREFIX`] hex digits is enough) or a key prefix.
    pub fn find_by_fingerprint(&self, text: &str) -> Result<&Knock, ResolveError> {
        let text = text.trim();
        let candidates = match KeyPattern::parse(text) {
            Some(p) => self.list().filter(|k| p.matches(&k.sender)).collect(),
            None => Vec::new(),
        };
        exactly_one(text, candidates, |k| match &k.name {
            Some(n) => format!("{} (claims {n:?})", k.fingerprint()),
            None => k.fingerprint().to_string(),
        })
    }

    /// Number of held knocks.
    pub fn len(&self) -> usize {
        self.knocks.len()
    }

    /// Whether no knock is held.
    pub fn is_empty(&self) -> bool {
        self.knocks.is_empty()
    }

    fn position(&self, sender: &IdentityKey) -> Option<usize> {
        self.knocks.iter().position(|(k, _)| k.sender == *sender)
    }
}

/// Why an inbound envelope was dropped.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum DropReason {
    /// Addressed to another identity or another session.
    #[error("addressed to {0}, not to this session")]
    WrongRecipient(SessionAddr),
    /// Older than the path's freshness window.
    #[error("stale: {0}")]
    Stale(TimeError),
    /// Too far in the future.
    #[error("future-dated: {0}")]
    FutureDated(TimeError),
    /// This message id from this sender was already accepted.
    #[error("message {0} was already received (replay)")]
    Replayed(MsgId),
    /// A message, goodbye or receipt from an identity that is not a peer.
    #[error("sender {0} is not a peer; strangers may only knock")]
    NotPaired(Fingerprint),
    /// A pairing acceptance nobody asked for.
    #[error("pair acceptance from {0}, to whom no pair request was sent")]
    UnsolicitedAccept(Fingerprint),
    /// A stranger's knock while the knock queue is full of recent knocks (retryable).
    #[error("this session already holds {0} knocks for its operator; knock again later")]
    KnocksFull(usize),
}

impl DropReason {
    /// The wire code for this reason.
    pub fn code(&self) -> RefusalCode {
        match self {
            Self::WrongRecipient(_) => RefusalCode::WrongRecipient,
            Self::Stale(_) => RefusalCode::Stale,
            Self::FutureDated(_) => RefusalCode::FutureDated,
            Self::Replayed(_) => RefusalCode::Replayed,
            Self::NotPaired(_) => RefusalCode::NotPaired,
            Self::UnsolicitedAccept(_) => RefusalCode::UnsolicitedAccept,
            Self::KnocksFull(_) => RefusalCode::OverBudget,
        }
    }

    /// This reason as a wire refusal: its code, and its text as the detail.
    pub fn refusal(&self) -> Refusal {
        Refusal::new(self.code(), self.to_string())
    }
}

/// What to do with an inbound envelope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Hand it to the inbox.
    Deliver,
    /// A stranger's knock: queued for a human; nothing reaches the agent.
    HoldKnock(Knock),
    /// Discard it.
    Drop(DropReason),
}

/// Applies the trust rules to inbound envelopes. Owns this session's copy of the peers
/// policy (replace it with [`Gate::set_policy`] when the stored file changes), the replay
/// set, the knock queue and the pair requests this session sent.
#[derive(Debug)]
pub struct Gate {
    policy: PeerPolicy,
    replay: ReplaySet,
    knocks: KnockQueue,
    pair_requests: VecDeque<IdentityKey>,
}

/// Domain prefix of the replay-set key; see [`replay_key`].
const REPLAY_KEY_DOMAIN: &[u8] = b"interlink-p2p/v1/replay";

/// The replay set is keyed by sender and id together. Message ids are visible in the
/// DHT, so keying by id alone would let a stranger copy a friend's pending id into a
/// knock of its own and get the friend's message rejected as a replay.
fn replay_key(sender: &IdentityKey, id: &MsgId) -> MsgId {
    let digest = Sha256::new()
        .chain_update(REPLAY_KEY_DOMAIN)
        .chain_update(sender.as_bytes())
        .chain_update(id.as_bytes())
        .finalize();
    let mut out = [0u8; 16];
    out.copy_from_slice(&digest[..16]);
    MsgId::from_bytes(out)
}

impl Gate {
    /// A gate using `policy`. Ids are remembered for the mailbox retention plus clock
    /// skew — the longest any path accepts an envelope — up to [`REPLAY_SET_CAPACITY`].
    pub fn new(policy: PeerPolicy) -> Self {
        Self {
            policy,
            replay: ReplaySet::new(
                REPLAY_SET_CAPACITY,
                MAILBOX_RETENTION_MS.saturating_add(MAX_FUTURE_SKEW_MS),
            ),
            knocks: KnockQueue::default(),
            pair_requests: VecDeque::new(),
        }
    }

    /// The policy in force.
    pub fn policy(&self) -> &PeerPolicy {
        &self.policy
    }

    /// Replaces the policy (after `peers.json` changed). Pair requests to identities
    /// that are now peers are settled and forgotten.
    pub fn set_policy(&mut self, policy: PeerPolicy) {
        self.pair_requests.retain(|k| !policy.contains(k));
        // A knock from an identity admitted since waits for nobody: its room goes to
        // the next stranger.
        self.knocks.retain(|k| !policy.contains(&k.sender));
        self.policy = policy;
    }

    /// The held knocks.
    pub fn knocks(&self) -> &KnockQueue {
        &self.knocks
    }

    /// The held knocks, to take or remove one.
    pub fn knocks_mut(&mut self) -> &mut KnockQueue {
        &mut self.knocks
    }

    /// Records that this session asked `key` to pair, so its acceptance is let in.
    /// Bounded by [`MAX_PENDING_PAIR_REQUESTS`]; the oldest request is forgotten first.
    pub fn note_pair_request(&mut self, key: IdentityKey) {
        self.pair_requests.retain(|k| *k != key);
        if self.pair_requests.len() >= MAX_PENDING_PAIR_REQUESTS {
            self.pair_requests.pop_front();
        }
        self.pair_requests.push_back(key);
    }

    /// Forgets a pair request; true if one was pending.
    pub fn forget_pair_request(&mut self, key: &IdentityKey) -> bool {
        let before = self.pair_requests.len();
        self.pair_requests.retain(|k| k != key);
        self.pair_requests.len() != before
    }

    /// Identities this session has asked to pair with, oldest first.
    pub fn pending_pair_requests(&self) -> impl ExactSizeIterator<Item = &IdentityKey> + '_ {
        self.pair_requests.iter()
    }

    /// Decides what to do with a verified envelope addressed to `me`. `window_ms` is
    /// the path's freshness window (live or mailbox).
    ///
    /// A delivery is not recorded here: the caller records it with
    /// [`Gate::record_delivered`] once the envelope is durably in the inbox. Recording
    /// before the write would turn a failed write (a full disk) into a loss: the
    /// sender's retry would be refused as a replay and its mailbox copy acked. A held
    /// knock is recorded at once — holding it is its store. A stranger's rejected
    /// message records nothing, so it cannot use up the id of a legitimate one.
    pub fn decide(
        &mut self,
        env: &Signed<Envelope>,
        me: &SessionAddr,
        window_ms: u64,
        now: u64,
    ) -> Decision {
        let body = env.body();
        if body.recipient != me.key || body.recipient_session != me.session {
            return Decision::Drop(DropReason::WrongRecipient(body.recipient_addr()));
        }
        if let Err(e) = check_time(body.ts, now, window_ms) {
            return Decision::Drop(match e {
                TimeError::FutureDated { .. } => DropReason::FutureDated(e),
                TimeError::Stale { .. } => DropReason::Stale(e),
            });
        }
        let id = replay_key(&body.sender, &body.msg_id);
        match self.admit(body, me) {
            Err(_) if self.replay.contains(&id) => {
                Decision::Drop(DropReason::Replayed(body.msg_id))
            }
            Err(reason) => Decision::Drop(reason),
            Ok(None) if self.replay.contains(&id) => {
                Decision::Drop(DropReason::Replayed(body.msg_id))
            }
            Ok(None) => Decision::Deliver,
            Ok(Some(knock)) => {
                // Refused before its id is recorded, so its sender may knock again.
                if self.knocks.is_full_for(&knock, now) {
                    return Decision::Drop(DropReason::KnocksFull(self.knocks.len()));
                }
                if self.replay.insert(id, now).is_err() {
                    return Decision::Drop(DropReason::Replayed(body.msg_id));
                }
                // An older duplicate is not queued, but the knock is held either way:
                // the newer one from the same identity is waiting.
                self.knocks.push(knock.clone(), now);
                Decision::HoldKnock(knock)
            }
        }
    }

    /// Records that `sender`'s message `id`, admitted by [`Gate::decide`], is now
    /// durably stored: from here on a copy of it is a replay.
    pub fn record_delivered(&mut self, sender: &IdentityKey, id: &MsgId, now: u64) {
        // Already recorded is fine: two copies in one batch are deduped by the inbox.
        let _ = self.replay.insert(replay_key(sender, id), now);
    }

    /// The pairing rule alone: `Ok(None)` to deliver, `Ok(Some)` to hold a knock.
    fn admit(&self, body: &Envelope, me: &SessionAddr) -> Result<Option<Knock>, DropReason> {
        // A sibling session of the same identity is the user talking to itself.
        if body.sender == me.key || self.policy.contains(&body.sender) {
            return Ok(None);
        }
        match body.kind {
            EnvelopeKind::Knock => Ok(Some(Knock::from_envelope(body))),
            EnvelopeKind::PairAccept if self.pair_requests.contains(&body.sender) => Ok(None),
            EnvelopeKind::PairAccept => {
                Err(DropReason::UnsolicitedAccept(body.sender.fingerprint()))
            }
            EnvelopeKind::Message
            | EnvelopeKind::Goodbye
            | EnvelopeKind::Read
            | EnvelopeKind::HostQueued
            | EnvelopeKind::Pass => Err(DropReason::NotPaired(body.sender.fingerprint())),
        }
    }
}

#[cfg(test)]
#[path = "trust_tests.rs"]
mod tests;

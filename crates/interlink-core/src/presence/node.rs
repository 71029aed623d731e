//! The presence of one node, IO-free: the [`Roster`] it holds, the [`Pacer`] that
//! says when it speaks, and the announce rules of its session. The network node
//! routes swarm events in and carries outputs out; the presence simulator
//! ([`super::sim`]) runs the same state machine for every simulated session.
//!
//! Time is passed in (ms on the node's clock), randomness (for sealing details) is
//! the node's own `R`, and everything to do comes out as an [`Output`]:
//! [`PresenceNode::handle`] or [`PresenceNode::handle_timeout`], then
//! [`PresenceNode::poll_output`] until `None`; [`PresenceNode::poll_timeout`] says
//! when the timer is due. Two calls answer at once because their transport waits for
//! the answer: [`PresenceNode::receive`] (gossipsub validates a message before
//! forwarding it) and [`PresenceNode::answer`] (a roster request's response).

use std::{collections::VecDeque, sync::Arc};

use rand_core::CryptoRng;
use serde_bytes::ByteBuf;

use super::{
    BeaconOutcome, Roster, Upsert,
    pacer::{self, Ask, Pacer},
    sync::{Summary, SummaryError, Tag},
};
use crate::{
    identity::{Identity, IdentityKey, SealingKey},
    session::SessionId,
    wire::{
        Announcement, Beacon, Details, Goodbye, MAX_PRESENCE_READERS, PresenceMessage,
        RosterRequest, RosterResponse, SealingBinding, SessionAddr, Signed, Unverified,
        UnverifiedPresence, VERSION,
    },
};

/// How long a session without any listen address holds back its first announcement,
/// ms: a session listening only through relays has no address until a reservation is
/// accepted; announced before, peers would find it but could not reach it.
pub const ANNOUNCE_WITHOUT_ADDRESS_AFTER_MS: u64 = 5_000;

/// Most announcements and beacons one anti-entropy answer makes this node publish
/// again (the rest are repaired by the next round).
pub const MAX_REPUBLISH: usize = 32;

/// Most outputs waiting to be polled. One input makes at most a few dozen (a roster
/// answer: its entries and [`MAX_REPUBLISH`]); the bound only matters to a driver
/// that never polls.
const MAX_OUTPUTS: usize = 4_096;

/// The session a node announces: who signs, and what it says about itself.
#[derive(Clone)]
pub struct Own {
    /// The identity that signs.
    pub identity: Arc<Identity>,
    /// The session id.
    pub session: SessionId,
    /// The node's PeerId, as its bytes.
    pub peer_id: Vec<u8>,
    /// The details, sealed for the readers at each announcement.
    pub details: Details,
}

/// What happened, for the presence node to act on.
#[derive(Clone, Debug)]
pub enum Input<P> {
    /// The node's periodic tick (its second): expired sessions swept, heartbeats,
    /// anti-entropy, and the announcement no peer took yet offered again.
    Tick,
    /// A connection to `P` is up (the first one).
    PeerConnected(P),
    /// The last connection to `P` closed.
    PeerDisconnected(P),
    /// `P` joined the presence topic: its roster is fetched, and the announcement
    /// owed (or not taken yet) goes out now that someone can take it.
    PeerSubscribed(P),
    /// A listen address is new: the next announcement says so, and a session that
    /// never announced does at once (its first tick ran before it listened).
    AddressAdded,
    /// What the announcement says changed otherwise (an address gone, an external
    /// address confirmed or expired): the next heartbeat is a full announcement.
    AnnouncementChanged,
    /// The details changed (summary, delivery mode): announced at once.
    Details(Details),
    /// The identities that may read the details may have changed (a peer added or
    /// removed, a sealing key learnt): announced anew if they did.
    ReadersChanged,
    /// A roster request to `peer` asking `ask` was answered.
    RosterAnswered {
        /// Who answered (not trusted: everything new is verified).
        peer: P,
        /// What the request asked.
        ask: Ask,
        /// The answer.
        response: RosterResponse,
    },
    /// The announcement published last had nobody to take it (no peer subscribed
    /// yet): it is kept, and published as it is once someone can take it — not signed
    /// anew, which at a cold start multiplied what each session cost (issue 15).
    NotPublished(Vec<u8>),
    /// Something needs the DHT before presence has settled.
    DhtNeeded,
    /// The session leaves: its goodbye is signed and published, and nothing
    /// announces it again.
    Leave,
}

/// What a presence message is, for the driver's bookkeeping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// This session's announcement.
    Announcement,
    /// This session's beacon.
    Beacon,
    /// This session's goodbye.
    Goodbye,
    /// Another session's announcement or beacon that anti-entropy brought (gossip had
    /// missed it here, and most likely elsewhere): published again so the overlay has
    /// it within one gossip round.
    Republish,
}

/// What the driver does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output<P> {
    /// Publish these bytes on the presence topic. An announcement nobody takes is
    /// handed back with [`Input::NotPublished`].
    Publish {
        /// What it is.
        kind: Kind,
        /// The encoded [`PresenceMessage`].
        bytes: Vec<u8>,
    },
    /// Send `peer` this roster request, and report its answer with
    /// [`Input::RosterAnswered`].
    AskRoster {
        /// To whom.
        peer: P,
        /// What it asks.
        ask: Ask,
        /// The request.
        request: RosterRequest,
    },
    /// Join the DHT now.
    JoinDht,
    /// A session is new or newer on the roster.
    Learned {
        /// The session.
        addr: SessionAddr,
        /// Inserted or updated.
        upsert: Upsert,
        /// It came by gossip: a sign of life of its node.
        live: bool,
    },
    /// A beacon of a held session was applied: a sign of life of its node.
    Heard(SessionAddr),
    /// A session left the roster (its goodbye, or retention passed).
    Departed(SessionAddr),
    /// The roster changed (for subscribers; the outputs above say how).
    RosterChanged,
    /// A peer sent something invalid.
    Rejected {
        /// Who.
        from: P,
        /// Why.
        reason: String,
    },
    /// This session's own message could not be sealed or signed.
    Failed(String),
}

/// What [`PresenceNode::receive`] made of a gossip message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// New, or a copy of what is held: forward it.
    Accept,
    /// Valid but nothing new: do not forward.
    Ignore,
    /// Invalid: reject (gossipsub lowers the forwarder's score).
    Reject(String),
}

/// The presence of one node; `P` names a peer (the node's `PeerId`, the simulator's
/// index), `R` is its randomness for sealing details.
pub struct PresenceNode<P, R> {
    roster: Roster,
    pacer: Pacer<P>,
    /// The session announced: none for observers, relays and sender sessions.
    own: Option<Own>,
    rng: R,
    /// When the node started, ms.
    started: u64,
    /// The addresses announced, and whether the node listens anywhere.
    addrs: Vec<String>,
    listening: bool,
    /// Whom the details are sealed for besides this identity (as of the driver's
    /// last [`Self::set_readers`]).
    readers: Vec<(IdentityKey, SealingKey)>,
    /// The identities the last announcement was sealed for, sorted: when the set
    /// changes, the session announces anew.
    announced_readers: Vec<IdentityKey>,
    /// Sequence number of the last message signed.
    seq: u64,
    /// The newest signed announcement while no peer has taken it.
    unpublished: Option<Vec<u8>>,
    /// The goodbye was signed: an announcement after it would put the leaving session
    /// back on every roster.
    left: bool,
    /// Presence messages verified (copies recognised as held or older are not).
    verified: u64,
    /// Messages anti-entropy made this node publish again.
    republished: u64,
    outputs: VecDeque<Output<P>>,
}

impl<P: Ord + Copy, R: CryptoRng> PresenceNode<P, R> {
    /// The presence of a node started at `now`, announcing `own` (if any) with
    /// `roster` and `pacer` (whose `announces` should say whether there is an `own`).
    pub fn new(roster: Roster, pacer: Pacer<P>, own: Option<Own>, rng: R, now: u64) -> Self {
        Self {
            roster,
            pacer,
            own,
            rng,
            started: now,
            addrs: Vec::new(),
            listening: false,
            readers: Vec::new(),
            announced_readers: Vec::new(),
            seq: 0,
            unpublished: None,
            left: false,
            verified: 0,
            republished: 0,
            outputs: VecDeque::new(),
        }
    }

    /// The roster held.
    pub fn roster(&self) -> &Roster {
        &self.roster
    }

    /// The roster, to set whom it trusts ([`Roster::set_trusted`]).
    pub fn roster_mut(&mut self) -> &mut Roster {
        &mut self.roster
    }

    /// The pacer (whether the DHT is joined, whether the session announced).
    pub fn pacer(&self) -> &Pacer<P> {
        &self.pacer
    }

    /// The session announced, while it has not left.
    pub fn own(&self) -> Option<&Own> {
        self.own.as_ref().filter(|_| !self.left)
    }

    /// Presence messages verified so far.
    pub fn verified(&self) -> u64 {
        self.verified
    }

    /// Messages anti-entropy made this node publish again so far.
    pub fn republished(&self) -> u64 {
        self.republished
    }

    /// The addresses the next announcement carries, and whether the node listens on
    /// any address at all (a session that does not holds its first announcement back
    /// [`ANNOUNCE_WITHOUT_ADDRESS_AFTER_MS`]).
    pub fn set_addresses(&mut self, addrs: Vec<String>, listening: bool) {
        self.addrs = addrs
            .into_iter()
            .filter(|a| a.len() <= crate::limits::MAX_ADDR_BYTES)
            .take(crate::limits::MAX_LISTEN_ADDRS)
            .collect();
        self.listening = listening;
    }

    /// Whom the next announcement's details are sealed for besides this identity, at
    /// most [`MAX_PRESENCE_READERS`] - 1 (the rest are dropped).
    pub fn set_readers(&mut self, mut readers: Vec<(IdentityKey, SealingKey)>) {
        readers.truncate(MAX_PRESENCE_READERS - 1);
        self.readers = readers;
    }

    /// Takes `input`, at `now`.
    pub fn handle(&mut self, input: Input<P>, now: u64) {
        match input {
            Input::Tick => {
                let removed = self.roster.sweep(now);
                let any = !removed.is_empty();
                for addr in removed {
                    self.push(Output::Departed(addr));
                }
                if any {
                    self.push(Output::RosterChanged);
                }
                self.pace(
                    pacer::Input::Tick {
                        roster_len: self.roster.len(),
                    },
                    now,
                );
                self.publish_announcement();
            }
            Input::PeerConnected(p) => self.pace(pacer::Input::PeerConnected(p), now),
            Input::PeerDisconnected(p) => self.pace(pacer::Input::PeerDisconnected(p), now),
            Input::PeerSubscribed(p) => {
                self.pace(pacer::Input::PeerSubscribed(p), now);
                if self.pacer.announce_due() {
                    self.announce(now);
                } else {
                    self.publish_announcement();
                }
            }
            Input::AddressAdded => {
                self.pace(pacer::Input::AnnouncementChanged, now);
                if !self.pacer.has_announced() {
                    self.announce(now);
                }
            }
            Input::AnnouncementChanged => self.pace(pacer::Input::AnnouncementChanged, now),
            Input::Details(details) => {
                if let Some(own) = self.own.as_mut() {
                    own.details = details;
                }
                self.pace(pacer::Input::AnnouncementChanged, now);
                self.announce(now);
            }
            Input::ReadersChanged => {
                if self.own().is_some()
                    && self.seq != 0
                    && reader_keys(&self.readers) != self.announced_readers
                {
                    self.announce(now);
                }
            }
            Input::RosterAnswered {
                peer,
                ask,
                response,
            } => {
                if ask == Ask::Digest {
                    // The pacer follows a difference with the summary.
                    self.pace(
                        pacer::Input::DigestAnswered {
                            peer,
                            same: response.same,
                        },
                        now,
                    );
                }
                self.apply_response(peer, &response, ask == Ask::Repair, now);
            }
            Input::NotPublished(bytes) => {
                // Only the newest: one handed back after a newer was signed is
                // superseded (the newest is the one on our own roster).
                let newest = self.own().and_then(|own| {
                    self.roster.get(&SessionAddr {
                        key: own.identity.public(),
                        session: own.session.clone(),
                    })
                });
                if newest
                    .is_some_and(|a| PresenceMessage::Announcement(a.clone()).to_bytes() == bytes)
                {
                    self.unpublished = Some(bytes);
                }
            }
            Input::DhtNeeded => self.pace(pacer::Input::DhtNeeded, now),
            Input::Leave => self.goodbye(now),
        }
    }

    /// Runs what is due at `now` between ticks: the pacer's second looks.
    pub fn handle_timeout(&mut self, now: u64) {
        self.pacer.handle_timeout(now);
        self.run_pacer(now);
    }

    /// When [`Self::handle_timeout`] has work next, if ever.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.pacer.poll_timeout()
    }

    /// The next thing to do.
    pub fn poll_output(&mut self) -> Option<Output<P>> {
        self.outputs.pop_front()
    }

    /// The full request the node sends `peer` for what it lacks (the summary of what
    /// it holds, with the sessions it judges away marked).
    fn summary_request(&self, now: u64) -> RosterRequest {
        RosterRequest::with_summary(&Summary::of(&self.roster, now))
    }

    /// The answer to a roster request (PROTOCOL.md §8.2); a refused one (a ragged or
    /// oversized summary, a bitmap that does not fit it) is an error, answered empty.
    pub fn answer(
        &self,
        request: &RosterRequest,
        now: u64,
    ) -> Result<RosterResponse, SummaryError> {
        self.roster
            .answer(request, now)
            .map(|a| RosterResponse::new(&a))
    }

    /// A presence message gossip delivered, from `from`. Gossipsub does not sign
    /// presence messages (protocol version 8): each payload is signed by its session's
    /// identity, so whoever forwards a copy, it is checked the same way. What is
    /// already held is recognised from the unverified bytes before any check.
    pub fn receive(&mut self, bytes: &[u8], now: u64) -> Verdict {
        match self.validate(bytes, now) {
            Ok(true) => Verdict::Accept,
            Ok(false) => Verdict::Ignore,
            Err(reason) => Verdict::Reject(reason),
        }
    }

    fn validate(&mut self, bytes: &[u8], now: u64) -> Result<bool, String> {
        match UnverifiedPresence::decode(bytes).map_err(|e| e.to_string())? {
            UnverifiedPresence::Announcement(ann) => {
                // A copy of what the roster holds, byte for byte, was verified when it
                // was applied (perhaps from a roster fetch): forwarded without a second
                // check, or peers that only hear it by gossip miss it. An older stamp
                // (a replay, or a copy overtaken) is nothing new: dropped unverified.
                let addr = ann.claimed().session_addr();
                if let Some(held) = self.roster.get(&addr)
                    && ann.is_copy_of(held)
                {
                    return Ok(true);
                }
                match self.take_announcement(ann, now)? {
                    Some((addr, upsert)) => {
                        self.learned(addr, upsert, true, now);
                        self.push(Output::RosterChanged);
                        Ok(true)
                    }
                    None => Ok(false),
                }
            }
            UnverifiedPresence::Beacon(beacon) => {
                // A byte-identical copy of the beacon held is forwarded unverified.
                let held = self
                    .roster
                    .beacon_target(&beacon.claimed().tag())
                    .and_then(|addr| self.roster.held_beacon(addr));
                if held.is_some_and(|h| beacon.is_copy_of(h)) {
                    return Ok(true);
                }
                match self.take_beacon(beacon, now)? {
                    Some(addr) => {
                        self.push(Output::Heard(addr));
                        Ok(true)
                    }
                    None => Ok(false),
                }
            }
            UnverifiedPresence::Goodbye(bye) => {
                self.verified += 1;
                let bye = bye.verify().map_err(|e| e.to_string())?;
                let addr = SessionAddr {
                    key: bye.body().identity,
                    session: bye.body().session_id.clone(),
                };
                match self.roster.apply_goodbye(bye, now) {
                    Ok(true) => {
                        self.push(Output::Departed(addr));
                        self.push(Output::RosterChanged);
                        Ok(true)
                    }
                    Ok(false) => Ok(false),
                    Err(e) => Err(e.to_string()),
                }
            }
        }
    }

    /// An announcement, however it arrived: `Ok(None)` when it would change nothing
    /// (this version or a newer one held, or the session's goodbye: recognised from the
    /// unverified stamp), else verified — not the sealing binding again when the
    /// roster holds it for this identity — and applied.
    fn take_announcement(
        &mut self,
        ann: Unverified<Announcement>,
        now: u64,
    ) -> Result<Option<(SessionAddr, Upsert)>, String> {
        let c = ann.claimed();
        if self.roster.knows(&c.identity, &c.session_id, c.ts, c.seq) {
            return Ok(None);
        }
        self.verified += 1;
        let known = self.roster.sealing_binding_of(&c.identity);
        let ann = ann
            .verify_knowing(known.as_ref())
            .map_err(|e| e.to_string())?;
        let addr = ann.body().session_addr();
        match self.roster.apply_announcement(ann, now) {
            Ok(upsert @ (Upsert::Inserted | Upsert::Updated)) => Ok(Some((addr, upsert))),
            Ok(Upsert::Unchanged) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    /// A beacon, however it arrived: `Ok(None)` when it names no announcement held
    /// (its signer would be unknown: ignored unverified, and learned with the
    /// announcement by the next roster fetch) or is not newer than what was heard;
    /// else verified under that announcement's identity and applied.
    fn take_beacon(
        &mut self,
        beacon: Unverified<Beacon>,
        now: u64,
    ) -> Result<Option<SessionAddr>, String> {
        let c = beacon.claimed();
        let Some(addr) = self.roster.beacon_target(&c.tag()).cloned() else {
            return Ok(None);
        };
        if self
            .roster
            .heard(&addr)
            .is_some_and(|h| (c.ts, c.seq) <= (h.ts, h.seq))
        {
            return Ok(None);
        }
        self.verified += 1;
        let beacon = beacon
            .signed_by(addr.key)
            .verify()
            .map_err(|e| e.to_string())?;
        match self.roster.apply_beacon(beacon, now) {
            Ok(BeaconOutcome::Applied) => Ok(Some(addr)),
            Ok(BeaconOutcome::Unchanged) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    /// A new or newer announcement of `addr`: while sessions are new the fast
    /// anti-entropy goes on.
    fn learned(&mut self, addr: SessionAddr, upsert: Upsert, live: bool, now: u64) {
        if upsert == Upsert::Inserted {
            self.pace(pacer::Input::RosterGrew, now);
        }
        self.push(Output::Learned { addr, upsert, live });
    }

    /// Applies what a roster fetch brought. The responder is not trusted: anything the
    /// roster does not already know is verified before it is applied, announcements
    /// first, then the beacons (whose signer is the identity of an announcement held).
    /// What an anti-entropy answer brings (`repair`) is what gossip failed to deliver
    /// here, and most likely elsewhere: published again, so the rest of the overlay
    /// has it within one gossip round instead of one fetch per hop.
    fn apply_response(&mut self, peer: P, response: &RosterResponse, repair: bool, now: u64) {
        let mut changed = Vec::new();
        let mut heard = Vec::new();
        for bytes in &response.announcements {
            // Several fetches in flight can bring the same announcement, and a responder
            // can send what we hold newer: neither costs a signature check.
            let result = Unverified::<Announcement>::decode(bytes)
                .map_err(|e| e.to_string())
                .and_then(|a| self.take_announcement(a, now));
            match result {
                Ok(Some(change)) => changed.push(change),
                Ok(None) => {}
                Err(reason) => self.push(Output::Rejected { from: peer, reason }),
            }
        }
        for bytes in &response.beacons {
            let result = Unverified::<Beacon>::decode(bytes)
                .map_err(|e| e.to_string())
                .and_then(|b| self.take_beacon(b, now));
            match result {
                Ok(Some(addr)) => heard.push(addr),
                Ok(None) => {}
                Err(reason) => self.push(Output::Rejected { from: peer, reason }),
            }
        }
        if repair {
            let again: Vec<Vec<u8>> = changed
                .iter()
                .filter_map(|(addr, _)| self.roster.get(addr).cloned())
                .map(|a| PresenceMessage::Announcement(a).to_bytes())
                .chain(
                    heard
                        .iter()
                        .filter_map(|addr| self.roster.held_beacon(addr).cloned())
                        .map(|b| PresenceMessage::Beacon(b).to_bytes()),
                )
                .take(MAX_REPUBLISH)
                .collect();
            self.republished += again.len() as u64;
            for bytes in again {
                self.push(Output::Publish {
                    kind: Kind::Republish,
                    bytes,
                });
            }
        }
        let any = !changed.is_empty();
        for (addr, upsert) in changed {
            self.learned(addr, upsert, false, now);
        }
        for addr in heard {
            self.push(Output::Heard(addr));
        }
        if any {
            self.push(Output::RosterChanged);
        }
    }

    /// The pacer takes `input`, and the node does what it decides.
    fn pace(&mut self, input: pacer::Input<P>, now: u64) {
        self.pacer.handle(input, now);
        self.run_pacer(now);
    }

    fn run_pacer(&mut self, now: u64) {
        while let Some(output) = self.pacer.poll_output() {
            match output {
                pacer::Output::AskRoster { peer, ask } => {
                    let request = match ask {
                        Ask::Digest => RosterRequest::with_digest(self.roster.digest()),
                        Ask::Connect | Ask::Repair => self.summary_request(now),
                    };
                    self.push(Output::AskRoster { peer, ask, request });
                }
                // Both report `Announced` themselves once signed; the interval they
                // promise is the pacer's for the roster held then.
                pacer::Output::Announce { .. } => self.announce(now),
                pacer::Output::Beacon { .. } => self.beacon(now),
                pacer::Output::JoinDht => self.push(Output::JoinDht),
            }
        }
    }

    /// The next sequence number: above every earlier one, also across restarts under
    /// the same session id (it starts from the clock).
    fn next_seq(&mut self, now: u64) -> u64 {
        self.seq = (self.seq + 1).max(now);
        self.seq
    }

    /// The interval this session promises now: the pacer's for the roster held.
    fn heartbeat_interval_ms(&self) -> u64 {
        self.pacer.heartbeat_interval_ms(self.roster.len())
    }

    /// Seals, signs and publishes this session's announcement. It also goes into our
    /// own roster, so roster fetches from us include it.
    fn announce(&mut self, now: u64) {
        let Some(own) = self.own().cloned() else {
            return;
        };
        // No address yet (relays only, no reservation accepted): it waits (the tick
        // retries while the announcement is due), a little.
        if !self.listening && now.saturating_sub(self.started) < ANNOUNCE_WITHOUT_ADDRESS_AFTER_MS {
            return;
        }
        let seq = self.next_seq(now);
        // The interval promised in this announcement is the one kept until the next:
        // receivers judge the session live by it.
        let heartbeat = self.heartbeat_interval_ms();
        let details =
            match own
                .details
                .seal(&own.identity, &own.session, &self.readers, &mut self.rng)
            {
                Ok(d) => d,
                Err(e) => {
                    self.push(Output::Failed(format!("cannot seal our details: {e}")));
                    return;
                }
            };
        let body = Announcement {
            v: VERSION,
            identity: own.identity.public(),
            sealing: SealingBinding::new(&own.identity),
            session_id: own.session.clone(),
            peer_id: ByteBuf::from(own.peer_id.clone()),
            addrs: self.addrs.clone(),
            details,
            heartbeat_ms: heartbeat,
            ts: now,
            seq,
        };
        let signed = match Signed::sign(body, &own.identity) {
            Ok(s) => s,
            Err(e) => {
                self.push(Output::Failed(format!("cannot sign our announcement: {e}")));
                return;
            }
        };
        self.announced_readers = reader_keys(&self.readers);
        if let Ok(Upsert::Inserted | Upsert::Updated) =
            self.roster.apply_announcement(signed.clone(), now)
        {
            self.push(Output::RosterChanged);
        }
        self.pace(
            pacer::Input::Announced {
                interval_ms: heartbeat,
            },
            now,
        );
        self.unpublished = Some(PresenceMessage::Announcement(signed).to_bytes());
        self.publish_announcement();
    }

    /// Hands the announcement no peer has taken yet to the driver, if there is one.
    fn publish_announcement(&mut self) {
        if let Some(bytes) = self.unpublished.take() {
            self.push(Output::Publish {
                kind: Kind::Announcement,
                bytes,
            });
        }
    }

    /// Re-announces by a beacon: the announcement is unchanged, so only its tag, the
    /// interval until the next beacon and a fresh stamp go out (PROTOCOL.md §4.9). A
    /// session whose announcement is not on its own roster (never announced, or
    /// evicted) announces in full instead.
    fn beacon(&mut self, now: u64) {
        let Some(own) = self.own().cloned() else {
            return;
        };
        let me = SessionAddr {
            key: own.identity.public(),
            session: own.session.clone(),
        };
        let Some(tag) = self.roster.get(&me).map(|a| Tag::of_announcement(a.body())) else {
            self.announce(now);
            return;
        };
        let heartbeat = self.heartbeat_interval_ms();
        let seq = self.next_seq(now);
        let body = Beacon::new(me.key, tag, heartbeat, now, seq);
        let signed = match Signed::sign(body, &own.identity) {
            Ok(s) => s,
            Err(e) => {
                self.push(Output::Failed(format!("cannot sign our beacon: {e}")));
                return;
            }
        };
        self.pace(
            pacer::Input::Announced {
                interval_ms: heartbeat,
            },
            now,
        );
        // Our own roster keeps us live too: roster fetches from us carry the beacon.
        let _ = self.roster.apply_beacon(signed.clone(), now);
        self.push(Output::Publish {
            kind: Kind::Beacon,
            bytes: PresenceMessage::Beacon(signed).to_bytes(),
        });
    }

    /// Signs and publishes the goodbye, once.
    fn goodbye(&mut self, now: u64) {
        let Some(own) = self.own().cloned() else {
            return;
        };
        let seq = self.next_seq(now);
        let body = Goodbye {
            v: VERSION,
            identity: own.identity.public(),
            session_id: own.session.clone(),
            ts: now,
            seq,
        };
        let signed = match Signed::sign(body, &own.identity) {
            Ok(s) => s,
            Err(e) => {
                self.push(Output::Failed(format!("cannot sign our goodbye: {e}")));
                return;
            }
        };
        self.left = true;
        self.unpublished = None;
        // Our own roster drops us too: a roster fetch answered while we leave must
        // not hand our announcement out again.
        let _ = self.roster.apply_goodbye(signed.clone(), now);
        self.push(Output::Publish {
            kind: Kind::Goodbye,
            bytes: PresenceMessage::Goodbye(signed).to_bytes(),
        });
    }

    fn push(&mut self, output: Output<P>) {
        if self.outputs.len() < MAX_OUTPUTS {
            self.outputs.push_back(output);
        }
    }
}

impl std::fmt::Debug for Own {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Own")
            .field("identity", &self.identity.public())
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl<P, R> std::fmt::Debug for PresenceNode<P, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PresenceNode")
            .field("roster", &self.roster.len())
            .field("seq", &self.seq)
            .field("left", &self.left)
            .finish_non_exhaustive()
    }
}

/// The identities of `readers`, sorted: the set compared between announcements.
fn reader_keys(readers: &[(IdentityKey, SealingKey)]) -> Vec<IdentityKey> {
    let mut keys: Vec<_> = readers.iter().map(|(k, _)| *k).collect();
    keys.sort();
    keys
}

#[cfg(test)]
#[path = "node_tests.rs"]
mod tests;

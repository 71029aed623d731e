//! Presence on the node: publishing announcements, beacons and goodbyes, and
//! validating what arrives on the topic. The roster fetch is `node::roster_sync`.

use interlink_core::{
    IdentityKey, SealingKey,
    presence::{BeaconOutcome, RosterError, Upsert, pacer::Input, sync::Tag},
    wire::{
        Announcement, Beacon, Details, Goodbye, MAX_PRESENCE_READERS, PresenceMessage,
        SealingBinding, SessionAddr, Signed, Unverified, UnverifiedPresence, VERSION,
    },
};
use libp2p::gossipsub;
use serde_bytes::ByteBuf;
use tracing::{debug, trace, warn};

use super::Actor;

/// How long a session without any listen address holds back its first announcement.
const ANNOUNCE_WITHOUT_ADDRESS_AFTER: std::time::Duration = std::time::Duration::from_secs(5);
use crate::{Event, Role, SessionSpec};

/// Presence state of a node: what it knows of the sessions of its network, when it
/// speaks (the pacer), and what it said last.
pub(super) struct Presence {
    pub(super) roster: interlink_core::presence::Roster,
    /// When presence work happens: heartbeats, roster requests, joining the DHT.
    pub(super) pacer: interlink_core::presence::pacer::Pacer<libp2p::PeerId>,
    pub(super) topic: gossipsub::IdentTopic,
    /// Sequence number of the last announcement published.
    pub(super) seq: u64,
    pub(super) summary: String,
    /// The newest signed announcement while no peer has taken it (nobody subscribed
    /// to the topic yet): published as it is once one does.
    pub(super) unpublished: Option<Vec<u8>>,
    /// This node's roster requests in flight and what each asked.
    pub(super) asks: super::roster_sync::RosterAsks,
    /// What presence has cost so far ([`crate::diagnostics::PresenceCost`]).
    pub(super) cost: crate::diagnostics::PresenceCost,
    /// The goodbye was signed: nothing announces or beacons the session again (an
    /// announcement after it would put the leaving session back on every roster).
    pub(super) left: bool,
    /// When the goodbye was handed to gossipsub: shutdown keeps the swarm running
    /// until it has had time to leave (`Actor::goodbye`).
    pub(super) goodbye_at: Option<std::time::Instant>,
    /// The identities the last announcement's details were sealed for (besides our
    /// own): when the set changes, the session announces anew.
    pub(super) readers: Vec<interlink_core::IdentityKey>,
    /// Opens the details of the announcements held, for the views handed out (none
    /// for nodes without an identity: observers and relays).
    pub(super) details: Option<interlink_core::wire::DetailsReader>,
}

impl Actor {
    /// The next sequence number: above every earlier one, also across restarts under
    /// the same session id (it starts from the clock).
    fn next_seq(&mut self) -> u64 {
        self.presence.seq = (self.presence.seq + 1).max(self.now_ms());
        self.presence.seq
    }

    /// The session this node announces: none for observers, relays and sender
    /// sessions ([`crate::Visibility::Sender`]), which never sign a presence message.
    /// Also none once the goodbye was said.
    fn session(&self) -> Option<&SessionSpec> {
        match &self.role {
            Role::Session(_) if self.presence.left => None,
            Role::Session(s) if s.visibility == crate::Visibility::Announced => Some(s),
            Role::Session(_) | Role::Observer | Role::Relay(_) => None,
        }
    }

    /// The interval this session promises now: the pacer's for the roster held
    /// ([`interlink_core::presence::pacer::Pacer::heartbeat_interval_ms`]).
    fn heartbeat_interval_ms(&self) -> u64 {
        self.presence
            .pacer
            .heartbeat_interval_ms(self.presence.roster.len())
    }

    /// Signs and publishes this session's announcement (sessions only). It also goes
    /// into our own roster, so roster fetches from us include it.
    pub(super) fn announce(&mut self) {
        let Some(spec) = self.session().cloned() else {
            return;
        };
        // A session listening only through relays has no address until a reservation
        // is accepted; announced before, peers would find it but could not reach it.
        // It waits (the tick retries while the announcement is due), a little.
        if self.listen_addrs.is_empty() && self.started.elapsed() < ANNOUNCE_WITHOUT_ADDRESS_AFTER {
            return;
        }
        let seq = self.next_seq();
        // The interval promised in this announcement is the one kept until the next:
        // receivers judge the session live by it.
        let heartbeat = self.heartbeat_interval_ms();
        let addrs = self
            .announced_addrs()
            .iter()
            .map(|a| a.to_string())
            .filter(|a| a.len() <= interlink_core::limits::MAX_ADDR_BYTES)
            .take(interlink_core::limits::MAX_LISTEN_ADDRS)
            .collect();
        let readers = self.presence_readers();
        let keys = reader_keys(&readers);
        let details = Details {
            cwd: spec.cwd.clone(),
            git_label: spec.git_label.clone(),
            summary: self.presence.summary.clone(),
            host: spec.host,
            delivery: spec.delivery,
        };
        let mut rng = rand_core::UnwrapErr(getrandom::SysRng);
        let details = match details.seal(&spec.identity, &spec.session, &readers, &mut rng) {
            Ok(d) => d,
            Err(e) => {
                warn!("cannot seal our announcement's details: {e}");
                return;
            }
        };
        let body = Announcement {
            v: VERSION,
            identity: spec.identity.public(),
            sealing: SealingBinding::new(&spec.identity),
            session_id: spec.session.clone(),
            peer_id: ByteBuf::from(self.swarm.local_peer_id().to_bytes()),
            addrs,
            details,
            heartbeat_ms: heartbeat,
            ts: self.now_ms(),
            seq,
        };
        let signed = match Signed::sign(body, &spec.identity) {
            Ok(s) => s,
            Err(e) => {
                warn!("cannot sign our announcement: {e}");
                return;
            }
        };
        self.presence.readers = keys;
        if let Ok(Upsert::Inserted | Upsert::Updated) = self
            .presence
            .roster
            .apply_announcement(signed.clone(), self.now_ms())
        {
            self.emit(Event::RosterChanged);
        }
        self.pace(Input::Announced {
            interval_ms: heartbeat,
        });
        self.presence.unpublished = Some(PresenceMessage::Announcement(signed).to_bytes());
        trace!(seq, "announcement signed");
        self.publish_announcement();
    }

    /// Whom this session's details are sealed for, besides its own identity: its peers
    /// whose sealing key it knows (from the roster, else pinned), those with a session
    /// on the roster first, at most [`MAX_PRESENCE_READERS`] - 1. A stranger reads only
    /// what a knock needs: the identity, its sealing key, the session id, addresses.
    fn presence_readers(&self) -> Vec<(IdentityKey, SealingKey)> {
        let Some(d) = self.parts.delivery() else {
            return Vec::new();
        };
        let own = self.own_addr().map(|a| a.key);
        let mut on_roster = Vec::new();
        let mut pinned = Vec::new();
        for (_, key) in d.engine().gate().policy().iter() {
            if Some(*key) == own {
                continue;
            }
            if let Some(binding) = self.presence.roster.sealing_binding_of(key) {
                on_roster.push((*key, binding.key));
            } else if let Some(sealing) = self.keys.pinned(key) {
                pinned.push((*key, sealing));
            }
        }
        on_roster.sort_by_key(|(k, _)| *k);
        pinned.sort_by_key(|(k, _)| *k);
        on_roster.extend(pinned);
        on_roster.truncate(MAX_PRESENCE_READERS - 1);
        on_roster
    }
}

/// The identities of `readers`, sorted: the set compared between announcements.
fn reader_keys(readers: &[(IdentityKey, SealingKey)]) -> Vec<IdentityKey> {
    let mut keys: Vec<_> = readers.iter().map(|(k, _)| *k).collect();
    keys.sort();
    keys
}

impl Actor {
    /// Announces anew when the identities that may read this session's details
    /// changed: a peer added or removed, a peer's sealing key learnt.
    pub(super) fn reannounce_if_readers_changed(&mut self) {
        if self.session().is_none() || self.presence.seq == 0 {
            return;
        }
        if reader_keys(&self.presence_readers()) != self.presence.readers {
            debug!("the readers of our details changed: announcing");
            self.announce();
        }
    }

    /// Re-announces by a beacon: the announcement is unchanged, so only its tag, the
    /// interval until the next beacon and a fresh stamp go out (PROTOCOL.md §4.9). A
    /// session whose announcement is not on its own roster (never announced, or
    /// evicted) announces in full instead.
    pub(super) fn beacon(&mut self) {
        let Some(spec) = self.session().cloned() else {
            return;
        };
        let own = SessionAddr {
            key: spec.identity.public(),
            session: spec.session.clone(),
        };
        let Some(tag) = self
            .presence
            .roster
            .get(&own)
            .map(|a| Tag::of_announcement(a.body()))
        else {
            self.announce();
            return;
        };
        let heartbeat = self.heartbeat_interval_ms();
        let now = self.now_ms();
        let body = Beacon::new(own.key, tag, heartbeat, now, self.next_seq());
        let signed = match Signed::sign(body, &spec.identity) {
            Ok(s) => s,
            Err(e) => {
                warn!("cannot sign our beacon: {e}");
                return;
            }
        };
        self.pace(Input::Announced {
            interval_ms: heartbeat,
        });
        // Our own roster keeps us live too: roster fetches from us carry the beacon.
        let _ = self.presence.roster.apply_beacon(signed.clone(), now);
        let bytes = PresenceMessage::Beacon(signed).to_bytes();
        match self
            .swarm
            .behaviour_mut()
            .gossipsub
            .publish(self.presence.topic.clone(), bytes)
        {
            Ok(_) => trace!("beacon"),
            // Nobody to tell; the next one will be, or a roster fetch carries it.
            Err(e) => debug!("beacon not published: {e}"),
        }
    }

    /// Publishes the signed announcement no peer has taken yet, if there is one. Until
    /// a peer subscribes to the topic gossipsub has nobody to send it to; the same
    /// bytes are published then (on the peer's subscription, or the next tick) rather
    /// than a new version signed: a new version is one more announcement every node
    /// verifies, and at start-up, before the mesh forms, that multiplied what each
    /// session cost the overlay (issue 15).
    pub(super) fn publish_announcement(&mut self) {
        let Some(bytes) = self.presence.unpublished.take() else {
            return;
        };
        match self
            .swarm
            .behaviour_mut()
            .gossipsub
            .publish(self.presence.topic.clone(), bytes.clone())
        {
            Ok(_) => trace!("announced"),
            // Nobody is subscribed yet: kept for the first peer that subscribes.
            Err(gossipsub::PublishError::NoPeersSubscribedToTopic) => {
                self.presence.unpublished = Some(bytes);
            }
            Err(e) => debug!("announce not published: {e}"),
        }
    }

    /// Publishes the goodbye; returns whether there was one to send.
    pub(super) fn publish_goodbye(&mut self) -> bool {
        let Some(spec) = self.session().cloned() else {
            return false;
        };
        let seq = self.next_seq();
        let body = Goodbye {
            v: VERSION,
            identity: spec.identity.public(),
            session_id: spec.session.clone(),
            ts: self.now_ms(),
            seq,
        };
        let Ok(signed) = Signed::sign(body, &spec.identity) else {
            return false;
        };
        self.presence.left = true;
        self.presence.unpublished = None;
        // Our own roster drops us too: a roster fetch answered while we leave must
        // not hand our announcement out again.
        let _ = self
            .presence
            .roster
            .apply_goodbye(signed.clone(), self.now_ms());
        let bytes = PresenceMessage::Goodbye(signed).to_bytes();
        match self
            .swarm
            .behaviour_mut()
            .gossipsub
            .publish(self.presence.topic.clone(), bytes)
        {
            Ok(_) => {
                self.presence.goodbye_at = Some(std::time::Instant::now());
                true
            }
            Err(e) => {
                debug!("goodbye not published: {e}");
                false
            }
        }
    }

    pub(super) fn on_gossipsub(&mut self, event: gossipsub::Event) {
        match event {
            gossipsub::Event::Message {
                propagation_source,
                message_id,
                message,
            } => {
                let verdict = self.validate_presence(&message);
                let acceptance = match &verdict {
                    Ok(true) => gossipsub::MessageAcceptance::Accept,
                    Ok(false) => gossipsub::MessageAcceptance::Ignore,
                    Err(reason) => {
                        debug!(from = %propagation_source, %reason, "presence message rejected");
                        self.emit(Event::Rejected {
                            from: propagation_source,
                            reason: reason.clone(),
                        });
                        gossipsub::MessageAcceptance::Reject
                    }
                };
                self.swarm
                    .behaviour_mut()
                    .gossipsub
                    .report_message_validation_result(&message_id, &propagation_source, acceptance);
            }
            gossipsub::Event::Subscribed { peer_id, topic }
                if topic == self.presence.topic.hash() =>
            {
                // Its roster now, and a second look shortly.
                self.pace(Input::PeerSubscribed(peer_id));
                if self.presence.pacer.announce_due() {
                    self.announce();
                } else {
                    self.publish_announcement();
                }
            }
            gossipsub::Event::SlowPeer {
                peer_id,
                failed_messages,
            } => {
                // Presence messages gossipsub dropped for this peer (queue full, or not
                // sent within the publish or forward window).
                debug!(peer = %peer_id, ?failed_messages, "gossipsub dropped messages to a slow peer");
            }
            _ => {}
        }
    }

    /// Applies a presence message to the roster. `Ok(true)`: new information, forward
    /// it; `Ok(false)`: valid but nothing new, don't forward; `Err`: invalid, reject
    /// (gossipsub lowers the forwarding peer's score).
    ///
    /// Gossipsub does not sign presence messages (protocol version 8): each payload is
    /// signed by its session's identity, which binds the announcement to its node's
    /// PeerId, so whoever forwards a copy, it is checked the same way. What is already
    /// held is recognised from the unverified bytes before any signature check.
    fn validate_presence(&mut self, message: &gossipsub::Message) -> Result<bool, String> {
        let now = self.now_ms();
        let cost = &mut self.presence.cost;
        cost.gossip_messages += 1;
        cost.gossip_bytes += message.data.len() as u64;
        match UnverifiedPresence::decode(&message.data).map_err(|e| e.to_string())? {
            UnverifiedPresence::Announcement(ann) => {
                let addr = ann.claimed().session_addr();
                // A copy of what the roster holds, byte for byte, was verified when it
                // was applied (perhaps from a roster fetch): forward it without a
                // second check, or peers that only hear it by gossip miss it. An older
                // stamp (a replay, or a copy overtaken) is nothing new: dropped
                // unverified and not forwarded.
                if let Some(held) = self.presence.roster.get(&addr)
                    && ann.is_copy_of(held)
                {
                    return Ok(true);
                }
                match self.take_announcement(ann, now)? {
                    Some((addr, upsert)) => {
                        self.learned(&addr, upsert);
                        // A fresh announcement is a sign of life: try it live again.
                        if let Some(peer) = self
                            .presence
                            .roster
                            .get(&addr)
                            .and_then(|a| a.body().peer_id())
                        {
                            self.peer_alive(peer);
                        }
                        self.emit(Event::RosterChanged);
                        Ok(true)
                    }
                    None => Ok(false),
                }
            }
            UnverifiedPresence::Beacon(beacon) => {
                // A byte-identical copy of the beacon held is forwarded unverified, as
                // an announcement's is.
                let held = self
                    .presence
                    .roster
                    .beacon_target(&beacon.claimed().tag())
                    .and_then(|addr| self.presence.roster.held_beacon(addr));
                if held.is_some_and(|h| beacon.is_copy_of(h)) {
                    return Ok(true);
                }
                match self.take_beacon(beacon, now)? {
                    Some(addr) => {
                        self.beacon_heard(&addr);
                        Ok(true)
                    }
                    None => Ok(false),
                }
            }
            UnverifiedPresence::Goodbye(bye) => {
                self.presence.cost.verified += 1;
                let bye = bye.verify().map_err(|e| e.to_string())?;
                let addr = SessionAddr {
                    key: bye.body().identity,
                    session: bye.body().session_id.clone(),
                };
                match self.presence.roster.apply_goodbye(bye, now) {
                    Ok(true) => {
                        // Gone: its mail goes to its mailbox without a live attempt first.
                        self.route_session(&addr);
                        self.emit(Event::RosterChanged);
                        Ok(true)
                    }
                    Ok(false) => Ok(false),
                    Err(e) => Err(roster_error(&e)),
                }
            }
        }
    }

    /// An announcement, however it arrived: `Ok(None)` when it would change nothing
    /// (this version or a newer one held, or the session's goodbye: recognised from the
    /// unverified stamp, before any signature check), else verified — not the sealing
    /// binding again when the roster holds it for this identity — and applied.
    pub(super) fn take_announcement(
        &mut self,
        ann: Unverified<Announcement>,
        now: u64,
    ) -> Result<Option<(SessionAddr, Upsert)>, String> {
        let c = ann.claimed();
        if self
            .presence
            .roster
            .knows(&c.identity, &c.session_id, c.ts, c.seq)
        {
            return Ok(None);
        }
        self.presence.cost.verified += 1;
        let known = self.presence.roster.sealing_binding_of(&c.identity);
        let ann = ann
            .verify_knowing(known.as_ref())
            .map_err(|e| e.to_string())?;
        let addr = ann.body().session_addr();
        match self.presence.roster.apply_announcement(ann, now) {
            Ok(upsert @ (Upsert::Inserted | Upsert::Updated)) => Ok(Some((addr, upsert))),
            Ok(Upsert::Unchanged) => Ok(None),
            Err(e) => Err(roster_error(&e)),
        }
    }

    /// A beacon, however it arrived: `Ok(None)` when it names no announcement held
    /// (its signer would be unknown: ignored unverified, and learned with the
    /// announcement by the next roster fetch) or is not newer than what was heard from
    /// the session; else verified under that announcement's identity and applied.
    pub(super) fn take_beacon(
        &mut self,
        beacon: Unverified<Beacon>,
        now: u64,
    ) -> Result<Option<SessionAddr>, String> {
        let c = beacon.claimed();
        let Some(addr) = self.presence.roster.beacon_target(&c.tag()).cloned() else {
            return Ok(None);
        };
        if self
            .presence
            .roster
            .heard(&addr)
            .is_some_and(|h| (c.ts, c.seq) <= (h.ts, h.seq))
        {
            return Ok(None);
        }
        self.presence.cost.verified += 1;
        let beacon = beacon
            .signed_by(addr.key)
            .verify()
            .map_err(|e| e.to_string())?;
        match self.presence.roster.apply_beacon(beacon, now) {
            Ok(BeaconOutcome::Applied) => Ok(Some(addr)),
            Ok(BeaconOutcome::Unchanged) => Ok(None),
            Err(e) => Err(roster_error(&e)),
        }
    }

    /// What follows a beacon of `addr`, however it arrived: it is a sign of life of
    /// the session's node (its mail is tried live again), and its presence may have
    /// changed (away to live).
    pub(super) fn beacon_heard(&mut self, addr: &SessionAddr) {
        if let Some(peer) = self
            .presence
            .roster
            .get(addr)
            .and_then(|a| a.body().peer_id())
        {
            self.peer_alive(peer);
        }
        self.emit(Event::RosterChanged);
    }

    /// What follows a new or newer announcement of `addr`, however it arrived: the
    /// fast anti-entropy goes on while sessions are new, the peer's sealing key is
    /// pinned, its mail is routed afresh and it is offered this user's pass.
    pub(super) fn learned(&mut self, addr: &SessionAddr, upsert: Upsert) {
        if upsert == Upsert::Inserted {
            self.pace(Input::RosterGrew);
        }
        self.pin_sealing_key(addr.key);
        self.book_announcement(addr);
        self.route_session(addr);
        self.offer_pass(addr);
    }
}

pub(super) fn roster_error(e: &RosterError) -> String {
    e.to_string()
}

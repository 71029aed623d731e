//! Presence on the node: publishing announcements and goodbyes, validating what
//! arrives on the topic, and the roster fetch on connect.

use interlink_core::{
    presence::{RosterError, Upsert, heartbeat_interval_ms, sync::Summary},
    wire::{
        Announcement, Goodbye, PresenceMessage, RosterRequest, RosterResponse, SealingBinding,
        SessionAddr, Signed, Unverified, UnverifiedPresence, VERSION,
    },
};
use libp2p::{PeerId, gossipsub, request_response};
use serde_bytes::ByteBuf;
use tracing::{debug, trace, warn};

use super::Actor;

/// How long a session without any listen address holds back its first announcement.
const ANNOUNCE_WITHOUT_ADDRESS_AFTER: std::time::Duration = std::time::Duration::from_secs(5);
use crate::{Event, Role, SessionSpec};

impl Actor {
    /// The next sequence number: above every earlier one, also across restarts under
    /// the same session id (it starts from the clock).
    fn next_seq(&mut self) -> u64 {
        self.seq = (self.seq + 1).max(crate::now_ms());
        self.seq
    }

    fn session(&self) -> Option<&SessionSpec> {
        match &self.role {
            Role::Session(s) => Some(s),
            Role::Observer | Role::Relay(_) => None,
        }
    }

    /// How long until this session announces again: the configured heartbeat, or
    /// longer on a large roster ([`interlink_core::presence::heartbeat_interval_ms`]),
    /// so each node's presence traffic stays flat as the overlay grows.
    fn heartbeat_interval(&self) -> std::time::Duration {
        let adaptive = heartbeat_interval_ms(self.roster.len());
        if adaptive > interlink_core::limits::HEARTBEAT_MS {
            self.config
                .heartbeat
                .max(std::time::Duration::from_millis(adaptive))
        } else {
            self.config.heartbeat
        }
    }

    /// Signs and publishes this session's announcement (sessions only). It also goes
    /// into our own roster, so roster fetches from us include it.
    pub(super) fn announce(&mut self) {
        let Some(spec) = self.session().cloned() else {
            self.announce_due = false;
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
        let heartbeat = self.heartbeat_interval();
        let addrs = self
            .listen_addrs
            .iter()
            .map(|a| a.to_string())
            .filter(|a| a.len() <= interlink_core::limits::MAX_ADDR_BYTES)
            .take(interlink_core::limits::MAX_LISTEN_ADDRS)
            .collect();
        let body = Announcement {
            v: VERSION,
            identity: spec.identity.public(),
            sealing: SealingBinding::new(&spec.identity),
            session_id: spec.session.clone(),
            peer_id: ByteBuf::from(self.swarm.local_peer_id().to_bytes()),
            addrs,
            cwd: spec.cwd.clone(),
            git_label: spec.git_label.clone(),
            summary: self.summary.clone(),
            host: spec.host,
            delivery: spec.delivery,
            heartbeat_ms: u64::try_from(heartbeat.as_millis()).unwrap_or(u64::MAX),
            ts: crate::now_ms(),
            seq,
        };
        let signed = match Signed::sign(body, &spec.identity) {
            Ok(s) => s,
            Err(e) => {
                warn!("cannot sign our announcement: {e}");
                self.announce_due = false;
                return;
            }
        };
        if let Ok(Upsert::Inserted | Upsert::Updated) = self
            .roster
            .apply_announcement(signed.clone(), crate::now_ms())
        {
            self.emit(Event::RosterChanged);
        }
        self.last_announce = Some((crate::now_ms(), heartbeat));
        let bytes = PresenceMessage::Announcement(signed).to_bytes();
        match self
            .swarm
            .behaviour_mut()
            .gossipsub
            .publish(self.topic.clone(), bytes)
        {
            Ok(_) => {
                trace!(seq, "announced");
                self.announce_due = false;
            }
            // Nobody is subscribed yet: keep it owed and publish when a peer subscribes.
            Err(gossipsub::PublishError::NoPeersSubscribedToTopic) => {}
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
            ts: crate::now_ms(),
            seq,
        };
        let Ok(signed) = Signed::sign(body, &spec.identity) else {
            return false;
        };
        let bytes = PresenceMessage::Goodbye(signed).to_bytes();
        match self
            .swarm
            .behaviour_mut()
            .gossipsub
            .publish(self.topic.clone(), bytes)
        {
            Ok(_) => true,
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
            gossipsub::Event::Subscribed { topic, .. }
                if topic == self.topic.hash() && self.announce_due =>
            {
                self.announce();
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
    /// (gossipsub lowers the sender's score).
    fn validate_presence(&mut self, message: &gossipsub::Message) -> Result<bool, String> {
        let now = crate::now_ms();
        let cost = &mut self.presence_cost;
        cost.gossip_messages += 1;
        cost.gossip_bytes += message.data.len() as u64;
        match UnverifiedPresence::decode(&message.data).map_err(|e| e.to_string())? {
            UnverifiedPresence::Announcement(ann) => {
                // Only the session's own node may publish its announcement: the
                // gossipsub source (signed by libp2p) must be the announced PeerId.
                // Relaying someone else's announcement is what roster fetches are for.
                if let Some(source) = message.source
                    && ann.claimed().peer_id() != Some(source)
                {
                    return Err(format!(
                        "announcement for {} published by another peer {source}",
                        ann.claimed().session_id
                    ));
                }
                let addr = ann.claimed().session_addr();
                // A copy of what the roster holds, byte for byte, was verified when it
                // was applied (perhaps from a roster fetch): forward it without a
                // second check, or peers that only hear it by gossip miss it. An older
                // stamp (a replay, or a copy overtaken) is nothing new: dropped
                // unverified and not forwarded.
                if let Some(held) = self.roster.get(&addr)
                    && ann.is_copy_of(held)
                {
                    return Ok(true);
                }
                let claimed = ann.claimed();
                if self
                    .roster
                    .knows(&addr.key, &addr.session, claimed.ts, claimed.seq)
                {
                    return Ok(false);
                }
                self.presence_cost.verified += 1;
                let ann = ann.verify().map_err(|e| e.to_string())?;
                match self.roster.apply_announcement(ann, now) {
                    Ok(upsert @ (Upsert::Inserted | Upsert::Updated)) => {
                        self.learned(&addr, upsert);
                        // A fresh announcement is a sign of life: try it live again.
                        if let Some(source) = message.source {
                            self.peer_alive(source);
                        }
                        self.emit(Event::RosterChanged);
                        Ok(true)
                    }
                    Ok(Upsert::Unchanged) => Ok(false),
                    Err(e) => Err(roster_error(&e)),
                }
            }
            UnverifiedPresence::Goodbye(bye) => {
                self.presence_cost.verified += 1;
                let bye = bye.verify().map_err(|e| e.to_string())?;
                let addr = SessionAddr {
                    key: bye.body().identity,
                    session: bye.body().session_id.clone(),
                };
                match self.roster.apply_goodbye(bye, now) {
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

    /// Asks `peer` for the announcements this node lacks, sending the summary of
    /// what it holds (PROTOCOL.md, "Roster fetch").
    pub(super) fn fetch_roster(&mut self, peer: PeerId) {
        self.presence_cost.roster_fetches += 1;
        let request = RosterRequest::with_summary(&Summary::of(&self.roster));
        self.swarm
            .behaviour_mut()
            .roster
            .send_request(&peer, request);
    }

    pub(super) fn on_roster_fetch(
        &mut self,
        event: request_response::Event<RosterRequest, RosterResponse>,
    ) {
        match event {
            request_response::Event::Message {
                peer,
                message:
                    request_response::Message::Request {
                        channel, request, ..
                    },
                ..
            } => {
                self.presence_cost.summary_bytes += request.have.len() as u64;
                // A ragged or oversized summary is refused with an empty answer: the
                // codec's size limit already bounds what it can cost.
                let response = match Summary::decode(&request.have) {
                    Ok(summary) => RosterResponse::new(self.roster.missing_from(&summary)),
                    Err(e) => {
                        debug!(%peer, %e, "roster request refused");
                        self.emit(Event::Rejected {
                            from: peer,
                            reason: e.to_string(),
                        });
                        RosterResponse::new(std::iter::empty())
                    }
                };
                if self
                    .swarm
                    .behaviour_mut()
                    .roster
                    .send_response(channel, response)
                    .is_err()
                {
                    debug!(%peer, "roster response not sent: connection closed");
                }
            }
            request_response::Event::Message {
                peer,
                message: request_response::Message::Response { response, .. },
                ..
            } => self.apply_roster_response(peer, response),
            request_response::Event::OutboundFailure { peer, error, .. } => {
                // Peers that are not interlink nodes (or other networks) don't speak it.
                debug!(%peer, %error, "roster fetch failed");
            }
            _ => {}
        }
    }

    /// What follows a new or newer announcement of `addr`, however it arrived: the
    /// fast anti-entropy goes on while sessions are new, the peer's sealing key is
    /// pinned, its mail is routed afresh and it is offered this user's pass.
    fn learned(&mut self, addr: &SessionAddr, upsert: Upsert) {
        if upsert == Upsert::Inserted {
            self.bootstrap.roster_grew(std::time::Instant::now());
        }
        self.pin_sealing_key(addr.key);
        self.route_session(addr);
        self.offer_pass(addr);
    }

    /// Applies what a roster fetch brought. The responder is not trusted: anything the
    /// roster does not already know is verified before it is applied.
    fn apply_roster_response(&mut self, peer: PeerId, response: RosterResponse) {
        let now = crate::now_ms();
        let mut changed = Vec::new();
        self.presence_cost.roster_bytes += response
            .announcements
            .iter()
            .map(|a| a.len() as u64)
            .sum::<u64>();
        let brought = response.announcements.len();
        for bytes in response.announcements {
            let result = Unverified::<Announcement>::decode(&bytes)
                .map_err(|e| e.to_string())
                .and_then(|a| {
                    let c = a.claimed();
                    // Several fetches in flight can bring the same announcement, and a
                    // responder can send what we hold newer: no signature check for
                    // what would change nothing.
                    if self.roster.knows(&c.identity, &c.session_id, c.ts, c.seq) {
                        return Ok(None);
                    }
                    self.presence_cost.verified += 1;
                    let a = a.verify().map_err(|e| e.to_string())?;
                    let addr = a.body().session_addr();
                    self.roster
                        .apply_announcement(a, now)
                        .map(|u| Some((u, addr)))
                        .map_err(|e| roster_error(&e))
                });
            match result {
                Ok(Some((upsert @ (Upsert::Inserted | Upsert::Updated), addr))) => {
                    changed.push((addr, upsert));
                }
                Ok(_) => {}
                Err(reason) => {
                    debug!(%peer, %reason, "roster entry rejected");
                    self.emit(Event::Rejected { from: peer, reason });
                }
            }
        }
        debug!(%peer, brought, new = changed.len(), held = self.roster.len(), "roster fetch answered");
        for (addr, upsert) in &changed {
            self.learned(addr, *upsert);
        }
        if !changed.is_empty() {
            self.emit(Event::RosterChanged);
        }
    }
}

fn roster_error(e: &RosterError) -> String {
    e.to_string()
}

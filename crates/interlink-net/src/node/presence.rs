//! Presence on the node: publishing announcements and goodbyes, validating what
//! arrives on the topic, and the roster fetch on connect.

use interlink_core::{
    presence::{RosterError, Upsert},
    wire::{
        Announcement, Goodbye, PresenceMessage, RosterRequest, RosterResponse, SealingBinding,
        SessionAddr, Signed, VERSION,
    },
};
use libp2p::{PeerId, gossipsub, request_response};
use serde_bytes::ByteBuf;
use sha2::{Digest as _, Sha256};
use tracing::{debug, trace, warn};

/// Most announcement digests remembered as already verified.
const KNOWN_ANNOUNCEMENTS: usize = 8192;

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
        self.last_announce = Some(std::time::Instant::now());
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
        cost.verified += 1;
        match PresenceMessage::decode(&message.data).map_err(|e| e.to_string())? {
            PresenceMessage::Announcement(ann) => {
                // Only the session's own node may publish its announcement: the
                // gossipsub source (signed by libp2p) must be the announced PeerId.
                // Relaying someone else's announcement is what roster fetches are for.
                if let Some(source) = message.source
                    && ann.body().peer_id() != Some(source)
                {
                    return Err(format!(
                        "announcement for {} published by another peer {source}",
                        ann.body().session_id
                    ));
                }
                let addr = ann.body().session_addr();
                let version = (ann.body().ts, ann.body().seq);
                // The bytes a roster response would carry for it: once verified here,
                // a roster fetch that brings the same announcement skips the check
                // (otherwise each announcement was verified twice per node).
                let digest: [u8; 32] = Sha256::digest(ann.to_bytes()).into();
                let applied = self.roster.apply_announcement(ann, now);
                if applied.is_ok() {
                    self.remember_announcement(digest);
                }
                match applied {
                    Ok(Upsert::Inserted | Upsert::Updated) => {
                        self.pin_sealing_key(addr.key);
                        self.route_session(&addr);
                        self.offer_pass(&addr);
                        // A fresh announcement is a sign of life: try it live again.
                        if let Some(source) = message.source {
                            self.peer_alive(source);
                        }
                        self.emit(Event::RosterChanged);
                        Ok(true)
                    }
                    // Already held, perhaps from a roster fetch: still forward it if it
                    // is the current one, or peers that only hear it by gossip miss it.
                    // Only an older copy (a replay) stops here.
                    Ok(_) => Ok(self
                        .roster
                        .get(&addr)
                        .is_some_and(|held| (held.body().ts, held.body().seq) == version)),
                    Err(e) => Err(roster_error(&e)),
                }
            }
            PresenceMessage::Goodbye(bye) => {
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

    /// Remembers the digest of announcement bytes already verified and applied.
    fn remember_announcement(&mut self, digest: [u8; 32]) {
        if self.known_announcements.len() >= KNOWN_ANNOUNCEMENTS {
            // Forgetting only costs a re-verification; clearing keeps this bounded.
            self.known_announcements.clear();
        }
        self.known_announcements.insert(digest);
    }

    pub(super) fn fetch_roster(&mut self, peer: PeerId) {
        self.presence_cost.roster_fetches += 1;
        self.swarm
            .behaviour_mut()
            .roster
            .send_request(&peer, RosterRequest::default());
    }

    pub(super) fn on_roster_fetch(
        &mut self,
        event: request_response::Event<RosterRequest, RosterResponse>,
    ) {
        match event {
            request_response::Event::Message {
                peer,
                message: request_response::Message::Request { channel, .. },
                ..
            } => {
                let response = RosterResponse::new(self.roster.announcements());
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
            } => {
                let now = crate::now_ms();
                let mut changed = Vec::new();
                self.presence_cost.roster_bytes += response
                    .announcements
                    .iter()
                    .map(|a| a.len() as u64)
                    .sum::<u64>();
                for bytes in response.announcements {
                    // An entry whose exact bytes we already applied needs no second
                    // signature check: on a busy overlay every connection brings a
                    // roster, and verifying each copy again dominated the CPU.
                    let digest: [u8; 32] = Sha256::digest(&bytes).into();
                    if self.known_announcements.contains(&digest) {
                        continue;
                    }
                    // Anything new is verified: the responder is not trusted.
                    self.presence_cost.verified += 1;
                    let result = Signed::<Announcement>::decode(&bytes)
                        .map_err(|e| e.to_string())
                        .and_then(|a| {
                            let addr = a.body().session_addr();
                            self.roster
                                .apply_announcement(a, now)
                                .map(|u| (u, addr))
                                .map_err(|e| roster_error(&e))
                        });
                    if result.is_ok() {
                        self.remember_announcement(digest);
                    }
                    match result {
                        Ok((Upsert::Inserted | Upsert::Updated, addr)) => changed.push(addr),
                        Ok(_) => {}
                        Err(reason) => {
                            debug!(%peer, %reason, "roster entry rejected");
                            self.emit(Event::Rejected { from: peer, reason });
                        }
                    }
                }
                for addr in &changed {
                    self.pin_sealing_key(addr.key);
                    self.route_session(addr);
                    self.offer_pass(addr);
                }
                if !changed.is_empty() {
                    self.emit(Event::RosterChanged);
                }
            }
            request_response::Event::OutboundFailure { peer, error, .. } => {
                // Peers that are not interlink nodes (or other networks) don't speak it.
                debug!(%peer, %error, "roster fetch failed");
            }
            _ => {}
        }
    }
}

fn roster_error(e: &RosterError) -> String {
    e.to_string()
}

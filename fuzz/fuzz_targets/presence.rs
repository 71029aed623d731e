//! Fuzzes the presence-topic decoder (an announcement, beacon or goodbye inside a
//! tagged map) and the roster-fetch answer a node computes from an arbitrary request.
#![no_main]

use interlink_core::{
    Identity,
    presence::{Roster, sync::Tag},
    wire::{Beacon, PresenceMessage, RosterRequest, RosterResponse, Signed, UnverifiedPresence},
};
use libfuzzer_sys::fuzz_target;

const NOW: u64 = 1_790_000_000_000;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    if which % 2 == 0 {
        // The shape decoder every copy passes before any signature check.
        let _ = UnverifiedPresence::decode(rest);
        // A beacon's signer is named by the receiver: a fixed identity here, so only
        // its refusals are reachable, but the whole path runs.
        let id = Identity::from_seed(&[9; 32]).public();
        if let Ok(m) = PresenceMessage::decode(rest, |_| Some(id)) {
            assert_eq!(
                PresenceMessage::decode(&m.to_bytes(), |_| Some(id)).expect("re-encoded decodes"),
                m
            );
        }
        return;
    }
    // A responder holding one session (with a beacon) answers any request.
    let Ok(request) = cbor4ii::serde::from_slice::<RosterRequest>(rest) else {
        return;
    };
    let alice = Identity::from_seed(&[1; 32]);
    let ann = interlink_testkit_free::announcement(&alice, NOW);
    let mut roster = Roster::default();
    roster.apply_announcement(ann.clone(), NOW).expect("applies");
    let beacon = Signed::sign(
        Beacon::new(alice.public(), Tag::of_announcement(ann.body()), 30_000, NOW + 1, ann.body().seq + 1),
        &alice,
    )
    .expect("signs");
    roster.apply_beacon(beacon, NOW + 1).expect("applies");
    if let Ok(answer) = roster.answer(&request, NOW + 1) {
        let _ = RosterResponse::new(&answer);
    }
});

/// A valid announcement without the test kit (the fuzz crate stands alone).
mod interlink_testkit_free {
    use interlink_core::{
        Identity, SessionId,
        wire::{Announcement, DeliveryMode, Details, HostKind, SealingBinding, Signed, VERSION},
    };

    /// Fixed "randomness" for the details' nonce and content key: a fuzz run must be
    /// reproducible from its input.
    struct FixedRng;
    impl rand_core::TryRng for FixedRng {
        type Error = std::convert::Infallible;
        fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
            Ok(7)
        }
        fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
            Ok(7)
        }
        fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
            dst.fill(7);
            Ok(())
        }
    }
    impl rand_core::TryCryptoRng for FixedRng {}

    pub(crate) fn announcement(id: &Identity, ts: u64) -> Signed<Announcement> {
        let session = SessionId::new("fuzz").expect("valid");
        let peer = id
            .transport_keypair(&session)
            .expect("derives")
            .public()
            .to_peer_id()
            .to_bytes();
        Signed::sign(
            Announcement {
                v: VERSION,
                identity: id.public(),
                sealing: SealingBinding::new(id),
                session_id: session.clone(),
                peer_id: peer.into(),
                addrs: vec![],
                details: Details {
                    cwd: "/".into(),
                    git_label: None,
                    summary: String::new(),
                    host: HostKind::Other,
                    delivery: DeliveryMode::Poll,
                    project: None,
                    claims: Vec::new(),
                }
                .seal(id, &session, &[], &mut FixedRng)
                .expect("seals"),
                heartbeat_ms: 30_000,
                ts,
                seq: 1,
            },
            id,
        )
        .expect("signs")
    }
}

//! The device-link exchange (PROTOCOL.md §8.8): one person's second machine gets the
//! identity of the first, by a short-lived single-use code, with no key file copied.
//!
//! Both sides are IO-free state machines fed requests, responses, the operator's
//! decision and the clock; the shell (`interlink-p2p`) carries the messages over a
//! libp2p request-response protocol and asks the users.
//!
//! Three round trips, all started by the joiner:
//!
//! 1. `hello`: a commitment `C = H(tag || eJ)` to the joiner's ephemeral X25519 key,
//!    MACed with a key derived from the code's secret. The waiting node checks the MAC
//!    first (one HMAC: a stranger without the secret costs nothing more and is told
//!    only `refused`), then spends the code (single use), and answers its own ephemeral
//!    key `eI`, MACed over `C || eI` (so the joiner knows the answer comes from a holder
//!    of the secret).
//! 2. `reveal`: `eJ`, which must open `C`. Both sides now show the comparison string,
//!    `HMAC(secret-derived key, C || eI || eJ)` as six digits.
//! 3. `confirm`: sent once the joiner's user confirmed; the waiting node answers it
//!    only once its own user confirmed too, with the seed and its addresses sealed by
//!    HPKE in auth-PSK mode: to `eJ`, from `eI`, under a key derived from the secret.
//!
//! The commitment is why the comparison string can be short. Someone who has the code
//! (a leak) and sits between the two machines must pick the key it shows the waiting
//! node before it learns `eI`, and the key it shows the joiner before it learns `eJ`:
//! the two strings it causes match by chance only, one in a million, and the code is
//! spent on the first try. Someone who has the code and merely races the real joiner
//! causes a string that no other screen shows.

use hkdf::Hkdf;
use hmac::{Hmac, Mac as _};
use hpke::{
    Deserializable, Kem as _, OpModeR, OpModeS, PskBundle, Serializable, aead::ChaCha20Poly1305,
    kdf::HkdfSha256, kem::X25519HkdfSha256,
};
use libp2p_identity::PeerId;
use rand_core::CryptoRng;
use serde_bytes::{ByteArray, ByteBuf};
use sha2::{Digest as _, Sha256};
use zeroize::Zeroizing;

use crate::{
    identity::{Identity, IdentityKey},
    wire::{
        DEVICE_LINK_MAC_BYTES, DeviceCode, DeviceOffer, LinkRequest, LinkResponse, LinkStatus,
        VERSION, link_step as step,
    },
};

/// How long a device-link code is accepted by default: long enough to walk to the other
/// machine and paste it, short enough that a code left in a chat or a scroll-back is
/// dead by the time anyone else reads it.
pub const DEFAULT_CODE_LIFETIME_MS: u64 = 5 * 60 * 1000;
/// The longest lifetime a user may ask for.
pub const MAX_CODE_LIFETIME_MS: u64 = 15 * 60 * 1000;
/// How long the exchange may take once a joiner spent the code: both users compare
/// and confirm within it, or the exchange fails and nothing is written.
pub const CONFIRM_WINDOW_MS: u64 = 2 * 60 * 1000;
/// Digits of the comparison string.
pub const COMPARISON_DIGITS: usize = 6;

/// HKDF salt of the keys derived from the code's secret.
const KDF_SALT: &[u8] = b"interlink-p2p/v1/device-link";
/// Domain of the commitment to the joiner's ephemeral key.
const COMMIT_TAG: &[u8] = b"interlink-p2p/v1/device-link-commit\0";
/// HPKE `info` and `psk_id` of the sealed offer.
const SEAL_INFO: &[u8] = b"interlink-p2p/v1/device-link";

type Kem = X25519HkdfSha256;
type HmacSha256 = Hmac<Sha256>;

/// The keys the code's secret gives both sides.
struct Keys {
    mac: Zeroizing<[u8; 32]>,
    psk: Zeroizing<[u8; 32]>,
}

impl Keys {
    fn new(code: &DeviceCode) -> Self {
        let hk = Hkdf::<Sha256>::new(Some(KDF_SALT), code.secret.as_ref());
        let mut mac = Zeroizing::new([0u8; 32]);
        let mut psk = Zeroizing::new([0u8; 32]);
        // Both expansions are 32 bytes of HKDF-SHA256: they cannot fail.
        let _ = hk.expand_multi_info(&[b"mac", code.key.as_bytes()], mac.as_mut_slice());
        let _ = hk.expand_multi_info(&[b"psk", code.key.as_bytes()], psk.as_mut_slice());
        Self { mac, psk }
    }

    fn hmac(&self, label: &[u8], parts: &[&[u8]]) -> HmacSha256 {
        // HMAC takes a key of any length.
        let mut m = <HmacSha256 as hmac::KeyInit>::new_from_slice(self.mac.as_slice())
            .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
        m.update(label);
        for p in parts {
            m.update(p);
        }
        m
    }

    fn tag(&self, label: &[u8], parts: &[&[u8]]) -> [u8; DEVICE_LINK_MAC_BYTES] {
        self.hmac(label, parts).finalize().into_bytes().into()
    }

    /// Constant-time check of `mac`.
    fn verify(&self, label: &[u8], parts: &[&[u8]], mac: &[u8]) -> bool {
        self.hmac(label, parts).verify_slice(mac).is_ok()
    }

    fn comparison(&self, commit: &[u8; 32], ei: &[u8; 32], ej: &[u8; 32]) -> String {
        let t = self.tag(b"compare\0", &[commit, ei, ej]);
        let n = u32::from_be_bytes([t[0], t[1], t[2], t[3]]) % 1_000_000;
        let digits = format!("{n:06}");
        format!("{}-{}", &digits[..3], &digits[3..])
    }
}

/// The commitment to an ephemeral key: `SHA-256(tag || key)`.
pub fn commitment(eph: &[u8; 32]) -> [u8; 32] {
    Sha256::new()
        .chain_update(COMMIT_TAG)
        .chain_update(eph)
        .finalize()
        .into()
}

/// The joiner's addresses as the confirm MAC covers them: each as a 2-byte big-endian
/// length and its UTF-8 bytes.
fn addrs_bytes(addrs: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    for a in addrs {
        // Bounded to 256 bytes by the request's shape check.
        out.extend_from_slice(&u16::try_from(a.len()).unwrap_or(u16::MAX).to_be_bytes());
        out.extend_from_slice(a.as_bytes());
    }
    out
}

fn keypair(rng: &mut impl CryptoRng) -> (<Kem as hpke::Kem>::PrivateKey, [u8; 32]) {
    let mut ikm = Zeroizing::new([0u8; 32]);
    rng.fill_bytes(ikm.as_mut_slice());
    let (sk, pk) = Kem::derive_keypair(ikm.as_slice());
    let mut bytes = [0u8; 32];
    bytes.copy_from_slice(&pk.to_bytes());
    (sk, bytes)
}

fn seal_aad(commit: &[u8; 32], ei: &[u8; 32], ej: &[u8; 32]) -> Vec<u8> {
    [commit.as_slice(), ei, ej].concat()
}

/// Why the exchange failed, as either side sees it.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum LinkError {
    /// The code expired (on the joiner's clock, or the waiting node said so).
    #[error("the code expired: run `interlink-p2p invite --device` on the other machine again")]
    Expired,
    /// The waiting node refused: the code's secret did not match, or the request did
    /// not fit the exchange.
    #[error(
        "the other machine refused this code (it does not hold this code's secret, or \
         the exchange went wrong): run `interlink-p2p invite --device` there again"
    )]
    Refused,
    /// Someone already used the code.
    #[error(
        "this code was already used by another machine: nothing was written. If that was \
         not you, the code leaked: run `interlink-p2p invite --device` again and pass \
         the new code over a channel only you see"
    )]
    Used,
    /// A user did not confirm the comparison string.
    #[error("the comparison was not confirmed: nothing was written")]
    Declined,
    /// The exchange took longer than [`CONFIRM_WINDOW_MS`].
    #[error("the comparison was not confirmed in time: nothing was written")]
    TimedOut,
    /// An answer that does not authenticate under the code's secret, or hands over
    /// another identity than the code's.
    #[error("the other machine's answer does not verify ({0}): nothing was written")]
    BadAnswer(&'static str),
}

impl LinkError {
    fn of_status(status: LinkStatus) -> Self {
        match status {
            LinkStatus::Expired => Self::Expired,
            LinkStatus::Used => Self::Used,
            LinkStatus::Declined => Self::Declined,
            LinkStatus::Refused | LinkStatus::Ok => Self::Refused,
        }
    }
}

/// The joining side.
pub struct Joiner {
    key: IdentityKey,
    expires: u64,
    keys: Keys,
    sk: <Kem as hpke::Kem>::PrivateKey,
    ej: [u8; 32],
    commit: [u8; 32],
    ei: Option<[u8; 32]>,
}

impl std::fmt::Debug for Joiner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Joiner")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl Joiner {
    /// Starts joining with a verified `code` at `now` (ms): the `hello` to send.
    pub fn new(
        code: &DeviceCode,
        now: u64,
        rng: &mut impl CryptoRng,
    ) -> Result<(Self, LinkRequest), LinkError> {
        if now >= code.expires {
            return Err(LinkError::Expired);
        }
        let keys = Keys::new(code);
        let (sk, ej) = keypair(rng);
        let commit = commitment(&ej);
        let mac = keys.tag(b"hello\0", &[&commit]);
        let hello = LinkRequest {
            v: VERSION,
            step: step::HELLO,
            commit: Some(ByteArray::new(commit)),
            eph: None,
            addrs: None,
            mac: ByteArray::new(mac),
        };
        Ok((
            Self {
                key: code.key,
                expires: code.expires,
                keys,
                sk,
                ej,
                commit,
                ei: None,
            },
            hello,
        ))
    }

    /// When the code expires (ms).
    pub fn expires(&self) -> u64 {
        self.expires
    }

    /// Takes the answer to `hello`: the `reveal` to send and the comparison string.
    pub fn accepted(&mut self, resp: &LinkResponse) -> Result<(LinkRequest, String), LinkError> {
        resp.check(step::HELLO)
            .map_err(|_| LinkError::BadAnswer("malformed"))?;
        let (Some(ei), Some(mac)) = (&resp.eph, &resp.mac) else {
            return Err(LinkError::of_status(resp.status));
        };
        let ei: [u8; 32] = **ei;
        if !self
            .keys
            .verify(b"accept\0", &[&self.commit, &ei], mac.as_ref())
        {
            return Err(LinkError::BadAnswer(
                "its MAC is not under the code's secret",
            ));
        }
        self.ei = Some(ei);
        let mac = self.keys.tag(b"reveal\0", &[&self.commit, &ei, &self.ej]);
        let reveal = LinkRequest {
            v: VERSION,
            step: step::REVEAL,
            commit: None,
            eph: Some(ByteArray::new(self.ej)),
            addrs: None,
            mac: ByteArray::new(mac),
        };
        Ok((reveal, self.keys.comparison(&self.commit, &ei, &self.ej)))
    }

    /// Takes the answer to `reveal` (a bare `ok`).
    pub fn revealed(&self, resp: &LinkResponse) -> Result<(), LinkError> {
        resp.check(step::REVEAL)
            .map_err(|_| LinkError::BadAnswer("malformed"))?;
        match resp.status {
            LinkStatus::Ok => Ok(()),
            other => Err(LinkError::of_status(other)),
        }
    }

    /// The `confirm` to send once this side's user confirmed, with `addrs` (this
    /// machine's addresses, at most 8 of at most 256 bytes: longer lists are cut).
    pub fn confirm(&self, addrs: &[String]) -> Result<LinkRequest, LinkError> {
        let ei = self.ei.ok_or(LinkError::BadAnswer("out of order"))?;
        let addrs: Vec<String> = addrs
            .iter()
            .filter(|a| a.len() <= crate::wire::MAX_LINK_ADDR_BYTES)
            .take(crate::wire::MAX_LINK_ADDRS)
            .cloned()
            .collect();
        let mac = self.keys.tag(
            b"confirm\0",
            &[&self.commit, &ei, &self.ej, &addrs_bytes(&addrs)],
        );
        Ok(LinkRequest {
            v: VERSION,
            step: step::CONFIRM,
            commit: None,
            eph: None,
            addrs: Some(addrs),
            mac: ByteArray::new(mac),
        })
    }

    /// Takes the answer to `confirm`: the identity (checked against the code's key)
    /// and the waiting machine's addresses.
    pub fn finish(&self, resp: &LinkResponse) -> Result<(Identity, Vec<String>), LinkError> {
        resp.check(step::CONFIRM)
            .map_err(|_| LinkError::BadAnswer("malformed"))?;
        let (Some(enc), Some(sealed)) = (&resp.enc, &resp.sealed) else {
            return Err(LinkError::of_status(resp.status));
        };
        let ei = self.ei.ok_or(LinkError::BadAnswer("out of order"))?;
        let bad = LinkError::BadAnswer("the sealed identity does not open");
        let enc =
            <Kem as hpke::Kem>::EncappedKey::from_bytes(enc.as_ref()).map_err(|_| bad.clone())?;
        let pk_i = <Kem as hpke::Kem>::PublicKey::from_bytes(&ei).map_err(|_| bad.clone())?;
        let psk = PskBundle::new(self.keys.psk.as_slice(), SEAL_INFO).map_err(|_| bad.clone())?;
        let plain = Zeroizing::new(
            hpke::single_shot_open::<ChaCha20Poly1305, HkdfSha256, Kem>(
                &OpModeR::AuthPsk(pk_i, psk),
                &self.sk,
                &enc,
                SEAL_INFO,
                sealed,
                &seal_aad(&self.commit, &ei, &self.ej),
            )
            .map_err(|_| bad)?,
        );
        let offer =
            DeviceOffer::decode(&plain).map_err(|_| LinkError::BadAnswer("malformed offer"))?;
        let identity = Identity::from_seed(&offer.seed);
        if identity.public() != self.key {
            return Err(LinkError::BadAnswer(
                "it is not the identity the code names",
            ));
        }
        Ok((identity, offer.addrs.clone()))
    }
}

/// What the waiting node does with a request.
#[derive(Debug, PartialEq, Eq)]
pub enum Reply {
    /// Answer it now.
    Respond(LinkResponse),
    /// Keep it unanswered until this side's user decides ([`Inviter::decide`]).
    Hold,
}

/// How the exchange ended at the waiting node.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The identity was sent to the joiner, which reported these addresses.
    Linked {
        /// The joiner's addresses (from its `confirm`).
        addrs: Vec<String>,
    },
    /// It failed; nothing was sent.
    Failed(LinkError),
}

/// Where the waiting node is.
enum Stage {
    /// No joiner yet: the code is unspent.
    Waiting,
    /// A joiner spent the code (boxed: the keys make it far larger than the others).
    Accepted(Box<Exchange>),
    /// Over; every later request is refused.
    Done,
}

/// The exchange with the joiner that spent the code.
struct Exchange {
    /// Its PeerId: every later request must come from it.
    peer: PeerId,
    /// When its `hello` came (ms).
    at: u64,
    commit: [u8; 32],
    sk: <Kem as hpke::Kem>::PrivateKey,
    pk: <Kem as hpke::Kem>::PublicKey,
    ei: [u8; 32],
    /// After a valid `reveal`: the joiner's key and the comparison string.
    ej: Option<([u8; 32], String)>,
    /// After a valid `confirm`: the joiner's addresses (its request is held).
    confirmed: Option<Vec<String>>,
    /// This side's user's decision.
    decided: Option<bool>,
}

/// The waiting (inviting) side: one code, one joiner.
pub struct Inviter {
    identity: Identity,
    expires: u64,
    keys: Keys,
    /// The addresses of this machine, sealed with the seed.
    own_addrs: Vec<String>,
    stage: Stage,
    outcome: Option<Outcome>,
    /// The joiner that spent the code, kept after the exchange ended: its late
    /// `confirm` after this side declined is told `declined`, not just `refused`.
    bound: Option<PeerId>,
}

impl std::fmt::Debug for Inviter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inviter")
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

impl Inviter {
    /// Waits for a joiner of `code` (which `identity` signed), offering `own_addrs`
    /// (cut to 8 of at most 256 bytes).
    pub fn new(identity: Identity, code: &DeviceCode, own_addrs: &[String]) -> Self {
        Self {
            keys: Keys::new(code),
            expires: code.expires,
            identity,
            own_addrs: own_addrs
                .iter()
                .filter(|a| a.len() <= crate::wire::MAX_LINK_ADDR_BYTES)
                .take(crate::wire::MAX_LINK_ADDRS)
                .cloned()
                .collect(),
            stage: Stage::Waiting,
            outcome: None,
            bound: None,
        }
    }

    /// The comparison string to show, once the joiner revealed its key.
    pub fn comparison(&self) -> Option<&str> {
        match &self.stage {
            Stage::Accepted(x) => x.ej.as_ref().map(|(_, sas)| sas.as_str()),
            _ => None,
        }
    }

    /// Whether a joiner spent the code (it is single-use from then on).
    pub fn spent(&self) -> bool {
        self.bound.is_some()
    }

    /// How it ended, once it did.
    pub fn outcome(&self) -> Option<&Outcome> {
        self.outcome.as_ref()
    }

    /// When [`Inviter::handle_timeout`] must next be called (ms).
    pub fn poll_timeout(&self) -> Option<u64> {
        match &self.stage {
            Stage::Waiting => Some(self.expires),
            Stage::Accepted(x) => Some(x.at.saturating_add(CONFIRM_WINDOW_MS)),
            Stage::Done => None,
        }
    }

    /// Ends the exchange when the code expired unspent or the confirmation window
    /// passed. A held `confirm` is then answered by the shell dropping it.
    pub fn handle_timeout(&mut self, now: u64) {
        match self.poll_timeout() {
            Some(t) if now >= t => {
                let why = if matches!(self.stage, Stage::Waiting) {
                    LinkError::Expired
                } else {
                    LinkError::TimedOut
                };
                self.fail(why);
            }
            _ => {}
        }
    }

    fn fail(&mut self, why: LinkError) {
        self.stage = Stage::Done;
        if self.outcome.is_none() {
            self.outcome = Some(Outcome::Failed(why));
        }
    }

    /// Takes a decoded, shape-checked request from `from` at `now`.
    pub fn handle(
        &mut self,
        from: PeerId,
        req: &LinkRequest,
        now: u64,
        rng: &mut impl CryptoRng,
    ) -> Reply {
        let refuse = |status| Reply::Respond(LinkResponse::status(req.step, status));
        if req.check().is_err() {
            return refuse(LinkStatus::Refused);
        }
        self.handle_timeout(now);
        if req.step == step::HELLO {
            let Some(commit) = &req.commit else {
                return refuse(LinkStatus::Refused);
            };
            let commit: [u8; 32] = **commit;
            // The only work a stranger can cause: one HMAC.
            if !self.keys.verify(b"hello\0", &[&commit], req.mac.as_ref()) {
                return refuse(LinkStatus::Refused);
            }
            return match self.stage {
                Stage::Waiting if now >= self.expires => refuse(LinkStatus::Expired),
                Stage::Waiting => {
                    let (sk, ei) = keypair(rng);
                    let Ok(pk) = <Kem as hpke::Kem>::PublicKey::from_bytes(&ei) else {
                        return refuse(LinkStatus::Refused);
                    };
                    let mac = self.keys.tag(b"accept\0", &[&commit, &ei]);
                    // The code is spent from here on: single use.
                    self.bound = Some(from);
                    self.stage = Stage::Accepted(Box::new(Exchange {
                        peer: from,
                        at: now,
                        commit,
                        sk,
                        pk,
                        ei,
                        ej: None,
                        confirmed: None,
                        decided: None,
                    }));
                    Reply::Respond(LinkResponse {
                        eph: Some(ByteArray::new(ei)),
                        mac: Some(ByteArray::new(mac)),
                        ..LinkResponse::status(step::HELLO, LinkStatus::Ok)
                    })
                }
                Stage::Done if now >= self.expires && self.outcome_is_expiry() => {
                    refuse(LinkStatus::Expired)
                }
                _ => refuse(LinkStatus::Used),
            };
        }
        let Stage::Accepted(x) = &mut self.stage else {
            let declined = matches!(self.outcome, Some(Outcome::Failed(LinkError::Declined)));
            if declined && req.step == step::CONFIRM && self.bound == Some(from) {
                return refuse(LinkStatus::Declined);
            }
            return refuse(LinkStatus::Refused);
        };
        let Exchange {
            peer,
            commit,
            ei,
            ej,
            confirmed,
            decided,
            ..
        } = &mut **x;
        if *peer != from {
            return refuse(LinkStatus::Refused);
        }
        match (req.step, &req.eph, &req.addrs) {
            (step::REVEAL, Some(eph), _) if ej.is_none() => {
                let eph: [u8; 32] = **eph;
                let valid = commitment(&eph) == *commit
                    && self.keys.verify(
                        b"reveal\0",
                        &[commit.as_slice(), ei, &eph],
                        req.mac.as_ref(),
                    );
                if !valid {
                    // The code is spent: a joiner that cannot open its commitment ends it.
                    self.fail(LinkError::Refused);
                    return refuse(LinkStatus::Refused);
                }
                let sas = self.keys.comparison(commit, ei, &eph);
                *ej = Some((eph, sas));
                refuse(LinkStatus::Ok)
            }
            (step::CONFIRM, _, Some(addrs)) if confirmed.is_none() => {
                let Some((eph, _)) = ej else {
                    self.fail(LinkError::Refused);
                    return refuse(LinkStatus::Refused);
                };
                let valid = self.keys.verify(
                    b"confirm\0",
                    &[commit.as_slice(), ei, eph.as_slice(), &addrs_bytes(addrs)],
                    req.mac.as_ref(),
                );
                if !valid {
                    self.fail(LinkError::Refused);
                    return refuse(LinkStatus::Refused);
                }
                *confirmed = Some(addrs.clone());
                match *decided {
                    None => Reply::Hold,
                    Some(yes) => self.answer_confirm(yes, rng),
                }
            }
            _ => {
                self.fail(LinkError::Refused);
                refuse(LinkStatus::Refused)
            }
        }
    }

    fn outcome_is_expiry(&self) -> bool {
        matches!(self.outcome, Some(Outcome::Failed(LinkError::Expired)))
    }

    /// This side's user decided about the comparison string. Returns the answer to the
    /// joiner's held `confirm`, if one is held.
    pub fn decide(&mut self, yes: bool, rng: &mut impl CryptoRng) -> Option<LinkResponse> {
        let Stage::Accepted(x) = &mut self.stage else {
            return None;
        };
        let Exchange {
            ej: Some(_),
            confirmed,
            decided,
            ..
        } = &mut **x
        else {
            return None;
        };
        *decided = Some(yes);
        if confirmed.is_none() {
            if !yes {
                self.fail(LinkError::Declined);
            }
            return None;
        }
        match self.answer_confirm(yes, rng) {
            Reply::Respond(r) => Some(r),
            Reply::Hold => None,
        }
    }

    /// Answers the held `confirm` once both users decided.
    fn answer_confirm(&mut self, yes: bool, rng: &mut impl CryptoRng) -> Reply {
        let refuse = |status| Reply::Respond(LinkResponse::status(step::CONFIRM, status));
        if !yes {
            self.fail(LinkError::Declined);
            return refuse(LinkStatus::Declined);
        }
        let Stage::Accepted(x) = &self.stage else {
            return Reply::Hold;
        };
        let Exchange {
            commit,
            sk,
            pk,
            ei,
            ej: Some((ej, _)),
            confirmed: Some(addrs),
            ..
        } = &**x
        else {
            return Reply::Hold;
        };
        let joiner_addrs = addrs.clone();
        let offer = DeviceOffer {
            seed: ByteArray::new(*self.identity.seed()),
            addrs: self.own_addrs.clone(),
        };
        let plain = offer.encode();
        drop(offer);
        let sealed = <Kem as hpke::Kem>::PublicKey::from_bytes(ej)
            .ok()
            .and_then(|pk_j| {
                let psk = PskBundle::new(self.keys.psk.as_slice(), SEAL_INFO).ok()?;
                hpke::single_shot_seal_with_rng::<ChaCha20Poly1305, HkdfSha256, Kem>(
                    &OpModeS::AuthPsk((sk.clone(), pk.clone()), psk),
                    &pk_j,
                    SEAL_INFO,
                    &plain,
                    &seal_aad(commit, ei, ej),
                    rng,
                )
                .ok()
            });
        let Some((enc, ct)) = sealed else {
            // The joiner's key is not a usable X25519 key (it opened its commitment, so
            // it chose it): end the exchange.
            self.fail(LinkError::Refused);
            return refuse(LinkStatus::Refused);
        };
        let mut enc_bytes = [0u8; 32];
        enc_bytes.copy_from_slice(&enc.to_bytes());
        self.stage = Stage::Done;
        self.outcome = Some(Outcome::Linked {
            addrs: joiner_addrs,
        });
        Reply::Respond(LinkResponse {
            enc: Some(ByteArray::new(enc_bytes)),
            sealed: Some(ByteBuf::from(ct)),
            ..LinkResponse::status(step::CONFIRM, LinkStatus::Ok)
        })
    }
}

#[cfg(test)]
#[path = "device_link_tests.rs"]
mod tests;

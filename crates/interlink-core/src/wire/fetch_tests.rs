use super::*;
use crate::{Identity, wire::VERSION};

fn fetch(owner: &Identity, holder: &[u8], ts: u64) -> Vec<u8> {
    let body = MailboxFetch {
        v: VERSION,
        owner: owner.public(),
        owner_session: SessionId::new("s").unwrap(),
        holder: ByteBuf::from(holder.to_vec()),
        ts,
    };
    Signed::sign(body, owner).unwrap().to_bytes()
}

#[test]
fn a_fetch_opens_only_its_mailbox_at_its_holder_while_fresh() {
    let owner = Identity::from_seed(&[7; 32]);
    let now = 1_790_000_000_000;
    let key = mailbox::record_key(&owner.public(), &SessionId::new("s").unwrap());
    let good = fetch(&owner, b"holder-a", now);
    assert_eq!(Signed::check_fetch(&good, b"holder-a", now), Ok(key));
    let code = |r: Result<[u8; 32], Refusal>| r.unwrap_err().code;
    // Replayed to another holder, stale, future-dated.
    assert_eq!(
        code(Signed::check_fetch(&good, b"holder-b", now)),
        RefusalCode::WrongRecipient
    );
    assert_eq!(
        code(Signed::check_fetch(
            &good,
            b"holder-a",
            now + FETCH_FRESHNESS_MS + 1
        )),
        RefusalCode::Stale
    );
    let ahead = fetch(&owner, b"holder-a", now + MAX_FUTURE_SKEW_MS + 1);
    assert_eq!(
        code(Signed::check_fetch(&ahead, b"holder-a", now)),
        RefusalCode::FutureDated
    );
    // A body signed by someone else, or re-signed in another domain.
    let mut forged = good.clone();
    let last = forged.len() - 1;
    forged[last] ^= 1;
    assert_eq!(
        code(Signed::check_fetch(&forged, b"holder-a", now)),
        RefusalCode::BadSignature
    );
    assert_eq!(
        code(Signed::check_fetch(&[0xa0], b"holder-a", now)),
        RefusalCode::Malformed
    );
    let empty = MailboxFetch {
        v: VERSION,
        owner: owner.public(),
        owner_session: SessionId::new("s").unwrap(),
        holder: ByteBuf::new(),
        ts: now,
    };
    assert!(Signed::sign(empty, &owner).is_err());
}

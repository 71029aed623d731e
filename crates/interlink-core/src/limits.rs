//! Every bound the protocol enforces, by name.
//!
//! Sizes are in bytes, times in milliseconds. Changing a wire limit changes what peers
//! accept: docs/PROTOCOL.md lists them and must be kept in step.

/// One second, in milliseconds.
pub const SECOND_MS: u64 = 1_000;
/// One minute, in milliseconds.
pub const MINUTE_MS: u64 = 60 * SECOND_MS;
/// One hour, in milliseconds.
pub const HOUR_MS: u64 = 60 * MINUTE_MS;
/// One day, in milliseconds.
pub const DAY_MS: u64 = 24 * HOUR_MS;

/// Largest plaintext message body (UTF-8 text) a session will seal or accept.
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// Largest encoded envelope (body, HPKE overhead and header fields). A group
/// message's tag ([`MAX_GROUP_TAG_BYTES`]) rides on top of a full text, so a group
/// message may be as long as a direct one.
pub const MAX_ENVELOPE_BYTES: usize = MAX_BODY_BYTES + 4 * 1024 + MAX_GROUP_TAG_BYTES;
/// Largest encoded sealed body: the text, its task id (up to [`MAX_TASK_ID_BYTES`]), its
/// status and the id it answers, with their CBOR framing, and a group tag.
pub const MAX_SEALED_BODY_BYTES: usize = MAX_BODY_BYTES + 256 + MAX_GROUP_TAG_BYTES;
/// Most recipient sessions a group message's sealed tag may name (protocol version 7):
/// one copy of the message goes to each, so it bounds a group send too.
pub const MAX_GROUP_RECIPIENTS: usize = 32;
/// Room a sealed body keeps for its group tag: a name of [`MAX_NAME_BYTES`], a thread
/// id and [`MAX_GROUP_RECIPIENTS`] addresses with session ids of
/// [`MAX_SESSION_ID_BYTES`] encode to 5,738 bytes (`wire::tests` pins it).
pub const MAX_GROUP_TAG_BYTES: usize = 6 * 1024;
/// Largest encoded announcement.
pub const MAX_ANNOUNCEMENT_BYTES: usize = 12 * 1024;
/// Largest encoded goodbye, receipt or ack for a single id.
pub const MAX_SMALL_MESSAGE_BYTES: usize = 1024;
/// Largest encoded receipt: a small message plus up to a full delivery batch of ids.
pub const MAX_RECEIPT_BYTES: usize = MAX_SMALL_MESSAGE_BYTES + MAX_DELIVER_BATCH * 24;
/// Largest encoded ack (it lists up to [`MAX_ACK_IDS`] message ids).
pub const MAX_ACK_BYTES: usize = 1024 + MAX_ACK_IDS * 56;
/// Largest encoded mailbox record value.
pub const MAX_MAILBOX_RECORD_BYTES: usize = 4 * 1024 * 1024;

/// Longest session summary, in bytes of UTF-8.
pub const MAX_SUMMARY_BYTES: usize = 512;
/// Longest working-directory string in an announcement.
pub const MAX_CWD_BYTES: usize = 1024;
/// Longest git-root label in an announcement.
pub const MAX_GIT_LABEL_BYTES: usize = 256;
/// Most listen addresses one announcement may carry.
pub const MAX_LISTEN_ADDRS: usize = 16;
/// Longest multiaddr (text form) in an announcement.
pub const MAX_ADDR_BYTES: usize = 256;
/// Longest session id.
pub const MAX_SESSION_ID_BYTES: usize = 128;
/// Longest task id.
pub const MAX_TASK_ID_BYTES: usize = 128;
/// Longest petname, and longest name a knock may claim.
pub const MAX_NAME_BYTES: usize = 32;
/// Most message ids one ack may list.
pub const MAX_ACK_IDS: usize = 256;

/// How far in the future a timestamp may lie before it is rejected (clock skew).
pub const MAX_FUTURE_SKEW_MS: u64 = 2 * MINUTE_MS;
/// Oldest envelope the live path accepts. Mailbox envelopes use [`MAILBOX_RETENTION_MS`].
pub const LIVE_FRESHNESS_MS: u64 = HOUR_MS;
/// How long a signed mailbox fetch request (PROTOCOL §8.5) is accepted after it was made.
pub const FETCH_FRESHNESS_MS: u64 = 5 * MINUTE_MS;
/// Oldest receipt accepted.
pub const RECEIPT_FRESHNESS_MS: u64 = MAILBOX_RETENTION_MS;

/// A session re-announces itself this often.
pub const HEARTBEAT_MS: u64 = 30 * SECOND_MS;
/// Longest heartbeat a session uses and a receiver honours: on a very large overlay a
/// session announces at most this rarely (and at least every [`HEARTBEAT_MS`]).
pub const MAX_HEARTBEAT_MS: u64 = 10 * MINUTE_MS;
/// Announcements per second a node aims to receive from the whole roster in steady
/// state: past `HEARTBEAT_MS × this` sessions (600) the heartbeat stretches to keep
/// each node's presence traffic flat (`presence::heartbeat::heartbeat_interval_ms`;
/// the simulation in docs/BENCHMARKS.md measures it).
pub const TARGET_ANNOUNCEMENTS_PER_S: u64 = 20;
/// A session whose last announcement is younger than this is live.
pub const LIVE_WINDOW_MS: u64 = 90 * SECOND_MS;
/// A silent session stays on the roster (away) this long, then it is gone.
pub const AWAY_RETENTION_MS: u64 = 3 * DAY_MS;

/// Most sessions one identity may have on a roster at once.
pub const MAX_SESSIONS_PER_IDENTITY: usize = 32;
/// Most identities a roster holds.
pub const MAX_ROSTER_IDENTITIES: usize = 1024;

/// How long a queued envelope stays deliverable, and how long an ack tombstone lives.
pub const MAILBOX_RETENTION_MS: u64 = 7 * DAY_MS;
/// Most admitted envelopes one mailbox holds; beyond it new ones are not kept.
pub const MAILBOX_MAX_ENVELOPES: usize = 256;
/// Most envelopes from one admitted sender in one mailbox.
pub const MAILBOX_SENDER_QUOTA: usize = 64;
/// Most bytes of admitted envelopes one mailbox holds.
pub const MAILBOX_MAX_BYTES: usize = 2 * 1024 * 1024;
/// Most bytes of envelopes from one admitted sender in one mailbox: four senders at
/// full speed fill [`MAILBOX_MAX_BYTES`], one cannot.
pub const MAILBOX_SENDER_MAX_BYTES: usize = 512 * 1024;
/// Most envelopes without a pass one mailbox holds, apart from its admitted mail:
/// knocks, and the first words of a peer paired by hand that has not met this one
/// online yet (PROTOCOL §7.2).
pub const MAILBOX_STRANGER_SLOTS: usize = 32;
/// Most envelopes without a pass from one sender in one mailbox.
pub const MAILBOX_STRANGER_SENDER_QUOTA: usize = 8;
/// Most bytes of envelopes without a pass one mailbox holds.
pub const MAILBOX_STRANGER_MAX_BYTES: usize = 128 * 1024;
/// Largest envelope without a pass a mailbox holds.
pub const MAILBOX_STRANGER_ENVELOPE_MAX_BYTES: usize = 16 * 1024;
/// Most owner acks one mailbox keeps; beyond it the oldest are dropped.
pub const MAILBOX_MAX_ACKS: usize = 64;

/// Capacity of the replay set (message ids remembered).
pub const REPLAY_SET_CAPACITY: usize = 65_536;
/// Most pending knocks a session keeps.
pub const KNOCK_QUEUE_CAPACITY: usize = 64;
/// How long a held knock is safe from being displaced: a full knock queue refuses new
/// strangers' knocks until its oldest has been held this long, so a flood of fresh
/// identities cannot push out a knock before the operator (or the agent side, which
/// copies it within a second) has seen it.
pub const KNOCK_MIN_HOLD_MS: u64 = 10 * 60 * 1000;
/// Most identities a session remembers having sent a pair request to; beyond it the
/// oldest request is forgotten and a late acceptance from it is dropped.
pub const MAX_PENDING_PAIR_REQUESTS: usize = 64;
/// Most peers in one peers policy.
pub const MAX_PEERS: usize = 4096;
/// Largest roster-fetch response.
pub const MAX_ROSTER_RESPONSE_BYTES: usize = 1024 * 1024;
/// Most envelopes in one live delivery request.
pub const MAX_DELIVER_BATCH: usize = 64;
/// Most messages one `read` or `host_queued` envelope is about (`in_reply_to` and
/// `also_about` together, version 10).
pub const MAX_RECEIPT_IDS: usize = 64;
/// Most envelope bytes packed into one live delivery request (one envelope may exceed it).
pub const MAX_DELIVER_REQUEST_BYTES: usize = 1024 * 1024;

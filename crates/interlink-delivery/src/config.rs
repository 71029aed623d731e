//! Engine configuration and the named capacities.

use interlink_core::{
    limits::{LIVE_FRESHNESS_MS, MAILBOX_SENDER_QUOTA, MINUTE_MS, SECOND_MS},
    mailbox,
    trust::PeerPolicy,
};

/// Most outbox entries for one recipient session (waiting to go live, in flight, or
/// held). A mailbox takes [`MAILBOX_SENDER_QUOTA`] from one sender, so a published copy
/// holds the oldest that many; later ones are held in the outbox only
/// ([`crate::HeldBy::Outbox`]) and travel live when the recipient shows life, or in a
/// later copy once earlier ones were collected.
pub const OUTBOX_PER_RECIPIENT: usize = 4 * MAILBOX_SENDER_QUOTA;
/// Most outbox entries in all.
pub const OUTBOX_CAPACITY: usize = 1024;
/// Most outbound live requests in flight (one per recipient session at most).
pub const REQUESTS_IN_FLIGHT: usize = 64;
/// Most inbound live requests from one node waiting for an inbox write; beyond it the
/// node is told `busy`.
pub const INBOUND_PER_PEER: usize = 4;
/// Most inbound live requests waiting in all.
pub const INBOUND_WAITING: usize = 64;
/// Most envelopes waiting for the next inbox append (beyond it, live envelopes are
/// refused `busy` and mailbox ones are left for the next drain).
pub const APPEND_QUEUE: usize = 1024;
/// Most (sender, id) pairs in the inbox index. Entries also leave when they can no
/// longer be delivered again (retention plus twice the skew tolerance after storing).
pub const INBOX_INDEX_CAPACITY: usize = 65_536;
/// Most collected-mail receipts waiting to go out.
pub const COLLECTED_RECEIPTS_PENDING: usize = 256;
/// Requests made for one collected-mail receipt before it is given up.
pub const RECEIPT_ATTEMPTS: u32 = 3;
/// Most sessions whose node the engine remembers.
pub const ROUTES_CAPACITY: usize = 4096;
/// Most mailbox publications a session without an outbox follows until holders
/// answer (each carries every message still waiting for its answer).
pub const PUTS_FOLLOWED: usize = 256;

/// Doc-hidden fault knobs that put back known bugs, so tests can show the simulator
/// finds them. Never set outside tests.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bugs {
    /// Key the inbox dedupe by message id alone (any sender's copy counts).
    pub id_only_acks: bool,
    /// Record an envelope as held before its inbox append is durable.
    pub replay_before_append: bool,
    /// Without an outbox, say `queued` once the copy is published, without waiting
    /// for a holder to say it keeps the message.
    pub queued_without_holder: bool,
}

/// Engine settings. Times in ms.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Config {
    /// Who may send to this session (the gate's policy).
    pub policy: PeerPolicy,
    /// Mailbox bounds and retention (must match every holder's).
    pub mailbox: mailbox::Config,
    /// How long a live attempt may take before the recipient counts as unreachable.
    pub live_timeout_ms: u64,
    /// Oldest envelope the live path accepts (the recipient's rule).
    pub live_window_ms: u64,
    /// How often this session drains its own mailbox.
    pub drain_interval_ms: u64,
    /// How often pending messages are published to the recipients' mailboxes again
    /// (holders may have lost them).
    pub republish_interval_ms: u64,
    /// How long after a retryable refusal the live path is tried again.
    pub retry_interval_ms: u64,
    /// Whether this session keeps a durable outbox. One that does not (a shell
    /// command that exits once its messages are answered) says `queued` only when
    /// another node answered that its mailbox copy keeps the message
    /// ([`crate::HeldBy::Mailbox`]), and `not kept` otherwise.
    pub keeps_outbox: bool,
    /// How long a session without an outbox waits for holders to answer a
    /// publication before the messages it carries are `not kept` (unconfirmed).
    pub put_timeout_ms: u64,
    #[doc(hidden)]
    pub bugs: Bugs,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            policy: PeerPolicy::new(),
            mailbox: mailbox::Config::default(),
            live_timeout_ms: SECOND_MS,
            live_window_ms: LIVE_FRESHNESS_MS,
            drain_interval_ms: 10 * SECOND_MS,
            republish_interval_ms: 10 * MINUTE_MS,
            retry_interval_ms: 5 * SECOND_MS,
            keeps_outbox: true,
            put_timeout_ms: 15 * SECOND_MS,
            bugs: Bugs::default(),
        }
    }
}

impl Config {
    /// With this peers policy.
    pub fn with_policy(mut self, policy: PeerPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// With these mailbox bounds (retention included).
    pub fn with_mailbox(mut self, mailbox: mailbox::Config) -> Self {
        self.mailbox = mailbox;
        self
    }

    /// With these periods: live timeout, drain, republish, retry.
    pub fn with_timing(
        mut self,
        live_timeout: u64,
        drain: u64,
        republish: u64,
        retry: u64,
    ) -> Self {
        self.live_timeout_ms = live_timeout.max(1);
        self.drain_interval_ms = drain.max(1);
        self.republish_interval_ms = republish.max(1);
        self.retry_interval_ms = retry.max(1);
        self
    }

    /// With this live freshness window.
    pub fn with_live_window(mut self, window: u64) -> Self {
        self.live_window_ms = window;
        self
    }

    /// Without a durable outbox (see [`Config::keeps_outbox`]).
    pub fn without_outbox(mut self) -> Self {
        self.keeps_outbox = false;
        self
    }

    /// With this wait for holders' answers (see [`Config::put_timeout_ms`]).
    pub fn with_put_timeout(mut self, ms: u64) -> Self {
        self.put_timeout_ms = ms.max(1);
        self
    }

    /// With these bug knobs (tests only).
    #[doc(hidden)]
    pub fn with_bugs(mut self, bugs: Bugs) -> Self {
        self.bugs = bugs;
        self
    }

    /// How long a message is kept: the mailbox retention.
    pub fn retention_ms(&self) -> u64 {
        self.mailbox.retention_ms
    }
}

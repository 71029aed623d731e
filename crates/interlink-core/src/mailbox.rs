//! mailbox (in progress)

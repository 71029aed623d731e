//! The one wall clock of a process, passed in rather than reached for.
//!
//! Every timestamp a node, a session or a CLI command makes or checks (announcement
//! `ts`, mailbox expiry, pairing requests, lock claims) comes from the [`Clock`] it was
//! given. A process-level test moves a process "an hour later" by giving it a clock
//! with an offset (`INTERLINK_TEST_CLOCK_OFFSET_MS`), instead of a global that every
//! caller would share.

/// Milliseconds since the Unix epoch, shifted by a fixed offset (0 outside tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Clock {
    offset_ms: i64,
}

impl Clock {
    /// The system clock.
    pub const fn system() -> Self {
        Self { offset_ms: 0 }
    }

    /// The system clock moved by `offset_ms` (may be negative).
    pub const fn offset_by(offset_ms: i64) -> Self {
        Self { offset_ms }
    }

    /// Milliseconds since the Unix epoch (0 if the system clock is before 1970).
    pub fn now_ms(&self) -> u64 {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        wall.saturating_add_signed(self.offset_ms)
    }
}

#[cfg(test)]
#[path = "clock_tests.rs"]
mod tests;

//! Session ids.
//!
//! A session id names one agent session under an identity; `identity key + session id`
//! is a session's address. How a session finds its own (flag, environment, random) is
//! `interlink_mcp::serve::resolve_session`.

use std::fmt;

use rand_core::CryptoRng;

use crate::limits::MAX_SESSION_ID_BYTES;

/// A validated session id: 1 to [`MAX_SESSION_ID_BYTES`] characters from
/// `A-Z a-z 0-9 . _ : -`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(String);

/// Why a session id was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionIdError {
    /// Empty.
    #[error("session id is empty")]
    Empty,
    /// Too long.
    #[error("session id is {0} bytes; the limit is {MAX_SESSION_ID_BYTES}")]
    TooLong(usize),
    /// Contains a character outside the allowed set.
    #[error("session id may only contain A-Z a-z 0-9 . _ : - (found {0:?})")]
    BadChar(char),
    /// `.` or `..`: valid characters, but never a session's id (no session can have
    /// them as its state directory), so a message is never queued for one.
    #[error("{0:?} is never a session id")]
    Reserved(String),
    /// A session id from the environment was invalid.
    #[error("{var} is set but invalid: {source}")]
    InvalidEnv {
        /// The variable.
        var: &'static str,
        /// What is wrong with it.
        source: Box<SessionIdError>,
    },
}

impl SessionId {
    /// Validates `s` as a session id.
    pub fn new(s: impl Into<String>) -> Result<Self, SessionIdError> {
        let s = s.into();
        if s.is_empty() {
            return Err(SessionIdError::Empty);
        }
        if s.len() > MAX_SESSION_ID_BYTES {
            return Err(SessionIdError::TooLong(s.len()));
        }
        if let Some(c) = s
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')))
        {
            return Err(SessionIdError::BadChar(c));
        }
        Ok(Self(s))
    }

    /// A fresh random id in UUID v4 text form.
    pub fn random(rng: &mut impl CryptoRng) -> Self {
        let mut b = [0u8; 16];
        rng.fill_bytes(&mut b);
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        let h = crate::identity::hex_encode(&b);
        Self(format!(
            "{}-{}-{}-{}-{}",
            &h[0..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        ))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SessionId({})", self.0)
    }
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;

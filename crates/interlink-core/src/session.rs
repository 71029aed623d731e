//! Session ids and how a session finds its own.
//!
//! A session id names one agent session under an identity; `identity key + session id`
//! is a session's address. Resolution order: an explicit `--session` flag, then
//! `INTERLINK_SESSION`, then `CLAUDE_CODE_SESSION_ID` (Claude Code injects it, and it is
//! stable across the server restarts Claude performs within one session), else a fresh
//! random id.

use std::fmt;

use rand_core::CryptoRng;

use crate::limits::MAX_SESSION_ID_BYTES;

/// Environment variable that pins the session id.
pub const ENV_SESSION: &str = crate::env::SESSION;
/// Environment variable Claude Code sets in the MCP server's environment.
pub const ENV_CLAUDE_SESSION: &str = crate::env::CLAUDE_SESSION;

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

/// Where a resolved session id came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionSource {
    /// The `--session` flag.
    Flag,
    /// `INTERLINK_SESSION`.
    InterlinkEnv,
    /// `CLAUDE_CODE_SESSION_ID`.
    ClaudeEnv,
    /// Generated at random.
    Random,
}

impl SessionSource {
    /// True when the id was pinned by the user or the host, so it survives restarts.
    pub fn is_pinned(self) -> bool {
        !matches!(self, SessionSource::Random)
    }
}

/// Resolves this session's id: `flag`, then [`ENV_SESSION`], then
/// [`ENV_CLAUDE_SESSION`] (read through `env`), else random. Empty variables count as
/// unset; a set but invalid value is an error rather than a silent fallback, so a typo
/// never detaches a session from its mailbox.
pub fn resolve(
    flag: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
    rng: &mut impl CryptoRng,
) -> Result<(SessionId, SessionSource), SessionIdError> {
    if let Some(f) = flag {
        return Ok((SessionId::new(f)?, SessionSource::Flag));
    }
    for (var, source) in [
        (ENV_SESSION, SessionSource::InterlinkEnv),
        (ENV_CLAUDE_SESSION, SessionSource::ClaudeEnv),
    ] {
        match env(var) {
            Some(v) if !v.trim().is_empty() => {
                let id = SessionId::new(v.trim()).map_err(|e| SessionIdError::InvalidEnv {
                    var,
                    source: Box::new(e),
                })?;
                return Ok((id, source));
            }
            _ => {}
        }
    }
    Ok((SessionId::random(rng), SessionSource::Random))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::{ChaCha20Rng, rand_core::SeedableRng};

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn resolution_order() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let all = [(ENV_SESSION, "pinned"), (ENV_CLAUDE_SESSION, "claude-1")];
        assert_eq!(
            resolve(Some("flag"), env(&all), &mut rng).unwrap(),
            (SessionId::new("flag").unwrap(), SessionSource::Flag)
        );
        assert_eq!(
            resolve(None, env(&all), &mut rng).unwrap().1,
            SessionSource::InterlinkEnv
        );
        let claude = [(ENV_SESSION, " "), (ENV_CLAUDE_SESSION, "claude-1")];
        assert_eq!(
            resolve(None, env(&claude), &mut rng).unwrap(),
            (
                SessionId::new("claude-1").unwrap(),
                SessionSource::ClaudeEnv
            )
        );
        let (id, src) = resolve(None, env(&[]), &mut rng).unwrap();
        assert_eq!(src, SessionSource::Random);
        assert_eq!(id.as_str().len(), 36);
        assert!(!src.is_pinned());
    }

    #[test]
    fn invalid_values_are_errors() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        assert_eq!(SessionId::new(""), Err(SessionIdError::Empty));
        assert_eq!(SessionId::new("a b"), Err(SessionIdError::BadChar(' ')));
        assert_eq!(
            SessionId::new("x".repeat(129)),
            Err(SessionIdError::TooLong(129))
        );
        let bad = [(ENV_SESSION, "no/slash")];
        let err = resolve(None, env(&bad), &mut rng).unwrap_err();
        assert!(err.to_string().contains(ENV_SESSION), "{err}");
    }
}

//! Where a user's interlink-p2p files live.
//!
//! The home directory holds the identity key, the peers policy and per-session state
//! (`sessions/<session id>/`: the session's inbox, the agent's read state, the lock
//! of `interlink-p2p wait`).
//! It is `--home`, else `INTERLINK_HOME`, else `$XDG_CONFIG_HOME/interlink-p2p`, else
//! `$HOME/.config/interlink-p2p`.

use std::path::{Path, PathBuf};

use interlink_core::SessionId;

/// Environment variable naming the home directory.
pub const ENV_HOME: &str = interlink_core::env::HOME;
/// File name of the identity key inside the home directory.
pub const IDENTITY_FILE: &str = "identity.key";

/// Resolves the home directory from an explicit value and an environment lookup.
pub fn resolve_home(
    explicit: Option<PathBuf>,
    env: impl Fn(&str) -> Option<String>,
) -> Option<PathBuf> {
    let nonempty = |v: Option<String>| v.filter(|s| !s.trim().is_empty());
    explicit
        .or_else(|| nonempty(env(ENV_HOME)).map(PathBuf::from))
        .or_else(|| nonempty(env("XDG_CONFIG_HOME")).map(|d| Path::new(&d).join("interlink-p2p")))
        .or_else(|| {
            nonempty(env("HOME")).map(|h| Path::new(&h).join(".config").join("interlink-p2p"))
        })
}

/// Directory under the home directory holding one directory per session.
pub const SESSIONS_DIR: &str = "sessions";

/// The identity key file under `home`.
pub fn identity_path(home: &Path) -> PathBuf {
    home.join(IDENTITY_FILE)
}

/// A session id that names no state directory.
#[derive(Debug, thiserror::Error)]
#[error("session id {0:?} cannot name a state directory; choose another id")]
pub struct SessionDirError(pub String);

/// The state directory of `session` (its inbox lives there):
/// `<home>/sessions/<session id>`. Session ids are plain file names, except that `.`
/// and `..` are valid ids but name no directory of their own, so they are refused.
pub fn session_dir(home: &Path, session: &SessionId) -> Result<PathBuf, SessionDirError> {
    let id = session.as_str();
    if id == "." || id == ".." {
        return Err(SessionDirError(id.to_owned()));
    }
    Ok(home.join(SESSIONS_DIR).join(id))
}

/// What the MCP client declared at `initialize` ([`crate::consent::note_client`]):
/// `<session dir>/client.json`.
pub fn client_file(session_dir: &Path) -> PathBuf {
    session_dir.join("client.json")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolution_order() {
        let env = |k: &str| match k {
            "INTERLINK_HOME" => Some("/a".to_string()),
            "XDG_CONFIG_HOME" => Some("/x".to_string()),
            "HOME" => Some("/h".to_string()),
            _ => None,
        };
        assert_eq!(
            resolve_home(Some("/f".into()), env),
            Some(PathBuf::from("/f"))
        );
        assert_eq!(resolve_home(None, env), Some(PathBuf::from("/a")));
        let env = |k: &str| (k == "HOME").then(|| "/h".to_string());
        assert_eq!(
            resolve_home(None, env),
            Some(PathBuf::from("/h/.config/interlink-p2p"))
        );
        assert_eq!(resolve_home(None, |_| None), None);
    }

    #[test]
    fn session_dirs() {
        let id = |s: &str| SessionId::new(s).unwrap();
        assert_eq!(
            session_dir(Path::new("/h"), &id("a:b")).unwrap(),
            PathBuf::from("/h/sessions/a:b")
        );
        assert!(session_dir(Path::new("/h"), &id("..")).is_err());
        assert!(session_dir(Path::new("/h"), &id(".")).is_err());
    }
}

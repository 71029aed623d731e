//! The identity key file.
//!
//! Format (text, one line that matters):
//! ```text
//! # interlink-p2p identity key: keep secret (mode 0600)
//! interlink-p2p-ed25519-v1 <64 hex digits of the Ed25519 secret seed>
//! ```
//! The file is created with mode 0600 (its directory 0700; on Windows an access list
//! for the user and SYSTEM only, see `owner_only`) and published atomically (written
//! to a temporary file, fsynced, then hard-linked into place, which fails rather than
//! overwrites), so two sessions starting at once agree on one identity. A key file
//! readable or writable by group or others (on Windows: by any other account) is
//! refused.

use std::{
    fs, io,
    io::Write,
    path::{Path, PathBuf},
};

use rand_core::CryptoRng;
use zeroize::Zeroizing;

use interlink_core::{
    Identity,
    identity::{hex_decode_into, hex_encode},
};

/// The label in front of the secret in the key file.
pub const KEY_LABEL: &str = "interlink-p2p-ed25519-v1";

/// Loading or creating the key file failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyFileError {
    /// An I/O error.
    #[error("key file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system reported.
        source: io::Error,
    },
    /// Group or others may read or write the file.
    #[error(
        "key file {path} has mode {mode:04o}: group or others can access it. \
         Fix it with: chmod 600 {path}"
    )]
    InsecurePermissions {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The file's access list lets another account in (Windows).
    #[error(
        "key file {path} can be accessed by {who}, not only by you. Fix it with: \
         icacls \"{path}\" /inheritance:r /grant:r \"%USERNAME%:F\""
    )]
    InsecureAccessList {
        /// The file.
        path: PathBuf,
        /// The other trustees, as SDDL names them (`BU`, `WD`, a SID, …).
        who: String,
    },
    /// The file's contents are not a key in the expected format.
    #[error("key file {path} is not an interlink-p2p key: {reason}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: &'static str,
    },
}

/// Parses the text of a key file.
pub fn parse(text: &str) -> Result<Identity, &'static str> {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .ok_or("no key line")?;
    let hex = line
        .strip_prefix(KEY_LABEL)
        .ok_or("the key line does not start with the expected label")?
        .trim();
    let mut seed = Zeroizing::new([0u8; 32]);
    hex_decode_into(hex, seed.as_mut_slice()).ok_or("the secret is not 64 hex digits")?;
    Ok(Identity::from_seed(&seed))
}

/// The text of a key file for `identity`.
pub fn render(identity: &Identity) -> Zeroizing<String> {
    Zeroizing::new(format!(
        "# interlink-p2p identity key: keep secret (mode 0600)\n{KEY_LABEL} {}\n",
        hex_encode(identity.seed().as_slice())
    ))
}

/// Loads the identity from `path`, refusing a file group or others can access.
pub fn load(path: &Path) -> Result<Identity, KeyFileError> {
    let io_err = |source| KeyFileError::Io {
        path: path.to_owned(),
        source,
    };
    check_permissions(path)?;
    let text = Zeroizing::new(fs::read_to_string(path).map_err(io_err)?);
    parse(&text).map_err(|reason| KeyFileError::Malformed {
        path: path.to_owned(),
        reason,
    })
}

/// Loads the identity from `path`, creating a new one (mode 0600) if there is none.
/// Returns whether it was created.
pub fn load_or_create(
    path: &Path,
    rng: &mut impl CryptoRng,
) -> Result<(Identity, bool), KeyFileError> {
    match load(path) {
        Err(KeyFileError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {}
        other => return other.map(|id| (id, false)),
    }
    let identity = Identity::generate(rng);
    match store(path, &identity, false) {
        Ok(()) => Ok((identity, true)),
        // Another process created it first: use theirs.
        Err(KeyFileError::Io { source, .. }) if source.kind() == io::ErrorKind::AlreadyExists => {
            load(path).map(|id| (id, false))
        }
        Err(e) => Err(e),
    }
}

/// Writes `identity` to `path` atomically, mode 0600: through a private temporary file
/// in the same directory, published by a hard link when `replace` is false (so an
/// existing key file is never overwritten: `AlreadyExists`) or by a rename when it is
/// true (the old file stays whole until the new one takes its place).
pub fn store(path: &Path, identity: &Identity, replace: bool) -> Result<(), KeyFileError> {
    let io_err = |source| KeyFileError::Io {
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        create_private_dir(dir).map_err(io_err)?;
    }
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    let _ = fs::remove_file(&tmp);
    let written = write_private(&tmp, render(identity).as_bytes());
    let published = written.and_then(|()| {
        if replace {
            fs::rename(&tmp, path)
        } else {
            fs::hard_link(&tmp, path)
        }
    });
    let _ = fs::remove_file(&tmp);
    published.map_err(io_err)
}

fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut opts = fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path)?;
    // Before the secret is in it.
    #[cfg(windows)]
    crate::owner_only::restrict(path, false)?;
    f.write_all(bytes)?;
    f.sync_all()
}

/// Creates `dir` and its parents, new directories with mode 0700 (owner only). Used for
/// the key file's directory and for per-session state directories.
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    // As a mode applies only to directories it creates, so does the access list: a
    // directory the user already had keeps its own.
    #[cfg(windows)]
    let existed = dir.exists();
    builder.create(dir)?;
    #[cfg(windows)]
    if !existed {
        crate::owner_only::restrict(dir, true)?;
    }
    Ok(())
}

#[cfg(unix)]
fn check_permissions(path: &Path) -> Result<(), KeyFileError> {
    use std::os::unix::fs::PermissionsExt;
    let meta = fs::metadata(path).map_err(|source| KeyFileError::Io {
        path: path.to_owned(),
        source,
    })?;
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(KeyFileError::InsecurePermissions {
            path: path.to_owned(),
            mode,
        });
    }
    Ok(())
}

#[cfg(windows)]
fn check_permissions(path: &Path) -> Result<(), KeyFileError> {
    match crate::owner_only::others_with_access(path) {
        Ok(None) => Ok(()),
        Ok(Some(who)) => Err(KeyFileError::InsecureAccessList {
            path: path.to_owned(),
            who,
        }),
        Err(source) => Err(KeyFileError::Io {
            path: path.to_owned(),
            source,
        }),
    }
}

#[cfg(not(any(unix, windows)))]
fn check_permissions(_path: &Path) -> Result<(), KeyFileError> {
    Ok(())
}

#[cfg(test)]
#[path = "keyfile_tests.rs"]
mod tests;

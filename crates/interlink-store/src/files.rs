//! Small file helpers shared by the local state files: private files, atomic
//! replacement, and the JSON files the user's tools edit together (peers, groups,
//! pairing) under an editors' lock.

use std::{
    fs::{self, File, OpenOptions},
    io,
    path::{Path, PathBuf},
};

use serde::{Serialize, de::DeserializeOwned};

/// Replaces `path` with `bytes` atomically and durably
/// ([`crate::atomic::write_file`]): a reader sees the old file or the new one,
/// never half of one, and the rename survives a crash.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    crate::atomic::write_file(path, bytes)
}

/// Like [`write_atomically`] but without the syncs, for state whose loss only repeats
/// work ([`crate::atomic::write_file_unsynced`]).
pub fn write_replacing(path: &Path, bytes: &[u8]) -> io::Result<()> {
    crate::atomic::write_file_unsynced(path, bytes)
}

/// Opens (creating, mode 0600) a file for writing; `truncate` empties it.
pub fn private_file(path: &Path, truncate: bool) -> io::Result<File> {
    let mut opts = OpenOptions::new();
    opts.write(true).create(true).truncate(truncate);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    opts.open(path)
}

/// Makes `path` a file only its owner can read or write: created empty with mode 0600
/// when missing, narrowed to 0600 when an earlier version left it wider. For files a
/// library creates with the default mode (redb databases), called before it opens them.
pub fn ensure_private_file(path: &Path) -> io::Result<()> {
    drop(private_file(path, false)?);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if fs::metadata(path)?.permissions().mode() & 0o077 != 0 {
            fs::set_permissions(path, fs::Permissions::from_mode(0o600))?;
        }
    }
    Ok(())
}

/// A failed step on one of the shared JSON state files. Each file's own error type
/// takes it into its `Io` and `Invalid` variants, so callers keep one error per file.
#[derive(Debug)]
pub enum JsonFileError {
    /// A file-system error on the file, its lock or its directory.
    Io {
        /// What was being done ("reading", "locking", …).
        what: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// What the operating system reported.
        source: io::Error,
    },
    /// The file exists but does not hold what it should.
    Invalid {
        /// The file.
        path: PathBuf,
        /// Where and how the JSON breaks.
        source: serde_json::Error,
    },
}

/// Implements `From<JsonFileError>` for a file's own error enum, whose `Io { what, path,
/// source }` and `Invalid { path, source }` variants name the file in its messages.
#[macro_export]
macro_rules! from_json_file_error {
    ($error:ty) => {
        impl From<$crate::files::JsonFileError> for $error {
            fn from(e: $crate::files::JsonFileError) -> Self {
                match e {
                    $crate::files::JsonFileError::Io { what, path, source } => {
                        Self::Io { what, path, source }
                    }
                    $crate::files::JsonFileError::Invalid { path, source } => {
                        Self::Invalid { path, source }
                    }
                }
            }
        }
    };
}
pub use crate::from_json_file_error;

fn io_step<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> JsonFileError + 'a {
    move |source| JsonFileError::Io {
        what,
        path: path.to_owned(),
        source,
    }
}

/// Reads the JSON state file `path`: a missing file is `T::default()`; one that cannot
/// be read or parsed is an error naming it.
pub fn load_json<T: DeserializeOwned + Default>(path: &Path) -> Result<T, JsonFileError> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(T::default()),
        Err(e) => return Err(io_step("reading", path)(e)),
    };
    serde_json::from_slice(&bytes).map_err(|source| JsonFileError::Invalid {
        path: path.to_owned(),
        source,
    })
}

/// Changes the JSON state file `path` under the editors' lock `lock_path` (an `flock`,
/// released when dropped, also if this process dies): creates `dir` (0700) if needed,
/// reads the file, lets `change` modify it, and writes it back atomically (0600) only
/// if `change` succeeded. Two tools editing at once therefore never lose each other's
/// change. Returns what `change` returned, inside the file's own result.
pub fn edit_json<S, T, E>(
    dir: &Path,
    lock_path: &Path,
    path: &Path,
    change: impl FnOnce(&mut S) -> Result<T, E>,
) -> Result<Result<T, E>, JsonFileError>
where
    S: Serialize + DeserializeOwned + Default,
{
    crate::keyfile::create_private_dir(dir).map_err(io_step("creating", dir))?;
    let lock = private_file(lock_path, false).map_err(io_step("opening", lock_path))?;
    lock.lock().map_err(io_step("locking", lock_path))?;
    let mut state: S = load_json(path)?;
    let out = match change(&mut state) {
        Ok(out) => out,
        Err(e) => return Ok(Err(e)),
    };
    let mut bytes = serde_json::to_vec_pretty(&state).map_err(|source| JsonFileError::Invalid {
        path: path.to_owned(),
        source,
    })?;
    bytes.push(b'\n');
    write_atomically(path, &bytes).map_err(io_step("writing", path))?;
    drop(lock);
    Ok(Ok(out))
}

#[cfg(test)]
#[path = "files_tests.rs"]
mod tests;

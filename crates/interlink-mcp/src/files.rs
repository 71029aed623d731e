//! Small file helpers shared by the local state files: private files and atomic
//! replacement.

use std::{
    fs::{File, OpenOptions},
    io,
    path::Path,
};

/// Replaces `path` with `bytes` atomically and durably
/// ([`interlink_net::atomic::write_file`]): a reader sees the old file or the new one,
/// never half of one, and the rename survives a crash.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    interlink_net::atomic::write_file(path, bytes)
}

/// Like [`write_atomically`] but without the syncs, for state whose loss only repeats
/// work ([`interlink_net::atomic::write_file_unsynced`]).
pub(crate) fn write_replacing(path: &Path, bytes: &[u8]) -> io::Result<()> {
    interlink_net::atomic::write_file_unsynced(path, bytes)
}

/// Opens (creating, mode 0600) a file for writing; `truncate` empties it.
pub(crate) fn private_file(path: &Path, truncate: bool) -> io::Result<File> {
    let mut opts = OpenOptions::new();
    opts.write(true).create(true).truncate(truncate);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    opts.open(path)
}

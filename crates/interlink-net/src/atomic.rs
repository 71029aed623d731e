//! Replacing a state file so that no reader ever sees half of it.

use std::{
    fs::{self, File},
    io::{self, Write as _},
    path::Path,
};

/// Writes `bytes` to `path` atomically (see [`replace_with`]).
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_with(path, |f| f.write_all(bytes))
}

/// Replaces `path` with what `fill` writes: a temporary file beside it (mode 0600),
/// synced, renamed over `path`, then the directory synced. A reader sees the old file
/// or the new one, never a mix; a crash leaves at worst the old file and a stray
/// temporary one, which the next replace overwrites.
pub(crate) fn replace_with(
    path: &Path,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no directory"))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut opts = fs::OpenOptions::new();
        opts.read(true).write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let mut file = opts.open(&tmp)?;
        fill(&mut file)?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

//! Replacing a state file so that no reader ever sees half of it: the one atomic
//! write of the node and of the agent side (`interlink-mcp` calls it too).

use std::{
    fs::File,
    io::{self, Write as _},
    path::Path,
};

/// Writes `bytes` to `path` atomically and durably (see [`replace_with`]).
pub fn write_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_with(path, |f| f.write_all(bytes))
}

/// Like [`write_file`] but without the syncs: readers still see the old file or the
/// new one, but a crash of the machine may keep the old one. For state whose loss only
/// repeats work, where two journal commits per change would cost more than the repeat.
pub fn write_file_unsynced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(path, false, |f| f.write_all(bytes))
}

/// Replaces `path` with what `fill` writes: a temporary file beside it (mode 0600),
/// synced, renamed over `path`, then the directory synced. A reader sees the old file
/// or the new one, never a mix; a crash leaves at worst the old file and a stray
/// temporary one (`.tmp*`).
pub fn replace_with(path: &Path, fill: impl FnOnce(&mut File) -> io::Result<()>) -> io::Result<()> {
    replace(path, true, fill)
}

fn replace(
    path: &Path,
    sync: bool,
    fill: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no directory"))?;
    // Created 0600 on Unix (tempfile's mode), and removed if it is not persisted.
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    fill(tmp.as_file_mut())?;
    if sync {
        tmp.as_file().sync_all()?;
    }
    tmp.persist(path)?;
    if sync {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Makes a rename in `dir` durable. Unix: fsync of the directory. Windows: nothing —
/// std cannot open a directory to flush it. NTFS journals the rename, so a crash
/// leaves the old file or the new one, but the newest rename may be lost with it.
fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    File::open(dir)?.sync_all()?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

//! Replacing a state file so that no reader ever sees half of it: the one atomic
//! write of the node and of the agent side (`interlink-mcp` calls it too).

use std::{
    fs::{self, File},
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
/// temporary one, which the next replace overwrites.
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
        if sync {
            file.sync_all()?;
        }
        fs::rename(&tmp, path)?;
        if sync {
            sync_dir(dir)?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
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

//! Replacing a small state file so that no reader ever sees half of it.

use std::{io::Write as _, path::Path};

/// Writes `bytes` to a temporary file beside `path` (mode 0600), syncs it and renames
/// it over `path`: a reader sees the old file or the new one, never a mix, and a
/// crash leaves at worst a stray temporary file.
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

//! Which `interlink-p2p` the hosts' entries run: this executable where it is, unless it
//! lives somewhere that vanishes — a Cargo build directory (`cargo clean`, a rebuild
//! elsewhere) or an npm package directory (npx's cache is pruned) — in which case it is
//! copied to a per-user place that belongs to this program, and the entries run the copy.
//! `uninstall` removes the copy once no host's configuration runs it.

use std::{
    io::Write,
    path::{Path, PathBuf},
};

use anyhow::Context as _;

use super::Locations;

#[cfg(windows)]
const EXE: &str = "interlink-p2p.exe";
#[cfg(not(windows))]
const EXE: &str = "interlink-p2p";

/// Why `exe` would not outlive its directory, if it would not.
pub(super) fn transient_place(exe: &Path) -> Option<&'static str> {
    // Cargo marks a target directory it creates with CACHEDIR.TAG, wherever
    // CARGO_TARGET_DIR puts it, but not one that existed before its first build (seen:
    // a fresh machine's CI made the directory first); each profile directory has its
    // `.fingerprint` either way. A path component named node_modules is an npm install
    // (npx's cache too).
    if exe.ancestors().skip(1).any(|dir| {
        dir.join("CACHEDIR.TAG").is_file()
            || (dir.join(".fingerprint").is_dir() && dir.join(".cargo-lock").is_file())
    }) {
        return Some("a Cargo build directory");
    }
    if exe.components().any(|c| c.as_os_str() == "node_modules") {
        return Some("an npm package directory");
    }
    None
}

/// The directory of the copy: `$XDG_DATA_HOME/interlink-p2p/bin`, else
/// `~/.local/share/interlink-p2p/bin` (`%LOCALAPPDATA%\interlink-p2p\bin` on Windows).
pub(super) fn copy_dir(locations: &Locations) -> PathBuf {
    locations
        .data_home
        .clone()
        .unwrap_or_else(|| locations.home.join(".local").join("share"))
        .join("interlink-p2p")
        .join("bin")
}

/// The command the entries run for `exe` (this executable): `exe` itself, or the stable
/// copy, made (or refreshed) here unless `dry_run`. Says what it did on `out`.
pub(super) fn stable_command(
    exe: &Path,
    locations: &Locations,
    dry_run: bool,
    out: &mut impl Write,
) -> anyhow::Result<String> {
    let Some(why) = transient_place(exe) else {
        return Ok(exe.to_string_lossy().into_owned());
    };
    let dir = copy_dir(locations);
    let copy = dir.join(EXE);
    let same = match (std::fs::read(exe), std::fs::read(&copy)) {
        (Ok(a), Ok(b)) => a == b,
        (Err(e), _) => return Err(e).with_context(|| format!("reading {}", exe.display())),
        (Ok(_), Err(_)) => false,
    };
    if same {
        writeln!(
            out,
            "{}: unchanged (copy of {})",
            copy.display(),
            exe.display()
        )?;
    } else {
        let verb = if dry_run { "would copy" } else { "copied" };
        writeln!(
            out,
            "{}: {verb} {} there: it is in {why}, which a clean or a rebuild would \
             remove from under every session",
            copy.display(),
            exe.display()
        )?;
        if !dry_run {
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            #[cfg(windows)]
            move_aside(&dir, &copy)?;
            // Written beside, then renamed over: a running session keeps its old binary.
            interlink_store::atomic::replace_with(&copy, |f| {
                let mut from = std::fs::File::open(exe)?;
                std::io::copy(&mut from, f)?;
                set_executable(f)
            })
            .with_context(|| format!("copying {} to {}", exe.display(), copy.display()))?;
        }
    }
    Ok(copy.to_string_lossy().into_owned())
}

/// Removes the old copies [`move_aside`] left that nothing runs any more.
#[cfg(windows)]
fn remove_old_copies(dir: &std::path::Path) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.file_name().to_string_lossy().ends_with(".old") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Windows cannot replace a running `.exe`, only rename it: the old copy moves to
/// `<name>.<pid>.old` first, and old copies no session runs any more are removed
/// (one still running refuses, and waits for the next install).
#[cfg(windows)]
fn move_aside(dir: &std::path::Path, copy: &std::path::Path) -> anyhow::Result<()> {
    remove_old_copies(dir);
    if copy.exists() {
        let aside = dir.join(format!("{EXE}.{}.old", std::process::id()));
        std::fs::rename(copy, &aside)
            .with_context(|| format!("moving {} aside", copy.display()))?;
    }
    Ok(())
}

#[cfg(unix)]
fn set_executable(f: &mut std::fs::File) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    f.set_permissions(std::fs::Permissions::from_mode(0o755))
}

#[cfg(not(unix))]
fn set_executable(_: &mut std::fs::File) -> std::io::Result<()> {
    Ok(())
}

/// After an uninstall: removes the copy (and the directories made for it) unless one of
/// `configs` — the hosts' configuration texts as they will be — still runs it.
pub(super) fn remove_unused_copy(
    locations: &Locations,
    configs: &[String],
    dry_run: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let dir = copy_dir(locations);
    let copy = dir.join(EXE);
    if !copy.exists() {
        return Ok(());
    }
    let needle = copy.to_string_lossy();
    // JSON escapes backslashes (Windows paths), TOML basic strings too.
    let escaped = needle.replace('\\', "\\\\");
    if configs
        .iter()
        .any(|c| c.contains(needle.as_ref()) || c.contains(&escaped))
    {
        writeln!(
            out,
            "{}: kept (another host's configuration runs it)",
            copy.display()
        )?;
        return Ok(());
    }
    let verb = if dry_run { "would remove" } else { "removed" };
    writeln!(out, "{}: {verb} (no host runs it)", copy.display())?;
    if dry_run {
        return Ok(());
    }
    std::fs::remove_file(&copy).with_context(|| format!("removing {}", copy.display()))?;
    #[cfg(windows)]
    remove_old_copies(&dir);
    // The directories made for the copy, while nothing else is in them: up to the data
    // home the user set, else up to HOME (~/.local/share, ~/.local).
    let stop = locations.data_home.as_deref().unwrap_or(&locations.home);
    remove_empty_dirs(&dir, stop);
    Ok(())
}

/// Removes `dir` and its parents below `stop` while they are empty; a non-empty one
/// ends it (not an error).
pub(super) fn remove_empty_dirs(dir: &Path, stop: &Path) {
    for d in dir.ancestors() {
        if d == stop || !d.starts_with(stop) || std::fs::remove_dir(d).is_err() {
            break;
        }
    }
}

#[cfg(test)]
#[path = "binary_tests.rs"]
mod tests;

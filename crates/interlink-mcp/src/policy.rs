//! The peers policy file, `peers.json` in the home directory: who may reach this user.
//!
//! Every session of a user shares the file. Readers ([`load`]) treat a missing file as
//! an empty policy (deny by default) and a malformed one as an error — a session never
//! silently runs with a policy other than the one written. Editors ([`edit`]) take an
//! exclusive `flock` on a sibling lock file, re-read the file under the lock, and
//! replace it atomically (temporary file in the same directory, fsync, rename, fsync of
//! the directory), so two concurrent `peer add`s never lose one another's update and a
//! reader never sees half a file. Running sessions notice a replacement with a
//! [`Watcher`] (cheap `stat` polling) and push the new policy into their node.

use interlink_core::keyfile::create_private_dir;
use std::{
    fs::{self, File, OpenOptions},
    io::{self, Write as _},
    path::{Path, PathBuf},
};

use anyhow::Context as _;
use interlink_core::trust::PeerPolicy;

/// File name of the peers policy inside the home directory.
pub const PEERS_FILE: &str = "peers.json";
/// File name of the lock editors hold while they read, change and replace the policy.
pub const LOCK_FILE: &str = "peers.json.lock";

/// The peers file under `home`.
pub fn path(home: &Path) -> PathBuf {
    home.join(PEERS_FILE)
}

/// Reads the policy from `home`: a missing file is an empty policy; a file that cannot
/// be read or parsed is an error naming it.
pub fn load(home: &Path) -> anyhow::Result<PeerPolicy> {
    let path = path(home);
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(PeerPolicy::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    parse(&text).with_context(|| format!("{} is not a valid peers file", path.display()))
}

fn parse(text: &str) -> anyhow::Result<PeerPolicy> {
    Ok(serde_json::from_str(text)?)
}

/// Changes the policy in `home` under the editors' lock: reads the current file, lets
/// `change` modify it, and writes the result atomically (mode 0600) if `change`
/// succeeded. Returns what `change` returned.
pub fn edit<T>(
    home: &Path,
    change: impl FnOnce(&mut PeerPolicy) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    create_private_dir(home).with_context(|| format!("creating {}", home.display()))?;
    let lock_path = home.join(LOCK_FILE);
    let lock = private_file(&lock_path, false)
        .with_context(|| format!("opening the lock file {}", lock_path.display()))?;
    // `flock`: released when `lock` is closed, also if this process dies.
    lock.lock()
        .with_context(|| format!("locking {}", lock_path.display()))?;
    let mut policy = load(home)?;
    let out = change(&mut policy)?;
    write_atomically(&path(home), &serde_json::to_vec_pretty(&policy)?)?;
    drop(lock);
    Ok(out)
}

/// Replaces `path` with `bytes`: a temporary file in the same directory, synced, then
/// renamed over it, then the directory synced so the rename survives a crash.
fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = path.parent().context("the peers file has no directory")?;
    let tmp = dir.join(format!(".{PEERS_FILE}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = private_file(&tmp, true)?;
        file.write_all(bytes)?;
        file.write_all(b"\n")?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.with_context(|| format!("writing {}", path.display()))
}

/// Opens (creating, mode 0600) a file for writing; `truncate` empties it.
fn private_file(path: &Path, truncate: bool) -> io::Result<File> {
    let mut opts = OpenOptions::new();
    opts.write(true).create(true).truncate(truncate);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    opts.open(path)
}

/// What identifies one version of the file: an edit replaces the file (new inode) and
/// a hand edit changes its modification time or size.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stamp {
    inode: u64,
    modified: Option<std::time::SystemTime>,
    len: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let meta = fs::metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    Some(Stamp {
        inode,
        modified: meta.modified().ok(),
        len: meta.len(),
    })
}

/// Notices when the peers file changed since it was last read.
#[derive(Debug)]
pub struct Watcher {
    path: PathBuf,
    seen: Option<Stamp>,
}

impl Watcher {
    /// Watches the peers file of `home`, taking its current state as read.
    pub fn new(home: &Path) -> Self {
        let path = path(home);
        let seen = stamp(&path);
        Self { path, seen }
    }

    /// `None` if the file is unchanged; otherwise its new content, read with the same
    /// rules as [`load`] (a removed file is an empty policy).
    pub fn poll(&mut self) -> Option<anyhow::Result<PeerPolicy>> {
        let now = stamp(&self.path);
        if now == self.seen {
            return None;
        }
        self.seen = now;
        let home = self.path.parent().unwrap_or(Path::new("."));
        Some(load(home))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY_A: &str = "d04ab232742bb4ab3a1368bd4615e4e6d0224ab71a016baf8520a332c9778737";

    #[test]
    fn missing_is_empty_and_malformed_is_an_error() {
        let home = tempfile::tempdir().unwrap();
        assert!(load(home.path()).unwrap().is_empty());
        fs::write(path(home.path()), "{not json").unwrap();
        let err = format!("{:#}", load(home.path()).unwrap_err());
        assert!(
            err.contains("peers.json") && err.contains("not a valid"),
            "{err}"
        );
    }

    #[test]
    fn edits_are_private_and_seen_by_the_watcher() {
        let parent = tempfile::tempdir().unwrap();
        let home = parent.path().join("home");
        let mut watcher = Watcher::new(&home);
        assert!(watcher.poll().is_none());
        edit(&home, |p| Ok(p.add("alice", KEY_A.parse()?)?)).unwrap();
        let seen = watcher.poll().unwrap().unwrap();
        assert_eq!(seen.get("alice").map(|k| k.to_hex()), Some(KEY_A.into()));
        assert!(watcher.poll().is_none());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&path(&home)), 0o600);
            assert_eq!(mode(&home), 0o700);
        }
        // A failed change writes nothing.
        let err = edit(&home, |p| {
            p.remove("alice");
            anyhow::Result::<()>::Err(anyhow::anyhow!("changed my mind"))
        });
        assert!(err.is_err());
        assert_eq!(load(&home).unwrap().len(), 1);
        assert!(watcher.poll().is_none());
        // No temporary files are left behind.
        let names: Vec<_> = fs::read_dir(&home)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    }

    #[test]
    fn concurrent_editors_lose_nothing() {
        let home = tempfile::tempdir().unwrap();
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let home = home.path().to_owned();
                std::thread::spawn(move || {
                    let key = format!("{i:02x}{}", &KEY_A[2..]).parse().unwrap();
                    edit(&home, |p| Ok(p.add(format!("peer{i}"), key)?)).unwrap();
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(load(home.path()).unwrap().len(), 8);
    }
}

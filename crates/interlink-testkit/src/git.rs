//! Git repositories for the tests of claims on files (the project of a directory, the
//! edit hook, the guard): `git` run with a throwaway author and no signing, whatever
//! the machine's own configuration says.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

/// Whether `git` runs here; without it a test prints SKIPPED, except under CI, where
/// that is a failure.
pub fn available() -> bool {
    match Command::new("git").arg("--version").output() {
        Ok(out) if out.status.success() => true,
        other => {
            assert!(
                std::env::var_os("CI").is_none_or(|v| v.is_empty() || v == "false"),
                "git is needed for this test under CI: {other:?}"
            );
            eprintln!("SKIPPED: git does not run here ({other:?})");
            false
        }
    }
}

/// Runs `git ARGS` in `dir`, which must succeed.
pub fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} in {}: {out:?}",
        dir.display()
    );
}

/// A new repository at `dir` with `files` (path, contents) in its first commit.
pub fn repo(dir: &Path, files: &[(&str, &str)]) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q"]);
    for (path, text) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    git(dir, &["add", "."]);
    git(dir, &["commit", "-q", "-m", "first"]);
    dir.to_path_buf()
}

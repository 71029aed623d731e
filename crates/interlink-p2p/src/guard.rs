//! `interlink-p2p guard`: a git pre-commit hook that refuses a commit touching files
//! another live session claims exclusively (docs/CLAIMS.md), naming the session.
//!
//! `guard install` writes the hook where git looks for it (`git rev-parse --git-path
//! hooks`, which follows `core.hooksPath`). A pre-commit hook that is there already is
//! kept: it is moved aside to `pre-commit.before-interlink` and ours runs it first,
//! stopping where it stops; `guard uninstall` puts it back.

use std::{
    path::{Path, PathBuf},
    process::{Command, ExitCode, Stdio},
};

use anyhow::Context as _;
use interlink_mcp::cli::claims::{claim_line, held_against, seen_from};

/// The hook moved aside by `install`, run first by ours.
const CHAINED: &str = "pre-commit.before-interlink";
/// What marks the hook as ours.
const MARK: &str = "# interlink-p2p guard";
/// The variable that skips the guard for one commit.
pub const ENV_GUARD: &str = "INTERLINK_GUARD";

/// A git pre-commit hook that refuses commits touching files other sessions claim.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "To commit anyway, once: INTERLINK_GUARD=off git commit … (or git \
                        commit --no-verify).\n\nExamples:\n  interlink-p2p guard install\n  \
                        interlink-p2p guard uninstall"
)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Install the pre-commit hook in this repository (an existing hook is kept and
    /// runs first).
    #[command(after_help = "Example:\n  cd ~/src/shop && interlink-p2p guard install")]
    Install,
    /// Remove it, putting back the hook it kept.
    #[command(after_help = "Example:\n  interlink-p2p guard uninstall")]
    Uninstall,
    /// What the hook runs: refuse (exit 1) when a staged path is held exclusively by
    /// another session.
    #[command(
        after_help = "Example (what the pre-commit hook runs):\n  git add src/api/auth.rs && interlink-p2p guard check"
    )]
    Check,
}

/// `interlink-p2p guard`.
pub fn command(args: Args, ctx: &crate::Ctx) -> anyhow::Result<ExitCode> {
    let home = ctx.home()?;
    let cwd = std::env::current_dir().context("reading the current directory")?;
    match args.action {
        Action::Install => {
            let hooks = hooks_dir(&cwd)?;
            let exe = std::env::current_exe().context("finding this program's path")?;
            println!("{}", install(&hooks, &exe, home.path())?);
            Ok(ExitCode::SUCCESS)
        }
        Action::Uninstall => {
            println!("{}", uninstall(&hooks_dir(&cwd)?)?);
            Ok(ExitCode::SUCCESS)
        }
        Action::Check => {
            let now = crate::config::clock(ctx.env())?.now_ms();
            match check(&home, &cwd, now)? {
                None => Ok(ExitCode::SUCCESS),
                Some(refusal) => {
                    eprintln!("{refusal}");
                    Ok(ExitCode::FAILURE)
                }
            }
        }
    }
}

/// Where git looks for this repository's hooks (following `core.hooksPath`).
fn hooks_dir(cwd: &Path) -> anyhow::Result<PathBuf> {
    let out = Command::new("git")
        .arg("-C")
        .arg(cwd)
        .args(["rev-parse", "--path-format=absolute", "--git-path", "hooks"])
        .stderr(Stdio::inherit())
        .output()
        .context("running git (is it installed?)")?;
    anyhow::ensure!(
        out.status.success(),
        "{} is not in a git repository",
        cwd.display()
    );
    Ok(PathBuf::from(String::from_utf8(out.stdout)?.trim()))
}

fn is_ours(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|s| s.contains(MARK))
}

/// Writes the hook into `hooks`, running `exe` with the home `home`.
pub fn install(hooks: &Path, exe: &Path, home: &Path) -> anyhow::Result<String> {
    std::fs::create_dir_all(hooks).with_context(|| format!("creating {}", hooks.display()))?;
    let hook = hooks.join("pre-commit");
    let mut note = String::new();
    if hook.exists() && !is_ours(&hook) {
        let chained = hooks.join(CHAINED);
        anyhow::ensure!(
            !chained.exists(),
            "{} exists already: move it away first (the guard keeps one earlier hook)",
            chained.display()
        );
        std::fs::rename(&hook, &chained)
            .with_context(|| format!("moving {} aside", hook.display()))?;
        note = format!(" (the existing hook is kept as {CHAINED} and runs first)");
    }
    let quote = |p: &Path| format!("'{}'", p.to_string_lossy().replace('\'', "'\\''"));
    let script = format!(
        "#!/bin/sh\n{MARK}: refuses a commit that touches files another live session claims\n\
         # exclusively (docs/CLAIMS.md). To commit anyway, once: {ENV_GUARD}=off git commit …\n\
         # (or git commit --no-verify). Remove: interlink-p2p guard uninstall.\n\
         here=$(dirname \"$0\")\n\
         if [ -x \"$here/{CHAINED}\" ]; then \"$here/{CHAINED}\" \"$@\" || exit $?; fi\n\
         [ \"${ENV_GUARD}\" = off ] && exit 0\n\
         exec {} --home {} guard check\n",
        quote(exe),
        quote(home)
    );
    write_executable(&hook, &script)?;
    Ok(format!("installed the guard as {}{note}", hook.display()))
}

/// Writes `text` to `path`, executable by its owner and readable by all (what git
/// wants of a hook).
fn write_executable(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("making {} executable", path.display()))?;
    }
    Ok(())
}

/// Removes our hook and puts back the one it kept.
pub fn uninstall(hooks: &Path) -> anyhow::Result<String> {
    let hook = hooks.join("pre-commit");
    if !is_ours(&hook) {
        return Ok("no guard installed here".into());
    }
    std::fs::remove_file(&hook).with_context(|| format!("removing {}", hook.display()))?;
    let chained = hooks.join(CHAINED);
    if chained.exists() {
        std::fs::rename(&chained, &hook)
            .with_context(|| format!("putting {} back", chained.display()))?;
        return Ok(format!("removed the guard; {} is back", hook.display()));
    }
    Ok("removed the guard".into())
}

/// The refusal for the commit staged in the repository at `cwd`, if any path in it is
/// held exclusively by another session.
pub fn check(
    home: &interlink_store::paths::Home,
    cwd: &Path,
    now: u64,
) -> anyhow::Result<Option<String>> {
    let Some(seen) = seen_from(home, cwd, now) else {
        return Ok(None);
    };
    let Some(view) = &seen.view else {
        return Ok(None);
    };
    let out = Command::new("git")
        .arg("-C")
        .arg(&seen.project.root)
        .args(["diff", "--cached", "--name-only", "-z"])
        .stderr(Stdio::inherit())
        .output()
        .context("running git diff --cached")?;
    anyhow::ensure!(out.status.success(), "git diff --cached failed");
    let me = crate::claims::me(home);
    let me = me.as_ref().map(|(k, s)| (k.as_str(), s.as_str()));
    let mut lines = Vec::new();
    for path in out.stdout.split(|b| *b == 0).filter(|p| !p.is_empty()) {
        let path = String::from_utf8_lossy(path);
        for c in held_against(view, &path, me) {
            lines.push(format!("  {path}: {}", claim_line(c)));
        }
    }
    if lines.is_empty() {
        return Ok(None);
    }
    Ok(Some(format!(
        "interlink guard: this commit touches files another session claims:\n{}\nCommit them \
         when those claims end, or ask those sessions. To commit anyway, once: {ENV_GUARD}=off \
         git commit … (or git commit --no-verify).",
        lines.join("\n")
    )))
}

#[cfg(test)]
#[path = "guard_tests.rs"]
mod tests;

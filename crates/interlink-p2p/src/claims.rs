//! `interlink-p2p claims`: the claims on files of this repository, as the home's
//! running sessions see them (docs/CLAIMS.md); and `claims hook`, the PreToolUse hook
//! on Claude Code's edit tools and on Codex's `apply_patch`, which `install` sets up.

use std::{
    io::Read as _,
    path::{Path, PathBuf},
    process::ExitCode,
};

use anyhow::Context as _;
use interlink_core::claims::project::relative_to;
use interlink_mcp::cli::{
    claims::{Seen, claim_line, held_against, seen_from},
    peers::own_key,
};
use interlink_store::{claims::BoardView, paths::Home};
use serde_json::{Value, json};

/// The variable (and `claims_hook` in config.toml) that sets what the edit hook does.
pub const ENV_CLAIMS_HOOK: &str = "INTERLINK_CLAIMS_HOOK";
/// Most bytes of a hook's input read.
const MAX_HOOK_INPUT: u64 = 1024 * 1024;

/// Show the claims on files of this repository (who works on what), or check paths.
#[derive(Debug, clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "Exit status 1 when a PATH given is held exclusively by a session other than \
                  this shell's (INTERLINK_SESSION, else CLAUDE_CODE_SESSION_ID).\n\nExamples:\n  \
                  interlink-p2p claims\n  interlink-p2p claims src/api/auth.rs\n  interlink-p2p claims --json"
)]
pub struct Args {
    #[command(subcommand)]
    hook: Option<Sub>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Only the claims that cover these paths (relative to the current directory, or
    /// absolute).
    paths: Vec<PathBuf>,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// The PreToolUse hook on Claude Code's Edit, Write, MultiEdit and NotebookEdit and
    /// on Codex's apply_patch (installed by `install`): reads the hook's JSON on stdin;
    /// an edit of a file another live session holds exclusively is warned about, or
    /// refused with `claims_hook = "block"` (INTERLINK_CLAIMS_HOOK: warn, block, off).
    #[command(
        after_help = "Example (what Claude Code runs; install claude sets it up):\n  echo '{\"session_id\":\"s1\",\"cwd\":\"/repo\",\"tool_name\":\"Edit\",\"tool_input\":{\"file_path\":\"/repo/src/a.rs\"}}' | interlink-p2p claims hook"
    )]
    Hook,
}

/// What the edit hook does about a held file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HookMode {
    /// Tell the agent (Claude Code adds it to the model's context) and let the edit go.
    Warn,
    /// Refuse the edit, saying why.
    Block,
    /// Nothing.
    Off,
}

impl HookMode {
    fn from_setting(v: Option<String>) -> anyhow::Result<Self> {
        match v.as_deref().map(str::trim) {
            None | Some("" | "warn") => Ok(Self::Warn),
            Some("block") => Ok(Self::Block),
            Some("off") => Ok(Self::Off),
            Some(other) => anyhow::bail!(
                "{ENV_CLAIMS_HOOK} / claims_hook is {other:?}: use warn, block or off"
            ),
        }
    }
}

/// `interlink-p2p claims`.
pub fn command(args: Args, ctx: &crate::Ctx) -> anyhow::Result<ExitCode> {
    let home = ctx.home()?;
    let now = crate::config::clock(ctx.env())?.now_ms();
    if let Some(Sub::Hook) = args.hook {
        let mode = HookMode::from_setting(ctx.env()(ENV_CLAIMS_HOOK))?;
        let mut input = String::new();
        std::io::stdin()
            .take(MAX_HOOK_INPUT)
            .read_to_string(&mut input)
            .context("reading the hook's input")?;
        if let Some(out) = edit_hook(&home, &input, mode, now) {
            println!("{out}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let Some(seen) = seen_from(&home, &cwd, now) else {
        anyhow::bail!(
            "{} is not in a git repository: claims are on a repository's files",
            cwd.display()
        );
    };
    let me = me(&home);
    let mut held_any = false;
    let mut rel_paths = Vec::new();
    for p in &args.paths {
        let abs = if p.is_absolute() {
            p.clone()
        } else {
            cwd.join(p)
        };
        let rel = relative(&seen.project.root, &abs).with_context(|| {
            format!(
                "{} is outside the repository at {}",
                p.display(),
                seen.project.root.display()
            )
        })?;
        rel_paths.push(rel);
    }
    let empty = BoardView::new(
        String::new(),
        String::new(),
        String::new(),
        String::new(),
        0,
    );
    let view = seen.view.as_ref().unwrap_or(&empty);
    let mut lines = Vec::new();
    let mut shown = Vec::new();
    if rel_paths.is_empty() {
        for c in &view.claims {
            lines.push(format!("  {}", claim_line(c)));
            shown.push(c);
        }
    } else {
        for rel in &rel_paths {
            let held = held_against(
                view,
                rel,
                me.as_ref().map(|(k, s)| (k.as_str(), s.as_str())),
            );
            held_any |= !held.is_empty();
            if held.is_empty() {
                lines.push(format!("  {rel}: free"));
            }
            for c in held {
                lines.push(format!("  {rel}: {}", claim_line(c)));
                shown.push(c);
            }
        }
    }
    if args.json {
        println!(
            "{}",
            json!({
                "version": 1,
                "project": seen.project.id.to_hex(),
                "root": seen.project.root,
                "seen_by": seen.view.as_ref().map(|v| &v.session),
                "claims": shown,
            })
        );
    } else {
        println!("{}", header(&seen));
        for l in lines {
            println!("{l}");
        }
    }
    Ok(if held_any {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn header(seen: &Seen) -> String {
    let root = seen.project.root.display();
    match &seen.view {
        Some(v) if v.claims.is_empty() => format!("{root}: no claims"),
        Some(v) => format!("{root}: claims, as session {} sees them:", v.session),
        None => format!(
            "{root}: no running interlink session of this home works in this repository, so no \
             claims are known (start one here: claims travel with running sessions)"
        ),
    }
}

/// This shell's session: the user's key and `INTERLINK_SESSION`, else
/// `CLAUDE_CODE_SESSION_ID` (Claude Code sets it for the commands its agent runs).
pub fn me(home: &Home) -> Option<(String, String)> {
    let session = [
        interlink_store::env::SESSION,
        interlink_store::env::CLAUDE_SESSION,
    ]
    .iter()
    .find_map(|k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()))?;
    Some((own_key(home)?.to_hex(), session))
}

/// `abs` relative to `root`, through the real paths of both (a symlinked temp
/// directory, a file not written yet: its nearest existing parent is resolved).
pub fn relative(root: &Path, abs: &Path) -> Option<String> {
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let mut existing = abs.to_path_buf();
    let mut rest = Vec::new();
    while !existing.exists() {
        rest.push(existing.file_name()?.to_owned());
        existing = existing.parent()?.to_path_buf();
    }
    let mut real = existing.canonicalize().ok()?;
    for part in rest.iter().rev() {
        real.push(part);
    }
    relative_to(&root.to_string_lossy(), &real.to_string_lossy())
}

/// Most files of one edit the hook looks at (a patch may name many).
const MAX_HOOK_FILES: usize = 64;

/// The files an edit tool's input writes, as given (absolute, or relative to the
/// hook's `cwd`): Claude Code's Edit, Write and MultiEdit (`file_path`) and
/// NotebookEdit (`notebook_path`); Codex's `apply_patch` (the patch in `command`,
/// whose `*** Add/Update/Delete File:` and `*** Move to:` lines name them).
fn edited_files(input: &Value) -> Vec<&str> {
    let tool = &input["tool_input"];
    if let Some(file) = tool["file_path"]
        .as_str()
        .or_else(|| tool["notebook_path"].as_str())
    {
        return vec![file];
    }
    if input["tool_name"] != "apply_patch" {
        return Vec::new();
    }
    let patch = tool["command"].as_str().or_else(|| tool["input"].as_str());
    let headers = [
        "*** Add File: ",
        "*** Update File: ",
        "*** Delete File: ",
        "*** Move to: ",
    ];
    let mut files: Vec<&str> = patch
        .into_iter()
        .flat_map(str::lines)
        .filter_map(|line| headers.iter().find_map(|h| line.strip_prefix(h)))
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .collect();
    files.dedup();
    files.truncate(MAX_HOOK_FILES);
    files
}

/// The PreToolUse hook of Claude Code (on its edit tools) and of Codex (on
/// `apply_patch`), which read the same answer: what to print for `input` (the hook's
/// JSON), if anything. An input that is not an edit, files outside any repository, or
/// files nobody else holds print nothing (the edit goes on as if there were no hook).
pub fn edit_hook(home: &Home, input: &str, mode: HookMode, now: u64) -> Option<String> {
    if mode == HookMode::Off {
        return None;
    }
    let input: Value = serde_json::from_str(input).ok()?;
    let cwd = input["cwd"].as_str().map(PathBuf::from);
    // The host's session id is the interlink session's (Claude Code's conversation,
    // Codex's thread): the session's own claims do not stop it.
    let me = input["session_id"]
        .as_str()
        .and_then(|s| Some((own_key(home)?.to_hex(), s.to_owned())));
    let mut seen: Option<Seen> = None;
    let mut told = Vec::new();
    for file in edited_files(&input) {
        let file = match (Path::new(file).is_absolute(), &cwd) {
            (true, _) | (false, None) => PathBuf::from(file),
            (false, Some(cwd)) => cwd.join(file),
        };
        // One project lookup (git) for the files of one repository.
        let rel = match seen
            .as_ref()
            .and_then(|s| relative(&s.project.root, &file).map(|r| (s, r)))
        {
            Some((_, rel)) => rel,
            None => {
                let Some(dir) = file.ancestors().skip(1).find(|d| d.is_dir()) else {
                    continue;
                };
                let Some(found) = seen_from(home, dir, now) else {
                    continue;
                };
                let Some(rel) = relative(&found.project.root, &file) else {
                    continue;
                };
                seen = Some(found);
                rel
            }
        };
        let Some(view) = seen.as_ref().and_then(|s| s.view.as_ref()) else {
            continue;
        };
        let held = held_against(
            view,
            &rel,
            me.as_ref().map(|(k, s)| (k.as_str(), s.as_str())),
        );
        if !held.is_empty() {
            let holders: Vec<String> = held.iter().map(|c| claim_line(c)).collect();
            told.push(format!("{rel} is claimed: {}", holders.join("; ")));
        }
    }
    if told.is_empty() {
        return None;
    }
    let text = format!(
        "interlink: {}. Another agent is working on it; leave it alone until \
         that claim ends, or ask its session first (send_message). The claim tool (check) shows \
         who holds what.",
        told.join(". ")
    );
    let output = match mode {
        HookMode::Block => json!({"hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": text,
        }}),
        HookMode::Warn | HookMode::Off => json!({"hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "additionalContext": text,
        }}),
    };
    Some(output.to_string())
}

#[cfg(test)]
#[path = "claims_tests.rs"]
pub(crate) mod tests;

//! `interlink-p2p install claude|codex [--dry-run]` and `uninstall`: registers the
//! MCP server (and what wakes the agent) in the user's agent-host configuration,
//! idempotently, keeping every other entry, and prints what it changed.
//!
//! One adapter per host: [`claude`] (`~/.claude.json` and `~/.claude/settings.json`)
//! and [`codex`] (`$CODEX_HOME/config.toml`). This module finds the files, runs an
//! adapter's edit and writes the result.
//!
//! The entries run a stable path to this program ([`binary`]): never a build tree's.
//! `uninstall` removes what `install` added and leaves no container it emptied: an
//! object or table left empty is dropped, a file left empty is removed, and so is the
//! copy of the binary once no host runs it.
//!
//! A file that does not parse is refused, never overwritten. Files are replaced
//! atomically (`interlink_store::atomic`), keeping their permissions.

mod binary;
mod claude;
mod codex;

use std::{
    io::Write,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, bail};
use serde_json::{Map, Value, json};
use toml_edit::DocumentMut;

pub use codex::{CODEX_ENV_VARS, CODEX_HOOK_EVENTS, CODEX_RETIRED_HOOK_EVENTS, CODEX_TRUST_NOTE};

/// The MCP server's name in the hosts' configuration.
pub const SERVER_NAME: &str = "interlink";

/// Which agent host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Host {
    /// Claude Code.
    Claude,
    /// Codex CLI.
    Codex,
}

/// Where the hosts keep their configuration.
#[derive(Clone, Debug)]
pub struct Locations {
    /// The user's home directory (`HOME`, else `USERPROFILE` on Windows).
    pub home: PathBuf,
    /// `CLAUDE_CONFIG_DIR`, if set: Claude Code then keeps `.claude.json` and
    /// `settings.json` there instead of `~/.claude.json` and `~/.claude/settings.json`.
    pub claude_config_dir: Option<PathBuf>,
    /// `CODEX_HOME`, if set (else `~/.codex`).
    pub codex_home: Option<PathBuf>,
    /// Where per-user program data goes: `XDG_DATA_HOME` (`LOCALAPPDATA` on Windows),
    /// else `~/.local/share`. The stable copy of the binary lives under it.
    pub data_home: Option<PathBuf>,
    /// The `claude` executable asked for its version (`claude` on `PATH`).
    pub claude_bin: PathBuf,
}

impl Locations {
    /// From `HOME`, `CLAUDE_CONFIG_DIR` and `CODEX_HOME`.
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> anyhow::Result<Self> {
        let home = interlink_mcp::cli::user_home(&env).context(if cfg!(windows) {
            "neither HOME nor USERPROFILE is set"
        } else {
            "HOME is not set"
        })?;
        let dir = |name: &str| {
            env(name)
                .filter(|h| !h.trim().is_empty())
                .map(PathBuf::from)
        };
        Ok(Self {
            home,
            claude_config_dir: dir("CLAUDE_CONFIG_DIR"),
            codex_home: dir("CODEX_HOME"),
            data_home: dir(if cfg!(windows) {
                "LOCALAPPDATA"
            } else {
                "XDG_DATA_HOME"
            }),
            claude_bin: PathBuf::from("claude"),
        })
    }

    fn claude_json(&self) -> PathBuf {
        match &self.claude_config_dir {
            Some(dir) => dir.join(".claude.json"),
            None => self.home.join(".claude.json"),
        }
    }

    fn claude_settings(&self) -> PathBuf {
        match &self.claude_config_dir {
            Some(dir) => dir.join("settings.json"),
            None => self.home.join(".claude").join("settings.json"),
        }
    }

    fn codex_config(&self) -> PathBuf {
        self.codex_home
            .clone()
            .unwrap_or_else(|| self.home.join(".codex"))
            .join("config.toml")
    }
}

/// Install or uninstall.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Add or update the entries.
    Install,
    /// Remove the entries.
    Uninstall,
}

/// The `interlink-p2p` the entries run.
#[derive(Clone, Debug)]
pub enum Program {
    /// This executable (the path the kernel gives): registered as it is, or through a
    /// stable copy when it lives in a build or npm directory.
    This(PathBuf),
    /// A command the user named (`--command`), registered as given.
    Given(String),
}

/// Runs `install`/`uninstall` for `host`; `program` is what the entries run (ignored
/// by uninstall). Prints one line per change (or `unchanged`) to `out`.
pub fn run(
    locations: &Locations,
    host: Host,
    action: Action,
    program: &Program,
    dry_run: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let command = match (action, program) {
        (Action::Uninstall, _) => "interlink-p2p".to_owned(),
        (Action::Install, Program::Given(c)) => c.clone(),
        (Action::Install, Program::This(exe)) => {
            binary::stable_command(exe, locations, dry_run, out)?
        }
    };
    let command = command.as_str();
    let mut changes: Vec<(PathBuf, Vec<String>, Option<String>)> = Vec::new();
    match host {
        Host::Claude => {
            let path = locations.claude_json();
            let (new, notes) = edit_json(&path, |doc| claude::server(doc, command, action))?;
            changes.push((path, notes, new));
            let path = locations.claude_settings();
            let (new, notes) = edit_json(&path, |doc| {
                let mut notes = claude::hook(doc, command, action)?;
                notes.extend(claude::conversation_hooks(doc, action)?);
                notes.extend(claude::claims_hook(doc, command, action)?);
                Ok(notes)
            })?;
            changes.push((path, notes, new));
        }
        Host::Codex => {
            let path = locations.codex_config();
            let text = read_optional(&path)?;
            let mut doc: DocumentMut =
                text.as_deref().unwrap_or("").parse().with_context(|| {
                    format!("{} is not valid TOML; not changed", path.display())
                })?;
            let notes = codex::edit(&mut doc, command, action)?;
            let new = (!notes.is_empty()).then(|| doc.to_string());
            changes.push((path, notes, new));
        }
    }
    let verb = if dry_run { "would change" } else { "changed" };
    for (path, notes, new) in &changes {
        match new {
            None => writeln!(out, "{}: unchanged", path.display())?,
            Some(text) if action == Action::Uninstall && is_empty_config(text) => {
                for n in notes {
                    writeln!(out, "{}: {verb}: {n}", path.display())?;
                }
                let verb = if dry_run { "would remove" } else { "removed" };
                writeln!(out, "{}: {verb} (nothing left in it)", path.display())?;
                if !dry_run {
                    std::fs::remove_file(path)
                        .with_context(|| format!("removing {}", path.display()))?;
                    // Its directory too (~/.claude, ~/.codex) when nothing else is there.
                    if let Some(dir) = path.parent() {
                        binary::remove_empty_dirs(dir, &locations.home);
                    }
                }
            }
            Some(text) => {
                for n in notes {
                    writeln!(out, "{}: {verb}: {n}", path.display())?;
                }
                if !dry_run {
                    write_file(path, text.as_bytes())?;
                }
            }
        }
    }
    if action == Action::Uninstall {
        // Every host's configuration as it is after this uninstall.
        let mut configs = Vec::new();
        for path in [
            locations.claude_json(),
            locations.claude_settings(),
            locations.codex_config(),
        ] {
            match changes.iter().find(|(p, _, _)| *p == path) {
                Some((_, _, Some(new))) => configs.push(new.clone()),
                _ => configs.extend(read_optional(&path)?),
            }
        }
        binary::remove_unused_copy(locations, &configs, dry_run, out)?;
    }
    if host == Host::Codex && action == Action::Install {
        writeln!(out, "{CODEX_TRUST_NOTE}")?;
    }
    if action == Action::Install {
        let config = match host {
            Host::Claude => locations.claude_settings(),
            Host::Codex => locations.codex_config(),
        };
        if read_optional(&config)?.is_some_and(|t| has_plugin(&t)) {
            writeln!(
                out,
                "note: the interlink-p2p plugin is installed in {} too; keep one of the \
                 two (`uninstall {}`, or remove the plugin), or each session starts two servers",
                config.display(),
                match host {
                    Host::Claude => "claude",
                    Host::Codex => "codex",
                }
            )?;
        }
    }
    if host == Host::Claude && action == Action::Install {
        let settings = read_optional(&locations.claude_settings())?
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .unwrap_or(Value::Null);
        let version = claude::installed_version(&locations.claude_bin);
        writeln!(
            out,
            "{}",
            claude::delivery_note(version.as_deref(), &settings)
        )?;
    }
    Ok(())
}

/// Whether a host's configuration enables the `interlink-p2p` plugin (Claude Code:
/// `"enabledPlugins": {"interlink-p2p@<marketplace>": true}`; Codex:
/// `[plugins."interlink-p2p@<marketplace>"]`).
fn has_plugin(config: &str) -> bool {
    config.contains("\"interlink-p2p@")
}

/// Whether an uninstall left nothing in a configuration file (`{}` or blank TOML).
fn is_empty_config(text: &str) -> bool {
    let t = text.trim();
    t.is_empty() || t == "{}"
}

fn read_optional(path: &Path) -> anyhow::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Replaces `path` atomically (creating its directory), keeping the original file's
/// permissions (`~/.claude.json` may hold secrets; a config file readable by others
/// stays so).
fn write_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = path.parent().context("a config file has no directory")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let keep = std::fs::metadata(path).ok().map(|m| m.permissions());
    interlink_store::atomic::replace_with(path, |f| {
        f.write_all(bytes)?;
        match keep {
            Some(p) => f.set_permissions(p),
            None => Ok(()),
        }
    })
    .with_context(|| format!("writing {}", path.display()))
}

/// Applies `change` to the JSON object in `path` (missing: `{}`); returns the new text
/// if anything changed, and the notes.
fn edit_json(
    path: &Path,
    change: impl FnOnce(&mut Map<String, Value>) -> anyhow::Result<Vec<String>>,
) -> anyhow::Result<(Option<String>, Vec<String>)> {
    let text = read_optional(path)?;
    let mut doc: Value = match text.as_deref() {
        None => json!({}),
        Some(t) if t.trim().is_empty() => json!({}),
        Some(t) => serde_json::from_str(t)
            .with_context(|| format!("{} is not valid JSON; not changed", path.display()))?,
    };
    let Value::Object(map) = &mut doc else {
        bail!("{} is not a JSON object; not changed", path.display());
    };
    let notes = change(map)?;
    if notes.is_empty() {
        return Ok((None, notes));
    }
    let mut out = serde_json::to_string_pretty(&doc)?;
    out.push('\n');
    Ok((Some(out), notes))
}

/// Register the MCP server (and its wake-up hooks) in Claude Code's or Codex's user
/// configuration; idempotent, keeps every other entry, prints what changed.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  interlink-p2p install claude\n  interlink-p2p install codex --dry-run\n  interlink-p2p install claude --relay /dns4/relay.example.net/tcp/4001/p2p/12D3KooW… --no-mdns"
)]
pub struct Args {
    /// claude or codex.
    #[arg(value_enum)]
    host: Host,
    /// Print what would change without writing anything.
    #[arg(long)]
    dry_run: bool,
    /// The interlink-p2p executable the entries run [default: this executable, or a
    /// copy of it in ~/.local/share/interlink-p2p/bin when it is in a build or npm
    /// directory]
    #[arg(long, value_name = "PATH")]
    command: Option<String>,
    /// Network settings to write to the settings file (config.toml in the home),
    /// which every command and session reads.
    #[command(flatten)]
    net: crate::config::NetArgs,
    /// This user's name, suggested to peers when pairing (written to config.toml).
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
}

/// `interlink-p2p install`.
pub fn command(args: Args, ctx: &crate::Ctx) -> anyhow::Result<std::process::ExitCode> {
    // Checked before anything is written: a bad address changes nothing.
    args.net.config(&crate::settings::Settings::default())?;
    let changes = args.net.settings_changes(args.name.as_deref());
    if !changes.is_empty() {
        let home = ctx.home()?;
        for note in crate::settings::write(home.path(), &changes, args.dry_run)? {
            println!("{note}");
        }
    }
    let locations = Locations::from_env(|k| std::env::var(k).ok())?;
    let program = match args.command {
        Some(c) => Program::Given(c),
        None => Program::This(
            std::env::current_exe().context("finding this executable (or pass --command)")?,
        ),
    };
    run(
        &locations,
        args.host,
        Action::Install,
        &program,
        args.dry_run,
        &mut std::io::stdout(),
    )?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// Remove what `install` added (other entries are kept).
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  interlink-p2p uninstall claude\n  interlink-p2p uninstall codex --dry-run"
)]
pub struct UninstallArgs {
    /// claude or codex.
    #[arg(value_enum)]
    host: Host,
    /// Print what would change without writing anything.
    #[arg(long)]
    dry_run: bool,
}

/// `interlink-p2p uninstall`.
pub fn uninstall(args: UninstallArgs, _: &crate::Ctx) -> anyhow::Result<std::process::ExitCode> {
    let locations = Locations::from_env(|k| std::env::var(k).ok())?;
    run(
        &locations,
        args.host,
        Action::Uninstall,
        &Program::Given("interlink-p2p".to_owned()),
        args.dry_run,
        &mut std::io::stdout(),
    )?;
    Ok(std::process::ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests;

//! The settings file, `config.toml` in the home: the network settings every command and
//! every session the agent hosts start read, so they are written once (by hand, or by
//! `install … --relay/--bootstrap/--network/--no-mdns`) instead of in every host's
//! environment and on every command line.
//!
//! ```toml
//! network = "team"
//! listen = ["/ip4/0.0.0.0/tcp/4001"]
//! bootstrap = ["/dns4/box.tailnet/tcp/4001/p2p/12D3KooW…"]
//! relay = ["/dns4/relay.example/tcp/4002/p2p/12D3KooW…"]
//! mdns = false
//! tailnet = false
//! port = 7385
//! name = "alice"
//! claims_hook = "block"
//! ```
//!
//! Each key stands for one environment variable ([`KEYS`]); a variable that is set, and
//! a flag, override the file. A file that does not parse, an unknown key or a value of
//! the wrong type is an error naming the file and the key, never ignored.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use interlink_store::env;
use toml_edit::{DocumentMut, Item, Value};

/// The file's name in the home.
pub const SETTINGS_FILE: &str = "config.toml";

/// Each key of the file, the variable it stands for, and whether it is a list.
pub const KEYS: &[(&str, &str, Kind)] = &[
    ("network", env::NETWORK, Kind::Text),
    ("listen", env::LISTEN, Kind::List),
    ("bootstrap", env::BOOTSTRAP, Kind::List),
    ("relay", crate::config::ENV_RELAY, Kind::List),
    ("mdns", env::MDNS, Kind::Bool),
    ("tailnet", env::TAILNET, Kind::Bool),
    ("port", env::PORT, Kind::Port),
    ("name", env::NAME, Kind::Text),
    ("claims_hook", crate::claims::ENV_CLAIMS_HOOK, Kind::Text),
];

/// The type of a key's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A string.
    Text,
    /// A string or an array of strings (multiaddrs).
    List,
    /// `true` or `false`.
    Bool,
    /// A port number, 0-65535.
    Port,
}

/// Why the settings file was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// It could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the operating system reported.
        source: std::io::Error,
    },
    /// It is not TOML.
    #[error("{path} is not valid TOML: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The TOML parser's message (line and column).
        reason: String,
    },
    /// A key is unknown or its value has the wrong type.
    #[error("{path}: {key}: {reason}")]
    Key {
        /// The file.
        path: PathBuf,
        #[allow(missing_docs)]
        key: String,
        /// What is wrong.
        reason: String,
    },
}

/// The settings of one home, as the environment variables they stand for.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    values: BTreeMap<&'static str, String>,
    path: PathBuf,
}

impl Settings {
    /// Reads `<home>/config.toml`; a missing file means no settings.
    pub fn load(home: &Path) -> Result<Self, SettingsError> {
        let path = home.join(SETTINGS_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => Self::parse(&text, &path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self {
                values: BTreeMap::new(),
                path,
            }),
            Err(source) => Err(SettingsError::Read { path, source }),
        }
    }

    /// Parses the text of the file at `path` (named in errors).
    pub fn parse(text: &str, path: &Path) -> Result<Self, SettingsError> {
        let doc: DocumentMut =
            text.parse()
                .map_err(|e: toml_edit::TomlError| SettingsError::Parse {
                    path: path.to_owned(),
                    reason: e.message().to_owned(),
                })?;
        let key_error = |key: &str, reason: String| SettingsError::Key {
            path: path.to_owned(),
            key: key.to_owned(),
            reason,
        };
        let mut values = BTreeMap::new();
        for (key, item) in doc.iter() {
            let Some((_, var, kind)) = KEYS.iter().find(|(k, _, _)| *k == key) else {
                let known: Vec<&str> = KEYS.iter().map(|(k, _, _)| *k).collect();
                return Err(key_error(
                    key,
                    format!("unknown key (the keys are {})", known.join(", ")),
                ));
            };
            let value = item
                .as_value()
                .ok_or_else(|| key_error(key, "expected a value, not a table".into()))?;
            let text = match (kind, value) {
                (Kind::Text, Value::String(s)) => s.value().clone(),
                (Kind::List, Value::String(s)) => s.value().clone(),
                (Kind::List, Value::Array(a)) => {
                    let items: Option<Vec<&str>> = a.iter().map(Value::as_str).collect();
                    items
                        .ok_or_else(|| key_error(key, "expected an array of strings".into()))?
                        .join(",")
                }
                (Kind::Bool, Value::Boolean(b)) => (if *b.value() { "1" } else { "0" }).into(),
                (Kind::Port, Value::Integer(n)) => u16::try_from(*n.value())
                    .map_err(|_| key_error(key, "expected a port number, 0 to 65535".into()))?
                    .to_string(),
                (Kind::Port, _) => {
                    return Err(key_error(
                        key,
                        "expected a port number, 0 to 65535 (0: none)".into(),
                    ));
                }
                (Kind::Text, _) => return Err(key_error(key, "expected a string".into())),
                (Kind::List, _) => {
                    return Err(key_error(
                        key,
                        "expected a string or an array of strings".into(),
                    ));
                }
                (Kind::Bool, _) => return Err(key_error(key, "expected true or false".into())),
            };
            values.insert(*var, text);
        }
        Ok(Self {
            values,
            path: path.to_owned(),
        })
    }

    /// The value the file gives the variable `var`, if any.
    pub fn get(&self, var: &str) -> Option<&str> {
        self.values.get(var).map(String::as_str)
    }

    /// Adds to a configuration error, which names variables, where a value it names came
    /// from when it came from this file rather than the environment.
    pub fn explain(&self, error: anyhow::Error) -> anyhow::Error {
        let text = error.to_string();
        let from_file: Vec<String> = KEYS
            .iter()
            .filter(|(_, var, _)| text.contains(var) && self.values.contains_key(var))
            .filter(|(_, var, _)| std::env::var(var).map_or(true, |v| v.trim().is_empty()))
            .map(|(key, var, _)| format!("{var} is `{key}` in {}", self.path.display()))
            .collect();
        if from_file.is_empty() {
            error
        } else {
            error.context(format!(
                "(from the settings file: {})",
                from_file.join("; ")
            ))
        }
    }

    /// A variable lookup for the configuration builders: the process environment
    /// (`env`) first, then this file.
    pub fn layered<'a>(
        &'a self,
        env: impl Fn(&str) -> Option<String> + 'a,
    ) -> impl Fn(&str) -> Option<String> + 'a {
        move |var| {
            env(var)
                .filter(|v| !v.trim().is_empty())
                .or_else(|| self.get(var).map(str::to_owned))
        }
    }
}

/// Sets keys of `<home>/config.toml` (keeping its other keys and comments); `changes`
/// are (key, value) with `None` removing the key. Returns one line per change.
pub fn write(
    home: &Path,
    changes: &[(&str, Option<Item>)],
    dry_run: bool,
) -> anyhow::Result<Vec<String>> {
    use anyhow::Context as _;
    let path = home.join(SETTINGS_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    // Refuse to rewrite a file that does not hold valid settings.
    Settings::parse(&text, &path)?;
    let mut doc: DocumentMut = text.parse().context("parsing the settings")?;
    let mut notes = Vec::new();
    for (key, item) in changes {
        let before = doc.get(key).map(|i| i.to_string().trim().to_owned());
        match item {
            Some(item) => {
                let after = item.to_string().trim().to_owned();
                if before.as_deref() != Some(after.as_str()) {
                    doc[*key] = item.clone();
                    notes.push(format!("{}: set {key} = {after}", path.display()));
                }
            }
            None if before.is_some() => {
                doc.remove(key);
                notes.push(format!("{}: removed {key}", path.display()));
            }
            None => {}
        }
    }
    let new = doc.to_string();
    Settings::parse(&new, &path)?;
    if !notes.is_empty() && !dry_run {
        std::fs::create_dir_all(home).with_context(|| format!("creating {}", home.display()))?;
        interlink_store::atomic::replace_with(&path, |f| {
            std::io::Write::write_all(f, new.as_bytes())
        })
        .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(notes)
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;

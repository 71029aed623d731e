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
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Settings, SettingsError> {
        Settings::parse(text, Path::new("/h/config.toml"))
    }

    #[test]
    fn keys_become_the_variables_they_stand_for() {
        let s = parse(
            "network = \"team\"\nbootstrap = [\"/ip4/1.2.3.4/tcp/1\", \"/ip4/5.6.7.8/tcp/2\"]\n\
             relay = \"/ip4/9.9.9.9/tcp/3/p2p/x\"\nmdns = false\nname = \"alice\"\n\
             tailnet = false\nport = 0\n",
        )
        .unwrap();
        assert_eq!(s.get(env::TAILNET), Some("0"));
        assert_eq!(s.get(env::NETWORK), Some("team"));
        assert_eq!(
            s.get(env::BOOTSTRAP),
            Some("/ip4/1.2.3.4/tcp/1,/ip4/5.6.7.8/tcp/2")
        );
        assert_eq!(
            s.get(crate::config::ENV_RELAY),
            Some("/ip4/9.9.9.9/tcp/3/p2p/x")
        );
        assert_eq!(s.get(env::MDNS), Some("0"));
        assert_eq!(s.get(env::NAME), Some("alice"));
        assert_eq!(s.get(env::PORT), Some("0"));
        assert_eq!(s.get(env::LISTEN), None);
    }

    #[test]
    fn the_environment_overrides_the_file_and_an_empty_variable_does_not() {
        let s = parse("network = \"team\"\nname = \"alice\"\n").unwrap();
        let env = |k: &str| match k {
            "INTERLINK_NETWORK" => Some("other".to_owned()),
            "INTERLINK_NAME" => Some(" ".to_owned()),
            _ => None,
        };
        let lookup = s.layered(env);
        assert_eq!(lookup(env::NETWORK).as_deref(), Some("other"));
        assert_eq!(lookup(env::NAME).as_deref(), Some("alice"));
        assert_eq!(lookup(crate::config::ENV_RELAY), None);
    }

    #[test]
    fn bad_files_are_refused_with_the_key_and_the_reason() {
        let e = parse("netwrk = \"team\"\n").unwrap_err().to_string();
        assert!(
            e.contains("netwrk: unknown key") && e.contains("network"),
            "{e}"
        );
        let e = parse("port = 70000\n").unwrap_err().to_string();
        assert!(e.contains("port: expected a port number"), "{e}");
        let e = parse("port = \"7385\"\n").unwrap_err().to_string();
        assert!(e.contains("port: expected a port number"), "{e}");
        let e = parse("mdns = \"no\"\n").unwrap_err().to_string();
        assert!(e.contains("mdns: expected true or false"), "{e}");
        let e = parse("bootstrap = [1]\n").unwrap_err().to_string();
        assert!(e.contains("bootstrap: expected an array of strings"), "{e}");
        let e = parse("network = \n").unwrap_err().to_string();
        assert!(e.contains("/h/config.toml is not valid TOML"), "{e}");
        let e = parse("[relay]\nx = 1\n").unwrap_err().to_string();
        assert!(e.contains("relay: expected a value"), "{e}");
    }

    #[test]
    fn write_keeps_comments_and_other_keys_and_reports_changes() {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join(SETTINGS_FILE);
        std::fs::write(&path, "# mine\nname = \"alice\"\n").unwrap();
        let relay = toml_edit::value(toml_edit::Array::from_iter(["/ip4/1.2.3.4/tcp/1/p2p/x"]));
        let notes = write(home.path(), &[("relay", Some(relay.clone()))], false).unwrap();
        assert_eq!(notes.len(), 1, "{notes:?}");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("# mine\nname = \"alice\"\n"), "{text}");
        assert_eq!(
            Settings::load(home.path())
                .unwrap()
                .get(crate::config::ENV_RELAY),
            Some("/ip4/1.2.3.4/tcp/1/p2p/x")
        );
        assert!(
            write(home.path(), &[("relay", Some(relay))], false)
                .unwrap()
                .is_empty()
        );
        std::fs::write(&path, "bogus = 1\n").unwrap();
        assert!(
            write(home.path(), &[("mdns", None)], false).is_err(),
            "a bad file is not rewritten"
        );
    }
}

//! Named groups of peers, `groups.json` beside `peers.json`: who `group:<name>`
//! reaches (docs/GROUPS.md).
//!
//! A group names a set of paired identities, each either routed like a direct message
//! (no sessions given) or narrowed to some of its session ids. Every session of the
//! user shares the file, and the MCP tools and the `interlink-p2p group` command edit
//! it the same way: only a peer of `peers.json` can be added; the editors take an
//! exclusive `flock` on a sibling lock file, re-read the file under it and replace it
//! atomically (mode 0600), like [`crate::policy::edit`]. Readers ([`load`]) read it at
//! every use — a send, a listing — so an edit is seen by every session at once; a
//! missing file is no groups, a malformed one an error naming it.
//!
//! A member removed from `peers.json` stays in its groups (the operator may pair
//! again) and is skipped, with that reason, when the group is sent to
//! ([`crate::tools`], `send_message`).
//!
//! Bounds: [`MAX_GROUPS`] groups; a group addresses at most
//! [`MAX_GROUP_RECIPIENTS`] sessions (a member counts once, or once per session it is
//! narrowed to), which is what one message's sealed group tag may list; a member is
//! narrowed to at most [`MAX_MEMBER_SESSIONS`] sessions.

use std::{collections::BTreeMap, io, path::PathBuf};

pub use interlink_core::limits::MAX_GROUP_RECIPIENTS;
use interlink_core::{
    IdentityKey, SessionId,
    session::SessionIdError,
    trust::{KeyPattern, PeerPolicy, ResolveError},
    wire::is_valid_name,
};
use serde::{Deserialize, Serialize};

use crate::{
    files::{edit_json, from_json_file_error, load_json},
    paths::Home,
    policy::{self, PolicyError},
};

/// Most groups one user keeps.
pub const MAX_GROUPS: usize = 64;
/// Most sessions one member may be narrowed to.
pub const MAX_MEMBER_SESSIONS: usize = 8;
/// What `to` starts with to name a group (`group:team`).
pub const GROUP_PREFIX: &str = "group:";
const VERSION: u32 = 1;

/// One member of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// The identity (a peer when it was added).
    pub key: IdentityKey,
    /// The sessions it is narrowed to, in the order added; empty: the session the
    /// routing rules pick for a direct message.
    pub sessions: Vec<SessionId>,
}

impl Member {
    /// How many recipient sessions the member stands for.
    fn size(&self) -> usize {
        self.sessions.len().max(1)
    }
}

/// A named group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// Its name (1-32 characters of `A-Z a-z 0-9 . _ -`).
    pub name: String,
    /// Its members, in the order added; one entry per identity.
    pub members: Vec<Member>,
}

impl Group {
    /// How many recipient sessions the group addresses at most.
    pub fn size(&self) -> usize {
        self.members.iter().map(Member::size).sum()
    }

    fn member_mut(&mut self, key: &IdentityKey) -> Option<&mut Member> {
        self.members.iter_mut().find(|m| m.key == *key)
    }
}

/// Every group of a user, by name. Serialized as `{"version": 1, "groups": {"<name>":
/// {"members": [{"identity_key": "<64 hex>", "sessions": ["<id>", …]}]}}}` and
/// validated with the same rules as the edits, except that a member need not be a
/// peer any more.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "GroupsFile", into = "GroupsFile")]
pub struct Groups {
    by_name: BTreeMap<String, Group>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupsFile {
    version: u32,
    groups: BTreeMap<String, GroupEntry>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupEntry {
    members: Vec<MemberEntry>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct MemberEntry {
    identity_key: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    sessions: Vec<String>,
}

/// Why a group or its file breaks the rules.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum InvalidGroup {
    /// The version is not one this build reads.
    #[error("groups file version {0} is not supported; this build reads {VERSION}")]
    UnsupportedVersion(u32),
    /// A name breaks the naming rule.
    #[error("invalid group name {0:?}: use 1-32 characters from A-Z a-z 0-9 . _ -")]
    InvalidName(String),
    /// More than [`MAX_GROUPS`] groups.
    #[error("there are {MAX_GROUPS} groups already (the most one user keeps); delete one first")]
    TooManyGroups,
    /// A group without members.
    #[error("group {0:?} has no members (delete the group instead)")]
    Empty(String),
    /// A group addressing more than [`MAX_GROUP_RECIPIENTS`] sessions.
    #[error(
        "group {name:?} would address {size} sessions; a group message goes to at most \
         {MAX_GROUP_RECIPIENTS} (a member counts once, or once per session it is narrowed to)"
    )]
    TooLarge {
        /// The group.
        name: String,
        /// Sessions it would address.
        size: usize,
    },
    /// A member narrowed to more than [`MAX_MEMBER_SESSIONS`] sessions.
    #[error(
        "a member of {name:?} is narrowed to {count} sessions; the limit is {MAX_MEMBER_SESSIONS}"
    )]
    TooManySessions {
        /// The group.
        name: String,
        /// Sessions given.
        count: usize,
    },
    /// An identity listed twice, or a session twice under one member.
    #[error("group {name:?} lists {what} twice")]
    Duplicate {
        /// The group.
        name: String,
        /// What is repeated.
        what: String,
    },
    /// A stored key or session id does not parse.
    #[error("group {name:?}: {what}")]
    BadEntry {
        /// The group.
        name: String,
        /// What is wrong.
        what: String,
    },
}

impl TryFrom<GroupsFile> for Groups {
    type Error = InvalidGroup;

    fn try_from(file: GroupsFile) -> Result<Self, InvalidGroup> {
        if file.version != VERSION {
            return Err(InvalidGroup::UnsupportedVersion(file.version));
        }
        if file.groups.len() > MAX_GROUPS {
            return Err(InvalidGroup::TooManyGroups);
        }
        let mut by_name = BTreeMap::new();
        for (name, entry) in file.groups {
            let bad = |what: String| InvalidGroup::BadEntry {
                name: name.clone(),
                what,
            };
            let mut members = Vec::with_capacity(entry.members.len());
            for m in entry.members {
                let key = m
                    .identity_key
                    .parse::<IdentityKey>()
                    .map_err(|e| bad(format!("identity key {:?}: {e}", m.identity_key)))?;
                let sessions = m
                    .sessions
                    .into_iter()
                    .map(|s| SessionId::new(&s).map_err(|e| bad(format!("session {s:?}: {e}"))))
                    .collect::<Result<Vec<_>, _>>()?;
                members.push(Member { key, sessions });
            }
            let group = Group { name, members };
            check(&group)?;
            by_name.insert(group.name.clone(), group);
        }
        Ok(Self { by_name })
    }
}

impl From<Groups> for GroupsFile {
    fn from(groups: Groups) -> Self {
        Self {
            version: VERSION,
            groups: groups
                .by_name
                .into_iter()
                .map(|(name, g)| {
                    let members = g
                        .members
                        .into_iter()
                        .map(|m| MemberEntry {
                            identity_key: m.key.to_hex(),
                            sessions: m.sessions.iter().map(ToString::to_string).collect(),
                        })
                        .collect();
                    (name, GroupEntry { members })
                })
                .collect(),
        }
    }
}

/// The rules every stored group keeps (peership aside, which only edits check).
fn check(g: &Group) -> Result<(), InvalidGroup> {
    if !is_valid_name(&g.name) {
        return Err(InvalidGroup::InvalidName(g.name.clone()));
    }
    if g.members.is_empty() {
        return Err(InvalidGroup::Empty(g.name.clone()));
    }
    let dup = |what: String| InvalidGroup::Duplicate {
        name: g.name.clone(),
        what,
    };
    for (i, m) in g.members.iter().enumerate() {
        if g.members[..i].iter().any(|o| o.key == m.key) {
            return Err(dup(format!("identity {}", m.key.fingerprint())));
        }
        if m.sessions.len() > MAX_MEMBER_SESSIONS {
            return Err(InvalidGroup::TooManySessions {
                name: g.name.clone(),
                count: m.sessions.len(),
            });
        }
        for (j, s) in m.sessions.iter().enumerate() {
            if m.sessions[..j].contains(s) {
                return Err(dup(format!("session {s}")));
            }
        }
    }
    if g.size() > MAX_GROUP_RECIPIENTS {
        return Err(InvalidGroup::TooLarge {
            name: g.name.clone(),
            size: g.size(),
        });
    }
    Ok(())
}

impl Groups {
    /// The group named `name`.
    pub fn get(&self, name: &str) -> Option<&Group> {
        self.by_name.get(name)
    }

    /// Every group, by name.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &Group> + '_ {
        self.by_name.values()
    }

    /// Number of groups.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Adds the group `name` with `members` (each must be a peer of `policy`).
    pub fn create(
        &mut self,
        name: &str,
        members: &[MemberSpec],
        policy: &PeerPolicy,
    ) -> Result<&Group, EditError> {
        if !is_valid_name(name) {
            return Err(InvalidGroup::InvalidName(name.to_owned()).into());
        }
        if self.by_name.contains_key(name) {
            return Err(EditError::Exists(name.to_owned()));
        }
        if self.by_name.len() >= MAX_GROUPS {
            return Err(InvalidGroup::TooManyGroups.into());
        }
        let mut group = Group {
            name: name.to_owned(),
            members: Vec::new(),
        };
        for spec in members {
            add_member(&mut group, spec, policy)?;
        }
        check(&group)?;
        Ok(self.by_name.entry(name.to_owned()).or_insert(group))
    }

    /// Adds `add` to and takes `remove` from the group `name`: additions must be peers;
    /// a removal names a member (petname, fingerprint or key prefix, also of a member
    /// that is no peer any more), or one of its sessions (`member/session`: the member
    /// goes when its last session does).
    pub fn update(
        &mut self,
        name: &str,
        add: &[MemberSpec],
        remove: &[String],
        policy: &PeerPolicy,
    ) -> Result<&Group, EditError> {
        let mut group = self
            .by_name
            .get(name)
            .cloned()
            .ok_or_else(|| EditError::NoSuchGroup(name.to_owned()))?;
        for text in remove {
            remove_member(&mut group, text, policy)?;
        }
        for spec in add {
            add_member(&mut group, spec, policy)?;
        }
        check(&group)?;
        self.by_name.insert(name.to_owned(), group);
        self.by_name
            .get(name)
            .ok_or_else(|| EditError::NoSuchGroup(name.to_owned()))
    }

    /// Deletes the group `name`, returning it.
    pub fn delete(&mut self, name: &str) -> Result<Group, EditError> {
        self.by_name
            .remove(name)
            .ok_or_else(|| EditError::NoSuchGroup(name.to_owned()))
    }
}

/// A member as an edit names it: `peer` or `peer/session`, where `peer` is a petname,
/// a fingerprint or a key prefix of a peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberSpec {
    /// The peer as given.
    pub peer: String,
    /// The session it is narrowed to, if any.
    pub session: Option<SessionId>,
}

impl std::str::FromStr for MemberSpec {
    type Err = EditError;

    fn from_str(text: &str) -> Result<Self, EditError> {
        let text = text.trim();
        let (peer, session) = match text.split_once('/') {
            Some((p, s)) => (p.trim(), Some(s.trim())),
            None => (text, None),
        };
        if peer.is_empty() {
            return Err(EditError::BadMember {
                text: text.to_owned(),
                why: "give a peer: its petname, fingerprint or key prefix".into(),
            });
        }
        let session = session
            .map(|s| {
                SessionId::new(s).map_err(|e: SessionIdError| EditError::BadMember {
                    text: text.to_owned(),
                    why: format!("session {s:?}: {e}"),
                })
            })
            .transpose()?;
        Ok(Self {
            peer: peer.to_owned(),
            session,
        })
    }
}

/// Why an edit of the groups was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EditError {
    /// The group would break a rule.
    #[error(transparent)]
    Invalid(#[from] InvalidGroup),
    /// A group by that name exists.
    #[error("a group named {0:?} exists already (change it with the group tool / `group add`)")]
    Exists(String),
    /// No group by that name.
    #[error(
        "no group is named {0:?} (list them with the group tool or `interlink-p2p group list`)"
    )]
    NoSuchGroup(String),
    /// A member text does not parse.
    #[error("member {text:?}: {why}")]
    BadMember {
        text: String,
        /// What is wrong with it.
        why: String,
    },
    /// A member to add is not a peer.
    #[error(
        "member {text:?}: {reason}; only peers (peers.json) can be in a group — pairing \
         comes first (`interlink-p2p invite` and `join`, or `interlink-p2p peer add NAME KEY`)"
    )]
    NotAPeer {
        text: String,
        /// Why the peers policy did not resolve it.
        reason: ResolveError,
    },
    /// The member is there already in a form the addition would silently change.
    #[error("{0}")]
    Conflict(String),
    /// A removal names nothing in the group.
    #[error("{text:?} is not in group {group:?}")]
    NotAMember { text: String, group: String },
    /// The groups file could not be read or written.
    #[error(transparent)]
    File(#[from] GroupsFileError),
    /// The peers file could not be read.
    #[error(transparent)]
    Policy(#[from] PolicyError),
}

fn add_member(group: &mut Group, spec: &MemberSpec, policy: &PeerPolicy) -> Result<(), EditError> {
    let key = policy
        .resolve(&spec.peer)
        .map_err(|reason| EditError::NotAPeer {
            text: spec.peer.clone(),
            reason,
        })?;
    let who = policy.name_of(&key).unwrap_or(&spec.peer).to_owned();
    let group_name = group.name.clone();
    match (group.member_mut(&key), &spec.session) {
        (None, session) => group.members.push(Member {
            key,
            sessions: session.iter().cloned().collect(),
        }),
        // Already in, routed: adding it again changes nothing.
        (Some(m), None) if m.sessions.is_empty() => {}
        (Some(m), Some(s)) if !m.sessions.is_empty() => {
            if !m.sessions.contains(s) {
                m.sessions.push(s.clone());
            }
        }
        (Some(m), None) => {
            return Err(EditError::Conflict(format!(
                "{who} is in group {group_name:?} narrowed to session(s) {}; remove {who} \
                 first to have it routed like a direct message",
                m.sessions
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        (Some(_), Some(s)) => {
            return Err(EditError::Conflict(format!(
                "{who} is in group {group_name:?} routed like a direct message; remove {who} \
                 first to narrow it to session {s}"
            )));
        }
    }
    Ok(())
}

fn remove_member(group: &mut Group, text: &str, policy: &PeerPolicy) -> Result<(), EditError> {
    let spec: MemberSpec = text.parse()?;
    let group_name = group.name.clone();
    let not_member = || EditError::NotAMember {
        text: text.trim().to_owned(),
        group: group_name.clone(),
    };
    // A petname of a peer, else a fingerprint or key prefix of a member (which may not
    // be a peer any more).
    let key = match policy.resolve(&spec.peer) {
        Ok(k) if group.members.iter().any(|m| m.key == k) => k,
        _ => {
            let pattern = KeyPattern::parse(&spec.peer).ok_or_else(not_member)?;
            let mut hits = group.members.iter().filter(|m| pattern.matches(&m.key));
            match (hits.next(), hits.next()) {
                (Some(m), None) => m.key,
                (Some(_), Some(_)) => {
                    return Err(EditError::BadMember {
                        text: text.trim().to_owned(),
                        why: "matches several members; give more digits".into(),
                    });
                }
                _ => return Err(not_member()),
            }
        }
    };
    match &spec.session {
        None => group.members.retain(|m| m.key != key),
        Some(s) => {
            let m = group.member_mut(&key).ok_or_else(not_member)?;
            let before = m.sessions.len();
            m.sessions.retain(|x| x != s);
            if m.sessions.len() == before {
                return Err(not_member());
            }
            // Its last session gone, the member goes too (rather than becoming routed).
            if m.sessions.is_empty() {
                group.members.retain(|m| m.key != key);
            }
        }
    }
    Ok(())
}

/// Reading or writing the groups file failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GroupsFileError {
    /// A file-system error on the file, its lock or its directory.
    #[error("{what} {}: {source}", .path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What the operating system reported.
        source: io::Error,
    },
    /// The file exists but is not a valid groups file.
    #[error("{} is not a valid groups file: {source}", .path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Where and how the JSON breaks.
        source: serde_json::Error,
    },
}

from_json_file_error!(GroupsFileError);

/// Reads the groups of `home`: a missing file is no groups; one that cannot be read or
/// parsed is an error naming it.
pub fn load(home: &Home) -> Result<Groups, GroupsFileError> {
    Ok(load_json(&home.groups())?)
}

/// Changes the groups of `home` under the editors' lock: reads the groups and the
/// peers, lets `change` modify the groups, and writes them atomically (mode 0600) if
/// `change` succeeded. Returns what `change` returned.
pub fn edit<T>(
    home: &Home,
    change: impl FnOnce(&mut Groups, &PeerPolicy) -> Result<T, EditError>,
) -> Result<T, EditError> {
    edit_json(home.path(), &home.groups_lock(), &home.groups(), |groups| {
        let policy = policy::load(home)?;
        change(groups, &policy)
    })
    .map_err(GroupsFileError::from)?
}

/// Creates the group `name` of `members` (texts `peer` or `peer/session`).
pub fn create(home: &Home, name: &str, members: &[String]) -> Result<Group, EditError> {
    let specs = parse_specs(members)?;
    if specs.is_empty() {
        return Err(InvalidGroup::Empty(name.to_owned()).into());
    }
    edit(home, |groups, policy| {
        groups.create(name, &specs, policy).cloned()
    })
}

/// Adds `add` to and takes `remove` from the group `name` ([`Groups::update`]).
pub fn update(
    home: &Home,
    name: &str,
    add: &[String],
    remove: &[String],
) -> Result<Group, EditError> {
    let specs = parse_specs(add)?;
    edit(home, |groups, policy| {
        groups.update(name, &specs, remove, policy).cloned()
    })
}

/// Deletes the group `name`.
pub fn delete(home: &Home, name: &str) -> Result<Group, EditError> {
    edit(home, |groups, _| groups.delete(name))
}

fn parse_specs(texts: &[String]) -> Result<Vec<MemberSpec>, EditError> {
    texts.iter().map(|t| t.parse()).collect()
}

/// A member as people read it, in the form `group create` takes: `bob`, or
/// `bob/b-1, bob/b-2` for a member narrowed to sessions, or the fingerprint of an
/// identity that is no peer any more, marked so.
pub fn member_label(policy: &PeerPolicy, m: &Member) -> String {
    let who = match policy.name_of(&m.key) {
        Some(n) => n.to_owned(),
        None => format!("{} (not a peer any more)", m.key.fingerprint()),
    };
    if m.sessions.is_empty() {
        who
    } else {
        let sessions: Vec<String> = m.sessions.iter().map(|s| format!("{who}/{s}")).collect();
        sessions.join(", ")
    }
}

/// A group as structuredContent: `{"name", "members": [{"identity_key",
/// "fingerprint", "petname", "paired", "sessions"}], "size"}`.
pub fn group_json(policy: &PeerPolicy, g: &Group) -> serde_json::Value {
    serde_json::json!({
        "name": g.name,
        "members": g.members.iter().map(|m| serde_json::json!({
            "identity_key": m.key.to_hex(),
            "fingerprint": m.key.fingerprint().to_string(),
            "petname": policy.name_of(&m.key),
            "paired": policy.contains(&m.key),
            "sessions": m.sessions.iter().map(ToString::to_string).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "size": g.size(),
    })
}

/// A group in one line: `team: bob, carol/c-1`.
pub fn group_line(policy: &PeerPolicy, g: &Group) -> String {
    let members: Vec<String> = g.members.iter().map(|m| member_label(policy, m)).collect();
    format!("{}: {}", g.name, members.join(", "))
}

#[cfg(test)]
#[path = "groups_tests.rs"]
mod tests;

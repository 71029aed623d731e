//! What a claim covers: a path relative to the repository root, or a glob.
//!
//! A pattern is `/`-separated segments. In a segment `*` stands for any run of
//! characters but `/` and `?` for one such character; a whole segment `**` stands for
//! any number of segments, none included; a trailing `/` is `/**`, so `src/api/` covers
//! everything below `src/api`. A pattern without wildcards names one path: the tools that
//! take a claim turn a directory's name into `dir/**`, since they can look at the disk
//! and this module does not.
//!
//! Two patterns overlap when some path is covered by both. That is decided exactly (no
//! path is enumerated): the same two-pointer search runs over the segments, where `**`
//! is the wildcard, and inside a pair of segments, where `*` is.

use std::fmt;

use super::{ClaimError, MAX_PATTERN_BYTES, MAX_PATTERN_SEGMENTS};

/// Longest path a pattern is matched against: the longest path a file system takes
/// (Linux's `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;

/// A checked pattern: relative, no `.` or `..`, no empty segment, no backslash, no
/// control character, at most [`MAX_PATTERN_BYTES`] and [`MAX_PATTERN_SEGMENTS`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pattern {
    text: String,
    segments: Vec<Segment>,
    /// The segments before the first wildcard: a cheap first test of overlap.
    literal_prefix: usize,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Segment {
    /// `**`: any number of segments.
    Any,
    /// A segment without wildcards.
    Literal(String),
    /// A segment with `*` or `?`.
    Glob(Vec<Ch>),
}

/// One character of a segment, as the search inside a segment reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Ch {
    /// `*` in a pattern: any run of characters.
    Any,
    /// `?` in a pattern: any one character.
    One,
    /// A character itself (in a path, `*` and `?` are characters too).
    Lit(char),
}

impl Pattern {
    /// Checks and takes `text`. A trailing `/` is read as `/**`, and a run of `**`
    /// segments as one.
    pub fn parse(text: &str) -> Result<Self, ClaimError> {
        let bad = |why: &str| ClaimError::Pattern(format!("`{}`: {why}", text.escape_debug()));
        if text.len() > MAX_PATTERN_BYTES {
            return Err(bad(&format!(
                "is {} bytes; the limit is {MAX_PATTERN_BYTES}",
                text.len()
            )));
        }
        if text.chars().any(char::is_control) {
            return Err(bad("contains control characters"));
        }
        if text.contains('\\') {
            return Err(bad("use `/` between directories"));
        }
        if text.starts_with('/') {
            return Err(bad(
                "is absolute; give a path relative to the repository root",
            ));
        }
        let mut parts: Vec<&str> = match text.strip_suffix('/') {
            Some(dir) => dir.split('/').chain(["**"]).collect(),
            None => text.split('/').collect(),
        };
        parts.dedup_by(|a, b| *a == "**" && *b == "**");
        if parts.len() > MAX_PATTERN_SEGMENTS {
            return Err(bad(&format!(
                "has {} segments; the limit is {MAX_PATTERN_SEGMENTS}",
                parts.len()
            )));
        }
        let mut segments = Vec::with_capacity(parts.len());
        for part in &parts {
            segments.push(match *part {
                "" => return Err(bad("has an empty segment")),
                "." | ".." => return Err(bad("has a `.` or `..` segment")),
                "**" => Segment::Any,
                p if p.contains("**") => {
                    return Err(bad("`**` must be a whole segment"));
                }
                p if p.contains(['*', '?']) => Segment::Glob(
                    p.chars()
                        .map(|c| match c {
                            '*' => Ch::Any,
                            '?' => Ch::One,
                            c => Ch::Lit(c),
                        })
                        .collect(),
                ),
                p => Segment::Literal(p.to_owned()),
            });
        }
        let literal_prefix = segments
            .iter()
            .take_while(|s| matches!(s, Segment::Literal(_)))
            .count();
        Ok(Self {
            text: parts.join("/"),
            segments,
            literal_prefix,
        })
    }

    /// The pattern as written, normalised (a trailing `/` as `/**`).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `path` (relative, `/`-separated) is covered. A path longer than
    /// [`MAX_PATH_BYTES`] names no file and is covered by nothing (the search is
    /// recursive, one level per character of a segment).
    pub fn covers(&self, path: &str) -> bool {
        if path.len() > MAX_PATH_BYTES {
            return false;
        }
        let segments: Vec<Segment> = path
            .split('/')
            .filter(|s| !s.is_empty() && *s != ".")
            .map(|s| Segment::Literal(s.to_owned()))
            .collect();
        intersects(
            &self.segments,
            &segments,
            &mut Memo::new(self.segments.len(), segments.len()),
        )
    }

    /// Whether some path is covered by both.
    pub fn overlaps(&self, other: &Pattern) -> bool {
        let shared = self.literal_prefix.min(other.literal_prefix);
        if self.segments[..shared] != other.segments[..shared] {
            return false;
        }
        let (a, b) = (&self.segments[shared..], &other.segments[shared..]);
        intersects(a, b, &mut Memo::new(a.len(), b.len()))
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Memo of the two-pointer search: `None` not yet decided.
struct Memo {
    width: usize,
    cells: Vec<Option<bool>>,
}

impl Memo {
    fn new(a: usize, b: usize) -> Self {
        Self {
            width: b + 1,
            cells: vec![None; (a + 1) * (b + 1)],
        }
    }
}

/// Whether some sequence is produced by both `a` and `b`, where [`Wildcard::is_any`]
/// items produce any run of items and two others must be [`Wildcard::meets`].
fn intersects<T: Wildcard>(a: &[T], b: &[T], memo: &mut Memo) -> bool {
    search(a, b, 0, 0, memo)
}

fn search<T: Wildcard>(a: &[T], b: &[T], i: usize, j: usize, memo: &mut Memo) -> bool {
    let cell = i * memo.width + j;
    if let Some(known) = memo.cells[cell] {
        return known;
    }
    let found = match (a.get(i), b.get(j)) {
        (None, None) => true,
        // A wildcard produces nothing more, or takes what the other side produces next.
        (Some(x), _) if x.is_any() => {
            search(a, b, i + 1, j, memo) || (j < b.len() && search(a, b, i, j + 1, memo))
        }
        (_, Some(y)) if y.is_any() => {
            search(a, b, i, j + 1, memo) || (i < a.len() && search(a, b, i + 1, j, memo))
        }
        (Some(x), Some(y)) => x.meets(y) && search(a, b, i + 1, j + 1, memo),
        _ => false,
    };
    memo.cells[cell] = Some(found);
    found
}

trait Wildcard {
    fn is_any(&self) -> bool;
    fn meets(&self, other: &Self) -> bool;
}

impl Wildcard for Segment {
    fn is_any(&self) -> bool {
        matches!(self, Segment::Any)
    }
    fn meets(&self, other: &Self) -> bool {
        match (self, other) {
            (Segment::Literal(x), Segment::Literal(y)) => x == y,
            (x, y) => {
                let (x, y) = (x.chars(), y.chars());
                intersects(&x, &y, &mut Memo::new(x.len(), y.len()))
            }
        }
    }
}

impl Segment {
    fn chars(&self) -> Vec<Ch> {
        match self {
            Segment::Glob(c) => c.clone(),
            Segment::Literal(s) => s.chars().map(Ch::Lit).collect(),
            Segment::Any => vec![Ch::Any],
        }
    }
}

/// Inside a segment: `*` any run of characters, `?` any one; a path's `*` is itself.
impl Wildcard for Ch {
    fn is_any(&self) -> bool {
        *self == Ch::Any
    }
    fn meets(&self, other: &Self) -> bool {
        match (self, other) {
            (Ch::Lit(a), Ch::Lit(b)) => a == b,
            _ => true,
        }
    }
}

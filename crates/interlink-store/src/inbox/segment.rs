//! The inbox's two files and their logical offsets, shared by the writer and every
//! reader.
//!
//! A *segment* is a JSON-lines file that may start with a header line
//! `{"inbox_base":N}`: its first entry line starts at logical offset `N` (no header:
//! `N` is 0, which is every inbox written before compaction existed). Logical offsets
//! are what cursors hold; they never move backwards and survive compaction.
//!
//! - `inbox.jsonl`, the hot segment: lines from its base on, appended by the node.
//! - `inbox.archive.jsonl`, the archive: the lines compaction moved out of the hot
//!   segment, in order, so its logical end is the hot segment's base. Only the
//!   writer touches it (appends, and a front trim when it passes its size bound).
//!
//! The reader rule: open the hot segment first, then the archive, and read the
//! archive only up to the hot segment's base. The writer replaces the hot segment with
//! an atomic rename, after the archive holds (synced) every line it drops; so whatever
//! generation of the hot segment a reader opened, the archive it opens next has every
//! line before that generation's base, and lines the archive holds past that base are
//! also in the hot segment the reader has open.
//!
//! The padding: the writer keeps a run of spaces (no newline) after the hot segment's
//! last line, so an append overwrites bytes the file already has. The file's length
//! and block map then stay put, and `fdatasync` need not write them (docs/DELIVERY.md
//! has the measurements). Every line the writer produces starts with `{`, so the data ends
//! at the first line that starts with a space (or a NUL, which a crash can leave where
//! the file grew); readers stop there. To a reader that does not know the rule, the
//! padding is a last line still being written, which it already waits for.

use std::{
    fs::File,
    io::{self, BufRead, BufReader, Read as _, Seek as _, SeekFrom},
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use super::{InboxEntry, InboxError};

/// File name of the archive (lines compaction moved out of the hot inbox).
pub const ARCHIVE_FILE: &str = "inbox.archive.jsonl";
/// How the header line starts; a file whose first bytes differ has no header.
const HEADER_PREFIX: &[u8] = b"{\"inbox_base\":";
/// Longest header line read (`{"inbox_base":` + 20 digits + `}\n` fits).
const MAX_HEADER_LEN: usize = 64;
/// Bytes read per step when a segment is read from its end.
const BACK_CHUNK: u64 = 64 * 1024;
/// The byte the writer pads the hot segment with.
pub(super) const PADDING: u8 = b' ';

/// Whether a line starting with `byte` is past the data: the padding, or zeros.
pub(super) fn ends_data(byte: u8) -> bool {
    byte == PADDING || byte == 0
}

/// Reads the next complete line into `line` (cleared first) and returns its length;
/// `None` at the end of the data: the end of the file, a line still being written (no
/// newline yet) or the padding. A line of padding is not read through.
pub(super) fn next_line(reader: &mut impl BufRead, line: &mut Vec<u8>) -> io::Result<Option<u64>> {
    line.clear();
    match reader.fill_buf()?.first() {
        None => return Ok(None),
        Some(b) if ends_data(*b) => return Ok(None),
        Some(_) => {}
    }
    let n = reader.read_until(b'\n', line)?;
    Ok((line.last() == Some(&b'\n')).then_some(n as u64))
}

#[derive(Serialize, Deserialize)]
struct Header {
    inbox_base: u64,
}

/// The header line for a segment starting at logical offset `base`.
pub(super) fn header_line(base: u64) -> Vec<u8> {
    let mut line = serde_json::to_vec(&Header { inbox_base: base }).unwrap_or_default();
    line.push(b'\n');
    line
}

/// The archive beside the hot inbox file `hot`.
pub(super) fn archive_path(hot: &Path) -> PathBuf {
    hot.with_file_name(ARCHIVE_FILE)
}

/// One open segment file and where it sits in the logical offsets.
#[derive(Debug)]
pub(super) struct Segment {
    pub(super) file: File,
    /// Logical offset of the first byte after the header.
    pub(super) base: u64,
    /// Bytes of the header line (0 without one).
    pub(super) header_len: u64,
    /// File length when opened (the hot segment's padding included).
    pub(super) len: u64,
}

impl Segment {
    /// Opens `path` for reading; `None` when it does not exist.
    pub(super) fn open(path: &Path) -> io::Result<Option<Self>> {
        match File::open(path) {
            Ok(file) => Self::from_file(file).map(Some),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Reads the header of an open file.
    pub(super) fn from_file(mut file: File) -> io::Result<Self> {
        // The length from a seek, not a `stat`: on Linux since 6.13 a `stat` that
        // asks for the change time makes the writer's next write stamp a fine-grained
        // one, which `fdatasync` then writes too (docs/DELIVERY.md).
        let len = file.seek(SeekFrom::End(0))?;
        let (base, header_len) = read_header(&mut file)?;
        Ok(Self {
            file,
            base,
            header_len,
            len,
        })
    }

    /// Logical offset of the file's end (a torn last line included); for the archive,
    /// which has no padding.
    pub(super) fn end(&self) -> u64 {
        self.base + self.len.saturating_sub(self.header_len)
    }

    /// Logical offset of the end of the data: the file's end without the padding (a
    /// torn last line included). Reads the padding from the end.
    pub(super) fn data_end(&mut self) -> io::Result<u64> {
        let mut pos = self.len;
        let mut chunk = Vec::new();
        while pos > self.header_len {
            let n = BACK_CHUNK.min(pos - self.header_len);
            chunk.resize(usize::try_from(n).unwrap_or(0), 0);
            // Short if the padding was cut off meanwhile: what is missing was padding.
            let got = read_at_most(&self.file, pos - n, &mut chunk)?;
            chunk.truncate(got);
            if let Some(i) = chunk.iter().rposition(|b| !ends_data(*b)) {
                pos = pos - n + i as u64 + 1;
                break;
            }
            pos -= n;
        }
        Ok(self.base + pos.max(self.header_len) - self.header_len)
    }

    /// Whether logical offset `logical` is within the data (its end included): past
    /// the base, not beyond the file, and not after a byte of padding. A cursor that is
    /// not belongs to a file that was replaced.
    pub(super) fn reaches(&mut self, logical: u64) -> io::Result<bool> {
        if logical < self.base {
            return Ok(false);
        }
        let phys = self.phys(logical);
        if phys == self.header_len {
            return Ok(true);
        }
        if phys > self.len {
            return Ok(false);
        }
        let mut before = [0u8];
        // Nothing there: the file shrank since it was opened (its padding was cut off).
        let got = read_at_most(&self.file, phys - 1, &mut before)?;
        Ok(got == 1 && !ends_data(before[0]))
    }

    /// File position of logical offset `logical` (at least the base).
    pub(super) fn phys(&self, logical: u64) -> u64 {
        logical.saturating_sub(self.base) + self.header_len
    }

    /// Appends the complete lines between logical `start` and `limit` to `out`, each
    /// with its logical end; returns the logical end of the last complete one (or
    /// `start`).
    fn read_lines(
        &mut self,
        start: u64,
        limit: u64,
        out: &mut Vec<(InboxEntry, u64)>,
    ) -> io::Result<u64> {
        self.file.seek(SeekFrom::Start(self.phys(start)))?;
        let mut reader = BufReader::new(&self.file);
        let mut pos = start;
        let mut line = Vec::new();
        while let Some(n) = next_line(&mut reader, &mut line)? {
            if pos + n > limit {
                break;
            }
            pos += n;
            // A line that does not parse is skipped rather than blocking every later one.
            if let Ok(e) = serde_json::from_slice::<InboxEntry>(&line) {
                out.push((e, pos));
            }
        }
        Ok(pos)
    }
}

/// Reads from position `pos` until `buf` is full or the file ends; returns how much
/// it read.
pub(super) fn read_at_most(mut file: &File, pos: u64, buf: &mut [u8]) -> io::Result<usize> {
    file.seek(SeekFrom::Start(pos))?;
    let mut got = 0;
    while got < buf.len() {
        match file.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// `(base, header length)` of a segment: `(0, 0)` without a header.
fn read_header(file: &mut File) -> io::Result<(u64, u64)> {
    file.seek(SeekFrom::Start(0))?;
    let mut buf = Vec::with_capacity(MAX_HEADER_LEN);
    file.by_ref()
        .take(MAX_HEADER_LEN as u64)
        .read_to_end(&mut buf)?;
    if !buf.starts_with(HEADER_PREFIX) {
        return Ok((0, 0));
    }
    let Some(nl) = buf.iter().position(|b| *b == b'\n') else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "inbox header line is not complete",
        ));
    };
    let header: Header = serde_json::from_slice(&buf[..nl])
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    Ok((header.inbox_base, nl as u64 + 1))
}

/// The logical offsets the hot inbox `path` covers: `(base, end)`, the end being that
/// of its last complete line or of a torn one being written (the padding left out). A
/// missing file is `(0, 0)`. A cursor below `base` reads from the archive; one above
/// `end` belongs to an inbox that was replaced.
pub fn bounds(path: &Path) -> Result<(u64, u64), InboxError> {
    let io_err = |source| InboxError::Io {
        path: path.to_owned(),
        source,
    };
    match Segment::open(path).map_err(io_err)? {
        Some(mut s) => Ok((s.base, s.data_end().map_err(io_err)?)),
        None => Ok((0, 0)),
    }
}

/// Reads the entries after logical offset `offset` of an inbox; returns them and the
/// offset after the last complete line (a reader's cursor). A missing file reads as
/// empty.
pub fn read_from(path: &Path, offset: u64) -> Result<(Vec<InboxEntry>, u64), InboxError> {
    let (entries, end) = read_positioned_from(path, offset)?;
    Ok((entries.into_iter().map(|(e, _)| e).collect(), end))
}

/// Like [`read_from`], with each entry the offset just after its line, so a reader
/// can move its cursor past a prefix of the entries (e.g. the ones it has consumed).
///
/// A cursor older than the hot file's base is served from the archive first (a line
/// trimmed off the archive's front is skipped), so no reader loses lines to a
/// compaction.
pub fn read_positioned_from(
    path: &Path,
    offset: u64,
) -> Result<(Vec<(InboxEntry, u64)>, u64), InboxError> {
    let io_err = |p: &Path| {
        let p = p.to_owned();
        move |source| InboxError::Io { path: p, source }
    };
    // The hot file first: see the module's reader rule.
    let Some(mut hot) = Segment::open(path).map_err(io_err(path))? else {
        return Ok((Vec::new(), offset));
    };
    let mut entries = Vec::new();
    let mut pos = offset;
    if offset < hot.base {
        let archive = archive_path(path);
        if let Some(mut old) = Segment::open(&archive).map_err(io_err(&archive))? {
            old.read_lines(offset.max(old.base), hot.base, &mut entries)
                .map_err(io_err(&archive))?;
        }
        pos = hot.base;
    }
    let end = hot
        .read_lines(pos, u64::MAX, &mut entries)
        .map_err(io_err(path))?;
    Ok((entries, end))
}

/// The entries of the hot file after logical offset `offset`, with one open: an offset
/// outside the hot file — before its base (lines that left for the archive) or past
/// its end (the file was replaced) — reads from the base. Returns the entries (each with
/// the offset after its line), the offset actually read from, and the end. For readers
/// that count what lies before the base as consumed (the agent's read state).
#[allow(clippy::type_complexity)] // (entries with their ends, start, end)
pub fn read_hot_from(
    path: &Path,
    offset: u64,
) -> Result<(Vec<(InboxEntry, u64)>, u64, u64), InboxError> {
    let io_err = |source| InboxError::Io {
        path: path.to_owned(),
        source,
    };
    let Some(mut hot) = Segment::open(path).map_err(io_err)? else {
        return Ok((Vec::new(), 0, 0));
    };
    let start = if hot.reaches(offset).map_err(io_err)? {
        offset
    } else {
        hot.base
    };
    let mut entries = Vec::new();
    let end = hot
        .read_lines(start, u64::MAX, &mut entries)
        .map_err(io_err)?;
    Ok((entries, start, end))
}

/// The newest entries of an inbox (hot file, then archive) from `sender` (hex; any
/// sender when `None`) that `keep` accepts, at most `limit`, oldest first, looking at no
/// more than `max_lines` lines from the end; and whether more may lie beyond: another
/// accepted entry was seen, or the scan stopped at `max_lines` before the start of the
/// history. `sender` is checked before a line is decoded in full, which makes asking
/// for one peer's messages cheap.
pub fn read_newest(
    path: &Path,
    limit: usize,
    max_lines: usize,
    sender: Option<&str>,
    keep: impl FnMut(&InboxEntry) -> bool,
) -> Result<(Vec<InboxEntry>, bool), InboxError> {
    read_newest_lines(
        path,
        limit,
        max_lines,
        |line| sender.is_none_or(|want| from_sender(line, want)),
        keep,
    )
}

/// Like [`read_newest`], with `line` looking at each line's bytes before it is decoded
/// (a line it refuses is not): a search that rules most lines out by a word they lack
/// decodes only the few that have it.
pub fn read_newest_lines(
    path: &Path,
    limit: usize,
    max_lines: usize,
    mut line_ok: impl FnMut(&[u8]) -> bool,
    mut keep: impl FnMut(&InboxEntry) -> bool,
) -> Result<(Vec<InboxEntry>, bool), InboxError> {
    let io_err = |p: &Path| {
        let p = p.to_owned();
        move |source| InboxError::Io { path: p, source }
    };
    let mut found = Vec::new();
    let mut seen = 0usize;
    let mut more = false;
    let mut visit = |line: &[u8]| {
        if seen >= max_lines {
            more = true;
            return false;
        }
        seen += 1;
        if !line_ok(line) {
            return true;
        }
        if let Ok(e) = serde_json::from_slice::<InboxEntry>(line)
            && keep(&e)
        {
            if found.len() == limit {
                more = true;
                return false;
            }
            found.push(e);
        }
        true
    };
    let Some(mut hot) = Segment::open(path).map_err(io_err(path))? else {
        return Ok((Vec::new(), false));
    };
    let (lo, hi) = (hot.header_len, hot.len);
    if scan_back(&mut hot.file, lo, hi, &mut visit).map_err(io_err(path))? {
        let archive = archive_path(path);
        if let Some(mut old) = Segment::open(&archive).map_err(io_err(&archive))? {
            let hi = old.phys(hot.base.min(old.end())).max(old.header_len);
            let lo = old.header_len;
            scan_back(&mut old.file, lo, hi, &mut visit).map_err(io_err(&archive))?;
        }
    }
    found.reverse();
    Ok((found, more))
}

/// Whether an inbox line's sender is `want`. The writer puts `msg_id` (32 hex digits)
/// then `sender` first, so the sender is read at its fixed place without decoding the
/// line; a line laid out otherwise is decoded.
fn from_sender(line: &[u8], want: &str) -> bool {
    const ID_AT: usize = br#"{"msg_id":""#.len();
    const SENDER_AT: usize = ID_AT + 32 + br#"","sender":""#.len();
    let fixed = line.starts_with(br#"{"msg_id":""#)
        && line.get(ID_AT + 32..SENDER_AT) == Some(br#"","sender":""#.as_slice())
        && line.get(SENDER_AT + want.len()) == Some(&b'"');
    if fixed {
        return line.get(SENDER_AT..SENDER_AT + want.len()) == Some(want.as_bytes());
    }
    #[derive(Deserialize)]
    struct Peek {
        sender: String,
    }
    serde_json::from_slice::<Peek>(line).is_ok_and(|p| p.sender == want)
}

/// Hands `visit` the complete lines of `file` between positions `lo` and `hi`, newest
/// first (a torn line at `hi` is left out); returns false once `visit` asked to stop.
pub(super) fn scan_back(
    file: &mut File,
    lo: u64,
    hi: u64,
    visit: &mut impl FnMut(&[u8]) -> bool,
) -> io::Result<bool> {
    let mut pos = hi;
    // Bytes from `pos` on not handed out yet; once `tail_checked`, they end in '\n'.
    let mut carry: Vec<u8> = Vec::new();
    let mut tail_checked = false;
    while pos > lo {
        let n = BACK_CHUNK.min(pos - lo);
        pos -= n;
        let mut chunk = vec![0; usize::try_from(n).unwrap_or(0)];
        let got = read_at_most(file, pos, &mut chunk)?;
        if got < chunk.len() {
            // The file shrank since it was opened: its padding was cut off, or a
            // failed append. Only the end may be missing.
            if tail_checked {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "inbox shrank while read",
                ));
            }
            chunk.truncate(got);
        }
        chunk.extend_from_slice(&carry);
        carry = chunk;
        if !tail_checked {
            match carry.iter().rposition(|b| *b == b'\n') {
                Some(i) => {
                    carry.truncate(i + 1);
                    tail_checked = true;
                }
                None => {
                    // Padding, or a line still being written: never handed out.
                    carry.clear();
                    continue;
                }
            }
        }
        // The bytes before the first '\n' may continue a line of the previous chunk,
        // unless this chunk starts the range.
        let start = if pos == lo {
            0
        } else {
            match carry.iter().position(|b| *b == b'\n') {
                Some(i) => i + 1,
                None => continue,
            }
        };
        if !visit_lines_back(&carry[start..], visit) {
            return Ok(false);
        }
        carry.truncate(start);
    }
    Ok(true)
}

/// Hands `visit` the lines of `block` (whole lines, the last ending in '\n'), last
/// first; false once `visit` asked to stop.
fn visit_lines_back(block: &[u8], visit: &mut impl FnMut(&[u8]) -> bool) -> bool {
    let Some(body) = block.strip_suffix(b"\n") else {
        return true;
    };
    // As text, the split uses the standard library's (optimised) reverse byte search;
    // inbox lines are JSON, hence UTF-8 — a block that is not is split byte by byte.
    match std::str::from_utf8(body) {
        Ok(text) => text.rsplit('\n').all(|line| visit(line.as_bytes())),
        Err(_) => body.rsplit(|b| *b == b'\n').all(visit),
    }
}

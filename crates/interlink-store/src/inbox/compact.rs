//! Compaction: moving the consumed and the expired lines at the head of the hot file
//! into the archive, under the reader rule of [`super::segment`].

use std::{
    fs::OpenOptions,
    io::{self, BufRead as _, BufReader, Read as _, Seek as _, SeekFrom, Write as _},
    path::Path,
};

use serde::Deserialize;
use tracing::warn;

use super::{
    HOT_RETENTION_MS, INDEX_FILE, Inbox, InboxError, MAX_ARCHIVE_BYTES, open_rw,
    segment::{Segment, archive_path, header_line},
};

impl Inbox {
    /// Moves the consumed and the expired lines at the head of the hot file to the
    /// archive, if they amount to [`super::COMPACT_MIN_BYTES`] (or the lowered threshold);
    /// returns whether it did.
    /// Runs when the inbox opens and every [`super::COMPACT_CHECK_EVERY`] appends.
    ///
    /// Order, so a crash at any step leaves a readable inbox: (1) append the lines to
    /// the archive and sync it; (2) save the index (atomic replace); (3) write the
    /// rest of the hot file under a header with the new base to a temporary file, sync
    /// it and rename it over `inbox.jsonl`. A crash before (3) leaves archive lines
    /// past the hot base, which readers ignore and [`Inbox::open`] cuts off.
    pub fn compact(&mut self, now: u64) -> Result<bool, InboxError> {
        if self.dirty {
            return Ok(false);
        }
        let io_err = |path: &Path| {
            let path = path.to_owned();
            move |source| InboxError::Io { path, source }
        };
        let cut = self.compaction_cut(now).map_err(io_err(&self.path))?;
        if cut - self.base < self.compact_min_bytes {
            return Ok(false);
        }
        let archive = archive_path(&self.path);
        let moved = self.phys(cut) - self.header_len;
        self.append_to_archive(&archive, moved)
            .map_err(io_err(&archive))?;
        self.index.expire(now);
        self.index.fold();
        let index_path = self.dir.join(INDEX_FILE);
        let index = &self.index;
        crate::atomic::replace_with(&index_path, |f| index.write_to(f))
            .map_err(io_err(&index_path))?;
        // The hot file, from `cut` on, under its new header.
        let from = self.phys(cut);
        let rest = self.len - from;
        let hot = &self.file;
        crate::atomic::replace_with(&self.path, |f| {
            f.write_all(&header_line(cut))?;
            let mut src = hot;
            src.seek(SeekFrom::Start(from))?;
            let copied = io::copy(&mut src.take(rest), f)?;
            if copied != rest {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "inbox shrank while compacting",
                ));
            }
            Ok(())
        })
        .map_err(io_err(&self.path))?;
        let file = open_rw(&self.path).map_err(io_err(&self.path))?;
        let seg = Segment::from_file(file.try_clone().map_err(io_err(&self.path))?)
            .map_err(io_err(&self.path))?;
        (self.file, self.base, self.header_len, self.len) =
            (file, seg.base, seg.header_len, seg.len);
        // The new file has no padding yet: the next `pad` gives it some.
        self.allocated = seg.len;
        if let Err(e) = trim_archive(&archive, MAX_ARCHIVE_BYTES) {
            warn!("trimming the inbox archive: {e}");
        }
        Ok(true)
    }

    /// File position of logical offset `logical` in the hot file.
    fn phys(&self, logical: u64) -> u64 {
        logical - self.base + self.header_len
    }

    /// The logical offset up to which the hot file's lines may move out: past every
    /// line before the consumed cursor, then past lines older than the retention.
    fn compaction_cut(&self, now: u64) -> io::Result<u64> {
        let end = self.base + (self.len - self.header_len);
        // The agent side's consumed cursor (0 when unreadable: nothing moves).
        let consumed = crate::read_state::consumed_offset(&self.dir).clamp(self.base, end);
        let expired_before = now.saturating_sub(HOT_RETENTION_MS);
        let mut src = &self.file;
        src.seek(SeekFrom::Start(self.header_len))?;
        let mut reader = BufReader::new(src.take(self.len - self.header_len));
        let mut pos = self.base;
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = reader.read_until(b'\n', &mut line)? as u64;
            if n == 0 || line.last() != Some(&b'\n') {
                break;
            }
            if pos + n > consumed {
                #[derive(Deserialize)]
                struct At {
                    #[serde(default)]
                    received_at: u64,
                }
                let old = serde_json::from_slice::<At>(&line)
                    .is_ok_and(|a| a.received_at < expired_before);
                if !old {
                    break;
                }
            }
            pos += n;
        }
        Ok(pos)
    }

    /// Appends the first `moved` bytes of the hot file's lines to the archive and
    /// syncs it; the archive ends at this hot file's base first (anything past it is
    /// a crashed compaction's, and is also in the hot file).
    fn append_to_archive(&self, archive: &Path, moved: u64) -> io::Result<()> {
        let mut out = open_rw(archive)?;
        let seg = Segment::from_file(out.try_clone()?)?;
        if seg.len == 0 || seg.base > self.base || seg.end() < self.base {
            // New, or not continuous with the hot file (lost): start it over here.
            out.set_len(0)?;
            out.seek(SeekFrom::Start(0))?;
            out.write_all(&header_line(self.base))?;
        } else {
            out.set_len(seg.phys(self.base))?;
            out.seek(SeekFrom::End(0))?;
        }
        let start = out.stream_position()?;
        let result = (|| {
            let mut src = &self.file;
            src.seek(SeekFrom::Start(self.header_len))?;
            let copied = io::copy(&mut src.take(moved), &mut out)?;
            if copied != moved {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "inbox shrank while compacting",
                ));
            }
            out.sync_data()
        })();
        if result.is_err() {
            // No half-copied lines in the archive: they would precede the hot base.
            let _ = out.set_len(start).and_then(|()| out.sync_all());
        }
        result
    }
}

/// Cuts archive lines past the hot base `base`: a compaction that crashed after
/// copying them and before replacing the hot file, which still holds them.
pub(super) fn repair_archive(hot: &Path, base: u64) -> io::Result<()> {
    let path = archive_path(hot);
    let Some(seg) = Segment::open(&path)? else {
        return Ok(());
    };
    if seg.end() > base && seg.base <= base {
        let f = OpenOptions::new().write(true).open(&path)?;
        f.set_len(seg.phys(base))?;
        f.sync_all()?;
    }
    Ok(())
}

/// Drops the older half of an archive longer than `max` bytes (its front, at a line
/// boundary, under a new header).
pub(super) fn trim_archive(path: &Path, max: u64) -> io::Result<()> {
    let Some(mut seg) = Segment::open(path)? else {
        return Ok(());
    };
    if seg.len <= max {
        return Ok(());
    }
    let mut from = seg.len - max / 2;
    seg.file.seek(SeekFrom::Start(from))?;
    let mut reader = BufReader::new(&seg.file);
    let mut skipped = Vec::new();
    from += reader.read_until(b'\n', &mut skipped)? as u64;
    let new_base = seg.base + (from - seg.header_len);
    let rest = seg.len - from;
    let src = &seg.file;
    crate::atomic::replace_with(path, |f| {
        f.write_all(&header_line(new_base))?;
        let mut src = src;
        src.seek(SeekFrom::Start(from))?;
        io::copy(&mut src.take(rest), f)?;
        Ok(())
    })
}

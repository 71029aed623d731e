//! Where the first CBOR data item of a byte stream ends.
//!
//! A request-response message is one raw CBOR item, and its writer then closes its
//! half of the stream (PROTOCOL.md, "Request-response framing"). Reading to the end of
//! the stream costs the reader a wait for that close, which often travels in a later
//! packet than the item's last byte; knowing where the item ends lets it decode as soon
//! as the item is complete. This walks the item's heads only — it skips over string
//! contents and allocates nothing but its nesting stack — so scanning a growing buffer
//! again after each read costs little beside the decode.

/// Nesting deeper than this is refused: no message of the protocol comes near it, and
/// the walk's stack is bounded by it.
pub const MAX_ITEM_DEPTH: usize = 32;

/// Why a buffer cannot start with a well-formed CBOR item.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ItemError {
    /// The item at this offset is not well-formed.
    #[error("malformed CBOR at byte {0}")]
    Malformed(usize),
    /// Containers nested past [`MAX_ITEM_DEPTH`].
    #[error("CBOR nested deeper than {MAX_ITEM_DEPTH}")]
    TooDeep,
}

/// Items still owed to an open container.
#[derive(Debug, Clone, Copy)]
enum Owed {
    /// A definite array or map (a map owes two items per entry).
    Items(u64),
    /// An indefinite array or map, closed by a break.
    UntilBreak,
    /// An indefinite byte or text string: definite chunks of that major type, then a
    /// break.
    Chunks(u8),
}

/// The length of the first CBOR item of `buf`: `Ok(Some(n))` once `buf[..n]` holds
/// the whole item, `Ok(None)` while it is a proper prefix of one. Bytes after the item
/// are not looked at. Checks well-formedness only (RFC 8949 §3: heads, lengths,
/// breaks, chunk types), not what a decoder would accept (UTF-8, shapes).
pub fn item_len(buf: &[u8]) -> Result<Option<usize>, ItemError> {
    let mut pos = 0usize;
    let mut open: Vec<Owed> = Vec::new();
    loop {
        let Some(&initial) = buf.get(pos) else {
            return Ok(None);
        };
        let at = pos;
        pos += 1;
        let major = initial >> 5;
        let info = initial & 0x1f;
        if initial == 0xff {
            match open.pop() {
                Some(Owed::UntilBreak | Owed::Chunks(_)) => {}
                _ => return Err(ItemError::Malformed(at)),
            }
        } else {
            if let Some(Owed::Chunks(of)) = open.last()
                && (major != *of || info == 31)
            {
                return Err(ItemError::Malformed(at));
            }
            let argument = match info {
                0..=23 => Some(u64::from(info)),
                24..=27 => {
                    let width = 1usize << (info - 24);
                    let Some(bytes) = buf.get(pos..pos + width) else {
                        return Ok(None);
                    };
                    pos += width;
                    Some(bytes.iter().fold(0u64, |n, &b| (n << 8) | u64::from(b)))
                }
                31 => None,
                _ => return Err(ItemError::Malformed(at)),
            };
            let opened = match (major, argument) {
                (0 | 1, Some(_)) => None,
                (2 | 3, Some(len)) => {
                    let end = usize::try_from(len)
                        .ok()
                        .and_then(|len| pos.checked_add(len))
                        .ok_or(ItemError::Malformed(at))?;
                    if end > buf.len() {
                        return Ok(None);
                    }
                    pos = end;
                    None
                }
                (2 | 3, None) => Some(Owed::Chunks(major)),
                (4, Some(0)) | (5, Some(0)) => None,
                (4, Some(n)) => Some(Owed::Items(n)),
                (5, Some(n)) => Some(Owed::Items(
                    n.checked_mul(2).ok_or(ItemError::Malformed(at))?,
                )),
                (4 | 5, None) => Some(Owed::UntilBreak),
                // A tag: its content is the next item, which completes it.
                (6, Some(_)) => continue,
                // Simple values and floats (a one-byte simple value below 32 is not
                // well-formed).
                (7, Some(n)) if info == 24 && n < 32 => return Err(ItemError::Malformed(at)),
                (7, Some(_)) => None,
                _ => return Err(ItemError::Malformed(at)),
            };
            if let Some(owed) = opened {
                if open.len() == MAX_ITEM_DEPTH {
                    return Err(ItemError::TooDeep);
                }
                open.push(owed);
                continue;
            }
        }
        // An item (or a container just closed) is complete: it pays what its
        // container owes, which may complete that container in turn.
        loop {
            match open.last_mut() {
                None => return Ok(Some(pos)),
                Some(Owed::Items(n)) => {
                    *n -= 1;
                    if *n > 0 {
                        break;
                    }
                    open.pop();
                }
                Some(Owed::UntilBreak | Owed::Chunks(_)) => break,
            }
        }
    }
}

#[cfg(test)]
#[path = "item_tests.rs"]
mod tests;

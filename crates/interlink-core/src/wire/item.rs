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
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn encode(value: &cbor4ii::core::Value) -> Vec<u8> {
        cbor4ii::serde::to_vec(Vec::new(), value).unwrap()
    }

    fn value() -> impl Strategy<Value = cbor4ii::core::Value> {
        use cbor4ii::core::Value;
        let leaf = prop_oneof![
            any::<i64>().prop_map(|n| Value::Integer(n.into())),
            proptest::collection::vec(any::<u8>(), 0..300).prop_map(Value::Bytes),
            ".{0,40}".prop_map(Value::Text),
            any::<bool>().prop_map(Value::Bool),
            Just(Value::Null),
            any::<f64>().prop_map(Value::Float),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                proptest::collection::vec((inner.clone(), inner), 0..8).prop_map(Value::Map),
            ]
        })
    }

    proptest! {
        #[test]
        fn an_encoded_value_ends_where_its_encoding_does(v in value(), tail in proptest::collection::vec(any::<u8>(), 0..8)) {
            let bytes = encode(&v);
            for cut in 0..bytes.len() {
                prop_assert_eq!(item_len(&bytes[..cut]), Ok(None));
            }
            let mut stream = bytes.clone();
            stream.extend_from_slice(&tail);
            prop_assert_eq!(item_len(&stream), Ok(Some(bytes.len())));
        }

        #[test]
        fn any_bytes_give_an_answer_and_a_complete_item_decodes_alike(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(Some(n)) = item_len(&bytes) {
                prop_assert!(n <= bytes.len());
            }
            // What the decoder takes as a whole item (it ignores what follows one), the
            // walk finds whole, and the decoder takes that much alone.
            if cbor4ii::serde::from_slice::<cbor4ii::core::Value>(&bytes).is_ok() {
                let n = item_len(&bytes).unwrap().unwrap();
                prop_assert!(cbor4ii::serde::from_slice::<cbor4ii::core::Value>(&bytes[..n]).is_ok());
            }
        }
    }

    #[test]
    fn indefinite_containers_and_strings_end_at_their_break() {
        // [_ 1, [2]] then trailing bytes
        assert_eq!(item_len(&[0x9f, 0x01, 0x81, 0x02, 0xff, 0x00]), Ok(Some(5)));
        assert_eq!(item_len(&[0x9f, 0x01, 0x81, 0x02]), Ok(None));
        // (_ h'01', h'0203')
        assert_eq!(
            item_len(&[0x5f, 0x41, 0x01, 0x42, 0x02, 0x03, 0xff]),
            Ok(Some(7))
        );
        // {_ "a": 1}
        assert_eq!(item_len(&[0xbf, 0x61, b'a', 0x01, 0xff]), Ok(Some(5)));
        // A tagged item: 1(0)
        assert_eq!(item_len(&[0xc1, 0x00]), Ok(Some(2)));
    }

    #[test]
    fn malformed_heads_are_refused() {
        // A lone break, a reserved additional info, an indefinite integer.
        assert_eq!(item_len(&[0xff]), Err(ItemError::Malformed(0)));
        assert_eq!(item_len(&[0x1c]), Err(ItemError::Malformed(0)));
        assert_eq!(item_len(&[0x1f]), Err(ItemError::Malformed(0)));
        // A text chunk inside an indefinite byte string, a nested indefinite chunk.
        assert_eq!(item_len(&[0x5f, 0x61, b'a']), Err(ItemError::Malformed(1)));
        assert_eq!(item_len(&[0x5f, 0x5f]), Err(ItemError::Malformed(1)));
        // A two-byte simple value below 32.
        assert_eq!(item_len(&[0xf8, 0x10]), Err(ItemError::Malformed(0)));
    }

    #[test]
    fn a_huge_declared_length_is_a_prefix_not_a_panic() {
        // A byte string claiming 2^64-1 bytes, and an array claiming as many items.
        let string = [0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        assert!(matches!(item_len(&string), Ok(None) | Err(_)));
        let array = [0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00];
        assert_eq!(item_len(&array), Ok(None));
        let map = [0xbb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        assert_eq!(item_len(&map), Err(ItemError::Malformed(0)));
    }

    #[test]
    fn nesting_past_the_bound_is_refused() {
        let deep = vec![0x81; MAX_ITEM_DEPTH + 1];
        assert_eq!(item_len(&deep), Err(ItemError::TooDeep));
        let mut ok = vec![0x81; MAX_ITEM_DEPTH];
        ok.push(0x00);
        assert_eq!(item_len(&ok), Ok(Some(MAX_ITEM_DEPTH + 1)));
    }
}

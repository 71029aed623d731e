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

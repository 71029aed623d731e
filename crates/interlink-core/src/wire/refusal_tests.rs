use super::*;

#[test]
fn codes_encode_as_snake_case_strings_and_details_are_bounded() {
    let r = Refusal::new(
        RefusalCode::StoreFailed,
        "é".repeat(MAX_REFUSAL_DETAIL_BYTES),
    );
    assert!(r.detail.len() <= MAX_REFUSAL_DETAIL_BYTES);
    assert!(r.is_retryable());
    let bytes = super::super::encode(&r);
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains("store_failed"), "{text}");
    let back: Refusal = cbor4ii::serde::from_slice(&bytes).unwrap();
    assert_eq!(back, r);
    assert!(!RefusalCode::NotPaired.is_retryable());
}

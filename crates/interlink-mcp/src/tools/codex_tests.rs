#[test]
fn uuids() {
    assert!(super::is_uuid("0199a6c2-3f4e-7a10-9b2c-1234567890ab"));
    assert!(!super::is_uuid("0199a6c2-3f4e-7a10-9b2c"));
    assert!(!super::is_uuid("0199a6c2x3f4e-7a10-9b2c-1234567890ab"));
    assert!(!super::is_uuid("zz99a6c2-3f4e-7a10-9b2c-1234567890ab"));
}

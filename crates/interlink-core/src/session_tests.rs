use super::*;

#[test]
fn invalid_values_are_errors() {
    assert_eq!(SessionId::new(""), Err(SessionIdError::Empty));
    assert_eq!(SessionId::new("a b"), Err(SessionIdError::BadChar(' ')));
    assert_eq!(
        SessionId::new("x".repeat(129)),
        Err(SessionIdError::TooLong(129))
    );
}

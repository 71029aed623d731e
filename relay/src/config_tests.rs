use super::*;

#[test]
fn defaults_are_valid_and_checked() {
    let c = Config::new("k", "db");
    assert_eq!(c.listen.len(), 2);
    c.validate().unwrap();
    assert!(matches!(
        c.clone().with_listen(vec![]).validate(),
        Err(ConfigError::NoListenAddr)
    ));
    assert!(matches!(
        c.with_sweep_interval(Duration::from_millis(5)).validate(),
        Err(ConfigError::SweepTooOften(_))
    ));
}

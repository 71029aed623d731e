use super::*;

#[tokio::test]
async fn fires_at_its_deadline_and_again_after_a_reset() {
    let start = Instant::now();
    let mut d = Delay::new(Duration::from_millis(30));
    (&mut d).await;
    assert!(start.elapsed() >= Duration::from_millis(30));
    d.reset(Duration::from_millis(20));
    let again = Instant::now();
    (&mut d).await;
    assert!(again.elapsed() >= Duration::from_millis(20));
}

#[tokio::test]
async fn a_reset_before_the_first_poll_moves_the_deadline() {
    let start = Instant::now();
    let mut d = Delay::new(Duration::from_secs(3600));
    d.reset(Duration::from_millis(10));
    tokio::time::timeout(Duration::from_secs(60), d)
        .await
        .unwrap_or_else(|_| panic!("the reset deadline was not taken"));
    assert!(start.elapsed() >= Duration::from_millis(10));
}

#[test]
fn fires_outside_a_runtime_on_a_thread() {
    let start = Instant::now();
    futures::executor::block_on(Delay::new(Duration::from_millis(30)));
    assert!(start.elapsed() >= Duration::from_millis(30));
    // Reset after firing: fires again.
    let mut d = Delay::new(Duration::from_millis(1));
    futures::executor::block_on(&mut d);
    d.reset(Duration::from_millis(20));
    let again = Instant::now();
    futures::executor::block_on(&mut d);
    assert!(again.elapsed() >= Duration::from_millis(20));
}

#[test]
fn fires_in_a_runtime_without_timers() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    let start = Instant::now();
    rt.block_on(Delay::new(Duration::from_millis(20)));
    assert!(start.elapsed() >= Duration::from_millis(20));
}

#[tokio::test]
async fn a_dropped_delay_does_not_fire_and_a_long_one_waits() {
    let d = Delay::new(Duration::from_secs(3600));
    let r = tokio::time::timeout(Duration::from_millis(20), d).await;
    assert!(r.is_err(), "an hour's delay fired at once");
}

use super::*;

#[test]
fn samples_this_process() {
    let s = sample(std::process::id()).unwrap();
    assert!(s.rss_kib > 0 && s.hwm_kib >= s.rss_kib && s.threads >= 1);
    assert!(s.cpu_ns.is_none_or(|ns| ns > 0));
}

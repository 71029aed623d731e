//! Times as people read them: a message's time in tool results and in `inbox`.

/// `YYYY-MM-DD HH:MM:SSZ` for ms since the Unix epoch.
pub fn utc(ms: u64) -> String {
    let (year, month, day, h, m, s) = interlink_core::dates::utc_fields(ms / 1000);
    format!("{year:04}-{month:02}-{day:02} {h:02}:{m:02}:{s:02}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00Z");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00Z");
        assert_eq!(utc(1_796_015_574_175), "2026-11-30 05:12:54Z");
    }
}

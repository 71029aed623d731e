//! Times as people read them: a message's time in tool results and in `inbox`.

/// `YYYY-MM-DD HH:MM:SSZ` for ms since the Unix epoch.
pub fn utc(ms: u64) -> String {
    let (year, month, day, h, m, s) = interlink_core::dates::utc_fields(ms / 1000);
    format!("{year:04}-{month:02}-{day:02} {h:02}:{m:02}:{s:02}Z")
}

#[cfg(test)]
#[path = "dates_tests.rs"]
mod tests;

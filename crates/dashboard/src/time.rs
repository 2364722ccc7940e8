//! The one text form of a time in the front ends: RFC 3339 in UTC, to the second, such as
//! `2026-11-29T18:53:00Z`. The `deadletter` command's tables and messages, the dashboard's
//! log and its page (whose script writes the same form) all use it, and the command's
//! `--since`/`--until` accept it. JSON documents (the API, `--json`, export files) carry
//! times as the store does: integer milliseconds since the Unix epoch, in fields ending in
//! `_ms`.

use jiff::Timestamp;

/// `ms` (milliseconds since the Unix epoch) as `YYYY-MM-DDTHH:MM:SSZ`, the fraction of a
/// second dropped. A time from the last day of the year 9999 on (a retention of centuries,
/// say) cannot be written so and is written as its number of milliseconds.
///
/// ```
/// use deadletter_dashboard::time::format_utc;
///
/// assert_eq!(format_utc(1_700_000_000_999), "2023-11-14T22:13:20Z");
/// ```
pub fn format_utc(ms: u64) -> String {
    match i64::try_from(ms)
        .ok()
        .and_then(|ms| Timestamp::from_millisecond(ms).ok())
    {
        Some(t) => format!("{t:.0}"),
        None => format!("{ms} ms after the epoch"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_to_the_second() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(1_700_000_000_999), "2023-11-14T22:13:20Z");
        assert_eq!(format_utc(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(format_utc(253_402_128_000_000), "9999-12-30T00:00:00Z");
        assert_eq!(
            format_utc(u64::MAX),
            "18446744073709551615 ms after the epoch"
        );
    }
}

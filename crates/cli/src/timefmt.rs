//! Times and durations: parsing what people type (`30d`, `1h30m`, `2024-05-01T10:00:00Z`,
//! with jiff) and printing times, ages and sizes. Times are printed in the front ends' one
//! form, RFC 3339 in UTC (`deadletter_dashboard::time`); input offsets such as `+02:00`
//! are honoured.

use std::time::Duration;

use jiff::civil::DateTime;
use jiff::tz::Offset;
use jiff::{RoundMode, SignedDuration, Span, SpanRelativeTo, SpanRound, Timestamp, Unit};

use deadletter_dashboard::time::format_utc;

/// Parses a duration: `30d`, `12h`, `90m`, `45s`, `500ms`, `2w`, sums such as `1h30m` or
/// `1h 30m`, decimals such as `1.5h` (jiff's friendly format; ISO 8601 `PT2H` too). A day
/// is 24 hours; months and years, which have no fixed length, are refused.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let span: Span = s.trim().parse().map_err(|_| {
        format!(
            "{s:?} is not a duration (expected a number and a unit: 30d, 12h, 90m, 45s, \
             500ms, 2w, or a sum such as 1h30m)"
        )
    })?;
    if span.is_negative() {
        return Err(format!("{s:?}: a duration cannot be negative"));
    }
    let duration = span
        .to_duration(SpanRelativeTo::days_are_24_hours())
        .map_err(|_| {
            format!("{s:?}: months and years have no fixed length; use days (d) or weeks (w)")
        })?;
    Duration::try_from(duration).map_err(|_| format!("{s:?}: too long"))
}

/// clap value parser for times: see [`parse_time`].
pub fn parse_time_arg(s: &str) -> Result<u64, String> {
    let now = u64::try_from(Timestamp::now().as_millisecond()).unwrap_or(0);
    parse_time(s, now)
}

/// Parses a point in time into ms since the epoch: `now`; a duration ago (`2h`, `30d`);
/// ms since the epoch (all digits); `YYYY-MM-DD`; or `YYYY-MM-DD[T ]HH:MM[:SS[.fff]]`
/// followed by `Z`, an offset such as `+02:00`, or nothing (UTC).
pub fn parse_time(s: &str, now: u64) -> Result<u64, String> {
    let t = s.trim();
    let not_a_time = || {
        format!(
            "{s:?} is not a time (expected 2024-05-01, 2024-05-01T10:00:00Z, ms since the \
             epoch, or a duration ago such as 2h)"
        )
    };
    if t == "now" {
        return Ok(now);
    }
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t
            .parse()
            .map_err(|_| format!("{s:?}: number too large for a time"));
    }
    if t.len() >= 10 && t.as_bytes()[4] == b'-' {
        return parse_datetime(t).ok_or_else(not_a_time);
    }
    let ago = parse_duration(t).map_err(|_| not_a_time())?;
    Ok(now.saturating_sub(u64::try_from(ago.as_millis()).unwrap_or(u64::MAX)))
}

/// A date and time with `Z` or an offset, or without one (then UTC), or a date alone
/// (midnight UTC).
fn parse_datetime(t: &str) -> Option<u64> {
    let at = match t.parse::<Timestamp>() {
        Ok(at) => at,
        Err(_) => Offset::UTC.to_timestamp(t.parse::<DateTime>().ok()?).ok()?,
    };
    u64::try_from(at.as_millisecond()).ok()
}

/// [`format_utc`], or `-` for none.
pub fn fmt_opt_time(ms: Option<u64>) -> String {
    ms.map(format_utc).unwrap_or_else(|| "-".into())
}

/// An age to its two largest units, such as `45s`, `5m 2s`, `3h 10m`, `4d 2h`; `-` for
/// none.
pub fn fmt_age(ms: Option<u64>) -> String {
    let Some(ms) = ms else {
        return "-".into();
    };
    let (largest, smallest) = match ms / 1000 {
        0..=59 => (Unit::Second, Unit::Second),
        60..=3599 => (Unit::Minute, Unit::Second),
        3600..=172_799 => (Unit::Hour, Unit::Minute),
        _ => (Unit::Day, Unit::Hour),
    };
    let rounding = SpanRound::new()
        .largest(largest)
        .smallest(smallest)
        .mode(RoundMode::Trunc)
        .days_are_24_hours();
    let age = SignedDuration::from_millis(i64::try_from(ms).unwrap_or(i64::MAX));
    match Span::try_from(age).and_then(|span| span.round(rounding)) {
        Ok(span) => format!("{span:#}"),
        // Beyond what a span holds (hundreds of thousands of years).
        Err(_) => format!("{}d", ms / 86_400_000),
    }
}

/// A size such as `512 B`, `3.1 KiB`, `64.0 MiB`. Hand-written: one division loop, which a
/// crate would not make shorter.
pub fn fmt_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(
            parse_duration("30d").unwrap(),
            Duration::from_secs(30 * 86_400)
        );
        assert_eq!(
            parse_duration("12h").unwrap(),
            Duration::from_secs(12 * 3600)
        );
        assert_eq!(parse_duration("90m").unwrap(), Duration::from_secs(90 * 60));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("1.5h").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(
            parse_duration("2w").unwrap(),
            Duration::from_secs(14 * 86_400)
        );
        for bad in ["", "30", "d", "3x", "-1h", "1mo", "1y"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn times() {
        let now = 1_700_000_000_000;
        assert_eq!(parse_time("now", now).unwrap(), now);
        assert_eq!(parse_time("2h", now).unwrap(), now - 7_200_000);
        assert_eq!(parse_time("1700000000000", now).unwrap(), now);
        assert_eq!(
            parse_time("2023-11-14T22:13:20Z", 0).unwrap(),
            1_700_000_000_000
        );
        assert_eq!(
            parse_time("2023-11-14 23:13:20.5+01:00", 0).unwrap(),
            1_700_000_000_500
        );
        assert_eq!(
            parse_time("2023-11-14T22:13", 0).unwrap(),
            1_699_999_980_000
        );
        assert_eq!(parse_time("1970-01-02", 0).unwrap(), 86_400_000);
        assert_eq!(parse_time("2000-02-29", 0).unwrap(), 951_782_400_000);
        // What the tool prints, it reads back.
        assert_eq!(parse_time(&format_utc(now), 0).unwrap(), now);
        for bad in [
            "2023-02-29",
            "2023-13-01",
            "2023-11-14T25:00",
            "yesterday",
            "2023-11-14X",
            "1969-12-31",
        ] {
            assert!(parse_time(bad, 0).is_err(), "{bad}");
        }
    }

    #[test]
    fn formatting() {
        assert_eq!(fmt_opt_time(None), "-");
        assert_eq!(fmt_age(Some(5_000)), "5s");
        assert_eq!(fmt_age(Some(302_000)), "5m 2s");
        assert_eq!(fmt_age(Some(3_600_000)), "1h");
        assert_eq!(fmt_age(Some(3 * 86_400_000 + 7_200_000)), "3d 2h");
        assert_eq!(fmt_age(None), "-");
        assert_eq!(fmt_bytes(512), "512 B");
        assert_eq!(fmt_bytes(3 * 1024 + 100), "3.1 KiB");
    }
}

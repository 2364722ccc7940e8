//! Times and durations: parsing what people type (`30d`, `1h30m`, `2024-05-01T10:00:00Z`)
//! and printing times (UTC), ages and sizes. No time-zone database: input offsets such as
//! `+02:00` are honoured, output is always UTC.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use deadletter::civil::{civil_from_days, days_from_civil};

/// Milliseconds since the epoch, now.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Parses `30d`, `12h`, `90m`, `45s`, `500ms`, `2w`, or sums of them such as `1h30m`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let text = s.trim();
    if text.is_empty() {
        return Err("empty duration".into());
    }
    let bytes = text.as_bytes();
    let mut total: u128 = 0;
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        if start == i {
            return Err(format!(
                "{s:?} is not a duration (expected a number then a unit: 30d, 12h, 90m, 45s, 500ms)"
            ));
        }
        let n: u128 = text[start..i]
            .parse()
            .map_err(|_| format!("{s:?}: number too large"))?;
        let unit_start = i;
        while i < bytes.len() && bytes[i].is_ascii_alphabetic() {
            i += 1;
        }
        let ms_per = match &text[unit_start..i] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "w" => 604_800_000,
            "" => return Err(format!("{s:?}: missing unit (ms, s, m, h, d or w)")),
            u => return Err(format!("{s:?}: unknown unit {u:?} (ms, s, m, h, d or w)")),
        };
        total = total
            .checked_add(n.saturating_mul(ms_per))
            .ok_or_else(|| format!("{s:?}: too long"))?;
    }
    let ms = u64::try_from(total).map_err(|_| format!("{s:?}: too long"))?;
    Ok(Duration::from_millis(ms))
}

/// clap value parser for durations.
pub fn parse_duration_arg(s: &str) -> Result<Duration, String> {
    parse_duration(s)
}

/// clap value parser for times: see [`parse_time`].
pub fn parse_time_arg(s: &str) -> Result<u64, String> {
    parse_time(s, now_ms())
}

/// Parses a point in time into ms since the epoch: `now`; a duration ago (`2h`, `30d`);
/// ms since the epoch (all digits); `YYYY-MM-DD`; or `YYYY-MM-DD[T ]HH:MM[:SS[.fff]]`
/// followed by `Z`, `+HH:MM`, `-HH:MM`, or nothing (UTC).
pub fn parse_time(s: &str, now: u64) -> Result<u64, String> {
    let t = s.trim();
    if t == "now" {
        return Ok(now);
    }
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t
            .parse()
            .map_err(|_| format!("{s:?}: number too large for a time"));
    }
    if t.len() >= 10 && t.as_bytes()[4] == b'-' {
        return parse_datetime(t).ok_or_else(|| {
            format!(
                "{s:?} is not a time (expected 2024-05-01, 2024-05-01T10:00:00Z, ms since \
                 the epoch, or a duration ago such as 2h)"
            )
        });
    }
    let ago = parse_duration(t).map_err(|_| {
        format!(
            "{s:?} is not a time (expected 2024-05-01, 2024-05-01T10:00:00Z, ms since the \
             epoch, or a duration ago such as 2h)"
        )
    })?;
    Ok(now.saturating_sub(ago.as_millis() as u64))
}

fn parse_datetime(t: &str) -> Option<u64> {
    let num = |s: &str| -> Option<i64> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    };
    let year = num(t.get(0..4)?)?;
    if t.get(4..5)? != "-" || t.get(7..8)? != "-" {
        return None;
    }
    let month = num(t.get(5..7)?)?;
    let day = num(t.get(8..10)?)?;
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    let mut secs = days_from_civil(year, month, day) * 86_400;
    let mut millis = 0i64;
    let mut rest = &t[10..];
    if !rest.is_empty() {
        let sep = rest.as_bytes()[0];
        if sep != b'T' && sep != b't' && sep != b' ' {
            return None;
        }
        rest = &rest[1..];
        let hour = num(rest.get(0..2)?)?;
        if rest.get(2..3)? != ":" {
            return None;
        }
        let minute = num(rest.get(3..5)?)?;
        rest = &rest[5..];
        let mut second = 0;
        if rest.starts_with(':') {
            second = num(rest.get(1..3)?)?;
            rest = &rest[3..];
            if let Some(frac) = rest.strip_prefix('.') {
                let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
                if digits == 0 {
                    return None;
                }
                let f = &frac[..digits];
                let padded = format!("{:0<3}", &f[..f.len().min(3)]);
                millis = num(&padded)?;
                rest = &frac[digits..];
            }
        }
        if hour > 23 || minute > 59 || second > 60 {
            return None;
        }
        secs += hour * 3600 + minute * 60 + second;
        match rest {
            "" | "Z" | "z" => {}
            _ => {
                let sign = match rest.as_bytes()[0] {
                    b'+' => 1,
                    b'-' => -1,
                    _ => return None,
                };
                let oh = num(rest.get(1..3)?)?;
                let om = match rest.get(3..)? {
                    "" => 0,
                    r => num(r.strip_prefix(':').unwrap_or(r))?,
                };
                if oh > 23 || om > 59 {
                    return None;
                }
                secs -= sign * (oh * 3600 + om * 60);
            }
        }
    }
    let ms = secs.checked_mul(1000)?.checked_add(millis)?;
    u64::try_from(ms).ok()
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if is_leap(y) => 29,
        _ => 28,
    }
}

/// `2024-05-01 10:00:00Z`.
pub fn fmt_time(ms: u64) -> String {
    let secs = (ms / 1000) as i64;
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// `fmt_time`, or `-` for none.
pub fn fmt_opt_time(ms: Option<u64>) -> String {
    ms.map(fmt_time).unwrap_or_else(|| "-".into())
}

/// An age such as `45s`, `5m 2s`, `3h 10m`, `4d 2h`; `-` for none.
pub fn fmt_age(ms: Option<u64>) -> String {
    let Some(ms) = ms else {
        return "-".into();
    };
    let s = ms / 1000;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {}s", s / 60, s % 60),
        3600..=172_799 => format!("{}h {}m", s / 3600, s / 60 % 60),
        _ => format!("{}d {}h", s / 86_400, s / 3600 % 24),
    }
}

/// A size such as `512 B`, `3.1 KiB`, `64.0 MiB`.
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
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        for bad in ["", "30", "d", "3x", "1.5h", "-1h"] {
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
        assert_eq!(parse_time("1970-01-02", 0).unwrap(), 86_400_000);
        assert_eq!(parse_time("2000-02-29", 0).unwrap(), 951_782_400_000);
        for bad in [
            "2023-02-29",
            "2023-13-01",
            "2023-11-14T25:00",
            "yesterday",
            "2023-11-14X",
        ] {
            assert!(parse_time(bad, 0).is_err(), "{bad}");
        }
    }

    #[test]
    fn formatting() {
        assert_eq!(fmt_time(1_700_000_000_000), "2023-11-14 22:13:20Z");
        assert_eq!(fmt_age(Some(5_000)), "5s");
        assert_eq!(fmt_age(Some(302_000)), "5m 2s");
        assert_eq!(fmt_age(Some(3 * 86_400_000 + 7_200_000)), "3d 2h");
        assert_eq!(fmt_age(None), "-");
        assert_eq!(fmt_bytes(512), "512 B");
        assert_eq!(fmt_bytes(3 * 1024 + 100), "3.1 KiB");
    }
}

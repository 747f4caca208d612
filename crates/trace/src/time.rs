//! Times as people write them: nanoseconds since the Unix epoch from and to
//! the command line and reports.
//!
//! Accepted input forms: seconds since the epoch with an optional fraction
//! (`1795317433.483032138`, as `tcpdump -tt` prints), and RFC 3339 date-times
//! (`2026-11-22T03:17:13.5Z`, `2026-11-22 03:17:13+09:00`).

/// Parses a time given on the command line into nanoseconds since the epoch.
pub fn parse_time(text: &str) -> Result<u64, String> {
    let t = text.trim();
    if t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return parse_epoch(t).ok_or_else(|| {
            format!("bad time '{text}' (expected SECONDS[.FRACTION] or an RFC 3339 date-time)")
        });
    }
    parse_rfc3339(t).ok_or_else(|| format!("bad time '{text}' (expected SECONDS[.FRACTION] or an RFC 3339 date-time like 2026-11-22T03:17:13Z)"))
}

fn parse_epoch(t: &str) -> Option<u64> {
    let (secs, frac) = t.split_once('.').unwrap_or((t, ""));
    if secs.is_empty() {
        return None;
    }
    let secs: u64 = secs.parse().ok()?;
    secs.checked_mul(1_000_000_000)?
        .checked_add(parse_fraction(frac)?)
}

/// Nanoseconds in a decimal fraction's digits (`"5"` is 500,000,000).
fn parse_fraction(frac: &str) -> Option<u64> {
    if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut ns = 0u64;
    for (i, b) in frac.bytes().enumerate() {
        ns += u64::from(b - b'0') * 10u64.pow(8 - i as u32);
    }
    Some(ns)
}

fn parse_rfc3339(t: &str) -> Option<u64> {
    let b = t.as_bytes();
    let num = |s: &[u8]| -> Option<i64> {
        if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(s).ok()?.parse().ok()
    };
    if b.len() < 19
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (year, month, day) = (num(&b[0..4])?, num(&b[5..7])?, num(&b[8..10])?);
    let (hour, min, sec) = (num(&b[11..13])?, num(&b[14..16])?, num(&b[17..19])?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || min > 59 || sec > 60 {
        return None;
    }
    let mut rest = &t[19..];
    let mut frac_ns = 0;
    if let Some(r) = rest.strip_prefix('.') {
        let end = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
        frac_ns = parse_fraction(&r[..end])?;
        rest = &r[end..];
    }
    let offset_secs = match rest {
        "" | "Z" | "z" => 0,
        _ => {
            let rb = rest.as_bytes();
            if rb.len() != 6 || rb[3] != b':' {
                return None;
            }
            let sign = match rb[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            sign * (num(&rb[1..3])? * 3600 + num(&rb[4..6])? * 60)
        }
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + min * 60 + sec - offset_secs;
    u64::try_from(secs)
        .ok()?
        .checked_mul(1_000_000_000)?
        .checked_add(frac_ns)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil` algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`].
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// `1795317433.483032138`: seconds and nanoseconds, as `tcpdump -tt --nano`.
pub fn format_epoch(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// `2026-11-22T03:17:13.483032138Z`.
pub fn format_rfc3339(ns: u64) -> String {
    let secs = (ns / 1_000_000_000) as i64;
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:09}Z",
        s / 3600,
        s / 60 % 60,
        s % 60,
        ns % 1_000_000_000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_forms() {
        assert_eq!(parse_time("0"), Ok(0));
        assert_eq!(parse_time("1.5"), Ok(1_500_000_000));
        assert_eq!(
            parse_time("1795317433.483032138"),
            Ok(1_795_317_433_483_032_138)
        );
        assert!(parse_time("1.1234567891").is_err());
        assert!(parse_time(".5").is_err());
    }

    #[test]
    fn rfc3339_forms() {
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(
            parse_time("2026-11-22T03:17:13.483032138Z"),
            Ok(1_795_317_433_483_032_138)
        );
        assert_eq!(
            parse_time("2026-11-22 12:17:13+09:00"),
            parse_time("2026-11-22T03:17:13Z")
        );
        assert_eq!(
            parse_time("2000-02-29T00:00:00Z"),
            Ok(951_782_400_000_000_000)
        );
        assert!(parse_time("2026-13-01T00:00:00Z").is_err());
        assert!(parse_time("2026-11-22T03:17").is_err());
        assert!(parse_time("1960-01-01T00:00:00Z").is_err());
        assert!(parse_time("yesterday").is_err());
    }

    #[test]
    fn formats_round_trip() {
        for ns in [
            0u64,
            951_782_400_000_000_000,
            1_795_317_433_483_032_138,
            4_102_444_799_999_999_999,
        ] {
            assert_eq!(parse_time(&format_rfc3339(ns)), Ok(ns));
            assert_eq!(parse_time(&format_epoch(ns)), Ok(ns));
        }
        assert_eq!(
            format_rfc3339(1_795_317_433_483_032_138),
            "2026-11-22T03:17:13.483032138Z"
        );
    }
}

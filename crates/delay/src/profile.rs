//! Delay profiles: the round-trip time each client address is given.
//!
//! A profile is a distribution of round-trip times: `none`, a constant
//! (`const:48ms`), a lognormal (`lognormal:median=48ms,sigma=1`), or the
//! cumulative distribution in a file (`cdf:FILE`). Following the paper
//! (MAWI WG 2001, chapter 3), N clients get N quantiles of
//! it: client `i` (from 0) the quantile at `(i + 1/2) / N`, the middle of
//! its N-th of the probability, so that no client gets an infinite tail
//! and the clients' mean tends to the distribution's mean.
//!
//! A CDF file has one point a line, `RTT_MS FRACTION` (the round-trip time
//! in milliseconds and the fraction of connections at or below it),
//! both non-decreasing, the last fraction 1; `#` starts a comment. Between
//! points the distribution is taken as linear (a straight CDF), below the
//! first point all the first fraction sits at the first time.

use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The longest round trip a profile may give (a minute).
pub const MAX_RTT: Duration = Duration::from_secs(60);

/// A profile that could not be read: where, and what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileError {
    /// `FILE:LINE:COLUMN` for a file, else the argument itself.
    pub place: String,
    pub message: String,
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.place, self.message)
    }
}

impl std::error::Error for ProfileError {}

fn arg_error(spec: &str, message: impl Into<String>) -> ProfileError {
    ProfileError {
        place: format!("delay profile {spec:?}"),
        message: message.into(),
    }
}

/// One point of a CDF: a round trip and the fraction at or below it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CdfPoint {
    pub rtt: Duration,
    pub fraction: f64,
}

/// A distribution of round-trip times.
#[derive(Debug, Clone, PartialEq)]
pub enum Profile {
    /// No delay.
    None,
    /// Every client the same round trip.
    Const(Duration),
    /// Lognormal: `median · exp(sigma · z)`, z standard normal.
    Lognormal { median: Duration, sigma: f64 },
    /// A measured distribution (see the module docs), from `source`.
    Cdf {
        source: PathBuf,
        points: Vec<CdfPoint>,
    },
}

/// Parses a duration with its unit: `48ms`, `1.5s`, `250us`, `0`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == 'e'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let scale = match unit {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "" => return Err(format!("{s:?}: a duration needs a unit (ns, us, ms, s)")),
        u => {
            return Err(format!(
                "{s:?}: unknown unit {u:?} (expected ns, us, ms or s)"
            ))
        }
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?}: not a number followed by a unit"))?;
    seconds_to_duration(v * scale).map_err(|e| format!("{s:?}: {e}"))
}

/// A non-negative finite number of seconds up to [`MAX_RTT`].
fn seconds_to_duration(secs: f64) -> Result<Duration, String> {
    if !secs.is_finite() {
        return Err("not a finite time".into());
    }
    if secs < 0.0 {
        return Err("a negative delay".into());
    }
    // Checked before converting: from_secs_f64 panics past u64::MAX
    // seconds (found by the delay_profile fuzz target: "1e210 1").
    match Duration::try_from_secs_f64(secs) {
        Ok(d) if d <= MAX_RTT => Ok(d),
        _ => Err(format!(
            "over the longest round trip, {}s",
            MAX_RTT.as_secs()
        )),
    }
}

impl Profile {
    /// Parses a profile argument; `cdf:FILE` reads the file.
    pub fn parse(spec: &str) -> Result<Profile, ProfileError> {
        let (kind, rest) = spec.split_once(':').unwrap_or((spec, ""));
        match kind {
            "none" if rest.is_empty() => Ok(Profile::None),
            "const" => parse_duration(rest)
                .map(Profile::Const)
                .map_err(|e| arg_error(spec, e)),
            "lognormal" => {
                let (mut median, mut sigma) = (None, None);
                for kv in rest.split(',') {
                    match kv.split_once('=') {
                        Some(("median", v)) => {
                            median = Some(parse_duration(v).map_err(|e| arg_error(spec, e))?)
                        }
                        Some(("sigma", v)) => {
                            let s: f64 = v.parse().map_err(|_| {
                                arg_error(spec, format!("sigma {v:?} is not a number"))
                            })?;
                            if !(s.is_finite() && (0.0..=5.0).contains(&s)) {
                                return Err(arg_error(spec, "sigma must be between 0 and 5"));
                            }
                            sigma = Some(s);
                        }
                        _ => {
                            return Err(arg_error(
                                spec,
                                format!("{kv:?}: expected median=DURATION or sigma=NUMBER"),
                            ))
                        }
                    }
                }
                match (median, sigma) {
                    (Some(median), Some(sigma)) => Ok(Profile::Lognormal { median, sigma }),
                    _ => Err(arg_error(
                        spec,
                        "lognormal needs median=DURATION,sigma=NUMBER",
                    )),
                }
            }
            "cdf" if !rest.is_empty() => Profile::read_cdf(Path::new(rest)),
            _ => Err(arg_error(
                spec,
                "expected none, const:DURATION, lognormal:median=DURATION,sigma=NUMBER or cdf:FILE",
            )),
        }
    }

    /// Reads a CDF file (see the module docs).
    pub fn read_cdf(path: &Path) -> Result<Profile, ProfileError> {
        let text = std::fs::read(path).map_err(|e| ProfileError {
            place: path.display().to_string(),
            message: e.to_string(),
        })?;
        let text = wire::text::utf8(&text).map_err(|e| ProfileError {
            place: format!("{}:{}:{}", path.display(), e.line, e.column),
            message: format!("not UTF-8 text (byte {:#04x})", e.byte),
        })?;
        let points = parse_cdf(text).map_err(|(line, col, message)| ProfileError {
            place: format!("{}:{line}:{col}", path.display()),
            message,
        })?;
        Ok(Profile::Cdf {
            source: path.to_path_buf(),
            points,
        })
    }

    /// The round trip at cumulative probability `p` (0 < p < 1).
    pub fn quantile(&self, p: f64) -> Duration {
        let p = p.clamp(f64::MIN_POSITIVE, 1.0 - f64::EPSILON);
        match self {
            Profile::None => Duration::ZERO,
            Profile::Const(d) => *d,
            Profile::Lognormal { median, sigma } => {
                let secs = median.as_secs_f64() * (sigma * inverse_normal_cdf(p)).exp();
                Duration::from_secs_f64(secs.min(MAX_RTT.as_secs_f64()))
            }
            Profile::Cdf { points, .. } => cdf_quantile(points, p),
        }
    }

    /// `n` clients' round trips: client `i` gets the quantile at
    /// `(i + 1/2) / n`.
    pub fn quantiles(&self, n: usize) -> Vec<Duration> {
        (0..n)
            .map(|i| self.quantile((i as f64 + 0.5) / n as f64))
            .collect()
    }

    /// Each of `clients` with its round trip: the i-th gets the i-th of
    /// [`Profile::quantiles`].
    pub fn assign(&self, clients: &[IpAddr]) -> Vec<(IpAddr, Duration)> {
        clients
            .iter()
            .copied()
            .zip(self.quantiles(clients.len()))
            .collect()
    }

    /// The distribution's median.
    pub fn median(&self) -> Duration {
        self.quantile(0.5)
    }

    /// The distribution's mean (for the CDF, of its piecewise-linear form).
    pub fn mean(&self) -> Duration {
        match self {
            Profile::None => Duration::ZERO,
            Profile::Const(d) => *d,
            Profile::Lognormal { median, sigma } => Duration::from_secs_f64(
                (median.as_secs_f64() * (sigma * sigma / 2.0).exp()).min(MAX_RTT.as_secs_f64()),
            ),
            Profile::Cdf { points, .. } => {
                let mut sum = points[0].rtt.as_secs_f64() * points[0].fraction;
                for w in points.windows(2) {
                    let mid = (w[0].rtt.as_secs_f64() + w[1].rtt.as_secs_f64()) / 2.0;
                    sum += mid * (w[1].fraction - w[0].fraction);
                }
                Duration::from_secs_f64(sum)
            }
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Profile::None => write!(f, "none"),
            Profile::Const(d) => write!(f, "const:{}", fmt_ms(*d)),
            Profile::Lognormal { median, sigma } => {
                write!(f, "lognormal:median={},sigma={sigma}", fmt_ms(*median))
            }
            Profile::Cdf { source, .. } => write!(f, "cdf:{}", source.display()),
        }
    }
}

/// A duration as milliseconds with the unit: `48ms`, `0.25ms`.
pub fn fmt_ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    let s = format!("{ms:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}ms")
}

/// The points of a CDF file's text; an error is `(line, column, message)`.
pub fn parse_cdf(text: &str) -> Result<Vec<CdfPoint>, (usize, usize, String)> {
    let mut points: Vec<CdfPoint> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let content = raw.split('#').next().unwrap_or("");
        let mut fields = Vec::new();
        let mut col = 0;
        for w in content.split_whitespace() {
            // The column (1-based, in characters) of this field.
            let at = content[col..].find(w).map_or(col, |o| col + o);
            col = at + w.len();
            fields.push((content[..at].chars().count() + 1, w));
        }
        if fields.is_empty() {
            continue;
        }
        if fields.len() != 2 {
            let col = fields.get(2).map_or(1, |f| f.0);
            return Err((
                line,
                col,
                format!(
                    "expected two fields, RTT_MS FRACTION (found {})",
                    fields.len()
                ),
            ));
        }
        let (c1, rtt) = fields[0];
        let (c2, frac) = fields[1];
        let rtt: f64 = rtt
            .parse()
            .map_err(|_| (line, c1, format!("{rtt:?} is not a number of milliseconds")))?;
        let rtt = seconds_to_duration(rtt / 1e3).map_err(|e| (line, c1, e))?;
        let fraction: f64 = frac
            .parse()
            .map_err(|_| (line, c2, format!("{frac:?} is not a fraction")))?;
        if !(0.0..=1.0).contains(&fraction) {
            return Err((
                line,
                c2,
                format!("fraction {fraction} is not between 0 and 1"),
            ));
        }
        if let Some(prev) = points.last() {
            if rtt < prev.rtt {
                return Err((line, c1, "round trips must not decrease".into()));
            }
            if fraction < prev.fraction {
                return Err((line, c2, "fractions must not decrease".into()));
            }
        }
        points.push(CdfPoint { rtt, fraction });
    }
    let lines = text.lines().count().max(1);
    match points.last() {
        None => Err((
            lines,
            1,
            "no points (expected lines of RTT_MS FRACTION)".into(),
        )),
        Some(p) if (p.fraction - 1.0).abs() > 1e-9 => Err((
            lines,
            1,
            format!("the last fraction is {}, expected 1", p.fraction),
        )),
        Some(_) => Ok(points),
    }
}

/// What the `delay_profile` fuzz target and the corpus replay check: a
/// CDF text parses into points that rise and end at 1 (and whose
/// quantiles stay among them), or into an error at a line and column
/// that exist; never a panic.
pub fn fuzz_check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse_cdf(text) {
        Ok(points) => {
            assert!(points
                .windows(2)
                .all(|w| w[0].rtt <= w[1].rtt && w[0].fraction <= w[1].fraction));
            assert!((points[points.len() - 1].fraction - 1.0).abs() <= 1e-9);
            let p = Profile::Cdf {
                source: PathBuf::new(),
                points: points.clone(),
            };
            for q in p.quantiles(7) {
                assert!(q >= points[0].rtt && q <= points[points.len() - 1].rtt);
            }
        }
        Err((line, col, _)) => {
            assert!(line >= 1 && line <= text.lines().count().max(1) && col >= 1)
        }
    }
}

/// The inverse of a piecewise-linear CDF at `p`.
fn cdf_quantile(points: &[CdfPoint], p: f64) -> Duration {
    let first = points[0];
    if p <= first.fraction {
        return first.rtt;
    }
    for w in points.windows(2) {
        let (a, b) = (w[0], w[1]);
        if p <= b.fraction {
            let span = b.fraction - a.fraction;
            if span <= 0.0 {
                return b.rtt;
            }
            let t = (p - a.fraction) / span;
            let secs = a.rtt.as_secs_f64() + t * (b.rtt.as_secs_f64() - a.rtt.as_secs_f64());
            return Duration::from_secs_f64(secs);
        }
    }
    points[points.len() - 1].rtt
}

/// The standard normal distribution's quantile function (Acklam's
/// rational approximation: relative error below 1.2e-9).
pub fn inverse_normal_cdf(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969683028665376e+01,
        2.209460984245205e+02,
        -2.759285104469687e+02,
        1.383_577_518_672_69e2,
        -3.066479806614716e+01,
        2.506628277459239e+00,
    ];
    const B: [f64; 5] = [
        -5.447609879822406e+01,
        1.615858368580409e+02,
        -1.556989798598866e+02,
        6.680131188771972e+01,
        -1.328068155288572e+01,
    ];
    const C: [f64; 6] = [
        -7.784894002430293e-03,
        -3.223964580411365e-01,
        -2.400758277161838e+00,
        -2.549732539343734e+00,
        4.374664141464968e+00,
        2.938163982698783e+00,
    ];
    const D: [f64; 4] = [
        7.784695709041462e-03,
        3.224671290700398e-01,
        2.445134137142996e+00,
        3.754408661907416e+00,
    ];
    const LOW: f64 = 0.02425;
    if p < LOW {
        let q = (-2.0 * p.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else if p <= 1.0 - LOW {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        let q = (-2.0 * (1.0 - p).ln()).sqrt();
        -(((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: f64) -> Duration {
        Duration::from_secs_f64(v / 1e3)
    }

    #[test]
    fn durations_need_units_and_refuse_negative_values() {
        assert_eq!(parse_duration("48ms"), Ok(ms(48.0)));
        assert_eq!(parse_duration("1.5s"), Ok(ms(1500.0)));
        assert_eq!(parse_duration("250us"), Ok(ms(0.25)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("48").unwrap_err().contains("unit"));
        assert!(parse_duration("-5ms").unwrap_err().contains("negative"));
        assert!(parse_duration("5m").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("2min").is_err());
        assert!(parse_duration("61s").unwrap_err().contains("longest"));
        // Past u64::MAX seconds too (Duration::from_secs_f64 would panic).
        assert!(parse_duration("1e300s").unwrap_err().contains("longest"));
        let e = parse_cdf("1e210 0.5\n20 1\n").unwrap_err();
        assert_eq!((e.0, e.1), (1, 1), "{e:?}");
        assert!(e.2.contains("longest"), "{e:?}");
        assert!(parse_duration("nanms").is_err());
    }

    #[test]
    fn profiles_parse_and_give_their_quantiles() {
        assert_eq!(
            Profile::parse("none").unwrap().quantiles(3),
            vec![Duration::ZERO; 3]
        );
        let c = Profile::parse("const:48ms").unwrap();
        assert_eq!(c.quantiles(100), vec![ms(48.0); 100]);
        assert_eq!(c.to_string(), "const:48ms");
        let l = Profile::parse("lognormal:median=48ms,sigma=1").unwrap();
        let q = l.quantiles(100);
        // The middle two quantiles straddle the median; the ends are e^±2.58.
        assert!(q[49] < ms(48.0) && q[50] > ms(48.0));
        let lo = 48.0 * (-2.5758f64).exp();
        assert!((q[0].as_secs_f64() * 1e3 - lo).abs() < 0.01, "{:?}", q[0]);
        assert!(q.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(l.median(), ms(48.0));
        assert!((l.mean().as_secs_f64() * 1e3 - 48.0 * 0.5f64.exp()).abs() < 1e-6);
        for bad in [
            "const:-1ms",
            "const:48",
            "lognormal:median=48ms",
            "lognormal:median=48ms,sigma=-1",
            "lognormal:median=48ms,sigma=x",
            "lognormal:mean=4ms,sigma=1",
            "gamma:1",
            "cdf:",
            "",
        ] {
            assert!(Profile::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_inverse_normal_matches_known_values() {
        for (p, z) in [
            (0.5, 0.0),
            (0.975, 1.959963984540054),
            (0.995, 2.5758293035489),
            (0.001, -3.090232306167813),
            (0.2, -0.8416212335729143),
        ] {
            assert!((inverse_normal_cdf(p) - z).abs() < 1e-8, "{p}");
        }
    }

    #[test]
    fn a_cdf_file_is_read_and_interpolated() {
        let text = "# rtt_ms fraction\n10 0.5\n\n20 0.75   # comment\n60 1\n";
        let pts = parse_cdf(text).unwrap();
        assert_eq!(pts.len(), 3);
        let p = Profile::Cdf {
            source: "x".into(),
            points: pts,
        };
        assert_eq!(p.quantile(0.25), ms(10.0));
        assert_eq!(p.quantile(0.625), ms(15.0));
        assert_eq!(p.quantile(0.875), ms(40.0));
        // 10·0.5 + 15·0.25 + 40·0.25
        assert!((p.mean().as_secs_f64() * 1e3 - 18.75).abs() < 1e-9);
    }

    #[test]
    fn bad_cdf_files_name_line_and_column() {
        let cases = [
            ("10 0.5\n5 1\n", (2, 1), "decrease"),
            ("10 0.5\n20 0.4\n30 1\n", (2, 4), "decrease"),
            ("10 0.5\n  -3 1\n", (2, 3), "negative"),
            ("10 x\n", (1, 4), "fraction"),
            ("10 1.5\n", (1, 4), "between"),
            ("10 0.5 7\n", (1, 8), "two fields"),
            ("10 0.5\n20 0.9\n", (2, 1), "last fraction"),
            ("# nothing\n", (1, 1), "no points"),
            ("", (1, 1), "no points"),
            ("inf 1\n", (1, 1), "finite"),
        ];
        for (text, (line, col), what) in cases {
            let (l, c, m) = parse_cdf(text).unwrap_err();
            assert_eq!((l, c), (line, col), "{text:?}: {m}");
            assert!(m.contains(what), "{text:?}: {m}");
        }
    }

    #[test]
    fn a_cdf_file_error_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("rtt.cdf");
        std::fs::write(&f, "10 0.5\n20 -1\n").unwrap();
        let e = Profile::parse(&format!("cdf:{}", f.display())).unwrap_err();
        assert_eq!(e.place, format!("{}:2:4", f.display()));
        std::fs::write(&f, [0xff, 0xfe]).unwrap();
        assert!(Profile::read_cdf(&f).unwrap_err().message.contains("UTF-8"));
        assert!(Profile::read_cdf(&dir.path().join("none")).is_err());
    }
}

//! The arithmetic every bench shares. Throughputs are in MB/s with
//! MB = 10^6 bytes, the unit of `dd` and of the papers (003 Table 5,
//! 000 Fig. 4).

/// The median of `v` (the mean of the middle two for an even count); 0 for none.
pub fn median(v: &[f64]) -> f64 {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return 0.0;
    }
    s.sort_by(|a, b| a.total_cmp(b));
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

/// Bytes per second as MB/s (10^6 bytes); 0 when no time was measured.
pub fn mb_per_s(bytes: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        bytes as f64 / 1e6 / secs
    } else {
        0.0
    }
}

/// Shimizu et al. 2006, eq. (2): compressing before writing pays when the compressor's
/// throughput exceeds `T_d / (1 - r)` for disk throughput `T_d` and average
/// compression ratio `r` (0 < r < 1). `None` outside that range.
pub fn compressor_needed(disk_mb_s: f64, ratio: f64) -> Option<f64> {
    (ratio > 0.0 && ratio < 1.0).then(|| disk_mb_s / (1.0 - ratio))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn mb_per_s_is_in_units_of_a_million_bytes() {
        assert_eq!(mb_per_s(3_000_000, 2.0), 1.5);
        assert_eq!(mb_per_s(1, 0.0), 0.0);
    }

    #[test]
    fn paper_condition_matches_its_example() {
        // Shimizu et al. 2006, §3.2: a 30 MB/s disk and r = 0.5 need a compressor above 60 MB/s.
        assert_eq!(compressor_needed(30.0, 0.5), Some(60.0));
        assert_eq!(compressor_needed(30.0, 1.0), None);
    }
}

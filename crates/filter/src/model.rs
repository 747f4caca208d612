//! The paper's cost model (§5.1): when the k-th of N patterns matches, a
//! packet costs t = T_O + k·T_P (t = T_O + N·T_P when none does). Over a trace
//! the expected cost is T = T_O + α·T_P with α = Σ k·p_k + N·p_0, and T_O, T_P
//! are fitted by least squares over several (rules, trace) pairs (Table 3).

/// α of a trace under a rule set of `n_rules`: the mean 1-based position of
/// the matching rule, counting N for packets that match none.
pub fn alpha(matches: &[Option<u32>], n_rules: usize) -> f64 {
    if matches.is_empty() {
        return 0.0;
    }
    let sum: f64 = matches
        .iter()
        .map(|m| m.map_or(n_rules as f64, |k| f64::from(k) + 1.0))
        .sum();
    sum / matches.len() as f64
}

/// The least-squares line T = T_O + α·T_P through measured points.
#[derive(Clone, Debug, PartialEq)]
pub struct Fit {
    pub t_o: f64,
    pub t_p: f64,
    /// Measured minus fitted T, one per point.
    pub residuals: Vec<f64>,
}

/// Fits `(alpha, time)` points; `None` with fewer than two distinct α.
pub fn fit(points: &[(f64, f64)]) -> Option<Fit> {
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if points.len() < 2 || sxx <= 0.0 {
        return None;
    }
    let t_p = sxy / sxx;
    let t_o = my - t_p * mx;
    let residuals = points.iter().map(|p| p.1 - (t_o + t_p * p.0)).collect();
    Some(Fit {
        t_o,
        t_p,
        residuals,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alpha_counts_positions_and_the_default() {
        assert_eq!(alpha(&[Some(0), Some(1), None], 4), (1.0 + 2.0 + 4.0) / 3.0);
    }

    #[test]
    fn fit_recovers_the_papers_table_3_row_6() {
        // Table 2, row 6 (PE software-pipelined code), in machine cycles.
        let pts = [
            (2.00, 57.8),
            (8.99, 89.1),
            (17.68, 123.9),
            (34.36, 191.0),
            (69.73, 325.8),
        ];
        let f = fit(&pts).unwrap();
        assert!((f.t_p - 3.9).abs() < 0.1, "{f:?}");
        assert!((f.t_o - 53.0).abs() < 1.5, "{f:?}");
        assert!(fit(&[(1.0, 2.0)]).is_none());
    }
}

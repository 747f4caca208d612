//! Rule-set diagnostics: rules that can never match, and overlapping rules
//! with different actions (where the order silently decides).
//!
//! A rule is reported as shadowed when one earlier rule covers it in every
//! field for every address family it applies to. (A rule covered only by the
//! union of several earlier rules is not found; that check is a full
//! classification problem of its own.) Pairs are compared directly, so the
//! cost is O(N²) box tests: about 50 million at 10K rules.

use crate::fast::{v4_box, v6_box, LeafRule, V4_DIMS, V6_DIMS};
use crate::rule::Rule;

/// One finding about the rule at index `rule`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finding {
    /// Rule `rule` can never match: the earlier rule `by` matches every
    /// packet it would.
    Shadowed { rule: usize, by: usize },
    /// Rules `earlier` and `rule` match some packets in common and have
    /// different actions; `earlier` wins for those packets.
    Conflict { rule: usize, earlier: usize },
}

struct Boxes {
    v4: Option<LeafRule<V4_DIMS>>,
    v6: Option<LeafRule<V6_DIMS>>,
}

fn covers<const D: usize>(outer: &LeafRule<D>, inner: &LeafRule<D>) -> bool {
    (0..D).all(|d| outer.lo[d] <= inner.lo[d] && inner.hi[d] <= outer.hi[d])
}

fn meets<const D: usize>(a: &LeafRule<D>, b: &LeafRule<D>) -> bool {
    (0..D).all(|d| a.lo[d] <= b.hi[d] && b.lo[d] <= a.hi[d])
}

/// Finds shadowed rules and conflicting overlaps, in rule order.
pub fn lint(rules: &[Rule]) -> Vec<Finding> {
    let boxes: Vec<Boxes> = rules
        .iter()
        .enumerate()
        .map(|(i, r)| Boxes {
            v4: v4_box(r, i),
            v6: v6_box(r, i),
        })
        .collect();
    let mut out = Vec::new();
    for (j, bj) in boxes.iter().enumerate() {
        let shadow = boxes[..j].iter().position(|bi| {
            let v4 = match (&bi.v4, &bj.v4) {
                (_, None) => true,
                (Some(a), Some(b)) => covers(a, b),
                (None, Some(_)) => false,
            };
            let v6 = match (&bi.v6, &bj.v6) {
                (_, None) => true,
                (Some(a), Some(b)) => covers(a, b),
                (None, Some(_)) => false,
            };
            v4 && v6
        });
        if let Some(by) = shadow {
            out.push(Finding::Shadowed { rule: j, by });
            continue;
        }
        if let Some(earlier) = boxes[..j].iter().enumerate().position(|(i, bi)| {
            rules[i].action != rules[j].action
                && (matches!((&bi.v4, &bj.v4), (Some(a), Some(b)) if meets(a, b))
                    || matches!((&bi.v6, &bj.v6), (Some(a), Some(b)) if meets(a, b)))
        }) {
            out.push(Finding::Conflict { rule: j, earlier });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_paper;

    #[test]
    fn finds_shadowed_and_conflicting_rules() {
        let rules = parse_paper(
            "ip filter 1 pass 10.0.0.0/8 * tcp * *\n\
             ip filter 2 pass 10.1.0.0/16 * tcp * 80\n\
             ip filter 3 reject * * udp * domain\n\
             ip filter 4 pass 10.0.0.0/8 * udp * 53\n\
             ip filter 5 pass 2001:db8::/32 * * * *\n\
             ip filter 6 reject * * * * *\n",
        )
        .unwrap();
        let f = lint(&rules);
        assert_eq!(
            f,
            [
                Finding::Shadowed { rule: 1, by: 0 },
                Finding::Shadowed { rule: 3, by: 2 },
                Finding::Conflict {
                    rule: 4,
                    earlier: 2
                },
                Finding::Conflict {
                    rule: 5,
                    earlier: 0
                },
            ]
        );
    }
}

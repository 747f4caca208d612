//! The reference engine: the paper's naive program (Fig. 2), a first-match
//! scan over the patterns in ascending order.
//!
//! Cost model (paper §5.1): t = T_O + k·T_P when the k-th pattern matches,
//! t = T_O + N·T_P when none does.

use crate::key::PacketKey;
use crate::rule::Rule;

/// A first-match linear scan.
#[derive(Clone, Debug)]
pub struct Linear {
    rules: Vec<Rule>,
}

impl Linear {
    /// `rules` in evaluation order.
    pub fn new(rules: &[Rule]) -> Linear {
        Linear {
            rules: rules.to_vec(),
        }
    }

    /// The index of the first rule that matches `key`, or `None` (the
    /// paper's default rule: reject).
    pub fn classify(&self, key: &PacketKey) -> Option<u32> {
        for (i, rule) in self.rules.iter().enumerate() {
            if rule.matches(key) {
                return Some(i as u32);
            }
        }
        None
    }

    /// Inserts `rule` at position `at`; `false` when `at` is past the end.
    pub fn insert(&mut self, at: usize, rule: Rule) -> bool {
        if at > self.rules.len() {
            return false;
        }
        self.rules.insert(at, rule);
        true
    }

    /// Deletes the rule at position `at`.
    pub fn delete(&mut self, at: usize) -> Option<Rule> {
        (at < self.rules.len()).then(|| self.rules.remove(at))
    }

    /// Bytes of heap this engine holds.
    pub fn memory_bytes(&self) -> usize {
        self.rules.capacity() * core::mem::size_of::<Rule>()
    }
}

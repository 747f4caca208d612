//! The filter stage's rule files. The stage itself is [`filter::Filter`]:
//! its frame-level entry [`filter::Filter::apply_slice`] carries the rule
//! that a packet which is not IP is rejected, and counts it.

use std::path::Path;

use filter::RuleSet;

use crate::error::{display_path, read_text, Error, Result};

/// Reads and parses a rule file (the paper's syntax or ClassBench), with
/// `FILE:LINE:COLUMN` errors.
pub fn load_rules(path: &Path) -> Result<RuleSet> {
    let text = read_text(path)?;
    let rules =
        RuleSet::parse(&text).map_err(|e| Error::input(format!("{}:{e}", display_path(path))))?;
    if rules.is_empty() {
        return Err(Error::input(format!(
            "{}: no rules in the file (only blank lines and comments)",
            display_path(path)
        )));
    }
    Ok(rules)
}

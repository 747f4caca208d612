//! What `kansoku filter` prints, as text (`Display`) and as JSON: a run's
//! per-rule counts ([`CountsReport`]), the rules a packet meets
//! ([`Explanation`]) and the lint's findings ([`Finding::describe`]).

use std::fmt;

use serde_json::{json, Value};

use crate::{Engine, EngineKind, Filter, Finding, PacketKey, RuleSet};

/// A rule as JSON: its id, line, action and text.
pub fn rule_json(rules: &RuleSet, i: usize) -> Value {
    let r = &rules.rules()[i];
    json!({"id": r.id, "line": r.line, "action": r.action.to_string(), "rule": r.to_string()})
}

/// A filter's counts: packets and bytes per rule, the default rule, what
/// was not IP, and the totals passed and rejected.
pub struct CountsReport<'a>(&'a Filter);

impl Filter {
    /// The counts so far, to print.
    pub fn report(&self) -> CountsReport<'_> {
        CountsReport(self)
    }
}

impl CountsReport<'_> {
    pub fn json(&self) -> Value {
        let f = self.0;
        let (rules, c) = (f.rules(), f.counters());
        let (pass, reject) = f.totals();
        let per_rule: Vec<_> = c
            .rules
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let mut v = rule_json(rules, i);
                v["packets"] = h.packets.into();
                v["bytes"] = h.bytes.into();
                v
            })
            .collect();
        json!({
            "engine": f.engine().kind().name(),
            "rules": per_rule,
            "default": {"packets": c.default.packets, "bytes": c.default.bytes},
            "non_ip": {"packets": c.non_ip.packets, "bytes": c.non_ip.bytes},
            "passed": {"packets": pass.packets, "bytes": pass.bytes},
            "rejected": {"packets": reject.packets, "bytes": reject.bytes},
        })
    }
}

impl fmt::Display for CountsReport<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (rules, c) = (self.0.rules(), self.0.counters());
        let (pass, reject) = self.0.totals();
        type Cell<'c> = &'c dyn fmt::Display;
        let row = |f: &mut fmt::Formatter<'_>,
                   id: Cell<'_>,
                   action: &str,
                   packets: Cell<'_>,
                   bytes: Cell<'_>,
                   what: Cell<'_>| {
            // Width and alignment apply to the cells' text.
            let (id, packets, bytes) = (id.to_string(), packets.to_string(), bytes.to_string());
            writeln!(f, "{id:>10} {action:>7} {packets:>12} {bytes:>14}  {what}")
        };
        row(f, &"id", "action", &"packets", &"bytes", &"rule")?;
        for (r, h) in rules.rules().iter().zip(&c.rules) {
            let action = r.action.to_string();
            row(f, &r.id, &action, &h.packets, &h.bytes, r)?;
        }
        let (d, n) = (c.default, c.non_ip);
        row(
            f,
            &"default",
            "reject",
            &d.packets,
            &d.bytes,
            &"(no rule matched)",
        )?;
        if n.packets > 0 {
            row(f, &"non-ip", "reject", &n.packets, &n.bytes, &"(not IP)")?;
        }
        writeln!(
            f,
            "passed {} packets ({} bytes), rejected {} packets ({} bytes)",
            pass.packets, pass.bytes, reject.packets, reject.bytes
        )
    }
}

/// The rules a packet meets: the first match, which decides, and every
/// later rule that also matches and is shadowed by it for this packet.
pub struct Explanation<'a> {
    rules: &'a RuleSet,
    key: PacketKey,
    first: Option<usize>,
    shadowed: Vec<usize>,
}

impl<'a> Explanation<'a> {
    /// Explains `key` by the linear engine, the reference.
    pub fn new(rules: &'a RuleSet, key: PacketKey) -> Explanation<'a> {
        let first = Engine::build(EngineKind::Linear, rules)
            .classify(&key)
            .map(|f| f as usize);
        let shadowed = match first {
            Some(f) => (f + 1..rules.len())
                .filter(|&i| rules.rules()[i].matches(&key))
                .collect(),
            None => Vec::new(),
        };
        Explanation {
            rules,
            key,
            first,
            shadowed,
        }
    }

    pub fn json(&self) -> Value {
        json!({
            "packet": self.key.to_string(),
            "action": self.rules.action(self.first.map(|f| f as u32)).to_string(),
            "first": self.first.map(|f| rule_json(self.rules, f)),
            "also": self.shadowed.iter().map(|&i| rule_json(self.rules, i)).collect::<Vec<_>>(),
        })
    }
}

impl fmt::Display for Explanation<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "packet: {}", self.key)?;
        match self.first {
            Some(i) => {
                let r = &self.rules.rules()[i];
                let action = r.action.to_string().to_uppercase();
                writeln!(f, "{action}: line {}: {r}", r.line)?;
            }
            None => writeln!(f, "REJECT: no rule matches (the default rule)")?,
        }
        for &i in &self.shadowed {
            let r = &self.rules.rules()[i];
            writeln!(f, "  also matches, shadowed here: line {}: {r}", r.line)?;
        }
        Ok(())
    }
}

impl Finding {
    /// The finding as a line about the rule file `name`.
    pub fn describe(&self, rules: &RuleSet, name: &str) -> String {
        let rs = rules.rules();
        match *self {
            Finding::Shadowed { rule, by } => {
                let (r, o) = (&rs[rule], &rs[by]);
                format!(
                    "{name}:{}: rule {} can never match: rule {} (line {}) matches every packet it would",
                    r.line, r.id, o.id, o.line
                )
            }
            Finding::Conflict { rule, earlier } => {
                let (r, o) = (&rs[rule], &rs[earlier]);
                format!(
                    "{name}:{}: rule {} ({}) overlaps rule {} (line {}, {}); rule {} wins where both match",
                    r.line, r.id, r.action, o.id, o.line, o.action, o.id
                )
            }
        }
    }

    /// The finding as JSON: its kind, the rule and the rule before it.
    pub fn json(&self, rules: &RuleSet) -> Value {
        let (kind, rule, other) = match *self {
            Finding::Shadowed { rule, by } => ("shadowed", rule, by),
            Finding::Conflict { rule, earlier } => ("conflict", rule, earlier),
        };
        json!({"kind": kind, "rule": rule_json(rules, rule), "by": rule_json(rules, other)})
    }
}

/// The first match of every key by the linear engine (the reference),
/// spread over the cores.
pub fn linear_answers(rules: &RuleSet, keys: &[PacketKey]) -> Vec<Option<u32>> {
    let engine = Engine::build(EngineKind::Linear, rules);
    let mut out = vec![None; keys.len()];
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = keys.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        for (k, o) in keys.chunks(chunk).zip(out.chunks_mut(chunk)) {
            let engine = &engine;
            s.spawn(move || engine.classify_batch(k, o));
        }
    });
    out
}

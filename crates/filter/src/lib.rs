//! kansoku's rule-based packet filter (Yamashita and Tsuru 2008,
//! "Implementation and Evaluation of Fast Packet Filters", IPSJ 2008).
//!
//! Overview:
//! - [`RuleSet::parse`] reads the paper's rule language
//!   (`ip filter N pass|reject SIP DIP PROTO SPT DPT`, plus `#` comments, IPv6,
//!   `icmp`, `icmp6` and numeric protocols) or a ClassBench rule file
//!   (recognised by its `@` lines). Rules are evaluated in ascending N; the
//!   first match decides; no match rejects (the paper's default rule).
//! - [`Engine`] classifies [`PacketKey`]s, one at a time or in batches:
//!   [`Linear`] is the paper's naive program (Fig. 2) and the reference;
//!   [`Fast`] returns the same rule for every packet: HyperSplit decision
//!   trees walked by batches of packets in lockstep, and, for IPv4 sets small
//!   enough, RFC tables ([`rfc`]) that answer IPv4 keys in the trees' place.
//! - [`Counters`] keep per-rule hits; [`lint()`] finds shadowed rules and
//!   conflicting overlaps; [`model`] is the paper's cost model (α, T_O, T_P).
//!
//! The crate does no I/O: it takes rule text and packet keys and gives rule
//! indices. A rule's index is its place in evaluation order, not its N.

#![forbid(unsafe_code)]

pub mod fast;
pub mod key;
pub mod linear;
pub mod lint;
pub mod model;
pub mod parse;
pub mod report;
pub mod rfc;
pub mod rule;
pub mod v6map;

pub use fast::Fast;
pub use key::PacketKey;
pub use linear::Linear;
pub use lint::{lint, Finding};
pub use parse::{ParseError, Syntax};
pub use report::{CountsReport, Explanation};
pub use rfc::RfcStats;
pub use rule::{Action, AddrMatch, PortRange, ProtoMatch, Rule};

/// A parsed rule file, in evaluation order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleSet {
    rules: Vec<Rule>,
    syntax: Syntax,
}

impl RuleSet {
    /// Parses rule text, detecting its syntax (ClassBench files have lines
    /// starting with `@`).
    pub fn parse(text: &str) -> Result<RuleSet, ParseError> {
        let syntax = parse::detect(text);
        let rules = match syntax {
            Syntax::Paper => parse::parse_paper(text)?,
            Syntax::ClassBench => parse::parse_classbench(text)?,
        };
        Ok(RuleSet { rules, syntax })
    }

    /// A rule set from rules already built; they are sorted by id.
    pub fn from_rules(mut rules: Vec<Rule>) -> RuleSet {
        rules.sort_by_key(|r| r.id);
        RuleSet {
            rules,
            syntax: Syntax::Paper,
        }
    }

    /// The first `n` rules (for the paper's experiment with growing rule sets).
    pub fn truncated(&self, n: usize) -> RuleSet {
        RuleSet {
            rules: self.rules[..n.min(self.rules.len())].to_vec(),
            syntax: self.syntax,
        }
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn syntax(&self) -> Syntax {
        self.syntax
    }

    /// The action for a classification result: the rule's, or reject.
    pub fn action(&self, m: Option<u32>) -> Action {
        m.and_then(|i| self.rules.get(i as usize))
            .map_or(Action::Reject, |r| r.action)
    }
}

/// Which engine to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum EngineKind {
    Linear,
    Fast,
}

impl EngineKind {
    pub const ALL: [EngineKind; 2] = [EngineKind::Linear, EngineKind::Fast];

    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Linear => "linear",
            EngineKind::Fast => "fast",
        }
    }
}

/// A built classifier. Results are rule indices in evaluation order, or
/// `None` for the default rule.
#[derive(Clone, Debug)]
pub enum Engine {
    Linear(Linear),
    Fast(Fast),
}

impl Engine {
    pub fn build(kind: EngineKind, rules: &RuleSet) -> Engine {
        match kind {
            EngineKind::Linear => Engine::Linear(Linear::new(rules.rules())),
            EngineKind::Fast => Engine::Fast(Fast::new(rules.rules())),
        }
    }

    pub fn kind(&self) -> EngineKind {
        match self {
            Engine::Linear(_) => EngineKind::Linear,
            Engine::Fast(_) => EngineKind::Fast,
        }
    }

    /// The index of the first rule that matches `key`.
    #[inline]
    pub fn classify(&self, key: &PacketKey) -> Option<u32> {
        match self {
            Engine::Linear(e) => e.classify(key),
            Engine::Fast(e) => e.classify(key),
        }
    }

    /// Classifies `keys[i]` into `out[i]` for every `i` below both lengths.
    pub fn classify_batch(&self, keys: &[PacketKey], out: &mut [Option<u32>]) {
        match self {
            Engine::Linear(e) => {
                for (k, o) in keys.iter().zip(out.iter_mut()) {
                    *o = e.classify(k);
                }
            }
            Engine::Fast(e) => e.classify_batch(keys, out),
        }
    }

    /// Bytes of heap the engine holds.
    pub fn memory_bytes(&self) -> usize {
        match self {
            Engine::Linear(e) => e.memory_bytes(),
            Engine::Fast(e) => e.memory_bytes(),
        }
    }

    /// Inserts `rule` at evaluation position `at` without rebuilding the
    /// engine; the rules from `at` on move one place down. `false` (nothing
    /// changed) when `at` is past the end.
    pub fn insert(&mut self, at: usize, rule: Rule) -> bool {
        match self {
            Engine::Linear(e) => e.insert(at, rule),
            Engine::Fast(e) => e.insert(at, rule),
        }
    }

    /// Deletes the rule at evaluation position `at` without rebuilding the
    /// engine and returns it; the rules after it move one place up.
    pub fn delete(&mut self, at: usize) -> Option<Rule> {
        match self {
            Engine::Linear(e) => e.delete(at),
            Engine::Fast(e) => e.delete(at),
        }
    }
}

/// Packets and bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hits {
    pub packets: u64,
    pub bytes: u64,
}

impl Hits {
    fn add(&mut self, bytes: u64) {
        self.packets += 1;
        self.bytes += bytes;
    }
}

/// Per-rule hit counters, plus the default rule's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Indexed like the rule set.
    pub rules: Vec<Hits>,
    /// Packets that matched no rule (rejected by default).
    pub default: Hits,
    /// Packets that are not IP: no `ip filter` rule can match them, and the
    /// default rule rejects them (counted here, not in `default`).
    pub non_ip: Hits,
}

impl Counters {
    pub fn new(n_rules: usize) -> Counters {
        Counters {
            rules: vec![Hits::default(); n_rules],
            default: Hits::default(),
            non_ip: Hits::default(),
        }
    }

    /// Counts a packet of `bytes` with classification result `m`.
    pub fn record(&mut self, m: Option<u32>, bytes: u64) {
        match m.and_then(|i| self.rules.get_mut(i as usize)) {
            Some(h) => h.add(bytes),
            None => self.default.add(bytes),
        }
    }
}

/// A rule set, an engine built from it, and its counters: the filter stage.
#[derive(Clone, Debug)]
pub struct Filter {
    rules: RuleSet,
    engine: Engine,
    counters: Counters,
}

/// What the filter decided for one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Index of the matching rule; `None` for the default rule.
    pub rule: Option<u32>,
    pub action: Action,
}

impl Filter {
    pub fn new(rules: RuleSet, kind: EngineKind) -> Filter {
        let engine = Engine::build(kind, &rules);
        let counters = Counters::new(rules.len());
        Filter {
            rules,
            engine,
            counters,
        }
    }

    /// Classifies and counts one packet of `bytes` bytes.
    pub fn apply(&mut self, key: &PacketKey, bytes: u64) -> Verdict {
        let rule = self.engine.classify(key);
        self.counters.record(rule, bytes);
        Verdict {
            rule,
            action: self.rules.action(rule),
        }
    }

    /// Classifies and counts one frame already sliced: the frame-level
    /// entry of every command that filters packets. A frame that is not IP
    /// matches no `ip filter` rule, so the default rule rejects it; it is
    /// counted in [`Counters::non_ip`].
    #[inline]
    pub fn apply_slice(&mut self, s: &wire::Slice<'_>, bytes: u64) -> Verdict {
        match PacketKey::from_slice(s) {
            Some(key) => self.apply(&key, bytes),
            None => {
                self.counters.non_ip.add(bytes);
                Verdict {
                    rule: None,
                    action: Action::Reject,
                }
            }
        }
    }

    /// Packets and bytes passed and rejected so far (the rejected ones
    /// include the default rule's and the non-IP packets).
    pub fn totals(&self) -> (Hits, Hits) {
        let c = &self.counters;
        let mut pass = Hits::default();
        let mut reject = c.non_ip;
        for (r, h) in self.rules.rules().iter().zip(&c.rules) {
            let t = if r.action == Action::Pass {
                &mut pass
            } else {
                &mut reject
            };
            t.packets += h.packets;
            t.bytes += h.bytes;
        }
        reject.packets += c.default.packets;
        reject.bytes += c.default.bytes;
        (pass, reject)
    }

    pub fn rules(&self) -> &RuleSet {
        &self.rules
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The rule set and what it counted, the engine freed: a filter that a
    /// newer rule set replaced, kept for its report.
    pub fn retire(self) -> (RuleSet, Counters) {
        (self.rules, self.counters)
    }
}

//! The filter stage's rule files, and their reload while a capture runs.
//! The stage itself is [`filter::Filter`]: its frame-level entry
//! [`filter::Filter::apply_slice`] carries the rule that a packet which is
//! not IP is rejected, and counts it.
//!
//! A reload (`kansoku capture --rules R`, SIGHUP) reads and builds the new
//! rule set on a thread of its own, one filter per lane, and leaves each in
//! the lane's [`Slot`]. The lane's consumer looks at its slot between two
//! batches and, when a filter waits there, swaps it in: one pointer moves,
//! so the ring thread never waits and no packet is lost, and every packet
//! is classified by exactly one rule set. The old filter's counters are
//! kept, by generation, for the report ([`RuleSetHits`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use filter::{Action, Counters, EngineKind, Filter, Hits, RuleSet};
use serde::Serialize;

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

/// Nanoseconds since the epoch, now.
fn now_unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// A rule set's place in a run: its number (0 for the rules the run
/// started with, then one more per successful reload) and when it was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Generation {
    pub number: u32,
    pub loaded_unix_ns: u64,
}

/// Where the reloader leaves a lane's next filter.
#[derive(Default)]
pub struct Slot {
    /// A filter waits in `next` (read once per batch, without the lock).
    pending: AtomicBool,
    next: Mutex<Option<(Generation, Filter)>>,
}

impl Slot {
    fn put(&self, generation: Generation, filter: Filter) {
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        // A filter the lane has not taken yet is simply replaced: it never
        // classified a packet, so nothing it would report is lost.
        *next = Some((generation, filter));
        self.pending.store(true, Ordering::Release);
    }

    fn take(&self) -> Option<(Generation, Filter)> {
        if !self.pending.swap(false, Ordering::Acquire) {
            return None;
        }
        self.next.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// A lane's side of reloading: its slot, the generation of the filter it
/// runs, and the rule sets it ran before, with their counters.
pub struct LaneRules {
    file: PathBuf,
    slot: Arc<Slot>,
    current: Generation,
    retired: Vec<(Generation, RuleSet, Counters)>,
}

impl LaneRules {
    /// Takes the filter waiting in the slot, if any, in place of `filter`.
    /// Called between batches.
    #[inline]
    pub fn swap_in(&mut self, filter: &mut Option<Filter>) {
        if !self.slot.pending.load(Ordering::Relaxed) {
            return;
        }
        let Some((generation, next)) = self.slot.take() else {
            return;
        };
        if let Some(old) = filter.replace(next) {
            let (rules, counters) = old.retire();
            self.retired.push((self.current, rules, counters));
        }
        self.current = generation;
    }

    /// What each rule set this lane ran counted, oldest first; `filter` is
    /// the one it runs now.
    pub fn report(self, filter: Option<&Filter>) -> Vec<RuleSetHits> {
        let file = self.file.as_path();
        let mut out: Vec<RuleSetHits> = self
            .retired
            .iter()
            .map(|(g, rules, counters)| RuleSetHits::of(*g, file, rules, counters))
            .collect();
        if let Some(f) = filter {
            out.push(RuleSetHits::of(self.current, file, f.rules(), f.counters()));
        }
        out
    }
}

/// The reloading side: on each request, reads the rule file, builds one
/// filter per lane and leaves them in the lanes' slots.
pub struct Reloader {
    path: PathBuf,
    kind: EngineKind,
    slots: Vec<Arc<Slot>>,
    generation: u32,
}

impl Reloader {
    /// A reloader of `path` for `lanes` lanes running `kind` engines, and
    /// each lane's side (to put in its [`Stages`](crate::Stages)).
    pub fn new(path: &Path, kind: EngineKind, lanes: usize) -> (Reloader, Vec<LaneRules>) {
        let started = Generation {
            number: 0,
            loaded_unix_ns: now_unix_ns(),
        };
        let slots: Vec<Arc<Slot>> = (0..lanes).map(|_| Arc::default()).collect();
        let sides = slots
            .iter()
            .map(|slot| LaneRules {
                file: path.to_path_buf(),
                slot: Arc::clone(slot),
                current: started,
                retired: Vec::new(),
            })
            .collect();
        let r = Reloader {
            path: path.to_path_buf(),
            kind,
            slots,
            generation: 0,
        };
        (r, sides)
    }

    /// The rule file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the file again and hands every lane the new rules; on an
    /// error, the lanes keep the rules they have. Returns a line saying
    /// what happened, for the log.
    pub fn reload(&mut self) -> std::result::Result<String, String> {
        let t = Instant::now();
        let rules = load_rules(&self.path)
            .map_err(|e| format!("reload failed, keeping rule set {}: {e}", self.generation))?;
        let n = rules.len();
        let filter = Filter::new(rules, self.kind);
        let built = t.elapsed();
        self.generation += 1;
        let g = Generation {
            number: self.generation,
            loaded_unix_ns: now_unix_ns(),
        };
        let Some((last, others)) = self.slots.split_last() else {
            return Err("reload: no ring to give the rules to".to_string());
        };
        for slot in others {
            slot.put(g, filter.clone());
        }
        last.put(g, filter);
        Ok(format!(
            "rule set {}: {n} rules from {}, read and built in {}; each ring uses it from its next batch",
            g.number,
            display_path(&self.path),
            format_ms(built)
        ))
    }

    /// Until `done`: reloads whenever `request` is set, logging each
    /// outcome with `log`.
    pub fn serve(&mut self, request: &AtomicBool, done: &AtomicBool, mut log: impl FnMut(&str)) {
        while !done.load(Ordering::Relaxed) {
            if request.swap(false, Ordering::Relaxed) {
                match self.reload() {
                    Ok(m) | Err(m) => log(&m),
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn format_ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// Packets and bytes, as reports print them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Count {
    pub packets: u64,
    pub bytes: u64,
}

impl Count {
    fn add(&mut self, h: Hits) {
        self.packets += h.packets;
        self.bytes += h.bytes;
    }
}

impl From<Hits> for Count {
    fn from(h: Hits) -> Count {
        Count {
            packets: h.packets,
            bytes: h.bytes,
        }
    }
}

/// One rule's hits in a rule set's report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RuleHit {
    /// Position in the file's rule list (0 = first rule).
    pub index: usize,
    /// The rule's number in the file (`ip filter N ...`, or the ClassBench line).
    pub id: u32,
    pub line: usize,
    pub action: String,
    pub packets: u64,
    pub bytes: u64,
}

/// What one rule set counted while it was in use: the hit counters of
/// `kansoku capture --rules`, one per generation of the rule file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RuleSetHits {
    /// 0: the rules the capture started with; then one per reload.
    pub generation: u32,
    pub file: String,
    /// When it was read, in nanoseconds since the epoch.
    pub loaded_unix_ns: u64,
    pub rules: usize,
    /// Packets it classified (passed + rejected).
    pub packets: u64,
    pub passed: Count,
    /// Rejected, the default rule's and the non-IP packets included.
    pub rejected: Count,
    /// Matched no rule.
    pub default: Count,
    /// Not IP: rejected without a lookup.
    pub non_ip: Count,
    /// The rules that matched at least one packet, in rule order.
    pub hits: Vec<RuleHit>,
}

impl RuleSetHits {
    fn of(g: Generation, file: &Path, rules: &RuleSet, c: &Counters) -> RuleSetHits {
        let mut r = RuleSetHits {
            generation: g.number,
            file: display_path(file).to_string(),
            loaded_unix_ns: g.loaded_unix_ns,
            rules: rules.len(),
            packets: 0,
            passed: Count::default(),
            rejected: Count::default(),
            default: c.default.into(),
            non_ip: c.non_ip.into(),
            hits: Vec::new(),
        };
        for (index, (rule, h)) in rules.rules().iter().zip(&c.rules).enumerate() {
            if h.packets == 0 {
                continue;
            }
            let side = if rule.action == Action::Pass {
                &mut r.passed
            } else {
                &mut r.rejected
            };
            side.add(*h);
            r.hits.push(RuleHit {
                index,
                id: rule.id,
                line: rule.line,
                action: rule.action.to_string(),
                packets: h.packets,
                bytes: h.bytes,
            });
        }
        r.rejected.add(c.default);
        r.rejected.add(c.non_ip);
        r.packets = r.passed.packets + r.rejected.packets;
        r
    }

    /// Adds another lane's counts of the same generation.
    pub fn absorb(&mut self, o: &RuleSetHits) {
        self.packets += o.packets;
        for (a, b) in [
            (&mut self.passed, o.passed),
            (&mut self.rejected, o.rejected),
            (&mut self.default, o.default),
            (&mut self.non_ip, o.non_ip),
        ] {
            a.packets += b.packets;
            a.bytes += b.bytes;
        }
        let mut merged: Vec<RuleHit> = Vec::with_capacity(self.hits.len() + o.hits.len());
        let (mut a, mut b) = (
            std::mem::take(&mut self.hits).into_iter().peekable(),
            o.hits.iter().cloned().peekable(),
        );
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) if x.index == y.index => {
                    let mut h = a.next().expect("peeked");
                    let y = b.next().expect("peeked");
                    h.packets += y.packets;
                    h.bytes += y.bytes;
                    h
                }
                (Some(x), Some(y)) if x.index < y.index => a.next().expect("peeked"),
                (Some(_), Some(_)) | (None, Some(_)) => b.next().expect("peeked"),
                (Some(_), None) => a.next().expect("peeked"),
                (None, None) => break,
            };
            merged.push(next);
        }
        self.hits = merged;
    }

    /// One line: `rule set 1 (R, 12 rules): 500 packets, 120 passed, 380 rejected (300 by no rule)`.
    pub fn describe(&self) -> String {
        format!(
            "rule set {} ({}, {} rules): {} packets, {} passed, {} rejected ({} matched no rule, {} not IP), {} rules hit",
            self.generation,
            self.file,
            self.rules,
            self.packets,
            self.passed.packets,
            self.rejected.packets,
            self.default.packets,
            self.non_ip.packets,
            self.hits.len()
        )
    }
}

/// The reports of every lane, merged by generation (oldest first).
pub fn merge_rule_sets(lanes: Vec<Vec<RuleSetHits>>) -> Vec<RuleSetHits> {
    let mut out: Vec<RuleSetHits> = Vec::new();
    for r in lanes.into_iter().flatten() {
        match out.iter_mut().find(|x| x.generation == r.generation) {
            Some(x) => x.absorb(&r),
            None => out.push(r),
        }
    }
    out.sort_by_key(|r| r.generation);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use filter::PacketKey;

    fn key(dport: u16) -> PacketKey {
        PacketKey::v4(0x0a00_0001, 0x0a00_0002, 17, 1000, dport)
    }

    #[test]
    fn a_swap_between_batches_counts_each_packet_under_one_generation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rules");
        std::fs::write(&path, "ip filter 1 pass * * udp * 53\n").unwrap();
        let (mut reloader, mut sides) = Reloader::new(&path, EngineKind::Fast, 2);
        let mut filters: Vec<Option<Filter>> = (0..2)
            .map(|_| Some(Filter::new(load_rules(&path).unwrap(), EngineKind::Fast)))
            .collect();
        for f in filters.iter_mut().flatten() {
            assert_eq!(f.apply(&key(53), 100).action, Action::Pass);
        }
        // A file that does not parse changes nothing.
        std::fs::write(&path, "ip filter 1 pass * * udp * 53 junk\n").unwrap();
        let e = reloader.reload().unwrap_err();
        assert!(e.contains("keeping rule set 0"), "{e}");
        for (side, f) in sides.iter_mut().zip(&mut filters) {
            side.swap_in(f);
        }
        std::fs::write(
            &path,
            "ip filter 1 reject * * udp * 53\nip filter 2 pass * * udp * 80\n",
        )
        .unwrap();
        reloader.reload().unwrap();
        // Lane 0 swaps before its next packets; lane 1 has one more packet
        // under the old rules first.
        sides[0].swap_in(&mut filters[0]);
        assert_eq!(
            filters[1].as_mut().unwrap().apply(&key(53), 10).action,
            Action::Pass
        );
        sides[1].swap_in(&mut filters[1]);
        for f in filters.iter_mut().flatten() {
            assert_eq!(f.apply(&key(53), 1).action, Action::Reject);
            assert_eq!(f.apply(&key(80), 2).action, Action::Pass);
            assert_eq!(f.apply(&key(81), 4).action, Action::Reject);
        }
        let reports: Vec<Vec<RuleSetHits>> = sides
            .into_iter()
            .zip(&filters)
            .map(|(s, f)| s.report(f.as_ref()))
            .collect();
        let merged = merge_rule_sets(reports);
        assert_eq!(merged.len(), 2);
        let (g0, g1) = (&merged[0], &merged[1]);
        assert_eq!((g0.generation, g0.rules, g0.packets), (0, 1, 3));
        assert_eq!(
            g0.passed,
            Count {
                packets: 3,
                bytes: 210
            }
        );
        assert_eq!(g0.hits.len(), 1);
        assert_eq!((g1.generation, g1.rules, g1.packets), (1, 2, 6));
        assert_eq!(
            g1.passed,
            Count {
                packets: 2,
                bytes: 4
            }
        );
        assert_eq!(
            g1.rejected,
            Count {
                packets: 4,
                bytes: 10
            }
        );
        assert_eq!(
            g1.default,
            Count {
                packets: 2,
                bytes: 8
            }
        );
        assert_eq!(
            g1.hits
                .iter()
                .map(|h| (h.id, h.packets))
                .collect::<Vec<_>>(),
            [(1, 2), (2, 2)]
        );
    }
}

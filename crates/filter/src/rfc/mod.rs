//! Recursive Flow Classification (Gupta and McKeown, "Packet Classification
//! on Multiple Fields", SIGCOMM 1999) for IPv4 rule sets whose tables stay
//! small: a lookup is a fixed sequence of table reads with no branch on the
//! data, where a decision tree walks levels of different depths and scans
//! leaves.
//!
//! The key is cut into seven chunks: the high and low halves of each
//! address, each port, and the protocol dimension (`protocol·2 +
//! established`, as in the trees). Phase 0 maps each chunk to its class: the
//! set of rules that match that chunk value (values with the same set share
//! a class). Each later step maps a pair of classes to the class of the
//! rules alive in both, through a table indexed by the pair; the last step's
//! table holds the first rule alive.
//!
//! - Phase 0: each 16-bit chunk through an index of deduplicated 32-entry
//!   blocks (two reads, a few KiB where a flat table takes 128 KiB); the
//!   protocol through a flat 512-entry table.
//! - Each address's halves are combined first; the addresses, the protocol
//!   and the ports (five units) are then combined in the order that makes the
//!   smallest tables. The classes of a set of units do not depend on the
//!   order that made it, so the build searches the orders by dynamic
//!   programming over the 31 sets of units, skipping sets that cannot be in
//!   a plan under the memory budget (`least` below).
//! - A port or protocol chunk with a single class is folded into another
//!   chunk's classes and takes no step (ClassBench's acl sets never name a
//!   source port).
//!
//! A class keeps only the rules that can still be a first match: a rule
//! that an earlier rule of the class covers on every chunk not yet combined
//! can never be the first match once those chunks are, so it is dropped
//! (this is what keeps wildcard-heavy sets from multiplying classes).
//! Lookups go `LANES` keys at a time, step by step, so that the keys' reads
//! overlap. The build gives up (and the trees serve) past `MAX_RULES`, the
//! memory budget or `MAX_WORK`.
//!
//! `classes` holds the build's sets of rules and the pruning that keeps
//! them small; `tables` holds the tables a lookup reads. This module
//! plans the steps, builds the tables and runs the lookups.

mod classes;
mod tables;

use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

use crate::fast::{LeafRule, V4_DIMS};

use classes::{chunk_ranges, first_bit, intersect, sparse, Classes, Columns, Pruner};
use tables::{Chunk16, Sparse, Step};

/// The seven chunks.
const CHUNKS: usize = 7;
const S_HI: usize = 0;
const S_LO: usize = 1;
const D_HI: usize = 2;
const D_LO: usize = 3;
const SP: usize = 4;
const DP: usize = 5;
const PR: usize = 6;
/// Bits of each chunk.
const WIDTH: [u32; CHUNKS] = [16, 16, 16, 16, 16, 16, 9];
/// Survivors of a class that prune the rules after them (the rest are kept
/// as they are: fewer classes are merged, the answer is the same): this
/// many for sets of up to `PRUNE_MORE` rules, one for larger ones. More
/// pruners merge a few more classes (ipc1_1k's tables 8% smaller than with
/// one) but take a third of a 10K set's build time (acl3: 0.85 s against
/// 0.62 s with one, for tables 4% larger).
const PRUNERS: usize = 4;
const PRUNE_MORE: usize = 4096;
/// Sets of at most this many rules are pruned rule against rule; larger
/// ones through cached rows of the cover relation.
const FEW: usize = 16;
/// The most rules the tables are built for: past it, the build (quadratic
/// in the rules where classes are large) would no longer stay under a
/// second; the 100K ClassBench sets are the trees'.
pub(crate) const MAX_RULES: usize = 16384;
/// The most work a build may do (set words intersected and pruned, rows of
/// the cover relation worked out): past it, the build gives up and the trees
/// serve. Counted, not timed, so the choice does not depend on the machine's
/// load. The ClassBench sets whose tables fit take tens of millions of
/// units (1K) to a few hundred million (acl1_10k, acl3_10k); those whose
/// tables do not fit mostly stop on the budget well before it.
const MAX_WORK: u64 = 1_000_000_000;

/// Keys `classify_lanes` takes at once.
pub(crate) const LANES: usize = 16;
/// Slots a lookup fills: the seven chunks' classes, then one per step.
const SLOTS: usize = 16;

/// The built tables.
#[derive(Clone, Debug)]
pub(crate) struct Rfc {
    p0: [Chunk16; 6],
    proto: Box<[u16; 512]>,
    /// In order; the last one's cells are the first match plus one (0 for
    /// none).
    steps: Vec<Step>,
    /// No step's table is sparse.
    dense: bool,
    stats: RfcStats,
}

/// Sizes of a built table set, for reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RfcStats {
    /// Classes of each chunk.
    pub chunk_classes: [usize; CHUNKS],
    /// The combinations, as "(a b)" of the chunks `sh sl dh dl sp dp pr`,
    /// with their cells.
    pub plan: String,
    /// Phase 0's bytes, and all the tables' (phase 0 included).
    pub phase0_bytes: usize,
    pub bytes: usize,
}

/// The classes of one chunk over its whole value range.
fn phase0(
    c: usize,
    ranges: &[[(u32, u32); CHUNKS]],
    pruner: &mut Pruner<'_>,
) -> Option<(Vec<u16>, Classes)> {
    let dom = 1u32 << WIDTH[c];
    let w = pruner.words;
    // Rules entering (at lo) and leaving (after hi), in value order.
    let mut events: Vec<(u32, usize)> = Vec::with_capacity(ranges.len() * 2);
    for (r, rr) in ranges.iter().enumerate() {
        events.push((rr[c].0, r));
        if rr[c].1 + 1 < dom {
            events.push((rr[c].1 + 1, r));
        }
    }
    events.sort_unstable();
    let mut live = vec![0u64; w];
    let mut flat = vec![0u16; dom as usize];
    let mut classes = Classes::default();
    let remaining = !(1u8 << c) & 0x7f;
    let mut i = 0;
    let mut at = 0u32;
    while at < dom {
        while i < events.len() && events[i].0 == at {
            let r = events[i].1;
            live[r / 64] ^= 1 << (r % 64);
            i += 1;
        }
        let next = events.get(i).map_or(dom, |e| e.0);
        pruner.work += w as u64;
        if pruner.over() {
            return None;
        }
        let mut bits = sparse(&live);
        pruner.prune(remaining, &mut bits);
        let id = classes.intern(&bits)?;
        flat[at as usize..next as usize].fill(id);
        at = next;
    }
    Some((flat, classes))
}

/// A table over the product of `a`'s and `b`'s classes (row-major: cell
/// `i·|b| + j` for classes `i` of `a` and `j` of `b`). With `remaining`,
/// each cell is a class of the result (interned into the returned classes);
/// without, it is the first rule alive plus one. `None` past `budget`
/// cells, `max_classes` classes (or 65,536) or the work limit.
fn combine(
    a: &Classes,
    b: &Classes,
    remaining: Option<u8>,
    pruner: &mut Pruner<'_>,
    budget: usize,
    max_classes: usize,
) -> Option<(Box<[u16]>, Classes)> {
    let (na, nb) = (a.len(), b.len());
    let cells = na.checked_mul(nb)?;
    if cells > budget {
        return None;
    }
    // One side's sets are laid out as a bitmap, one at a time, and the
    // other's are scanned against it: the cheaper way round.
    let total = |c: &Classes| c.sets.iter().map(|s| s.len()).sum::<usize>();
    let (by_a, by_b) = (na.saturating_mul(total(b)), nb.saturating_mul(total(a)));
    let a_outer = by_a <= by_b;
    // The scan alone would pass the work limit: give up before starting.
    if pruner.total().saturating_add(by_a.min(by_b) as u64) > MAX_WORK {
        return None;
    }
    let (outer, inner) = if a_outer { (a, b) } else { (b, a) };
    let mut out = vec![0u16; cells];
    let mut classes = Classes::default();
    let mut dense = vec![0u64; pruner.words];
    let mut bits = Vec::new();
    for (io, o) in outer.sets.iter().enumerate() {
        for &(i, w) in o.iter() {
            *dense.get_mut(i as usize)? = w;
        }
        for (ii, s) in inner.sets.iter().enumerate() {
            pruner.work += s.len() as u64 + 1;
            if pruner.over() {
                return None;
            }
            bits.clear();
            for &(i, w) in s.iter() {
                let x = w & dense.get(i as usize).copied().unwrap_or(0);
                if x != 0 {
                    bits.push((i, x));
                }
            }
            let v = match remaining {
                Some(m) => {
                    pruner.prune(m, &mut bits);
                    let id = classes.intern(&bits)?;
                    if classes.len() > max_classes {
                        return None;
                    }
                    id
                }
                None => match first_bit(&bits, 0) {
                    Some(r) => u16::try_from(r + 1).ok()?,
                    None => 0,
                },
            };
            let cell = if a_outer { io * nb + ii } else { ii * nb + io };
            *out.get_mut(cell)? = v;
        }
        for &(i, _) in o.iter() {
            *dense.get_mut(i as usize)? = 0;
        }
    }
    Some((out.into(), classes))
}

/// The units the plan combines: each address (its two halves combined
/// first), the protocol, and each port.
const UNITS: [u8; 5] = [
    1 << S_HI | 1 << S_LO,
    1 << D_HI | 1 << D_LO,
    1 << PR,
    1 << SP,
    1 << DP,
];
const ALL: u8 = 0x7f;
const CHUNK_NAMES: [&str; CHUNKS] = ["sh", "sl", "dh", "dl", "sp", "dp", "pr"];

/// A combination of units being planned: its classes, the table that
/// makes them (none for a single chunk), and the tables under it.
struct Part {
    classes: Classes,
    /// The two parts (by unit subset) and the table; `None` for a chunk.
    made: Option<(usize, usize, Box<[u16]>)>,
    /// Cells of every table in this part.
    cost: usize,
    /// For a single chunk: its index.
    chunk: Option<usize>,
}

impl Rfc {
    /// The tables for `boxes` (IPv4 rules, by index), or `None` when there
    /// are too many rules, a box is not a product of chunk ranges, or the
    /// tables would take more than `budget` bytes.
    pub(crate) fn build(boxes: &[LeafRule<V4_DIMS>], n_rules: usize, budget: usize) -> Option<Rfc> {
        if boxes.is_empty() || n_rules > MAX_RULES {
            return None;
        }
        // Rules without an IPv4 box never match an IPv4 key: they get an
        // empty range (lo > hi), which no value and no cover meets.
        let mut ranges = vec![[(1u32, 0u32); CHUNKS]; n_rules];
        for b in boxes {
            *ranges.get_mut(b.index as usize)? = chunk_ranges(b)?;
        }
        let cells_budget = budget / 2;
        let spent = AtomicU64::new(0);
        let cols = Columns::new(&ranges);
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
        let mut pruners: Vec<Pruner> = (0..threads)
            .map(|_| Pruner::new(&ranges, &cols, &spent))
            .collect();
        // Phase 0, a chunk a job.
        let mut flats = Vec::with_capacity(CHUNKS);
        // Parts by unit subset (bit u: unit u); chunk parts apart.
        let mut chunks: Vec<Part> = Vec::with_capacity(CHUNKS);
        let p0 = run((0..CHUNKS).collect(), &mut pruners, &|c, pruner| {
            phase0(c, &ranges, pruner)
        });
        for (c, done) in p0.into_iter().enumerate() {
            let (flat, classes) = done.flatten()?;
            flats.push(flat);
            chunks.push(Part {
                classes,
                made: None,
                cost: 0,
                chunk: Some(c),
            });
        }
        // A port or protocol chunk that all values put in one class tells
        // nothing apart: its class is folded into another such chunk's
        // classes (their intersection) and it takes no step.
        let mut folded = [false; CHUNKS];
        for c in [SP, DP, PR] {
            if chunks[c].classes.len() != 1 {
                continue;
            }
            let Some(p) = [PR, DP, SP].into_iter().find(|&p| p != c && !folded[p]) else {
                continue;
            };
            let only = chunks[c].classes.sets[0].clone();
            let mut merged = Classes::default();
            let mut map = Vec::with_capacity(chunks[p].classes.len());
            let mut bits = Vec::new();
            for k in &chunks[p].classes.sets {
                intersect(k, &only, &mut bits);
                map.push(merged.intern(&bits)?);
            }
            for v in flats[p].iter_mut() {
                *v = *map.get(usize::from(*v))?;
            }
            chunks[p].classes = merged;
            folded[c] = true;
        }
        let p0: Vec<Chunk16> = flats[..6]
            .iter()
            .map(|f| Chunk16::new(f))
            .collect::<Option<_>>()?;
        let p0_bytes = p0.iter().map(Chunk16::memory_bytes).sum::<usize>() + 1024;
        let cells_budget = cells_budget.checked_sub(p0_bytes / 2)?;
        let chunk_classes: [usize; CHUNKS] = core::array::from_fn(|c| chunks[c].classes.len());
        // What is left to combine after a subset of units: a folded chunk is
        // always counted as left (a weaker prune, never a wrong one).
        let folded_mask = (0..CHUNKS)
            .filter(|&c| folded[c])
            .fold(0u8, |m, c| m | 1 << c);
        let mask_of = |set: usize| -> u8 {
            (0..UNITS.len())
                .filter(|u| set >> u & 1 == 1)
                .fold(0, |m, u| m | UNITS[u])
                & !folded_mask
        };
        // Units 0 and 1 are the addresses' two halves combined, a job each.
        let mut parts: Vec<Option<Part>> = (0..1 << UNITS.len()).map(|_| None).collect();
        let addresses = run(
            vec![(S_HI, S_LO), (D_HI, D_LO)],
            &mut pruners,
            &|(hi, lo), pruner| {
                let u = usize::from(hi != S_HI);
                let rem = ALL & !UNITS[u];
                let (a, b) = (&chunks[hi].classes, &chunks[lo].classes);
                // The address is combined with the rest later, which has at
                // least as many classes as any of its chunks (see `least` below).
                let others: &[usize] = match u {
                    0 => &[D_HI, D_LO, PR, SP, DP],
                    _ => &[S_HI, S_LO, PR, SP, DP],
                };
                let rest = others
                    .iter()
                    .map(|&c| chunk_classes[c])
                    .max()
                    .unwrap_or(1)
                    .max(1);
                let cells = a.len().saturating_mul(b.len());
                let max_classes = cells_budget.saturating_sub(cells) / rest;
                // An address's table is one of at least three in any plan.
                combine(a, b, Some(rem), pruner, cells_budget / 4, max_classes)
            },
        );
        let mut chunks: Vec<Option<Part>> = chunks.into_iter().map(Some).collect();
        for (u, ((hi, lo), done)) in [(S_HI, S_LO), (D_HI, D_LO)]
            .into_iter()
            .zip(addresses)
            .enumerate()
        {
            let (table, classes) = done.flatten()?;
            let cost = table.len();
            parts[1 << u] = Some(Part {
                classes,
                made: Some((CHUNK_BASE + hi, CHUNK_BASE + lo, table)),
                cost,
                chunk: None,
            });
        }
        let mut full = 0b11usize;
        for (u, c) in [(2, PR), (3, SP), (4, DP)] {
            if !folded[c] {
                parts[1 << u] = chunks[c].take();
                full |= 1 << u;
            }
        }
        // Then every subset of units, by its cheapest split, where that can
        // beat the bound: the subsets of one size are made side by side (the
        // classes of a subset do not depend on how it was made, only its
        // cost does).
        let mut bound = cells_budget;
        for size in 2..=UNITS.len() as u32 {
            let mut jobs = Vec::new();
            for set in (1..=full).filter(|s| s & !full == 0 && s.count_ones() == size) {
                let mut best: Option<(usize, usize, usize)> = None;
                let mut a = (set - 1) & set;
                while a > 0 {
                    let b = set & !a;
                    if a < b {
                        if let (Some(pa), Some(pb)) = (&parts[a], &parts[b]) {
                            let cost = pa.cost
                                + pb.cost
                                + pa.classes.len().saturating_mul(pb.classes.len());
                            if best.is_none_or(|x| cost < x.2) {
                                best = Some((a, b, cost));
                            }
                        }
                    }
                    a = (a - 1) & set;
                }
                let Some((a, b, cost)) = best else { continue };
                // A part short of the whole is later combined, in one step
                // or more, with every unit not in it; each step's table has
                // at least the part's classes times that unit's, taking the
                // classes of a union to be at least those of its parts
                // (pruning rarely merges them). A part that cannot be in a
                // plan under the bound that way is not made, and its making
                // stops once its classes say so.
                let rest = (0..UNITS.len())
                    .filter(|u| full >> u & 1 == 1 && set >> u & 1 == 0)
                    .filter_map(|u| parts[1 << u].as_ref().map(|p| p.classes.len()))
                    .max();
                let classes = |s: usize| parts[s].as_ref().map_or(0, |p| p.classes.len());
                let (least, max_classes) = match rest {
                    Some(r) => (
                        cost.saturating_add(classes(a).max(classes(b)).saturating_mul(r)),
                        bound.saturating_sub(cost) / r.max(1),
                    ),
                    None => (cost, usize::MAX),
                };
                if least < bound && cost <= cells_budget {
                    jobs.push((set, a, b, cost, max_classes));
                }
            }
            let made = run(
                jobs.clone(),
                &mut pruners,
                &|(set, a, b, _, max_classes), pruner| {
                    let (pa, pb) = (parts[a].as_ref()?, parts[b].as_ref()?);
                    let rem = if set == full {
                        None
                    } else {
                        Some(ALL & !mask_of(set))
                    };
                    combine(
                        &pa.classes,
                        &pb.classes,
                        rem,
                        pruner,
                        cells_budget,
                        max_classes,
                    )
                },
            );
            for ((set, a, b, cost, _), done) in jobs.into_iter().zip(made) {
                if let Some((table, classes)) = done.flatten() {
                    parts[set] = Some(Part {
                        classes,
                        made: Some((a, b, table)),
                        cost,
                        chunk: None,
                    });
                    if set == full {
                        bound = bound.min(cost);
                    }
                }
            }
        }
        let top = parts[full].take()?;
        if p0_bytes + top.cost * 2 > budget {
            return None;
        }
        // The steps, children first.
        let mut steps = Vec::new();
        let slot = emit(top, &mut parts, &mut chunks, &mut steps)?;
        if slot + 1 != CHUNKS + steps.len() || steps.len() + CHUNKS > SLOTS {
            return None;
        }
        // Sparse tables where they save a tenth of the whole: a plan with
        // one costs every step a branch (see `classify_lanes`).
        let dense_bytes: usize = steps.iter().map(|s| s.dense.len() * 2).sum();
        let saved: usize = steps
            .iter()
            .filter_map(|s| Some((s.dense.len() * 2).saturating_sub(s.sparse.as_ref()?.bytes())))
            .sum();
        let pack = saved * 10 >= p0_bytes + dense_bytes;
        for s in &mut steps {
            if !pack {
                s.sparse = None;
            } else if s.sparse.is_some() {
                s.dense = Box::default();
            }
        }
        let plan = plan_text(&steps, steps.len() + CHUNKS - 1);
        let mut proto = Box::new([0u16; 512]);
        proto.copy_from_slice(&flats[PR]);
        let bytes = p0_bytes + steps.iter().map(Step::bytes).sum::<usize>();
        Some(Rfc {
            p0: p0.try_into().ok()?,
            proto,
            dense: steps.iter().all(|s| s.sparse.is_none()),
            steps,
            stats: RfcStats {
                chunk_classes,
                plan,
                phase0_bytes: p0_bytes,
                bytes,
            },
        })
    }

    /// The first rule that matches an IPv4 key (`[src, dst, sport, dport,
    /// protocol·2 + established]`).
    #[inline(always)]
    pub(crate) fn classify(&self, k: &[u32; V4_DIMS]) -> Option<u32> {
        let mut v = [0usize; SLOTS];
        v[S_HI] = self.p0[S_HI].get(k[0] >> 16);
        v[S_LO] = self.p0[S_LO].get(k[0]);
        v[D_HI] = self.p0[D_HI].get(k[1] >> 16);
        v[D_LO] = self.p0[D_LO].get(k[1]);
        v[SP] = self.p0[SP].get(k[2]);
        v[DP] = self.p0[DP].get(k[3]);
        v[PR] = usize::from(self.proto[(k[4] & 511) as usize]);
        let mut last = 0;
        for (i, s) in self.steps.iter().enumerate() {
            last = s.get(v[usize::from(s.a) % SLOTS], v[usize::from(s.b) % SLOTS]);
            v[(CHUNKS + i) % SLOTS] = last;
        }
        (last as u32).checked_sub(1)
    }

    /// `classify` of up to `LANES` keys at once, step by step, so that the
    /// keys' reads overlap.
    #[inline]
    pub(crate) fn classify_lanes(&self, keys: &[[u32; V4_DIMS]], out: &mut [Option<u32>]) {
        // A branch per step on the table's kind costs a quarter of the time
        // of a plan of dense tables alone (measured: acl1_1k 12.7 -> 16 ns),
        // so such plans get a loop without it.
        if self.dense {
            self.lanes::<false>(keys, out);
        } else {
            self.lanes::<true>(keys, out);
        }
    }

    #[inline(always)]
    fn lanes<const MIXED: bool>(&self, keys: &[[u32; V4_DIMS]], out: &mut [Option<u32>]) {
        let n = keys.len().min(LANES).min(out.len());
        let mut v = [[0usize; LANES]; SLOTS];
        for (j, k) in keys.iter().enumerate().take(n) {
            v[S_HI][j] = self.p0[S_HI].get(k[0] >> 16);
            v[S_LO][j] = self.p0[S_LO].get(k[0]);
            v[D_HI][j] = self.p0[D_HI].get(k[1] >> 16);
            v[D_LO][j] = self.p0[D_LO].get(k[1]);
            v[SP][j] = self.p0[SP].get(k[2]);
            v[DP][j] = self.p0[DP].get(k[3]);
            v[PR][j] = usize::from(self.proto[(k[4] & 511) as usize]);
        }
        let mut to = CHUNKS;
        for s in &self.steps {
            let (a, b) = (v[usize::from(s.a) % SLOTS], v[usize::from(s.b) % SLOTS]);
            v[to % SLOTS] = match &s.sparse {
                Some(sparse) if MIXED => sparse_lanes(sparse, &a, &b),
                _ => dense_lanes(&s.dense, s.row, a, b),
            };
            to += 1;
        }
        let last = &v[(to - 1) % SLOTS];
        for (o, &m) in out.iter_mut().zip(last).take(n) {
            *o = (m as u32).checked_sub(1);
        }
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        self.stats.bytes
    }

    pub(crate) fn stats(&self) -> RfcStats {
        self.stats.clone()
    }
}

/// The lanes' reads of a sparse table.
#[inline(always)]
fn sparse_lanes(t: &Sparse, a: &[usize; LANES], b: &[usize; LANES]) -> [usize; LANES] {
    let mut r = [0usize; LANES];
    for j in 0..LANES {
        r[j] = t.get(a[j], b[j]);
    }
    r
}

/// The lanes' reads of a dense table.
#[inline(always)]
fn dense_lanes(t: &[u16], row: usize, a: [usize; LANES], b: [usize; LANES]) -> [usize; LANES] {
    let mut r = [0usize; LANES];
    for j in 0..LANES {
        r[j] = dense_get(t, row, a[j], b[j]);
    }
    r
}

/// Cell `(a, b)` of a dense table of rows of `row`.
#[inline(always)]
fn dense_get(t: &[u16], row: usize, a: usize, b: usize) -> usize {
    usize::from(t.get(a * row + b).copied().unwrap_or(0))
}

/// Runs `f` on every job, on as many threads as there are pruners (each
/// thread with its own), and gives the results in the jobs' order (`None`
/// for a job no thread ran, which only a thread's panic leaves).
fn run<J: Send, R: Send>(
    jobs: Vec<J>,
    pruners: &mut [Pruner<'_>],
    f: &(dyn Fn(J, &mut Pruner<'_>) -> R + Sync),
) -> Vec<Option<R>> {
    let n = jobs.len();
    let mut queue: Vec<(usize, J)> = jobs.into_iter().enumerate().collect();
    queue.reverse();
    let queue = Mutex::new(queue);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..n).map(|_| None).collect());
    let work = |pruner: &mut Pruner<'_>| loop {
        let job = match queue.lock() {
            Ok(mut q) => q.pop(),
            Err(_) => None,
        };
        let Some((i, job)) = job else {
            return;
        };
        let r = f(job, pruner);
        if let Ok(mut res) = results.lock() {
            if let Some(slot) = res.get_mut(i) {
                *slot = Some(r);
            }
        }
    };
    std::thread::scope(|s| {
        let mut each = pruners.iter_mut().take(n.max(1));
        let first = each.next();
        for pruner in each {
            // A thread that cannot be had leaves its jobs to the others.
            let _ = std::thread::Builder::new()
                .name("rfc-build".into())
                .spawn_scoped(s, || work(pruner));
        }
        if let Some(pruner) = first {
            work(pruner);
        }
    });
    results.into_inner().unwrap_or_default()
}

/// Part references in `made` below this are unit subsets; from it on,
/// chunks.
const CHUNK_BASE: usize = 1 << 8;

/// Appends the steps that compute `part` (its children first) and returns
/// the slot that holds its value.
fn emit(
    part: Part,
    parts: &mut [Option<Part>],
    chunks: &mut [Option<Part>],
    steps: &mut Vec<Step>,
) -> Option<usize> {
    if let Some(c) = part.chunk {
        return Some(c);
    }
    let (a, b, table) = part.made?;
    let (sa, _) = emit_ref(a, parts, chunks, steps)?;
    let (sb, nb) = emit_ref(b, parts, chunks, steps)?;
    // Packed or not is decided for the whole plan (`Rfc::build`).
    let sparse = Sparse::pack(&table, nb).map(Box::new);
    steps.push(Step {
        a: u8::try_from(sa).ok()?,
        b: u8::try_from(sb).ok()?,
        row: nb,
        cells: table.len(),
        dense: table,
        sparse,
    });
    Some(CHUNKS + steps.len() - 1)
}

/// The plan that fills `slot`, as "(a b)[cells]" of the chunks' names.
fn plan_text(steps: &[Step], slot: usize) -> String {
    match slot.checked_sub(CHUNKS).and_then(|i| steps.get(i)) {
        None => CHUNK_NAMES.get(slot).copied().unwrap_or("?").to_string(),
        Some(s) => format!(
            "({} {})[{}{}]",
            plan_text(steps, usize::from(s.a)),
            plan_text(steps, usize::from(s.b)),
            s.cells,
            if s.sparse.is_some() { " sparse" } else { "" }
        ),
    }
}

/// `emit` of a part named in `made`, and its number of classes.
fn emit_ref(
    r: usize,
    parts: &mut [Option<Part>],
    chunks: &mut [Option<Part>],
    steps: &mut Vec<Step>,
) -> Option<(usize, usize)> {
    let p = if r >= CHUNK_BASE {
        chunks.get_mut(r - CHUNK_BASE)?.take()?
    } else {
        parts.get_mut(r)?.take()?
    };
    let n = p.classes.len();
    Some((emit(p, parts, chunks, steps)?, n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fast::v4_box;
    use crate::key::PacketKey;
    use crate::rule::{AddrMatch, PortRange, ProtoMatch, Rule};
    use core::net::Ipv4Addr;

    /// xorshift64: deterministic rules and keys.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    fn addr(g: &mut Rng) -> AddrMatch {
        // A small pool of networks so that rules overlap, some wildcards.
        let base = [0x0a00_0000u32, 0x0a01_0000, 0xc0a8_0100, 0x8000_0000][g.below(4) as usize];
        match g.below(5) {
            0 => AddrMatch::Any,
            _ => AddrMatch::v4(
                Ipv4Addr::from(base | (g.below(1 << 12) as u32) << 4),
                [0, 1, 8, 12, 16, 17, 20, 24, 28, 31, 32][g.below(11) as usize],
            ),
        }
    }

    fn ports(g: &mut Rng, wild: bool) -> PortRange {
        let (a, b) = (g.below(2000) as u16, g.below(2000) as u16);
        match if wild { 0 } else { g.below(4) } {
            0 => PortRange::ANY,
            1 => PortRange { lo: a, hi: a },
            2 => PortRange {
                lo: a.min(b),
                hi: a.max(b),
            },
            _ => PortRange {
                lo: 1024,
                hi: 65535,
            },
        }
    }

    fn rules(g: &mut Rng, n: usize, sport_wild: bool) -> Vec<Rule> {
        (0..n)
            .map(|i| Rule {
                id: i as u32,
                action: crate::rule::Action::Pass,
                src: addr(g),
                dst: addr(g),
                proto: [
                    ProtoMatch::Any,
                    ProtoMatch::Tcp,
                    ProtoMatch::Udp,
                    ProtoMatch::Established,
                    ProtoMatch::Number(1),
                ][g.below(5) as usize],
                src_port: ports(g, sport_wild),
                dst_port: ports(g, false),
                line: i + 1,
            })
            .collect()
    }

    /// A key near a rule's edges (its bounds, one off either side), or random.
    fn key(g: &mut Rng, rules: &[Rule]) -> PacketKey {
        let r = &rules[g.below(rules.len() as u64) as usize];
        let near = |g: &mut Rng, a: &AddrMatch| -> u32 {
            let (lo, hi) = match *a {
                AddrMatch::V4 { addr, len } => (addr, addr | !crate::rule::mask32(len)),
                _ => (0, u32::MAX),
            };
            [
                lo,
                hi,
                lo.wrapping_sub(1),
                hi.wrapping_add(1),
                g.next() as u32,
            ][g.below(5) as usize]
        };
        let port = |g: &mut Rng, p: &PortRange| -> u16 {
            [
                p.lo,
                p.hi,
                p.lo.wrapping_sub(1),
                p.hi.wrapping_add(1),
                g.next() as u16,
            ][g.below(5) as usize]
        };
        let mut k = PacketKey::v4(
            near(g, &r.src),
            near(g, &r.dst),
            [1u8, 6, 17, 47][g.below(4) as usize],
            port(g, &r.src_port),
            port(g, &r.dst_port),
        );
        k.tcp_flags = [0u16, 0x02, 0x10, 0x04, 0x12][g.below(5) as usize];
        k
    }

    fn boxes(rules: &[Rule]) -> Vec<LeafRule<V4_DIMS>> {
        rules
            .iter()
            .enumerate()
            .filter_map(|(i, r)| v4_box(r, i))
            .collect()
    }

    fn v4(k: &PacketKey) -> [u32; V4_DIMS] {
        let (core::net::IpAddr::V4(s), core::net::IpAddr::V4(d)) = (k.src, k.dst) else {
            panic!("an IPv4 key");
        };
        [
            u32::from(s),
            u32::from(d),
            u32::from(k.src_port),
            u32::from(k.dst_port),
            2 * u32::from(k.protocol) + u32::from(k.established()),
        ]
    }

    fn assert_exact(rules: &[Rule], t: &Rfc, g: &mut Rng, n: usize) {
        let keys: Vec<PacketKey> = (0..n).map(|_| key(g, rules)).collect();
        let k4: Vec<[u32; V4_DIMS]> = keys.iter().map(v4).collect();
        let mut lanes = vec![None; keys.len()];
        for (ks, out) in k4.chunks(LANES).zip(lanes.chunks_mut(LANES)) {
            t.classify_lanes(ks, out);
        }
        for (i, k) in keys.iter().enumerate() {
            let want = rules.iter().position(|r| r.matches(k)).map(|i| i as u32);
            assert_eq!(t.classify(&k4[i]), want, "key {k}");
            assert_eq!(lanes[i], want, "key {k} in lanes");
        }
    }

    #[test]
    fn tables_give_the_first_match_on_sets_of_every_shape() {
        let mut g = Rng(0x9e37_79b9_7f4a_7c15);
        for (n, sport_wild) in [
            (1, false),
            (7, false),
            (60, false),
            (300, true),
            (800, false),
        ] {
            let rs = rules(&mut g, n, sport_wild);
            let t = Rfc::build(&boxes(&rs), rs.len(), 8 << 20)
                .unwrap_or_else(|| panic!("tables within budget, {n} rules"));
            assert_exact(&rs, &t, &mut g, 20_000);
        }
    }

    #[test]
    fn a_sparse_table_reads_as_the_dense_one() {
        let mut g = Rng(3);
        for (rows, row, per_mille) in [(300, 200, 20), (100, 700, 5), (2000, 30, 50), (70, 300, 0)]
        {
            let cells: Vec<u16> = (0..rows * row)
                .map(|_| {
                    if g.below(1000) < per_mille {
                        g.below(5000) as u16
                    } else {
                        7
                    }
                })
                .collect();
            let s = Sparse::pack(&cells, row).expect("sparse enough to pack");
            assert!(s.bytes() * 3 <= cells.len() * 2, "{} bytes", s.bytes());
            for a in 0..rows {
                for b in 0..row {
                    assert_eq!(
                        s.get(a, b),
                        usize::from(cells[a * row + b]),
                        "cell ({a}, {b})"
                    );
                }
            }
        }
        // Dense tables and small ones stay dense.
        let dense: Vec<u16> = (0..200 * 200).map(|i| (i % 13) as u16).collect();
        assert!(Sparse::pack(&dense, 200).is_none());
        assert!(Sparse::pack(&[7; 100], 10).is_none());
    }

    #[test]
    fn a_plan_with_sparse_tables_gives_the_first_match() {
        // Each rule pairs its own source /24 with its own destination /24,
        // as acl5's rules do: most source and destination classes meet in
        // no rule, so the tables that combine them are mostly one value.
        let mut g = Rng(21);
        let rs: Vec<Rule> = (0..400u32)
            .map(|i| Rule {
                id: i,
                action: crate::rule::Action::Pass,
                src: AddrMatch::v4(
                    Ipv4Addr::from(0x0a00_0000 | (g.below(1 << 16) as u32) << 8),
                    24,
                ),
                dst: AddrMatch::v4(
                    Ipv4Addr::from(0xc000_0000 | (g.below(1 << 16) as u32) << 8),
                    24,
                ),
                proto: [ProtoMatch::Tcp, ProtoMatch::Udp][g.below(2) as usize],
                src_port: PortRange::ANY,
                dst_port: ports(&mut g, false),
                line: i as usize + 1,
            })
            .collect();
        let t = Rfc::build(&boxes(&rs), rs.len(), 8 << 20).expect("tables");
        assert!(t.stats().plan.contains("sparse"), "{}", t.stats().plan);
        assert!(!t.dense);
        assert_exact(&rs, &t, &mut g, 20_000);
    }

    #[test]
    fn a_port_that_tells_nothing_apart_takes_no_step() {
        let mut g = Rng(77);
        let rs = rules(&mut g, 200, true);
        let t = Rfc::build(&boxes(&rs), rs.len(), 8 << 20).expect("tables");
        assert_eq!(t.stats().chunk_classes[SP], 1);
        assert!(!t.stats().plan.contains("sp"), "{}", t.stats().plan);
        assert_exact(&rs, &t, &mut g, 20_000);
    }

    #[test]
    fn no_tables_past_the_budget_or_without_ipv4_rules() {
        let mut g = Rng(5);
        let rs = rules(&mut g, 400, false);
        assert!(Rfc::build(&boxes(&rs), rs.len(), 4 << 10).is_none());
        assert!(Rfc::build(&[], 3, 8 << 20).is_none());
        let many = rules(&mut g, MAX_RULES + 1, false);
        assert!(Rfc::build(&boxes(&many), many.len(), 64 << 20).is_none());
    }

    #[test]
    fn rules_without_an_ipv4_box_never_match_through_the_tables() {
        let mut g = Rng(11);
        let mut rs = rules(&mut g, 50, false);
        for r in rs.iter_mut().step_by(3) {
            r.src = AddrMatch::v6("2001:db8::".parse().unwrap(), 32);
        }
        let t = Rfc::build(&boxes(&rs), rs.len(), 8 << 20).expect("tables");
        assert_exact(&rs, &t, &mut g, 5_000);
    }
}

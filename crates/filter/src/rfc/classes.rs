//! The build's sets of rules: the ranges a rule covers in each chunk, the
//! rule sets (classes) as sparse bit sets, and the pruner that drops the
//! rules an earlier rule of the class covers on every chunk not yet
//! combined, which can never be the first match.

use std::sync::atomic::{AtomicU64, Ordering};

use rustc_hash::FxHashMap as HashMap;

use crate::fast::{LeafRule, V4_DIMS};

use super::{CHUNKS, FEW, MAX_WORK, PRUNERS, PRUNE_MORE};

/// A chunk's per-rule range, for every rule: `None` when a rule's box is not
/// a product of chunk ranges (an address range that is not a prefix).
pub(super) fn chunk_ranges(b: &LeafRule<V4_DIMS>) -> Option<[(u32, u32); CHUNKS]> {
    let split = |lo: u32, hi: u32| -> Option<[(u32, u32); 2]> {
        let (lh, hh) = (lo >> 16, hi >> 16);
        let (ll, hl) = (lo & 0xffff, hi & 0xffff);
        if lh == hh {
            Some([(lh, hh), (ll, hl)])
        } else if ll == 0 && hl == 0xffff {
            Some([(lh, hh), (0, 0xffff)])
        } else {
            None
        }
    };
    let [s_hi, s_lo] = split(b.lo[0], b.hi[0])?;
    let [d_hi, d_lo] = split(b.lo[1], b.hi[1])?;
    let port = |d: usize| (b.lo[d].min(0xffff), b.hi[d].min(0xffff));
    Some([
        s_hi,
        s_lo,
        d_hi,
        d_lo,
        port(2),
        port(3),
        (b.lo[4].min(511), b.hi[4].min(511)),
    ])
}

/// A set of rules: the bitmap's non-zero 64-bit words with their word
/// index, in order (classes past the first phase hold few rules, so this
/// keeps their intersections and hashes short).
pub(super) type Bits = Box<[(u32, u64)]>;

pub(super) fn sparse(dense: &[u64]) -> Vec<(u32, u64)> {
    (0u32..)
        .zip(dense.iter().copied())
        .filter(|&(_, w)| w != 0)
        .collect()
}

/// `a ∩ b` into `out`.
pub(super) fn intersect(a: &[(u32, u64)], b: &[(u32, u64)], out: &mut Vec<(u32, u64)>) {
    out.clear();
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let (ia, wa) = a[i];
        let (ib, wb) = b[j];
        if ia < ib {
            i += 1;
        } else if ib < ia {
            j += 1;
        } else {
            if wa & wb != 0 {
                out.push((ia, wa & wb));
            }
            i += 1;
            j += 1;
        }
    }
}

/// The first rule of `bits` at or after `from`.
pub(super) fn first_bit(bits: &[(u32, u64)], from: usize) -> Option<usize> {
    bits.iter().find_map(|&(i, w)| {
        let base = i as usize * 64;
        let w = if base + 64 <= from {
            0
        } else if base < from {
            w & (u64::MAX << (from - base))
        } else {
            w
        };
        (w != 0).then(|| base + w.trailing_zeros() as usize)
    })
}

/// Equivalence classes of one table's output: distinct rule bitmaps.
#[derive(Default)]
pub(super) struct Classes {
    pub(super) sets: Vec<Bits>,
    pub(super) ids: HashMap<Bits, u16>,
}

impl Classes {
    /// The id of `bits`, new or not; `None` past 65,536 classes.
    pub(super) fn intern(&mut self, bits: &[(u32, u64)]) -> Option<u16> {
        if let Some(&id) = self.ids.get(bits) {
            return Some(id);
        }
        let id = u16::try_from(self.sets.len()).ok()?;
        self.sets.push(bits.into());
        self.ids.insert(bits.into(), id);
        Some(id)
    }

    pub(super) fn len(&self) -> usize {
        self.sets.len()
    }
}

/// Which later rules each rule covers on the chunks not yet combined,
/// worked out for a rule when a class first needs it.
/// Each build thread has its own (the rows are a cache).
pub(super) struct Pruner<'a> {
    pub(super) words: usize,
    /// Work done by this thread and not yet added to `spent`.
    pub(super) work: u64,
    /// Work done by all the build's threads (see `MAX_WORK`).
    pub(super) spent: &'a AtomicU64,
    pub(super) ranges: &'a [[(u32, u32); CHUNKS]],
    pub(super) cols: &'a Columns,
    /// Survivors of a set that prune the rules after them (`PRUNERS`).
    pub(super) pruners: usize,
    /// Per mask of remaining chunks (by the mask), per rule r: the rules
    /// after r that r covers there.
    pub(super) rows: Vec<Vec<Option<Box<[u64]>>>>,
}

/// The rules' chunk ranges chunk by chunk, for `cover_row`'s scans.
pub(super) struct Columns {
    pub(super) lo: [Vec<u32>; CHUNKS],
    pub(super) hi: [Vec<u32>; CHUNKS],
}

impl Columns {
    pub(super) fn new(ranges: &[[(u32, u32); CHUNKS]]) -> Columns {
        Columns {
            lo: core::array::from_fn(|c| ranges.iter().map(|r| r[c].0).collect()),
            hi: core::array::from_fn(|c| ranges.iter().map(|r| r[c].1).collect()),
        }
    }
}

/// The rules after `r` that rule `r` covers on the `remaining` chunks, as
/// `w` words: chunk by chunk, 64 rules a word (a loop the compiler
/// vectorises; rule by rule, this was a third of a 10K set's build).
fn cover_row(
    cols: &Columns,
    ranges: &[[(u32, u32); CHUNKS]],
    r: usize,
    remaining: u8,
    w: usize,
) -> Box<[u64]> {
    let n = ranges.len();
    let mut row = vec![0u64; w];
    for q in r + 1..n {
        row[q / 64] |= 1 << (q % 64);
    }
    let Some(a) = ranges.get(r) else {
        return row.into();
    };
    for c in (0..CHUNKS).filter(|c| remaining >> c & 1 == 1) {
        let (alo, ahi) = a[c];
        let (lo, hi) = (&cols.lo[c], &cols.hi[c]);
        let mut any = 0;
        for (i, word) in row.iter_mut().enumerate().skip((r + 1) / 64) {
            if *word == 0 {
                continue;
            }
            let start = i * 64;
            let end = (start + 64).min(n);
            let mut m = 0u64;
            for (k, (&l, &h)) in lo[start..end].iter().zip(&hi[start..end]).enumerate() {
                m |= u64::from((alo <= l) & (h <= ahi)) << k;
            }
            *word &= m;
            any |= *word;
        }
        if any == 0 {
            break;
        }
    }
    row.into()
}

/// Work a thread counts before adding it to the build's total.
const FLUSH: u64 = 1 << 20;

impl<'a> Pruner<'a> {
    pub(super) fn new(
        ranges: &'a [[(u32, u32); CHUNKS]],
        cols: &'a Columns,
        spent: &'a AtomicU64,
    ) -> Pruner<'a> {
        Pruner {
            cols,
            pruners: if ranges.len() > PRUNE_MORE {
                1
            } else {
                PRUNERS
            },
            words: ranges.len().div_ceil(64).max(1),
            work: 0,
            spent,
            rows: vec![Vec::new(); 128],
            ranges,
        }
    }

    /// The build's work so far, this thread's included.
    pub(super) fn total(&mut self) -> u64 {
        if self.work >= FLUSH {
            self.spent.fetch_add(self.work, Ordering::Relaxed);
            self.work = 0;
        }
        self.spent.load(Ordering::Relaxed) + self.work
    }

    /// Whether the build is past `MAX_WORK`.
    pub(super) fn over(&mut self) -> bool {
        self.total() > MAX_WORK
    }

    /// Drops from `bits` the rules that an earlier one in it covers on the
    /// `remaining` chunks.
    pub(super) fn prune(&mut self, remaining: u8, bits: &mut Vec<(u32, u64)>) {
        let ones: u32 = bits.iter().map(|&(_, w)| w.count_ones()).sum();
        if ones as usize <= FEW {
            self.prune_few(remaining, bits);
        } else {
            self.prune_rows(remaining, bits);
        }
    }

    /// `prune` of a small set: each pruner against the rules left after it.
    pub(super) fn prune_few(&mut self, remaining: u8, bits: &mut Vec<(u32, u64)>) {
        let mut rules = [0u32; FEW];
        let mut n = 0;
        for &(i, w) in bits.iter() {
            let mut w = w;
            while w != 0 && n < FEW {
                rules[n] = i * 64 + w.trailing_zeros();
                n += 1;
                w &= w - 1;
            }
        }
        let mut alive = [true; FEW];
        let mut dropped = false;
        let mut pruners = 0;
        for p in 0..n {
            if !alive[p] {
                continue;
            }
            let Some(a) = self.ranges.get(rules[p] as usize) else {
                return;
            };
            self.work += (n - p) as u64;
            for q in p + 1..n {
                if !alive[q] {
                    continue;
                }
                let Some(b) = self.ranges.get(rules[q] as usize) else {
                    return;
                };
                let covered = (0..CHUNKS)
                    .all(|c| remaining >> c & 1 == 0 || (a[c].0 <= b[c].0 && b[c].1 <= a[c].1));
                if covered {
                    alive[q] = false;
                    dropped = true;
                }
            }
            pruners += 1;
            if pruners == self.pruners {
                break;
            }
        }
        if dropped {
            bits.clear();
            for (&r, _) in rules[..n].iter().zip(&alive).filter(|(_, &a)| a) {
                match bits.last_mut() {
                    Some((i, w)) if *i == r / 64 => *w |= 1 << (r % 64),
                    _ => bits.push((r / 64, 1 << (r % 64))),
                }
            }
        }
    }

    /// `prune` of a large set: each pruner's row of the rules it covers,
    /// worked out once per rule and mask.
    pub(super) fn prune_rows(&mut self, remaining: u8, bits: &mut Vec<(u32, u64)>) {
        let mut from = 0;
        let (w, ranges) = (self.words, &self.ranges);
        let Some(rows) = self.rows.get_mut(usize::from(remaining)) else {
            return;
        };
        if rows.is_empty() {
            rows.resize(ranges.len(), None);
        }
        for _ in 0..self.pruners {
            self.work += bits.len() as u64;
            let Some(r) = first_bit(bits, from) else {
                return;
            };
            let Some(slot) = rows.get_mut(r) else {
                return;
            };
            if slot.is_none() {
                self.work += ranges.len() as u64;
            }
            let cols = self.cols;
            let row = slot.get_or_insert_with(|| cover_row(cols, ranges, r, remaining, w));
            let mut zero = false;
            for (i, w) in bits.iter_mut() {
                if *i as usize >= r / 64 {
                    *w &= !row.get(*i as usize).copied().unwrap_or(0);
                    zero |= *w == 0;
                }
            }
            if zero {
                bits.retain(|&(_, w)| w != 0);
            }
            from = r + 1;
        }
    }
}

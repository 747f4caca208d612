//! Exact counts of one interval's keys, and aguri's aggregation over them.
//!
//! aguri's trees ([`crate::tree`]) hold a budget of nodes and fold the least
//! recently used leaf into its parent when a new key needs room: a new key
//! walks the tree and reclaims a leaf (100-170 ns), and counts folded early
//! are reported under a shorter prefix than they belong to. This store keeps
//! every key of the interval instead: a key is appended to a buffer (a
//! store, 3 ns), and the summary is made from the buffer by a radix pass
//! over the keys' bytes, most significant first (`Reduce`): a block of
//! keys whose counts do not reach the threshold has no node that can, so it
//! stands as one node, the root of its subtree (where its smallest and
//! largest keys part), with its counts, and is not sorted further; the
//! others are split on the next byte. The Patricia tree of what is left is
//! implicit in its order (a branch is where two neighbours part), and
//! aguri's aggregation pass is one walk over it with a stack (`Walk`):
//! the entries the same, count for count, as
//! [`PatriciaTree::aggregate_with`](crate::tree::PatriciaTree::aggregate_with)
//! gives for a tree that holds every key (the tests compare them for every
//! metric, threshold and coarsening). On 1.2 million new IPv4 or IPv6
//! addresses, 8 ns a key against the tree's 100 and 170.
//!
//! A hash-indexed slot per key in front of the buffer (4,096 of them)
//! sums a key counted again soon (a popular port or host) in place.
//!
//! Memory is bounded: when the buffer reaches its capacity the keys are
//! sorted and their duplicates summed (when a sample of them shows some);
//! if that leaves it more than half full, what it holds is *collapsed*: every
//! node whose subtree holds [`COLLAPSE_SHARE`] of the threshold (of the totals
//! so far) is held, with what its light children hold folded into it, and
//! the buffer is emptied. Totals stay exact, and an interval with fewer
//! distinct keys than half the capacity is counted exactly; beyond, what is
//! lost is how traffic that was light when the store collapsed spreads
//! below the smallest heavy subtree around it (aguri's trees lose that at
//! every new key once their budget is full).

use crate::label::{mask, KeyKind, Prefix};
use crate::tree::{scale_of, similar, Entry, Metric};

/// A counted full-length key.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
struct Rec {
    key: u128,
    bytes: u64,
    packets: u64,
}

/// A prefix held by a collapse, with what was folded into it.
#[derive(Clone, Copy, Debug)]
struct Held {
    key: u128,
    len: u8,
    bytes: u64,
    packets: u64,
}

/// The share of the summary's threshold at which a collapse holds a
/// subtree (of the totals so far): half, so that a block that ends just
/// over the threshold was held whole through the interval. A sixteenth
/// made a flood of new addresses 40% slower to count than aguri's trees
/// (the walk over many more nodes at each collapse). Never below 16 keys'
/// worth of the capacity, and doubled while more than a quarter of the
/// capacity would be held, so that a threshold of 0 (every node with a
/// count reported) still bounds memory.
pub const COLLAPSE_SHARE: f64 = 0.5;

/// Slots of the recent keys in front of the buffer: 4,096 (128 KiB).
const RECENT_BITS: u32 = 12;

/// The smallest capacity (see [`ExactCounts::new`]).
pub const MIN_CAP: usize = 1024;

/// Every key of an interval in one key space, counted exactly while they
/// fit (see the module doc).
pub struct ExactCounts {
    kind: KeyKind,
    width: u8,
    /// The keys last counted, by a hash of the key, one each (empty: no
    /// counts): a key counted again while it is here is summed in place,
    /// not appended (a popular port or host, a flow let go again and
    /// again); one that is pushed out goes to the buffer.
    recent: Vec<Rec>,
    keys: Vec<Rec>,
    scratch: Vec<Rec>,
    held: Vec<Held>,
    pinned: Vec<(u128, u8)>,
    cap: usize,
    bytes: u64,
    packets: u64,
    /// What a collapse keeps (see [`collapse`](Self::collapse)).
    metric: Metric,
    threshold: f64,
}

/// The most significant byte `i` (0 first) of a key.
#[inline]
fn digit(key: u128, i: u32) -> usize {
    (key >> (120 - 8 * i)) as u8 as usize
}

/// An open node of the aggregation walk: a node whose subtree is being
/// walked.
#[derive(Clone, Copy, Debug)]
struct Open {
    key: u128,
    len: u8,
    pinned: bool,
    /// Its own counts, what its children folded into it, and what their
    /// subtrees hold.
    own: (u64, u64),
    acc: (u64, u64),
    sub: (u64, u64),
    /// Children whose subtree holds a reported entry.
    below: u8,
    children: [Option<Done>; 2],
}

impl Open {
    fn new(key: u128, len: u8, own: (u64, u64), pinned: bool) -> Open {
        Open {
            key,
            len,
            pinned,
            own,
            acc: (0, 0),
            sub: (0, 0),
            below: 0,
            children: [None, None],
        }
    }

    #[inline]
    fn contains(&self, key: u128, len: u8) -> bool {
        self.len <= len && (self.key ^ key).leading_zeros() >= u32::from(self.len)
    }
}

/// A finished child, as its parent's coarsening needs it.
#[derive(Clone, Copy, Debug)]
struct Done {
    len: u8,
    /// What it reports (zero when it folded into its parent).
    acc: (u64, u64),
    keep: bool,
    /// Its entry in the output, when kept.
    out: usize,
}

/// A node of the walk, in preorder: a pinned prefix, a held prefix or a key.
#[derive(Clone, Copy, Debug)]
struct Item {
    key: u128,
    len: u8,
    bytes: u64,
    packets: u64,
    pinned: bool,
}

/// The settings of one aggregation walk.
struct Walk {
    kind: KeyKind,
    metric: Metric,
    threshold: f64,
    coarsen: bool,
    totals: (u64, u64),
    /// A collapse's walk: a node is kept when its whole subtree reaches the
    /// threshold (not what is left of it when the kept nodes below are
    /// taken out), so that what is folded stays in the smallest heavy
    /// subtree around it: two halves of a block just under the threshold
    /// each fold into the block, which the summary can still report whole,
    /// not into a node further up.
    subtree: bool,
}

impl Walk {
    /// Finishes node `x`, whose parent is `parent`: reported (pushed to
    /// `out`) or folded into the parent, as `PatriciaTree::aggregate_with`
    /// decides for a node.
    fn finish(&self, x: Open, parent: &mut Open, out: &mut Vec<Option<(Entry, u128, u8)>>) {
        let (mut b, mut p) = (x.acc.0 + x.own.0, x.acc.1 + x.own.1);
        let mut threshold = self.threshold;
        if self.coarsen {
            threshold *= f64::from(1u32 << scale_of(self.kind, x.key, x.len));
            if let [Some(c0), Some(c1)] = x.children {
                let kept = |c: &Done| c.keep && c.acc.0 > 0;
                let mut merge = [false; 2];
                if kept(&c0) && kept(&c1) && c0.len == c1.len && similar(c0.acc.0, c1.acc.0) {
                    merge = [true, true];
                } else if kept(&c1) && c0.len == x.len + 1 && similar(b, c1.acc.0) {
                    merge[1] = true;
                } else if kept(&c0) && c1.len == x.len + 1 && similar(b, c0.acc.0) {
                    merge[0] = true;
                }
                for (c, _) in [c0, c1].into_iter().zip(merge).filter(|m| m.1) {
                    b += c.acc.0;
                    p += c.acc.1;
                    out[c.out] = None;
                }
            }
        }
        let nonzero = b > 0 || p > 0;
        let below = x.below > 0;
        let sub = (x.sub.0 + x.own.0, x.sub.1 + x.own.1);
        parent.sub.0 += sub.0;
        parent.sub.1 += sub.1;
        let heavy = if self.subtree { sub } else { (b, p) };
        let keep = x.len == 0
            || (x.pinned && nonzero)
            || (x.below == 2 && nonzero)
            || self.metric.reaches(heavy, self.totals, threshold);
        let side = if parent.len < 128 {
            ((x.key >> (127 - u32::from(parent.len))) & 1) as usize
        } else {
            0
        };
        let done = if keep {
            out.push(Some((
                Entry {
                    prefix: Prefix::new(self.kind, x.key, x.len),
                    bytes: b,
                    packets: p,
                },
                x.key,
                x.len,
            )));
            Done {
                len: x.len,
                acc: (b, p),
                keep: true,
                out: out.len() - 1,
            }
        } else {
            parent.acc.0 += b;
            parent.acc.1 += p;
            Done {
                len: x.len,
                acc: (0, 0),
                keep: false,
                out: 0,
            }
        };
        parent.below += u8::from(keep || below);
        parent.children[side] = Some(done);
    }

    /// The walk over `items`, which are in preorder (by key, then by
    /// length), start with the root and hold no node twice. Entries in
    /// preorder.
    fn run(&self, items: impl Iterator<Item = Item>) -> Vec<Entry> {
        let mut out: Vec<Option<(Entry, u128, u8)>> = Vec::new();
        let mut stack: Vec<Open> = Vec::with_capacity(130);
        // The root's own parent: receives nothing that is read.
        let mut sink = Open::new(0, 0, (0, 0), false);
        for it in items {
            if stack.is_empty() {
                debug_assert_eq!((it.key, it.len), (0, 0));
                stack.push(Open::new(0, 0, (it.bytes, it.packets), true));
                continue;
            }
            while !stack[stack.len() - 1].contains(it.key, it.len) {
                let x = stack.pop().expect("the root contains every key");
                // Where x and the item part; the item neither contains x
                // nor is inside it (preorder), so both are longer.
                let l = ((x.key ^ it.key).leading_zeros() as u8).min(x.len);
                let y = stack.last_mut().expect("the root contains every key");
                if y.len >= l {
                    self.finish(x, y, &mut out);
                } else {
                    let mut b = Open::new(x.key & mask(l), l, (0, 0), false);
                    self.finish(x, &mut b, &mut out);
                    stack.push(b);
                    break;
                }
            }
            stack.push(Open::new(it.key, it.len, (it.bytes, it.packets), it.pinned));
        }
        while let Some(x) = stack.pop() {
            match stack.last_mut() {
                Some(y) => self.finish(x, y, &mut out),
                None => self.finish(x, &mut sink, &mut out),
            }
        }
        let mut entries: Vec<(Entry, u128, u8)> = out.into_iter().flatten().collect();
        entries.sort_unstable_by_key(|e| (e.1, e.2));
        entries.into_iter().map(|e| e.0).collect()
    }
}

impl ExactCounts {
    /// An empty store over `kind` keys holding up to `cap` keys exactly
    /// (at least [`MIN_CAP`]), with the `pinned` prefixes always present (as
    /// [`PatriciaTree::new`](crate::tree::PatriciaTree::new)); collapses keep
    /// prefixes at [`COLLAPSE_SHARE`] of `threshold` in `metric`.
    pub fn new(
        kind: KeyKind,
        cap: usize,
        pinned: &[(u128, u8)],
        metric: Metric,
        threshold: f64,
    ) -> ExactCounts {
        ExactCounts {
            kind,
            width: kind.width(),
            // Reserved, not touched: pages come as keys do, and the buffer
            // is never copied to grow.
            keys: Vec::with_capacity(cap.max(MIN_CAP) + (1 << RECENT_BITS)),
            recent: vec![Rec::default(); 1 << RECENT_BITS],
            scratch: Vec::new(),
            held: Vec::new(),
            pinned: pinned.to_vec(),
            cap: cap.max(MIN_CAP),
            bytes: 0,
            packets: 0,
            metric,
            threshold,
        }
    }

    /// Empties the store, keeping its memory.
    pub fn clear(&mut self) {
        self.recent.fill(Rec::default());
        self.keys.clear();
        self.held.clear();
        self.bytes = 0;
        self.packets = 0;
    }

    /// Bytes counted since the last [`clear`](Self::clear).
    pub fn total_bytes(&self) -> u64 {
        self.bytes
    }

    /// Packets counted since the last [`clear`](Self::clear).
    pub fn total_packets(&self) -> u64 {
        self.packets
    }

    /// Counts a full-length key.
    #[inline]
    pub fn add(&mut self, key: u128, bytes: u64, packets: u64) {
        self.bytes = self.bytes.saturating_add(bytes);
        self.packets = self.packets.saturating_add(packets);
        let x = (key as u64) ^ ((key >> 64) as u64);
        let i = (x.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - RECENT_BITS)) as usize;
        let slot = &mut self.recent[i];
        if slot.key == key && (slot.bytes | slot.packets) != 0 {
            slot.bytes = slot.bytes.saturating_add(bytes);
            slot.packets = slot.packets.saturating_add(packets);
            return;
        }
        let old = std::mem::replace(
            slot,
            Rec {
                key,
                bytes,
                packets,
            },
        );
        if (old.bytes | old.packets) != 0 {
            self.push(old);
        }
    }

    /// Appends a key to the buffer, making room first if it is full.
    #[inline]
    fn push(&mut self, r: Rec) {
        if self.keys.len() >= self.cap {
            self.compact();
        }
        self.keys.push(r);
    }

    /// Takes the keys held in `recent` out (a collapse, or a summary, must
    /// see all of each key's counts).
    fn take_recent(&mut self) -> Vec<Rec> {
        let taken = self
            .recent
            .iter()
            .filter(|r| (r.bytes | r.packets) != 0)
            .copied()
            .collect();
        self.recent.fill(Rec::default());
        taken
    }

    /// The pinned and held prefixes, in preorder, the root first.
    fn fixed(&self) -> Vec<Item> {
        let mut fixed: Vec<Item> = std::iter::once((0u128, 0u8))
            .chain(self.pinned.iter().copied())
            .map(|(key, len)| Item {
                key: key & mask(len),
                len,
                bytes: 0,
                packets: 0,
                pinned: true,
            })
            .chain(self.held.iter().map(|h| Item {
                key: h.key,
                len: h.len,
                bytes: h.bytes,
                packets: h.packets,
                pinned: false,
            }))
            .collect();
        fixed.sort_by_key(|i| (i.key, i.len));
        fixed
    }

    /// The nodes of the keys' tree that an aggregation needs, in preorder,
    /// each key once with its counts summed; a subtree whose counts `small`
    /// says no node of it can reach the threshold (and that holds no fixed
    /// node) is one node, its root, with the subtree's counts: what the
    /// walk folds into its parent either way.
    fn reduce(&mut self, fixed: &[Item], small: impl Fn(u64, u64) -> bool) -> Vec<Item> {
        let mut out = Vec::new();
        let n = self.keys.len();
        if n == 0 {
            return out;
        }
        if self.scratch.len() < n {
            self.scratch.resize(n, Rec::default());
        }
        // Skip the leading bytes every key shares (an IPv4 address's 12).
        let first = self.keys[0].key;
        let diff = self.keys.iter().fold(0u128, |d, r| d | (r.key ^ first));
        let byte = (diff.leading_zeros() / 8).min(16);
        let r = Reduce {
            width: self.width,
            fixed,
            small: &small,
        };
        r.run(&mut self.keys, &mut self.scratch[..n], byte, &mut out);
        out
    }

    /// Makes room: the keys sorted and summed; if that leaves the buffer
    /// more than half full, collapsed.
    #[cold]
    fn compact(&mut self) {
        // Into the room reserved for them beyond the capacity.
        let recent = self.take_recent();
        self.keys.extend(recent);
        let mut fixed = self.fixed();
        // Summing duplicates is only worth a pass when there are some: a
        // sample of evenly spaced keys tells.
        let step = (self.keys.len() / 1024).max(1);
        let mut sample: Vec<u128> = self.keys.iter().step_by(step).map(|r| r.key).collect();
        sample.sort_unstable();
        let n = sample.len();
        sample.dedup();
        if sample.len() * 4 < n * 3 {
            let items = self.reduce(&fixed, |_, _| false);
            self.keys.clear();
            self.keys.extend(items.iter().map(|i| Rec {
                key: i.key,
                bytes: i.bytes,
                packets: i.packets,
            }));
            if self.keys.len() <= self.cap / 2 {
                return;
            }
        }
        // Every node folded away at the collapse's threshold (of the
        // totals so far): the subtrees below it are one node each first.
        let (metric, totals) = (self.metric, (self.bytes, self.packets));
        // Never below 16 keys' worth of the capacity (a threshold of 0 keeps
        // every node with a count, which would hold every key).
        let mut threshold = (self.threshold * COLLAPSE_SHARE).max(1600.0 / self.cap as f64);
        let mut items = self.reduce(&fixed, |b, p| !metric.reaches((b, p), totals, threshold));
        // The keys are in `items` now; further rounds fold what is held.
        self.keys.clear();
        loop {
            let walk = Walk {
                kind: self.kind,
                metric,
                threshold,
                coarsen: false,
                totals,
                subtree: true,
            };
            let entries = walk.run(merged(std::mem::take(&mut fixed), items));
            self.held = entries
                .into_iter()
                .map(|e| Held {
                    key: e.prefix.key,
                    len: e.prefix.len,
                    bytes: e.bytes,
                    packets: e.packets,
                })
                .collect();
            // Held prefixes beyond a quarter of the capacity (traffic spread
            // evenly over many deep blocks): collapse them further.
            if self.held.len() <= self.cap / 4 || threshold >= 100.0 {
                return;
            }
            threshold *= 2.0;
            fixed = self.fixed();
            items = Vec::new();
        }
    }

    /// aguri's aggregation pass over every key counted, as
    /// [`PatriciaTree::aggregate_with`](crate::tree::PatriciaTree::aggregate_with);
    /// the store is empty afterwards (the sort works in its buffers).
    pub fn summarize(&mut self, metric: Metric, threshold: f64, coarsen: bool) -> Vec<Entry> {
        for r in self.take_recent() {
            self.push(r);
        }
        let totals = (self.bytes, self.packets);
        let fixed = self.fixed();
        // A subtree whose counts do not reach the threshold has no node
        // that does (coarsening only raises it).
        let items = self.reduce(&fixed, |b, p| !metric.reaches((b, p), totals, threshold));
        let walk = Walk {
            kind: self.kind,
            metric,
            threshold,
            coarsen,
            totals,
            subtree: false,
        };
        let entries = walk.run(merged(fixed, items));
        self.clear();
        entries
    }
}

/// The pinned and held prefixes merged with the reduced keys.
fn merged(fixed: Vec<Item>, items: Vec<Item>) -> impl Iterator<Item = Item> {
    Merged {
        a: fixed.into_iter().peekable(),
        b: items.into_iter().peekable(),
    }
}

/// One bucket of a level of [`Reduce::run`].
#[derive(Clone, Copy)]
struct Bucket {
    n: usize,
    bytes: u64,
    packets: u64,
    min: u128,
    max: u128,
}

/// The walk of [`ExactCounts::reduce`] (a radix sort by the keys' bytes,
/// most significant first, that stops at subtrees it can fold whole).
struct Reduce<'a, F> {
    width: u8,
    fixed: &'a [Item],
    small: &'a F,
}

impl<F: Fn(u64, u64) -> bool> Reduce<'_, F> {
    fn item(&self, key: u128, len: u8, bytes: u64, packets: u64) -> Item {
        Item {
            key,
            len,
            bytes,
            packets,
            pinned: false,
        }
    }

    /// Whether a fixed prefix lies within the block of `key`'s first
    /// `bits` bits (those above it contain the whole block).
    fn fixed_within(&self, key: u128, bits: u32) -> bool {
        let lo = key & mask(bits as u8);
        let hi = lo | !mask(bits as u8);
        let from = self.fixed.partition_point(|f| f.key < lo);
        self.fixed[from..]
            .iter()
            .take_while(|f| f.key <= hi)
            .any(|f| u32::from(f.len) >= bits)
    }

    /// Keys `a`, which share their first `byte` bytes, into `out`; `s` is
    /// scratch as long as `a`.
    fn run(&self, a: &mut [Rec], s: &mut [Rec], byte: u32, out: &mut Vec<Item>) {
        const SMALL: usize = 32;
        if a.len() <= SMALL || byte >= 16 {
            a.sort_unstable_by_key(|r| r.key);
            let mut it = a.iter();
            let Some(&f) = it.next() else { return };
            let mut cur = self.item(f.key, self.width, f.bytes, f.packets);
            for r in it {
                if r.key == cur.key {
                    cur.bytes = cur.bytes.saturating_add(r.bytes);
                    cur.packets = cur.packets.saturating_add(r.packets);
                } else {
                    out.push(cur);
                    cur = self.item(r.key, self.width, r.bytes, r.packets);
                }
            }
            out.push(cur);
            return;
        }
        let mut b = [Bucket {
            n: 0,
            bytes: 0,
            packets: 0,
            min: u128::MAX,
            max: 0,
        }; 256];
        for r in a.iter() {
            let x = &mut b[digit(r.key, byte)];
            x.n += 1;
            x.bytes = x.bytes.saturating_add(r.bytes);
            x.packets = x.packets.saturating_add(r.packets);
            x.min = x.min.min(r.key);
            x.max = x.max.max(r.key);
        }
        let bits = 8 * (byte + 1);
        // Which buckets are one node, and which are walked on.
        let mut deeper = [false; 256];
        for (d, x) in b.iter().enumerate() {
            deeper[d] = x.n > 0
                && x.min != x.max
                && (!(self.small)(x.bytes, x.packets) || self.fixed_within(x.min, bits));
        }
        if let Some(d) = b.iter().position(|x| x.n == a.len()) {
            if deeper[d] {
                return self.run(a, s, byte + 1, out);
            }
        }
        // Only the buckets walked on are moved, each to its own run of `s`.
        let mut starts = [0usize; 256];
        let mut at = 0;
        for d in 0..256 {
            starts[d] = at;
            if deeper[d] {
                at += b[d].n;
            }
        }
        if at > 0 {
            let mut next = starts;
            for r in a.iter() {
                let d = digit(r.key, byte);
                if deeper[d] {
                    s[next[d]] = *r;
                    next[d] += 1;
                }
            }
        }
        for (d, x) in b.iter().enumerate() {
            if x.n == 0 {
                continue;
            }
            if deeper[d] {
                let range = starts[d]..starts[d] + x.n;
                self.run(&mut s[range.clone()], &mut a[range], byte + 1, out);
            } else if x.min == x.max {
                out.push(self.item(x.min, self.width, x.bytes, x.packets));
            } else {
                let len = (x.min ^ x.max).leading_zeros() as u8;
                out.push(self.item(x.min & mask(len), len, x.bytes, x.packets));
            }
        }
    }
}

/// Two preorder streams merged, the same node's counts summed.
struct Merged<A: Iterator<Item = Item>, B: Iterator<Item = Item>> {
    a: std::iter::Peekable<A>,
    b: std::iter::Peekable<B>,
}

impl<A: Iterator<Item = Item>, B: Iterator<Item = Item>> Iterator for Merged<A, B> {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        let mut x = match (self.a.peek(), self.b.peek()) {
            (None, None) => return None,
            (Some(_), None) => self.a.next()?,
            (None, Some(_)) => self.b.next()?,
            (Some(a), Some(b)) => {
                if (a.key, a.len) <= (b.key, b.len) {
                    self.a.next()?
                } else {
                    self.b.next()?
                }
            }
        };
        // The same node from either stream (or twice from one) counts once.
        loop {
            let same = |i: &Item| (i.key, i.len) == (x.key, x.len);
            let y = if self.a.peek().is_some_and(same) {
                self.a.next()
            } else if self.b.peek().is_some_and(same) {
                self.b.next()
            } else {
                None
            };
            match y {
                Some(y) => {
                    x.bytes = x.bytes.saturating_add(y.bytes);
                    x.packets = x.packets.saturating_add(y.packets);
                    x.pinned |= y.pinned;
                }
                None => return Some(x),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::label::{V4_MAPPED, V4_MAPPED_LEN};
    use crate::tree::PatriciaTree;

    fn pinned(kind: KeyKind) -> Vec<(u128, u8)> {
        match kind {
            KeyKind::Address => vec![(V4_MAPPED, V4_MAPPED_LEN)],
            KeyKind::Port => vec![(4u128 << 120, 8), (6u128 << 120, 8)],
        }
    }

    /// The same keys in a tree big enough to hold them all and in the
    /// store: the same entries, for every metric, threshold and coarsening.
    fn same_as_tree(kind: KeyKind, keys: &[(u128, u64, u64)]) {
        let pins = pinned(kind);
        let mut t = PatriciaTree::new(kind, 4 * keys.len() + 64, &pins);
        for &(k, b, p) in keys {
            t.add(k, b, p);
        }
        for metric in [Metric::Bytes, Metric::Packets, Metric::Either] {
            for threshold in [0.0, 0.5, 1.0, 5.0, 20.0] {
                for coarsen in [false, true] {
                    let mut e = ExactCounts::new(kind, 1 << 20, &pins, Metric::Either, 1.0);
                    for &(k, b, p) in keys {
                        e.add(k, b, p);
                    }
                    assert_eq!(
                        e.summarize(metric, threshold, coarsen),
                        t.aggregate_with(metric, threshold, coarsen),
                        "{metric:?} {threshold} {coarsen}"
                    );
                }
            }
        }
    }

    fn rng(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    #[test]
    fn same_entries_as_a_tree_that_holds_every_key() {
        let mut s = 0x1234_5678_9abc_def1u64;
        for round in 0..40u32 {
            let n = 1 + (rng(&mut s) % 3000) as usize;
            let spread = 1 + rng(&mut s) % 24;
            let mut keys = Vec::new();
            for _ in 0..n {
                let r = rng(&mut s);
                let b = 40 + rng(&mut s) % 1500;
                let k = if round.is_multiple_of(3) {
                    // IPv6 within a /32, some IPv4.
                    if r.is_multiple_of(4) {
                        V4_MAPPED | u128::from((r >> 8) as u32 >> spread)
                    } else {
                        (0x2001_0db8u128 << 96) | (u128::from(r) << 20 >> spread)
                    }
                } else {
                    V4_MAPPED | u128::from(0x0a00_0000 | ((r as u32) >> (8 + spread % 16)))
                };
                keys.push((k, b, 1 + r % 3));
            }
            same_as_tree(KeyKind::Address, &keys);
            let ports: Vec<_> = keys
                .iter()
                .map(|&(k, b, p)| {
                    let v = if k & mask(V4_MAPPED_LEN) == V4_MAPPED {
                        4
                    } else {
                        6
                    };
                    let proto = [6u128, 17, 1][(k % 3) as usize];
                    (
                        (v << 120) | (proto << 112) | ((k as u16 as u128 >> (spread % 12)) << 96),
                        b,
                        p,
                    )
                })
                .collect();
            same_as_tree(KeyKind::Port, &ports);
        }
    }

    /// Far more distinct keys than the store holds: it collapses, memory
    /// stays within its capacity, totals and the entries' sum stay exact,
    /// and a heavy host is still reported on its own with its exact counts.
    #[test]
    fn collapses_keep_memory_bounded_and_counts_exact() {
        let pins = pinned(KeyKind::Address);
        let mut e = ExactCounts::new(KeyKind::Address, MIN_CAP, &pins, Metric::Either, 1.0);
        let heavy = V4_MAPPED | 0xc000_0201;
        let mut s = 0x0bad_cafe_f00d_d00du64;
        let (mut bytes, mut packets, mut heavy_bytes) = (0u64, 0u64, 0u64);
        for i in 0..200_000u64 {
            let (k, b) = if i % 10 == 0 {
                heavy_bytes += 700;
                (heavy, 700)
            } else {
                let r = rng(&mut s);
                (
                    V4_MAPPED | u128::from(0x0a00_0000 | (r as u32 & 0x00ff_ffff)),
                    40 + r % 1400,
                )
            };
            e.add(k, b, 1);
            bytes += b;
            packets += 1;
            assert!(e.keys.len() <= MIN_CAP && e.held.len() <= MIN_CAP);
        }
        assert_eq!((e.total_bytes(), e.total_packets()), (bytes, packets));
        let entries = e.summarize(Metric::Either, 1.0, false);
        let sum = entries
            .iter()
            .fold((0, 0), |(b, p), x| (b + x.bytes, p + x.packets));
        assert_eq!(sum, (bytes, packets));
        let h = entries
            .iter()
            .find(|x| x.prefix.len == 128 && x.prefix.key == heavy)
            .expect("the heavy host on its own");
        assert_eq!((h.bytes, h.packets), (heavy_bytes, 20_000));
        // Emptied by the summary.
        assert_eq!(
            (e.total_bytes(), e.total_packets(), e.keys.len()),
            (0, 0, 0)
        );
    }

    /// Blocks that each hold just over the threshold (uniform ports: every
    /// /4 of a protocol's ports about 1.04%), counted through many
    /// collapses: the summary is the one counting every key exactly gives.
    /// (Collapsing to what aguri's pass reports, rather than to the heavy
    /// subtrees, folded a half block into a node above its block, and the
    /// block was reported merged with its sibling.)
    #[test]
    fn collapses_keep_blocks_near_the_threshold_whole() {
        let pins = pinned(KeyKind::Port);
        let mut small = ExactCounts::new(KeyKind::Port, 4096, &pins, Metric::Either, 1.0);
        let mut big = ExactCounts::new(KeyKind::Port, 1 << 22, &pins, Metric::Either, 1.0);
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..400_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v: u128 = if x & 1 == 0 { 4 } else { 6 };
            let proto: u128 = [6, 17, 1][(x >> 1) as usize % 3];
            let port = u128::from(1024 + (x >> 8) % 64512);
            let k = (v << 120) | (proto << 112) | (port << 96);
            small.add(k, 64 + (x >> 40) % 1400, 1);
            big.add(k, 64 + (x >> 40) % 1400, 1);
        }
        let a = small.summarize(Metric::Either, 1.0, false);
        let b = big.summarize(Metric::Either, 1.0, false);
        assert!(b.len() > 90, "{} entries", b.len());
        assert_eq!(a, b);
    }

    /// A threshold of 0 reports every node with a count; collapses still
    /// bound what is held.
    #[test]
    fn a_zero_threshold_still_bounds_memory() {
        let pins = pinned(KeyKind::Address);
        let mut e = ExactCounts::new(KeyKind::Address, MIN_CAP, &pins, Metric::Either, 0.0);
        let mut s = 0x5eed_1234_abcd_0001u64;
        let mut packets = 0u64;
        for _ in 0..100_000u64 {
            let r = rng(&mut s);
            e.add(V4_MAPPED | u128::from(r as u32), 100, 1);
            packets += 1;
            assert!(e.keys.len() <= MIN_CAP && e.held.len() <= MIN_CAP / 4 + 1);
        }
        let entries = e.summarize(Metric::Either, 0.0, false);
        assert_eq!(entries.iter().map(|x| x.packets).sum::<u64>(), packets);
        assert!(entries.len() > 10, "{} entries", entries.len());
    }
}

//! The fast engine: the rules split into a few groups by which address and
//! port fields they fix (as CutSplit does), a HyperSplit decision tree per
//! group (Qi, Xu, Yang, Li, Li: "Packet Classification Algorithms: From
//! Theory to Practice", INFOCOM 2009), walked for many packets at once; the
//! first match is the smallest rule index any tree finds, and a tree whose
//! smallest index cannot beat a packet's match so far is skipped. For IPv4
//! sets small enough, [`crate::rfc`]'s tables answer IPv4 keys instead; the
//! trees stay for IPv6, for live updates (which drop the tables) and for
//! the sets the tables do not fit.
//!
//! Every rule is a box in a D-dimensional space of 32-bit fields. An IPv4
//! packet has five: source, destination, source port, destination port, and
//! `protocol·2 + established` (so that `tcp` is [12, 13] and `established`
//! is [13, 13]). An IPv6 packet has eleven: each address is four 32-bit
//! words, and an IPv6 prefix is exactly a product of per-word ranges (the
//! words inside the prefix fixed, the word it ends in a range, the rest
//! free), so one tree code serves both families.
//!
//! Build: each node holds the rules that overlap its region, in priority
//! order. Rules after the first one that covers the whole region can never
//! win there and are dropped (this prunes some of the replication of
//! wildcard-heavy sets; the split into groups does the rest). A node with at
//! most `BINTH` rules becomes a leaf; otherwise HyperSplit's heuristic picks
//! the dimension whose elementary segments carry the fewest rules on average
//! and cuts it where the rule-segment weight reaches each eighth (HyperSplit
//! cuts in two at the half), so the tree stays balanced in the rules rather
//! than in the address space, and a node of eight children is one cache line.
//!
//! Lookup cost model: per tree, one dependent load and seven compares per
//! level (5-9 levels at 1K-100K rules, where binary cuts made 11-20), then a
//! scan of at most `BINTH` boxes. Eight-way nodes were 10-25% faster than
//! binary ones on the ClassBench sets, four- and sixteen-way slower; leaves
//! of 2 or 4 rules were no faster and took up to twice the memory.
//! The dependent loads are latency-bound, so [`Fast::classify_batch`] walks
//! `LANES` packets in lockstep: their loads overlap and the walk runs at
//! memory-level parallelism rather than at one miss per level.

use core::net::IpAddr;

use crate::key::PacketKey;
use crate::rfc::{self, Rfc, RfcStats};
use crate::rule::{mask128, mask32, AddrMatch, PortRange, ProtoMatch, Rule};

/// Bytes the RFC tables may take for a set of `n` rules (past it the trees
/// serve IPv4 keys): 1 KiB a rule and 512 KiB, at most 8 MiB.
fn table_budget(n: usize) -> usize {
    (n.saturating_mul(1536) + (512 << 10)).min(16 << 20)
}
/// Leaves hold at most this many rules (HyperSplit's `binth`).
const BINTH: usize = 8;
/// Packets walked in lockstep by `classify_batch`: 8 was 7-15% faster than
/// 16 on every ClassBench set (back to back, one core; 4, 6 and 12 were
/// slower on most): each step examines every lane, those already at a leaf
/// too, so lanes of mixed depths cost more the more there are.
const LANES: usize = 8;
/// A cap on rule copies in leaves, so that an adversarial rule set cannot
/// make the tree explode: past it, nodes become (slower, still exact) leaves.
const MAX_LEAF_RULES: usize = 2_000_000;
/// Marks a leaf in `Node::dim`.
const LEAF: u32 = u32::MAX;
/// Cut points of one node: it has up to `CUTS + 1` children.
const CUTS: usize = 7;
/// An empty leaf: where a key that skips a tree waits.
const PASSED: Node = Node {
    dim: LEAF,
    first: 0,
    count: 0,
    pts: [u32::MAX; CUTS],
};

/// A node: a leaf, or cuts of one dimension into up to `CUTS + 1` ranges
/// whose children are adjacent, so that a key's child is `first` plus the
/// number of cut points below its value (no branch). One cache line.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Node {
    /// The dimension compared, or `LEAF`.
    dim: u32,
    /// The first child, or the first leaf rule.
    first: u32,
    /// The leaf's number of rules.
    count: u32,
    /// Ascending; child `i` takes values above `pts[i - 1]` up to `pts[i]`.
    /// Unused points are `u32::MAX` (no value is above it).
    pts: [u32; CUTS],
}

/// A rule's box, copied into every leaf that holds it so that the leaf
/// scan reads memory in order.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LeafRule<const D: usize> {
    pub(crate) lo: [u32; D],
    pub(crate) hi: [u32; D],
    /// Index of the rule in the rule set.
    pub(crate) index: u32,
}

impl<const D: usize> LeafRule<D> {
    #[inline]
    pub(crate) fn contains(&self, k: &[u32; D]) -> bool {
        // Non-short-circuit `&` keeps the loop branch-free.
        let mut ok = true;
        for ((lo, hi), v) in self.lo.iter().zip(&self.hi).zip(k) {
            ok &= (lo <= v) & (v <= hi);
        }
        ok
    }
}

/// Whether `b` covers the whole region `lo..=hi`.
fn covers<const D: usize>(b: &LeafRule<D>, lo: &[u32; D], hi: &[u32; D]) -> bool {
    (0..D).all(|d| b.lo[d] <= lo[d] && hi[d] <= b.hi[d])
}

/// A HyperSplit tree over D 32-bit dimensions.
#[derive(Clone, Debug)]
struct Tree<const D: usize> {
    nodes: Vec<Node>,
    leaf_rules: Vec<LeafRule<D>>,
    depth: usize,
    /// The smallest rule index in the tree (`u32::MAX` when empty): a
    /// packet that already matched a smaller one skips the tree.
    min_index: u32,
    /// The group's rules, by index: what a leaf is rebuilt from when a rule
    /// that covered its whole region (and so hid the rules after it) goes.
    rules: Vec<LeafRule<D>>,
    /// The splits that made the group: a rule inserted later joins the
    /// first tree whose splits it passes.
    path: Vec<(Field, u32, bool)>,
    /// Leaf rule copies no leaf points at any more (leaves moved to the end
    /// of `leaf_rules` when they grew); compacted when they are half.
    garbage: usize,
}

impl<const D: usize> Tree<D> {
    fn empty(boxes: &[LeafRule<D>]) -> Tree<D> {
        Tree {
            nodes: vec![PASSED],
            leaf_rules: Vec::new(),
            depth: 1,
            min_index: boxes.iter().map(|b| b.index).min().unwrap_or(u32::MAX),
            rules: boxes.to_vec(),
            path: Vec::new(),
            garbage: 0,
        }
    }

    /// The tree of `boxes` (in priority order), its leaf copies capped at
    /// [`MAX_LEAF_RULES`].
    fn build(boxes: &[LeafRule<D>]) -> Tree<D> {
        let mut t = Tree::empty(boxes);
        Builder::new(boxes, usize::MAX, &mut t).run();
        t
    }

    /// The tree of `boxes`, or `None` as soon as its leaves would hold more
    /// than `budget` rule copies (the build stops there, so a failed
    /// attempt costs about as much as the budget).
    fn build_within(boxes: &[LeafRule<D>], budget: usize) -> Option<Tree<D>> {
        let mut t = Tree::empty(boxes);
        let mut b = Builder::new(boxes, budget, &mut t);
        b.run();
        let over = b.over;
        (!over).then_some(t)
    }

    /// Whether a rule's box passes this tree's splits.
    fn takes(&self, b: &LeafRule<D>, f: &Fields) -> bool {
        self.path
            .iter()
            .all(|&(field, bits, narrow)| (f.fixed_bits(b, field) >= bits) == narrow)
    }

    /// Renumbers for a rule inserted at index `at` (`up`) or removed from it:
    /// the copies of the rules after it move by one.
    fn shift(&mut self, at: u32, up: bool) {
        let mv = |i: &mut u32| {
            if up && *i >= at {
                *i += 1;
            } else if !up && *i > at {
                *i -= 1;
            }
        };
        self.leaf_rules.iter_mut().for_each(|r| mv(&mut r.index));
        self.rules.iter_mut().for_each(|r| mv(&mut r.index));
        self.min_index = self.rules.first().map_or(u32::MAX, |r| r.index);
    }

    /// The leaves whose regions meet `b`, with their regions and depths.
    fn leaves_meeting(&self, b: &LeafRule<D>) -> Vec<(usize, [u32; D], [u32; D], usize)> {
        let mut out = Vec::new();
        let mut stack = vec![(0usize, [0u32; D], [u32::MAX; D], 1usize)];
        while let Some((at, lo, hi, depth)) = stack.pop() {
            let node = &self.nodes[at];
            if node.dim == LEAF {
                out.push((at, lo, hi, depth));
                continue;
            }
            let d = node.dim as usize;
            // Cut points are below `u32::MAX`; the unused ones are it.
            let cuts = node.pts.iter().take_while(|&&p| p != u32::MAX).count();
            let mut clo = lo[d];
            for c in 0..=cuts {
                let chi = if c < cuts { node.pts[c] } else { hi[d] };
                if b.lo[d] <= chi && b.hi[d] >= clo {
                    let (mut l, mut h) = (lo, hi);
                    l[d] = clo;
                    h[d] = chi;
                    stack.push((node.first as usize + c, l, h, depth + 1));
                }
                clo = chi.wrapping_add(1);
            }
        }
        out
    }

    /// Puts `rules` (by index) in the leaf at `at` of region `lo..=hi`: in
    /// place when they fit where its rules were, else at the end; a leaf
    /// grown past twice `BINTH` becomes a subtree.
    fn set_leaf(
        &mut self,
        at: usize,
        mut rules: Vec<LeafRule<D>>,
        lo: [u32; D],
        hi: [u32; D],
        depth: usize,
    ) {
        if let Some(first) = rules.iter().position(|r| covers(r, &lo, &hi)) {
            rules.truncate(first + 1);
        }
        let node = self.nodes[at];
        if rules.len() > 2 * BINTH {
            self.garbage += node.count as usize;
            let mut b = Builder::new(&rules, usize::MAX, self);
            let all = (0..rules.len() as u32).collect();
            b.build(at, all, lo, hi, depth);
        } else if rules.len() <= node.count as usize {
            let start = node.first as usize;
            self.leaf_rules[start..start + rules.len()].copy_from_slice(&rules);
            self.garbage += node.count as usize - rules.len();
            self.nodes[at].count = rules.len() as u32;
        } else {
            self.garbage += node.count as usize;
            self.nodes[at].first = self.leaf_rules.len() as u32;
            self.nodes[at].count = rules.len() as u32;
            self.leaf_rules.extend_from_slice(&rules);
        }
        if self.garbage * 2 > self.leaf_rules.len() {
            self.compact();
        }
    }

    /// Rewrites `leaf_rules` with only the leaves' rules.
    fn compact(&mut self) {
        let mut kept = Vec::with_capacity(self.leaf_rules.len() - self.garbage);
        for node in self.nodes.iter_mut().filter(|n| n.dim == LEAF) {
            let start = node.first as usize;
            node.first = kept.len() as u32;
            kept.extend_from_slice(&self.leaf_rules[start..start + node.count as usize]);
        }
        self.leaf_rules = kept;
        self.garbage = 0;
    }

    /// Adds a rule (its index already made room for by [`shift`](Self::shift)).
    fn insert(&mut self, b: LeafRule<D>) {
        let pos = self.rules.partition_point(|r| r.index < b.index);
        self.rules.insert(pos, b);
        self.min_index = self.min_index.min(b.index);
        for (at, lo, hi, depth) in self.leaves_meeting(&b) {
            let node = self.nodes[at];
            let mut rules =
                self.leaf_rules[node.first as usize..(node.first + node.count) as usize].to_vec();
            let pos = rules.partition_point(|r| r.index < b.index);
            rules.insert(pos, b);
            self.set_leaf(at, rules, lo, hi, depth);
        }
    }

    /// Removes the rule of index `index`, if the tree has it; the indices
    /// after it are left for [`shift`](Self::shift).
    fn delete(&mut self, index: u32) {
        let pos = self.rules.partition_point(|r| r.index < index);
        if self.rules.get(pos).is_none_or(|r| r.index != index) {
            return;
        }
        let b = self.rules.remove(pos);
        self.min_index = self.rules.first().map_or(u32::MAX, |r| r.index);
        for (at, lo, hi, depth) in self.leaves_meeting(&b) {
            let node = self.nodes[at];
            let held = &self.leaf_rules[node.first as usize..(node.first + node.count) as usize];
            if !held.iter().any(|r| r.index == index) {
                continue;
            }
            let rules = if covers(&b, &lo, &hi) {
                // It hid every rule after it here: the region's rules anew.
                self.rules
                    .iter()
                    .filter(|r| (0..D).all(|d| r.lo[d] <= hi[d] && r.hi[d] >= lo[d]))
                    .copied()
                    .collect()
            } else {
                held.iter().filter(|r| r.index != index).copied().collect()
            };
            self.set_leaf(at, rules, lo, hi, depth);
        }
    }

    /// The child of internal node `node` that `k` goes to. The children are
    /// adjacent, so the choice is a count and an add, not a branch:
    /// a data-dependent branch per level would mispredict half the time.
    #[inline(always)]
    fn child(node: &Node, k: &[u32; D]) -> u32 {
        let v = k.get(node.dim as usize).copied().unwrap_or(0);
        let mut above = 0;
        for p in node.pts {
            above += u32::from(v > p);
        }
        node.first + above
    }

    #[inline]
    fn leaf_of(&self, k: &[u32; D]) -> &Node {
        let mut node = &self.nodes[0];
        while node.dim != LEAF {
            node = &self.nodes[Self::child(node, k) as usize];
        }
        node
    }

    #[inline]
    fn scan(&self, leaf: &Node, k: &[u32; D]) -> Option<u32> {
        let start = leaf.first as usize;
        let rules = self.leaf_rules.get(start..start + leaf.count as usize)?;
        rules.iter().find(|r| r.contains(k)).map(|r| r.index)
    }

    #[inline]
    fn classify(&self, k: &[u32; D]) -> Option<u32> {
        self.scan(self.leaf_of(k), k)
    }

    /// Walks up to `LANES` keys down the tree together. `out` holds each
    /// key's best (smallest) match so far, lowered where this tree has a
    /// better one; keys whose match beats every rule here stay at the root.
    fn classify_lanes(&self, keys: &[[u32; D]], out: &mut [Option<u32>]) {
        let n = keys.len().min(LANES).min(out.len());
        // Node indices; `SKIP` for a key whose match beats every rule here.
        const SKIP: u32 = u32::MAX;
        let mut at = [0u32; LANES];
        let mut any = false;
        for j in 0..n {
            if out[j].is_some_and(|m| m < self.min_index) {
                at[j] = SKIP;
            } else {
                any = true;
            }
        }
        if !any {
            return;
        }
        loop {
            let mut moving = false;
            for j in 0..n {
                let Some(node) = self.nodes.get(at[j] as usize) else {
                    continue;
                };
                if node.dim != LEAF {
                    at[j] = Self::child(node, &keys[j]);
                    moving = true;
                }
            }
            if !moving {
                break;
            }
        }
        for j in 0..n {
            let Some(leaf) = self.nodes.get(at[j] as usize) else {
                continue;
            };
            if let Some(m) = self.scan(leaf, &keys[j]) {
                if out[j].is_none_or(|b| m < b) {
                    out[j] = Some(m);
                }
            }
        }
    }

    /// The nodes, the leaves' rule copies and the group's rules (kept for
    /// updates).
    fn memory_bytes(&self) -> usize {
        self.nodes.capacity() * core::mem::size_of::<Node>()
            + (self.leaf_rules.capacity() + self.rules.capacity())
                * core::mem::size_of::<LeafRule<D>>()
            + self.path.capacity() * core::mem::size_of::<(Field, u32, bool)>()
    }
}

struct Builder<'a, const D: usize> {
    boxes: &'a [LeafRule<D>],
    /// Most leaf rule copies before the build gives up.
    budget: usize,
    /// The budget was exceeded: the tree is incomplete.
    over: bool,
    tree: &'a mut Tree<D>,
}

impl<'a, const D: usize> Builder<'a, D> {
    fn new(boxes: &'a [LeafRule<D>], budget: usize, tree: &'a mut Tree<D>) -> Builder<'a, D> {
        Builder {
            boxes,
            budget,
            over: false,
            tree,
        }
    }

    /// Builds the whole tree from the root (a leaf until built).
    fn run(&mut self) {
        let all: Vec<u32> = (0..self.boxes.len() as u32).collect();
        self.build(0, all, [0; D], [u32::MAX; D], 1);
        self.tree.nodes.shrink_to_fit();
        self.tree.leaf_rules.shrink_to_fit();
    }
}

impl<const D: usize> Builder<'_, D> {
    /// Fills node `at` with the tree for `rules` (in priority order) inside
    /// the region `lo..=hi`.
    fn build(&mut self, at: usize, mut rules: Vec<u32>, lo: [u32; D], hi: [u32; D], depth: usize) {
        if self.over {
            return;
        }
        self.tree.depth = self.tree.depth.max(depth);
        // Rules after one that covers the whole region never win in it.
        if let Some(first) = rules
            .iter()
            .position(|&r| covers(&self.boxes[r as usize], &lo, &hi))
        {
            rules.truncate(first + 1);
        }
        let split =
            if rules.len() <= BINTH || self.tree.leaf_rules.len() + rules.len() > MAX_LEAF_RULES {
                None
            } else {
                self.choose_split(&rules, &lo, &hi)
            };
        let Some((dim, pts)) = split else {
            if self.tree.leaf_rules.len() + rules.len() > self.budget {
                self.over = true;
                return;
            }
            let start = self.tree.leaf_rules.len() as u32;
            self.tree
                .leaf_rules
                .extend(rules.iter().map(|&r| self.boxes[r as usize]));
            self.tree.nodes[at] = Node {
                first: start,
                count: rules.len() as u32,
                ..PASSED
            };
            return;
        };
        // The children's ranges of `dim`: up to each cut point, then the rest.
        let first = self.tree.nodes.len();
        let mut node = Node {
            dim: dim as u32,
            first: first as u32,
            ..PASSED
        };
        node.pts[..pts.len()].copy_from_slice(&pts);
        self.tree.nodes[at] = node;
        for _ in 0..=pts.len() {
            self.tree.nodes.push(PASSED);
        }
        let mut child_lo = lo[dim];
        for c in 0..=pts.len() {
            let child_hi = pts.get(c).copied().unwrap_or(hi[dim]);
            let child_rules: Vec<u32> = rules
                .iter()
                .copied()
                .filter(|&r| {
                    let b = &self.boxes[r as usize];
                    b.lo[dim] <= child_hi && b.hi[dim] >= child_lo
                })
                .collect();
            let (mut clo, mut chi) = (lo, hi);
            clo[dim] = child_lo;
            chi[dim] = child_hi;
            self.build(first + c, child_rules, clo, chi, depth + 1);
            child_lo = child_hi.wrapping_add(1);
        }
    }

    /// HyperSplit's choice: the dimension with the fewest rules per
    /// elementary segment, cut at the weighted median segment boundary.
    /// `None` when no rule edge falls strictly inside the region.
    fn choose_split(
        &self,
        rules: &[u32],
        lo: &[u32; D],
        hi: &[u32; D],
    ) -> Option<(usize, Vec<u32>)> {
        let mut best: Option<(f64, usize, Vec<u32>)> = None;
        let mut bounds: Vec<u32> = Vec::with_capacity(rules.len() * 2);
        let mut weight: Vec<i64> = Vec::new();
        for d in 0..D {
            // A boundary b means "a segment ends at b": the region splits
            // into (.., b] and [b+1, ..).
            bounds.clear();
            for &r in rules {
                let b = &self.boxes[r as usize];
                let (clo, chi) = (b.lo[d].max(lo[d]), b.hi[d].min(hi[d]));
                if clo > lo[d] {
                    bounds.push(clo - 1);
                }
                if chi < hi[d] {
                    bounds.push(chi);
                }
            }
            if bounds.is_empty() {
                continue;
            }
            bounds.sort_unstable();
            bounds.dedup();
            // Rules overlapping each segment, by a difference array.
            weight.clear();
            weight.resize(bounds.len() + 2, 0);
            for &r in rules {
                let b = &self.boxes[r as usize];
                let (clo, chi) = (b.lo[d].max(lo[d]), b.hi[d].min(hi[d]));
                let first = bounds.partition_point(|&x| x < clo);
                let last = bounds.partition_point(|&x| x < chi);
                weight[first] += 1;
                weight[last + 1] -= 1;
            }
            let segments = bounds.len() + 1;
            let mut running = 0i64;
            let mut total = 0i64;
            for w in weight.iter_mut().take(segments) {
                running += *w;
                *w = running;
                total += running;
            }
            let cost = total as f64 / segments as f64;
            if best.as_ref().is_some_and(|(c, _, _)| *c <= cost) {
                continue;
            }
            // The weighted quantiles (HyperSplit's median, generalised to
            // `CUTS` points), kept off the last segment so that every child
            // is non-empty.
            let mut pts = Vec::with_capacity(CUTS);
            let mut acc = 0i64;
            let mut next = 1i64;
            for (s, w) in weight.iter().take(bounds.len()).enumerate() {
                acc += w;
                if acc * (CUTS as i64 + 1) >= total * next {
                    pts.push(bounds[s]);
                    while next <= CUTS as i64 && acc * (CUTS as i64 + 1) >= total * next {
                        next += 1;
                    }
                    if pts.len() == CUTS {
                        break;
                    }
                }
            }
            if pts.is_empty() {
                pts.push(bounds[0]);
            }
            best = Some((cost, d, pts));
        }
        best.map(|(_, d, pts)| (d, pts))
    }
}

/// A closed range of one field.
fn v4_range(a: &AddrMatch) -> Option<(u32, u32)> {
    match *a {
        AddrMatch::Any => Some((0, u32::MAX)),
        AddrMatch::V4 { addr, len } => Some((addr, addr | !mask32(len))),
        AddrMatch::V6 { .. } => None,
    }
}

/// The four per-word ranges of an IPv6 prefix.
fn v6_ranges(a: &AddrMatch) -> Option<[(u32, u32); 4]> {
    let (addr, mask) = match *a {
        AddrMatch::Any => (0, 0),
        AddrMatch::V6 { addr, len } => (addr, mask128(len)),
        AddrMatch::V4 { .. } => return None,
    };
    let mut out = [(0, 0); 4];
    for (w, slot) in out.iter_mut().enumerate() {
        let shift = 96 - 32 * w;
        let v = (addr >> shift) as u32;
        let m = (mask >> shift) as u32;
        *slot = (v & m, v | !m);
    }
    Some(out)
}

fn port_range(p: &PortRange) -> (u32, u32) {
    (u32::from(p.lo), u32::from(p.hi))
}

/// The protocol dimension: `protocol·2 + established`.
fn proto_range(p: &ProtoMatch) -> (u32, u32) {
    match *p {
        ProtoMatch::Any => (0, 511),
        ProtoMatch::Tcp => (12, 13),
        ProtoMatch::Udp => (34, 35),
        ProtoMatch::Established => (13, 13),
        ProtoMatch::Number(n) => (2 * u32::from(n), 2 * u32::from(n) + 1),
    }
}

fn proto_key(k: &PacketKey) -> u32 {
    2 * u32::from(k.protocol) + u32::from(k.established())
}

fn leaf_rule<const D: usize>(ranges: &[(u32, u32)], index: usize) -> LeafRule<D> {
    let mut r = LeafRule {
        lo: [0; D],
        hi: [0; D],
        index: index as u32,
    };
    for (d, &(lo, hi)) in ranges.iter().enumerate().take(D) {
        r.lo[d] = lo;
        r.hi[d] = hi;
    }
    r
}

pub(crate) const V4_DIMS: usize = 5;
pub(crate) const V6_DIMS: usize = 11;

/// The IPv4 box of a rule, if it can match IPv4 packets.
pub(crate) fn v4_box(rule: &Rule, index: usize) -> Option<LeafRule<V4_DIMS>> {
    let ranges = [
        v4_range(&rule.src)?,
        v4_range(&rule.dst)?,
        port_range(&rule.src_port),
        port_range(&rule.dst_port),
        proto_range(&rule.proto),
    ];
    Some(leaf_rule(&ranges, index))
}

/// The IPv6 box of a rule, if it can match IPv6 packets.
pub(crate) fn v6_box(rule: &Rule, index: usize) -> Option<LeafRule<V6_DIMS>> {
    let s = v6_ranges(&rule.src)?;
    let d = v6_ranges(&rule.dst)?;
    let ranges = [
        s[0],
        s[1],
        s[2],
        s[3],
        d[0],
        d[1],
        d[2],
        d[3],
        port_range(&rule.src_port),
        port_range(&rule.dst_port),
        proto_range(&rule.proto),
    ];
    Some(leaf_rule(&ranges, index))
}

fn v4_key(k: &PacketKey) -> Option<[u32; V4_DIMS]> {
    match (k.src, k.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => Some([
            u32::from(s),
            u32::from(d),
            u32::from(k.src_port),
            u32::from(k.dst_port),
            proto_key(k),
        ]),
        _ => None,
    }
}

fn v6_key(k: &PacketKey) -> Option<[u32; V6_DIMS]> {
    match (k.src, k.dst) {
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let (s, d) = (u128::from(s), u128::from(d));
            let w = |a: u128, i: u32| (a >> (96 - 32 * i)) as u32;
            Some([
                w(s, 0),
                w(s, 1),
                w(s, 2),
                w(s, 3),
                w(d, 0),
                w(d, 1),
                w(d, 2),
                w(d, 3),
                u32::from(k.src_port),
                u32::from(k.dst_port),
                proto_key(k),
            ])
        }
        _ => None,
    }
}

/// Answers the IPv4 keys of `keys` in groups of up to `N` through `lanes`
/// (keys in, answers out, as long) and every other key through `other`,
/// each answer at its key's place in `out`.
fn in_lanes<const N: usize>(
    keys: &[PacketKey],
    out: &mut [Option<u32>],
    mut lanes: impl FnMut(&[[u32; V4_DIMS]], &mut [Option<u32>]),
    other: impl Fn(&PacketKey) -> Option<u32>,
) {
    let mut lane_keys = [[0u32; V4_DIMS]; N];
    let mut lane_pos = [0usize; N];
    let mut lane_out = [None; N];
    let mut n = 0;
    let mut flush = |n: usize,
                     lane_keys: &[[u32; V4_DIMS]; N],
                     lane_pos: &[usize; N],
                     out: &mut [Option<u32>]| {
        lanes(&lane_keys[..n], &mut lane_out[..n]);
        for (&at, &m) in lane_pos[..n].iter().zip(&lane_out[..n]) {
            if let Some(slot) = out.get_mut(at) {
                *slot = m;
            }
        }
    };
    for (i, key) in keys.iter().enumerate().take(out.len()) {
        match v4_key(key) {
            Some(k) => {
                lane_keys[n] = k;
                lane_pos[n] = i;
                n += 1;
                if n == N {
                    flush(n, &lane_keys, &lane_pos, out);
                    n = 0;
                }
            }
            None => out[i] = other(key),
        }
    }
    if n > 0 {
        flush(n, &lane_keys, &lane_pos, out);
    }
}

/// The first match among `trees` (sorted by their smallest rule index).
#[inline]
fn classify_in<const D: usize>(trees: &[Tree<D>], k: &[u32; D]) -> Option<u32> {
    let mut best: Option<u32> = None;
    for t in trees {
        if best.is_some_and(|b| b < t.min_index) {
            break;
        }
        if let Some(m) = t.classify(k) {
            best = Some(best.map_or(m, |b| b.min(m)));
        }
    }
    best
}

/// Where an address family's fields lie among a box's dimensions.
struct Fields {
    /// The source and destination address, most significant word first.
    src: core::ops::Range<usize>,
    dst: core::ops::Range<usize>,
    src_port: usize,
    dst_port: usize,
    /// Leading fixed bits that make an address narrow at the first split:
    /// half the address in IPv4 (16); a site prefix in IPv6 (48, RFC 6177's
    /// assignment to a site), where half the address (64) would count only
    /// hosts as narrow: on the IPv6 images of the ClassBench 10K sets, 64
    /// gave 52-155 ns a packet, 48 gives 41-80 ns (`ARCHITECTURE.md`).
    narrow: u32,
}

const V4_FIELDS: Fields = Fields {
    src: 0..1,
    dst: 1..2,
    src_port: 2,
    dst_port: 3,
    narrow: 16,
};

const V6_FIELDS: Fields = Fields {
    src: 0..4,
    dst: 4..8,
    src_port: 8,
    dst_port: 9,
    narrow: 48,
};

/// A field a group of rules is split by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Src,
    Dst,
    SrcPort,
    DstPort,
}

impl Fields {
    /// The leading bits a box fixes in `field` (a prefix's length; for a
    /// port range, the bits its two ends share).
    fn fixed_bits<const D: usize>(&self, b: &LeafRule<D>, field: Field) -> u32 {
        let dims = match field {
            Field::Src => self.src.clone(),
            Field::Dst => self.dst.clone(),
            Field::SrcPort => self.src_port..self.src_port + 1,
            Field::DstPort => self.dst_port..self.dst_port + 1,
        };
        let ports = matches!(field, Field::SrcPort | Field::DstPort);
        let mut bits = 0;
        for d in dims {
            let x = b.lo[d] ^ b.hi[d];
            bits += x.leading_zeros();
            if x != 0 {
                break;
            }
        }
        // Ports are 16-bit values in 32-bit dimensions.
        if ports {
            bits.saturating_sub(16)
        } else {
            bits
        }
    }

    /// The splits tried, in order, on a group whose tree outgrows its
    /// budget: addresses at half their length (CutSplit's "small" fields),
    /// then at a quarter, exact ports, then at three quarters.
    fn candidates(&self) -> [(Field, u32); 8] {
        let n = self.narrow;
        [
            (Field::Src, n),
            (Field::Dst, n),
            (Field::Src, n / 2),
            (Field::Dst, n / 2),
            (Field::DstPort, 16),
            (Field::SrcPort, 16),
            (Field::Src, n + n / 2),
            (Field::Dst, n + n / 2),
        ]
    }
}

/// Leaf rule copies a group's tree may hold before the group is split
/// further: `per_rule` for each of its rules plus `base`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitBudget {
    pub per_rule: usize,
    pub base: usize,
}

impl SplitBudget {
    /// 8 copies a rule plus 4,096. With 8-way trees, 4 split acl4_10k into
    /// four trees (39 ns a packet, against 32 ns in the single tree before
    /// the split), 8 into three (33 ns, 4.1 MB with the rules kept for
    /// updates); from 4 to 32 the other ClassBench sets were the same within
    /// noise. The base keeps small groups in one tree.
    pub const DEFAULT: SplitBudget = SplitBudget {
        per_rule: 8,
        base: 4096,
    };

    fn of(&self, rules: usize) -> usize {
        self.per_rule
            .saturating_mul(rules)
            .saturating_add(self.base)
    }
}
/// Splits deeper than this give up and build a (capped) tree as it comes.
const MAX_SPLITS: usize = 6;

/// Splits the boxes into groups by which fields they fix, and builds each
/// group's tree, sorted by smallest rule index.
///
/// One HyperSplit tree over a whole firewall-style set replicates every
/// rule that is wide in the dimension cut across the cut: 10K-rule sets
/// made trees of two million leaf copies (the cap) and 300-1,000 ns
/// lookups. Rules that fix many leading bits of a field never straddle a
/// cut of that field at that depth, so a tree over a group of such rules
/// cuts it without copying them. As CutSplit (Li et al., INFOCOM 2018)
/// does, the rules are first split by whether the source address fixes
/// half its bits, the rest by the destination; a group whose tree then
/// still outgrows its budget is split again by the next field and
/// threshold in [`Fields::candidates`] that divides it, down to
/// [`MAX_SPLITS`]. On the ClassBench sets this gives 2-5 trees and at most
/// 1.1 leaf copies per rule (`ARCHITECTURE.md` has the figures).
fn decompose<const D: usize>(
    boxes: Vec<LeafRule<D>>,
    f: &Fields,
    budget: SplitBudget,
) -> Vec<Tree<D>> {
    let mut trees = Vec::new();
    split_group(boxes, f, budget, 0, &mut Vec::new(), &mut trees);
    if trees.is_empty() {
        trees.push(Tree::build(&[]));
    }
    trees.sort_by_key(|t| t.min_index);
    trees
}

/// Builds `boxes` into one tree if it fits its budget (the top level always
/// splits), else splits the group by the first candidate that divides it.
fn split_group<const D: usize>(
    boxes: Vec<LeafRule<D>>,
    f: &Fields,
    budget: SplitBudget,
    level: usize,
    path: &mut Vec<(Field, u32, bool)>,
    out: &mut Vec<Tree<D>>,
) {
    if boxes.is_empty() {
        return;
    }
    if level > 0 {
        if let Some(mut t) = Tree::build_within(&boxes, budget.of(boxes.len())) {
            t.path = path.clone();
            out.push(t);
            return;
        }
    }
    if level < MAX_SPLITS {
        for (field, bits) in f.candidates() {
            let (narrow, wide): (Vec<_>, Vec<_>) =
                boxes.iter().partition(|b| f.fixed_bits(*b, field) >= bits);
            if !narrow.is_empty() && !wide.is_empty() {
                for (part, is_narrow) in [(narrow, true), (wide, false)] {
                    path.push((field, bits, is_narrow));
                    split_group(part, f, budget, level + 1, path, out);
                    path.pop();
                }
                return;
            }
        }
    }
    let mut t = Tree::build(&boxes);
    t.path = path.clone();
    out.push(t);
}

/// Adds `b` to the first tree whose splits it passes, or to a new tree
/// that takes any rule (its group was empty when the trees were built).
fn insert_box<const D: usize>(trees: &mut Vec<Tree<D>>, b: LeafRule<D>, f: &Fields) {
    match trees.iter_mut().find(|t| t.takes(&b, f)) {
        Some(t) => t.insert(b),
        None => trees.push(Tree::build(&[b])),
    }
}

/// The fast engine: per address family, a few HyperSplit trees over groups
/// of rules (see `decompose`).
#[derive(Clone, Debug)]
pub struct Fast {
    v4: Vec<Tree<V4_DIMS>>,
    v6: Vec<Tree<V6_DIMS>>,
    /// Keys whose source and destination are of different families cannot
    /// come off the wire; they are answered by a plain scan.
    rules: Vec<Rule>,
    /// RFC tables for the IPv4 rules when the set is small enough (they
    /// answer IPv4 keys in place of the trees); dropped by an update.
    tables: Option<Box<Rfc>>,
}

/// The shape of a built tree, for reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeStats {
    /// Trees the rules were split into.
    pub trees: usize,
    pub nodes: usize,
    pub leaf_rules: usize,
    /// The deepest tree's depth.
    pub depth: usize,
}

impl TreeStats {
    fn of<const D: usize>(trees: &[Tree<D>]) -> TreeStats {
        TreeStats {
            trees: trees.len(),
            nodes: trees.iter().map(|t| t.nodes.len()).sum(),
            leaf_rules: trees.iter().map(|t| t.leaf_rules.len()).sum(),
            depth: trees.iter().map(|t| t.depth).max().unwrap_or(0),
        }
    }
}

impl Fast {
    /// `rules` in evaluation order: the trees, and RFC tables for the IPv4
    /// rules when the set is small enough (see [`crate::rfc`]'s limits).
    ///
    /// The tables are built on a thread of their own while this one builds
    /// the trees (both need the rules only).
    pub fn new(rules: &[Rule]) -> Fast {
        let tables = |rules: &[Rule]| {
            let v4: Vec<_> = rules
                .iter()
                .enumerate()
                .filter_map(|(i, r)| v4_box(r, i))
                .collect();
            Rfc::build(&v4, rules.len(), table_budget(rules.len())).map(Box::new)
        };
        if rules.len() > rfc::MAX_RULES {
            return Fast::with_budget(rules, SplitBudget::DEFAULT);
        }
        std::thread::scope(|s| {
            let built = std::thread::Builder::new()
                .name("rfc-build".into())
                .spawn_scoped(s, || tables(rules));
            let mut fast = Fast::with_budget(rules, SplitBudget::DEFAULT);
            fast.tables = match built {
                Ok(h) => h.join().ok().flatten(),
                // No thread to be had: build them here.
                Err(_) => tables(rules),
            };
            fast
        })
    }

    /// The trees alone (no tables), with another split budget: smaller
    /// budgets split the rules into more groups (the tests use them to reach
    /// every split and to check the trees where tables would answer).
    pub fn with_budget(rules: &[Rule], budget: SplitBudget) -> Fast {
        let v4: Vec<_> = rules
            .iter()
            .enumerate()
            .filter_map(|(i, r)| v4_box(r, i))
            .collect();
        let v6: Vec<_> = rules
            .iter()
            .enumerate()
            .filter_map(|(i, r)| v6_box(r, i))
            .collect();
        Fast {
            tables: None,
            v4: decompose(v4, &V4_FIELDS, budget),
            v6: decompose(v6, &V6_FIELDS, budget),
            rules: rules.to_vec(),
        }
    }

    /// The index of the first rule that matches `key`.
    #[inline]
    pub fn classify(&self, key: &PacketKey) -> Option<u32> {
        if let Some(k) = v4_key(key) {
            match &self.tables {
                Some(t) => t.classify(&k),
                None => classify_in(&self.v4, &k),
            }
        } else if let Some(k) = v6_key(key) {
            classify_in(&self.v6, &k)
        } else {
            self.rules
                .iter()
                .position(|r| r.matches(key))
                .map(|i| i as u32)
        }
    }

    /// Classifies `keys` into `out` (which must be as long): IPv4 keys
    /// through the tables `rfc::LANES` at a time, or through the trees
    /// `LANES` at a time.
    pub fn classify_batch(&self, keys: &[PacketKey], out: &mut [Option<u32>]) {
        let other = |k: &PacketKey| self.classify(k);
        match &self.tables {
            Some(t) => in_lanes::<{ rfc::LANES }>(keys, out, |k, o| t.classify_lanes(k, o), other),
            None => in_lanes::<LANES>(
                keys,
                out,
                |k, o| {
                    o.fill(None);
                    for t in &self.v4 {
                        t.classify_lanes(k, o);
                    }
                },
                other,
            ),
        }
    }

    /// Bytes of heap this engine holds.
    pub fn memory_bytes(&self) -> usize {
        self.v4.iter().map(Tree::memory_bytes).sum::<usize>()
            + self.v6.iter().map(Tree::memory_bytes).sum::<usize>()
            + self.rules.capacity() * core::mem::size_of::<Rule>()
            + self.tables.as_ref().map_or(0, |t| t.memory_bytes())
    }

    /// Inserts `rule` at evaluation position `at` (at most the number of
    /// rules): the rules from `at` on move one place down. The trees are
    /// changed where the rule's box meets them, without a rebuild: the rule
    /// goes into the leaves it overlaps, a leaf grown past twice `BINTH`
    /// becomes a subtree. Returns `false` (and changes nothing) when `at`
    /// is past the end.
    pub fn insert(&mut self, at: usize, rule: Rule) -> bool {
        if at > self.rules.len() || self.rules.len() >= u32::MAX as usize - 1 {
            return false;
        }
        let i = at as u32;
        self.tables = None;
        for t in &mut self.v4 {
            t.shift(i, true);
        }
        for t in &mut self.v6 {
            t.shift(i, true);
        }
        if let Some(b) = v4_box(&rule, at) {
            insert_box(&mut self.v4, b, &V4_FIELDS);
        }
        if let Some(b) = v6_box(&rule, at) {
            insert_box(&mut self.v6, b, &V6_FIELDS);
        }
        self.rules.insert(at, rule);
        self.v4.sort_by_key(|t| t.min_index);
        self.v6.sort_by_key(|t| t.min_index);
        true
    }

    /// Deletes the rule at evaluation position `at` and returns it; the
    /// rules after it move one place up. `None` when there is no such rule.
    pub fn delete(&mut self, at: usize) -> Option<Rule> {
        if at >= self.rules.len() {
            return None;
        }
        let i = at as u32;
        self.tables = None;
        for t in &mut self.v4 {
            t.delete(i);
            t.shift(i, false);
        }
        for t in &mut self.v6 {
            t.delete(i);
            t.shift(i, false);
        }
        self.v4.sort_by_key(|t| t.min_index);
        self.v6.sort_by_key(|t| t.min_index);
        Some(self.rules.remove(at))
    }

    /// The RFC tables' sizes, when the engine has them.
    pub fn tables(&self) -> Option<RfcStats> {
        self.tables.as_ref().map(|t| t.stats())
    }

    /// Node count, leaf rule copies and depth of the IPv4 and IPv6 trees.
    pub fn stats(&self) -> [TreeStats; 2] {
        [TreeStats::of(&self.v4), TreeStats::of(&self.v6)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v6_prefix_is_a_product_of_word_ranges() {
        let a = AddrMatch::v6("2001:db8:8000::".parse().unwrap(), 33);
        let r = v6_ranges(&a).unwrap();
        assert_eq!(r[0], (0x2001_0db8, 0x2001_0db8));
        assert_eq!(r[1], (0x8000_0000, 0xffff_ffff));
        assert_eq!(r[2], (0, u32::MAX));
        let any = v6_ranges(&AddrMatch::Any).unwrap();
        assert!(any.iter().all(|&w| w == (0, u32::MAX)));
    }
}

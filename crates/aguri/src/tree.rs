//! The Patricia tree with a node budget and LRU reclaim (MAWI WG 2001 §2.2).
//!
//! "When packets are accumulated in a tree, a plain binary tree grows too
//! large; AGURI uses a Patricia tree to keep the node count small, and LRU to
//! keep it constant" (§2.2, paraphrased). Each node is a prefix with a byte
//! and a packet count. Inserting a key walks down from the root; a missing
//! key gets a leaf (and, where its path leaves an edge, a branch node). When
//! the tree holds its budget of nodes, the least-recently-used leaf is
//! removed and its counts are added to its parent, so nothing is ever lost:
//! the tree's counts always add up to everything inserted.
//!
//! Cost model (the profiler's hot path; see bench/profile-throughput.md).
//! Nodes live in one array indexed by `u32`, allocated once, each exactly
//! one aligned cache line holding what a walk reads (key, length, children),
//! the counts, and the LRU list threaded through the leaves. Two small
//! direct tables sit in front:
//!
//! - `exact`: full-length keys (hosts, exact ports) to their leaf, open
//!   addressing with linear probing, 8 bytes a slot holding the node and 32
//!   bits of the key's hash, so a key already in the tree costs one probe,
//!   one key comparison and an O(1) LRU move, without walking;
//! - `hints`: for a new key, a node known to contain it: the deepest node at
//!   or above the key's fine block (an IPv4 /24, an IPv6 /64, a port key's
//!   version, protocol and high port byte) or, failing that, its coarse
//!   block (/16, /32, version and protocol), as the last walk through that
//!   block left it. The walk starts there, a level or two above where the
//!   leaf goes, instead of some 15 levels up at the root. A hint is checked
//!   before use (the node is live and its prefix contains the key); every
//!   node whose prefix contains a key lies on that key's path from the
//!   root, so a walk started there ends exactly where one from the root
//!   would, and the tree's shape and counts do not depend on the hints.
//!
//! The tests check this against the straightforward tree it replaced
//! (`reference.rs`): same nodes, same counts, after every step.
//!
//! With the default budget (4096) a tree takes about 370 KiB (64 bytes a
//! node, 8 bytes an exact slot and 4 a hint slot, twice as many slots as
//! nodes), so a profiler's four trees take about 1.5 MiB.

use std::hash::BuildHasher;

use crate::label::{mask, KeyKind, Prefix, V4_MAPPED, V4_MAPPED_LEN};

const NIL: u32 = u32::MAX;
/// The length of a released node: longer than any key, so no hint to it
/// passes the containment check.
const FREE: u8 = u8::MAX;

/// The smallest budget accepted: room for the pinned nodes and a few more.
pub const MIN_BUDGET: usize = 16;

/// A node: what a walk reads (key, length, children), its counts, and the
/// LRU list threaded through the leaves. Exactly one cache line, aligned,
/// so a hit, a reclaim or a walk step costs one line per node.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Node {
    key: u128,
    bytes: u64,
    packets: u64,
    child: [u32; 2],
    parent: u32,
    /// LRU neighbours (towards the most and the least recently used).
    prev: u32,
    next: u32,
    /// The exact table's hash of a full-length key (kept so that removing
    /// the key from the table does not hash it again).
    hash: u32,
    len: u8,
    /// Never reclaimed nor spliced out: the root and the family roots.
    pinned: bool,
    in_lru: bool,
}

/// A multiply-fold hash of a `u128` key with a per-tree seed. Keys come from
/// the wire; the tables never hold more than the budget, so a collision
/// flood costs at most slower lookups, never memory, and the random seed
/// makes such a flood hard to aim.
#[inline]
fn fold(key: u128, seed: u64) -> u64 {
    let x = (key as u64) ^ ((key >> 64) as u64).rotate_left(29) ^ seed;
    let m = u128::from(x ^ 0x9e37_79b9_7f4a_7c15) * 0xbf58_476d_1ce4_e5b9u128;
    (m as u64) ^ ((m >> 64) as u64)
}

const EMPTY: u64 = u64::MAX;

/// Full-length keys to their leaves: linear probing over `u64` slots, each
/// `hash << 32 | node`, with backward-shift deletion (no tombstones). It
/// holds at most the budget's nodes in at least twice as many slots.
struct ExactTable {
    slots: Vec<u64>,
    mask: usize,
}

impl ExactTable {
    fn new(budget: usize) -> ExactTable {
        let cap = (budget * 2).next_power_of_two();
        ExactTable {
            slots: vec![EMPTY; cap],
            mask: cap - 1,
        }
    }

    fn clear(&mut self) {
        self.slots.fill(EMPTY);
    }

    #[inline]
    fn find(&self, key: u128, h: u32, nodes: &[Node]) -> Option<u32> {
        let mut i = h as usize & self.mask;
        loop {
            let s = self.slots[i];
            if s == EMPTY {
                return None;
            }
            if (s >> 32) as u32 == h {
                let n = s as u32;
                if nodes[n as usize].key == key {
                    return Some(n);
                }
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Adds a key known to be absent. There is always an empty slot: the
    /// table has more slots than the tree has nodes.
    #[inline]
    fn insert(&mut self, h: u32, n: u32) {
        let mut i = h as usize & self.mask;
        while self.slots[i] != EMPTY {
            i = (i + 1) & self.mask;
        }
        self.slots[i] = (u64::from(h) << 32) | u64::from(n);
    }

    /// Removes node `n`, whose key hashes to `h`, and closes the gap by
    /// moving back later entries of the run that may no longer be found.
    #[inline]
    fn remove(&mut self, h: u32, n: u32) {
        let want = (u64::from(h) << 32) | u64::from(n);
        let mut i = h as usize & self.mask;
        loop {
            let s = self.slots[i];
            if s == want {
                break;
            }
            if s == EMPTY {
                return;
            }
            i = (i + 1) & self.mask;
        }
        let mut j = i;
        loop {
            self.slots[i] = EMPTY;
            loop {
                j = (j + 1) & self.mask;
                let s = self.slots[j];
                if s == EMPTY {
                    return;
                }
                let home = (s >> 32) as usize & self.mask;
                // The entry at j stays if its home lies cyclically in (i, j].
                let stays = if i <= j {
                    i < home && home <= j
                } else {
                    i < home || home <= j
                };
                if !stays {
                    self.slots[i] = s;
                    i = j;
                    break;
                }
            }
        }
    }
}

/// A node as the aggregation pass reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub prefix: Prefix,
    pub bytes: u64,
    pub packets: u64,
}

/// Which count the threshold applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Metric {
    Bytes,
    Packets,
    /// An entry is kept when its bytes or its packets reach the threshold,
    /// as aguri2 does: a flood of small packets (a SYN scan, an ICMP flood)
    /// shows even when its bytes are few. Shares are printed in bytes.
    Either,
}

impl Metric {
    /// The count shares are given in: packets for [`Metric::Packets`],
    /// bytes otherwise.
    pub fn value(self, bytes: u64, packets: u64) -> u64 {
        match self {
            Metric::Packets => packets,
            Metric::Bytes | Metric::Either => bytes,
        }
    }

    /// Whether counts of `bytes` and `packets` reach the threshold of
    /// `percent` of totals `total_bytes` and `total_packets` (a zero count
    /// never does).
    pub fn reaches(
        self,
        (bytes, packets): (u64, u64),
        (total_bytes, total_packets): (u64, u64),
        percent: f64,
    ) -> bool {
        let over = |v: u64, total: u64| v > 0 && v as f64 >= total as f64 * percent / 100.0;
        match self {
            Metric::Bytes => over(bytes, total_bytes),
            Metric::Packets => over(packets, total_packets),
            Metric::Either => over(bytes, total_bytes) || over(packets, total_packets),
        }
    }
}

/// A Patricia tree over one key space, holding at most `budget` nodes.
pub struct PatriciaTree {
    kind: KeyKind,
    width: u8,
    nodes: Vec<Node>,
    free: Vec<u32>,
    live: usize,
    budget: usize,
    lru_head: u32,
    lru_tail: u32,
    exact: ExactTable,
    hints: Vec<u32>,
    hint_shift: u32,
    seed: u64,
    pinned: Vec<(u128, u8)>,
    bytes: u64,
    packets: u64,
}

impl PatriciaTree {
    /// An empty tree over `kind` keys with room for `budget` nodes
    /// (at least [`MIN_BUDGET`]). `pinned` prefixes are always present.
    pub fn new(kind: KeyKind, budget: usize, pinned: &[(u128, u8)]) -> PatriciaTree {
        let budget = budget.max(MIN_BUDGET).max(2 * pinned.len() + 8);
        let hint_slots = (2 * budget).next_power_of_two();
        let mut t = PatriciaTree {
            kind,
            width: kind.width(),
            nodes: Vec::with_capacity(budget),
            free: Vec::with_capacity(budget),
            live: 0,
            budget,
            lru_head: NIL,
            lru_tail: NIL,
            exact: ExactTable::new(budget),
            hints: vec![0; hint_slots],
            hint_shift: 64 - hint_slots.trailing_zeros(),
            seed: std::collections::hash_map::RandomState::new().hash_one(0u8),
            pinned: pinned.to_vec(),
            bytes: 0,
            packets: 0,
        };
        t.clear();
        t
    }

    /// Empties the tree, keeping its memory, and puts back the pinned nodes.
    pub fn clear(&mut self) {
        self.nodes.clear();
        self.free.clear();
        self.exact.clear();
        // Hint 0 is the root, which contains every key.
        self.hints.fill(0);
        self.lru_head = NIL;
        self.lru_tail = NIL;
        self.live = 0;
        self.bytes = 0;
        self.packets = 0;
        self.alloc(0, 0, 0, 0);
        self.nodes[0].pinned = true;
        for (key, len) in self.pinned.clone() {
            let h = self.exact_hash(key);
            let (n, _) = self.insert(0, key, len, h, 0, 0, [0, 0]);
            self.set_pinned(n);
        }
    }

    fn set_pinned(&mut self, n: u32) {
        self.lru_remove(n);
        self.nodes[n as usize].pinned = true;
    }

    /// The key space.
    pub fn kind(&self) -> KeyKind {
        self.kind
    }

    /// Nodes in use.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether only the root is there (nothing pinned, nothing counted).
    pub fn is_empty(&self) -> bool {
        self.live <= 1
    }

    /// The node budget.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Bytes counted since the last [`clear`](Self::clear).
    pub fn total_bytes(&self) -> u64 {
        self.bytes
    }

    /// Packets counted since the last [`clear`](Self::clear).
    pub fn total_packets(&self) -> u64 {
        self.packets
    }

    #[inline]
    fn exact_hash(&self, key: u128) -> u32 {
        fold(key, self.seed) as u32
    }

    /// How much of a full-length key its two hint slots stand for: a fine
    /// one (an IPv4 address's /24, an IPv6 address's /64, a port key's
    /// version, protocol and high port byte) that the busy blocks keep
    /// warm, and a coarse one (/16, /32, version and protocol) that most
    /// new keys find warm even when their fine block is new.
    #[inline]
    fn hint_lens(&self, key: u128) -> [u8; 2] {
        match self.kind {
            KeyKind::Address if key & mask(V4_MAPPED_LEN) == V4_MAPPED => {
                [V4_MAPPED_LEN + 24, V4_MAPPED_LEN + 16]
            }
            KeyKind::Address => [64, 32],
            KeyKind::Port => [24, 16],
        }
    }

    /// The hint slot of `key`'s first `hl` bits (the length is part of the
    /// hash, so the two levels share one table).
    #[inline]
    fn hint_slot(&self, key: u128, hl: u8) -> usize {
        (fold(key & mask(hl), self.seed ^ u64::from(hl)) >> self.hint_shift) as usize
    }

    /// Whether node `n` can start the walk of `key`: it is live, no longer
    /// than `hl`, and its prefix contains the key. Every such node lies on
    /// the key's path from the root (see the module doc).
    #[inline]
    fn hint_fits(&self, n: u32, key: u128, hl: u8) -> bool {
        match self.nodes.get(n as usize) {
            Some(l) => l.len <= hl && (l.key ^ key).leading_zeros() >= u32::from(l.len),
            None => false,
        }
    }

    /// Counts a full-length key. The hot path: one probe of the exact table
    /// when the key is already a leaf; otherwise a short walk from a hint.
    /// Always inlined: the generic loops that call it (`Trees::count`, for
    /// flows that left the flow table and for packets past it) were left
    /// with a call per update, 9% more of the trees' time under a flood.
    #[inline(always)]
    pub fn add(&mut self, key: u128, bytes: u64, packets: u64) {
        let h = self.exact_hash(key);
        if let Some(n) = self.exact.find(key, h, &self.nodes) {
            self.bytes += bytes;
            self.packets += packets;
            let m = &mut self.nodes[n as usize];
            m.bytes += bytes;
            m.packets += packets;
            self.touch(n);
            return;
        }
        self.add_new(key, h, bytes, packets);
    }

    /// A full-length key that is not in the tree.
    #[inline(never)]
    fn add_new(&mut self, key: u128, h: u32, bytes: u64, packets: u64) {
        self.bytes = self.bytes.saturating_add(bytes);
        self.packets = self.packets.saturating_add(packets);
        self.make_room();
        let [fine, coarse] = self.hint_lens(key);
        let (fs, cs) = (self.hint_slot(key, fine), self.hint_slot(key, coarse));
        let start = if self.hint_fits(self.hints[fs], key, fine) {
            self.hints[fs]
        } else if self.hint_fits(self.hints[cs], key, coarse) {
            self.hints[cs]
        } else {
            0
        };
        // The next new keys of these blocks start at the deepest nodes at or
        // above each block on this path (the walk notes them as it passes).
        let (_, [f, c]) = self.insert(start, key, self.width, h, bytes, packets, [fine, coarse]);
        if f != NIL {
            self.hints[fs] = f;
        }
        if c != NIL {
            self.hints[cs] = c;
        }
    }

    /// Counts a prefix (a summary entry being re-aggregated, or a key).
    pub fn add_prefix(&mut self, key: u128, len: u8, bytes: u64, packets: u64) {
        self.bytes = self.bytes.saturating_add(bytes);
        self.packets = self.packets.saturating_add(packets);
        self.make_room();
        let h = self.exact_hash(key);
        self.insert(0, key, len.min(self.width), h, bytes, packets, [0, 0]);
    }

    /// Reclaims leaves until an insertion, which needs at most two new
    /// nodes (a branch and a leaf), fits in the budget.
    #[inline]
    fn make_room(&mut self) {
        while self.live + 2 > self.budget {
            if !self.reclaim_one() {
                break;
            }
        }
    }

    fn alloc(&mut self, key: u128, len: u8, bytes: u64, packets: u64) -> u32 {
        let hash = if len == self.width {
            self.exact_hash(key)
        } else {
            0
        };
        self.alloc_hashed(key, len, hash, bytes, packets)
    }

    /// [`alloc`](Self::alloc) with the exact hash already known (0 for a
    /// key shorter than the width, which the exact table does not hold).
    #[inline]
    fn alloc_hashed(&mut self, key: u128, len: u8, hash: u32, bytes: u64, packets: u64) -> u32 {
        let node = Node {
            key,
            bytes,
            packets,
            child: [NIL; 2],
            parent: NIL,
            prev: NIL,
            next: NIL,
            hash,
            len,
            pinned: false,
            in_lru: false,
        };
        self.live += 1;
        let n = match self.free.pop() {
            Some(n) => {
                self.nodes[n as usize] = node;
                n
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        if len == self.width {
            self.exact.insert(hash, n);
        }
        n
    }

    fn release(&mut self, n: u32) {
        let link = &mut self.nodes[n as usize];
        let (hash, len) = (link.hash, link.len);
        link.len = FREE;
        link.child = [NIL; 2];
        if len == self.width {
            self.exact.remove(hash, n);
        }
        self.lru_remove(n);
        self.live -= 1;
        self.free.push(n);
    }

    /// Walks down from `start` (the root, or a node whose prefix contains
    /// `key/len`) and counts `key/len`, creating what is missing; returns the
    /// node, and for each length in `marks` the deepest node on the path
    /// from `start` no longer than it (`NIL` if none). `hash` is the exact
    /// table's hash of `key`, used when `len` is the full width.
    #[allow(clippy::too_many_arguments)]
    fn insert(
        &mut self,
        start: u32,
        key: u128,
        len: u8,
        hash: u32,
        bytes: u64,
        packets: u64,
        marks: [u8; 2],
    ) -> (u32, [u32; 2]) {
        let key = key & mask(len);
        let hash = if len == self.width { hash } else { 0 };
        let mut n = start;
        let (mut fine, mut coarse) = (NIL, NIL);
        loop {
            let (nlen, child) = {
                let node = &self.nodes[n as usize];
                (node.len, node.child)
            };
            // The path only gets longer: the last node within each mark wins.
            if nlen <= marks[0] {
                fine = n;
            }
            if nlen <= marks[1] {
                coarse = n;
            }
            if nlen == len {
                let m = &mut self.nodes[n as usize];
                m.bytes += bytes;
                m.packets += packets;
                self.touch(n);
                return (n, [fine, coarse]);
            }
            let d = bit(key, nlen);
            let c = child[d];
            if c == NIL {
                let l = self.alloc_hashed(key, len, hash, bytes, packets);
                self.link(n, d, l);
                self.lru_remove(n);
                self.lru_push(l);
                return (l, [fine, coarse]);
            }
            let (ckey, clen) = {
                let cn = &self.nodes[c as usize];
                (cn.key, cn.len)
            };
            let common = ((key ^ ckey).leading_zeros() as u8).min(len).min(clen);
            if common == clen {
                n = c;
                continue;
            }
            if common == len {
                // key/len lies on the edge to c: put it between.
                let x = self.alloc_hashed(key, len, hash, bytes, packets);
                self.link(n, d, x);
                self.link(x, bit(ckey, len), c);
                return (x, [fine, coarse]);
            }
            // The paths part at `common`: a branch node with both below it.
            let b = self.alloc_hashed(key & mask(common), common, 0, 0, 0);
            let l = self.alloc_hashed(key, len, hash, bytes, packets);
            self.link(n, d, b);
            self.link(b, bit(ckey, common), c);
            self.link(b, bit(key, common), l);
            self.lru_push(l);
            if common <= marks[0] {
                fine = b;
            }
            if common <= marks[1] {
                coarse = b;
            }
            return (l, [fine, coarse]);
        }
    }

    #[inline]
    fn link(&mut self, parent: u32, d: usize, child: u32) {
        self.nodes[parent as usize].child[d] = child;
        self.nodes[child as usize].parent = parent;
    }

    /// Folds the least-recently-used leaf into its parent. Returns false
    /// when no leaf can be reclaimed (only pinned nodes are left).
    fn reclaim_one(&mut self) -> bool {
        let t = self.lru_tail;
        if t == NIL {
            return false;
        }
        let (p, bytes, packets) = {
            let tn = &self.nodes[t as usize];
            (tn.parent, tn.bytes, tn.packets)
        };
        let pm = &mut self.nodes[p as usize];
        pm.bytes += bytes;
        pm.packets += packets;
        let (pinned, folded) = (pm.pinned, (pm.bytes, pm.packets));
        let pl = &mut self.nodes[p as usize];
        let d = usize::from(pl.child[1] == t);
        pl.child[d] = NIL;
        let other = pl.child[1 - d];
        self.release(t);
        if pinned {
            return true;
        }
        if other == NIL {
            // The parent is a leaf now, holding what its children held.
            self.lru_push(p);
        } else if folded == (0, 0) {
            // A bare branch with one child left: splice it out.
            let gp = self.nodes[p as usize].parent;
            let gd = usize::from(self.nodes[gp as usize].child[1] == p);
            self.link(gp, gd, other);
            self.release(p);
        }
        true
    }

    #[inline]
    fn touch(&mut self, n: u32) {
        if self.nodes[n as usize].in_lru && self.lru_head != n {
            self.lru_remove(n);
            self.lru_push(n);
        }
    }

    #[inline]
    fn lru_push(&mut self, n: u32) {
        if self.nodes[n as usize].pinned {
            return;
        }
        let head = self.lru_head;
        {
            let m = &mut self.nodes[n as usize];
            m.prev = NIL;
            m.next = head;
            m.in_lru = true;
        }
        if head != NIL {
            self.nodes[head as usize].prev = n;
        } else {
            self.lru_tail = n;
        }
        self.lru_head = n;
    }

    #[inline]
    fn lru_remove(&mut self, n: u32) {
        let m = &mut self.nodes[n as usize];
        if !m.in_lru {
            return;
        }
        m.in_lru = false;
        let (prev, next) = (m.prev, m.next);
        if prev != NIL {
            self.nodes[prev as usize].next = next;
        } else {
            self.lru_head = next;
        }
        if next != NIL {
            self.nodes[next as usize].prev = prev;
        } else {
            self.lru_tail = prev;
        }
    }

    /// The entry of node `n` with its own counts.
    fn entry(&self, n: u32) -> Entry {
        let (l, m) = (&self.nodes[n as usize], &self.nodes[n as usize]);
        Entry {
            prefix: Prefix::new(self.kind, l.key, l.len),
            bytes: m.bytes,
            packets: m.packets,
        }
    }

    /// Every node with its counts, in preorder (for tests and re-aggregation).
    pub fn nodes(&self) -> Vec<Entry> {
        let mut out = Vec::with_capacity(self.live);
        let mut stack = vec![0u32];
        while let Some(n) = stack.pop() {
            out.push(self.entry(n));
            for &c in self.nodes[n as usize].child.iter().rev() {
                if c != NIL {
                    stack.push(c);
                }
            }
        }
        out
    }

    /// aguri's aggregation pass: a node whose count (its own plus what its
    /// children folded into it) is below `threshold` percent of the total in
    /// `metric` is folded into its parent; the rest are the entries, in
    /// preorder. The root is always an entry, and so are the pinned nodes
    /// that hold anything, so the entries add up to the total exactly.
    ///
    /// One refinement over aguri: a node where two reported subtrees meet
    /// keeps what was folded into it even when that is below the threshold.
    /// That traffic is known to lie within the node's prefix; folding it
    /// further up would move it out of an aggregate that is reported (say,
    /// a /16 reported as its /20s), and summed over many re-aggregated
    /// summaries such remainders add up. There are fewer such branch points
    /// than reported entries, so the output at most doubles.
    pub fn aggregate(&self, metric: Metric, threshold: f64) -> Vec<Entry> {
        self.aggregate_with(metric, threshold, false)
    }

    /// [`aggregate`](Self::aggregate), with aguri2's coarsening when
    /// `coarsen` is set: the threshold is scaled by the node's prefix length
    /// (multiplied by 2^`scale`, aguri2's tables: an IPv4 /8 needs 8 times
    /// the threshold, a /16 4 times, a /24 once, a /1 64 times), so that
    /// fewer entries of lengths operators seldom use are reported; and two
    /// children of the same length with similar byte counts (within 1/16 of
    /// their sum), or a child similar to a parent that already holds its
    /// sibling, are merged into the parent, which keeps thresholds from
    /// splitting even traffic into halves. Counts stay exact.
    pub fn aggregate_with(&self, metric: Metric, threshold: f64, coarsen: bool) -> Vec<Entry> {
        let totals = (self.bytes, self.packets);
        let slots = self.nodes.len();
        // Post-order pass: acc[n] is what n reports, or folds up if it is small.
        let mut acc = vec![(0u64, 0u64); slots];
        let mut keep = vec![false; slots];
        // Whether a node's subtree holds a reported entry.
        let mut below = vec![false; slots];
        let mut order = Vec::with_capacity(self.live);
        let mut stack = vec![0u32];
        while let Some(n) = stack.pop() {
            order.push(n);
            for &c in &self.nodes[n as usize].child {
                if c != NIL {
                    stack.push(c);
                }
            }
        }
        for &n in order.iter().rev() {
            let (link, m) = (&self.nodes[n as usize], &self.nodes[n as usize]);
            let (b, p) = acc[n as usize];
            let (mut b, mut p) = (b + m.bytes, p + m.packets);
            let mut threshold = threshold;
            if coarsen {
                threshold *= f64::from(1u32 << scale_of(self.kind, m.key, m.len));
                let [c0, c1] = link.child;
                if c0 != NIL && c1 != NIL {
                    let (k0, k1) = (c0 as usize, c1 as usize);
                    let kept = |k: usize| keep[k] && acc[k].0 > 0;
                    let len = |k: usize| self.nodes[k].len;
                    let mut merge = [false; 2];
                    if kept(k0) && kept(k1) && len(k0) == len(k1) && similar(acc[k0].0, acc[k1].0) {
                        merge = [true, true];
                    } else if kept(k1) && len(k0) == m.len + 1 && similar(b, acc[k1].0) {
                        merge[1] = true;
                    } else if kept(k0) && len(k1) == m.len + 1 && similar(b, acc[k0].0) {
                        merge[0] = true;
                    }
                    for (k, _) in [k0, k1].into_iter().zip(merge).filter(|x| x.1) {
                        b += acc[k].0;
                        p += acc[k].1;
                        acc[k] = (0, 0);
                        keep[k] = false;
                    }
                }
            }
            let is_family_root = m.pinned && (b > 0 || p > 0);
            let branches = link
                .child
                .iter()
                .filter(|&&c| c != NIL && below[c as usize])
                .count();
            below[n as usize] = branches > 0;
            let meeting_point = branches == 2 && (b > 0 || p > 0);
            if n == 0
                || is_family_root
                || meeting_point
                || metric.reaches((b, p), totals, threshold)
            {
                below[n as usize] = true;
                keep[n as usize] = true;
                acc[n as usize] = (b, p);
            } else {
                acc[n as usize] = (0, 0);
                let pa = &mut acc[m.parent as usize];
                pa.0 += b;
                pa.1 += p;
            }
        }
        // Entries in preorder, the 0 side first.
        let mut out = Vec::new();
        let mut stack = vec![0u32];
        while let Some(n) = stack.pop() {
            if keep[n as usize] {
                let (bytes, packets) = acc[n as usize];
                out.push(Entry {
                    bytes,
                    packets,
                    ..self.entry(n)
                });
            }
            for &c in self.nodes[n as usize].child.iter().rev() {
                if c != NIL {
                    stack.push(c);
                }
            }
        }
        out
    }
}

/// aguri2's threshold scales (`thresh <<= scale[prefixlen]`, aguri_ip.c),
/// for IPv4 prefixes (by length within IPv4), IPv6 ones, and
/// `version:protocol:port` keys.
const ADDR4_SCALE: [u8; 33] = [
    0, 6, 6, 6, 6, 6, 6, 6, 3, 5, 5, 5, 5, 4, 4, 4, 2, 3, 3, 3, 2, 2, 2, 2, 0, 1, 1, 1, 1, 1, 1, 2,
    0,
];
const ADDR6_SCALE: [u8; 129] = [
    0, 6, 6, 6, 3, 4, 4, 4, 3, 4, 4, 4, 3, 4, 4, 4, 3, 4, 4, 4, 3, 4, 4, 4, 3, 4, 4, 4, 3, 4, 4,
    4, //
    2, 4, 4, 4, 3, 4, 4, 4, 3, 4, 4, 4, 3, 4, 4, 4, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1,
    1, //
    0, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6,
    6, //
    6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6,
    0,
];
const PORT_SCALE: [u8; 33] = [
    0, 6, 6, 6, 6, 6, 6, 6, 1, 5, 5, 5, 5, 5, 4, 4, 0, 6, 6, 6, 6, 5, 5, 4, 4, 4, 3, 3, 3, 3, 3, 2,
    0,
];

/// Whether two counts differ by less than a sixteenth of their sum (aguri2's `are_similar`).
pub(crate) fn similar(a: u64, b: u64) -> bool {
    a.abs_diff(b) < a.saturating_add(b) >> 4
}

/// aguri2's threshold scale for a node of `key`/`len` in a `kind` tree.
pub(crate) fn scale_of(kind: KeyKind, key: u128, len: u8) -> u8 {
    use crate::label::{V4_MAPPED, V4_MAPPED_LEN};
    match kind {
        KeyKind::Port => PORT_SCALE[usize::from(len.min(32))],
        KeyKind::Address if len >= V4_MAPPED_LEN && key >> 32 == V4_MAPPED >> 32 => {
            ADDR4_SCALE[usize::from(len - V4_MAPPED_LEN)]
        }
        KeyKind::Address => ADDR6_SCALE[usize::from(len.min(128))],
    }
}

#[inline]
fn bit(key: u128, i: u8) -> usize {
    // `i` is below the width (at most 127) wherever this is called. One
    // 64-bit word and a shift: a variable `u128` shift costs several
    // instructions and a branch, and this runs at every step of a walk.
    let i = u32::from(i.min(127));
    let word = if i < 64 {
        (key >> 64) as u64
    } else {
        key as u64
    };
    ((word >> (63 - (i & 63))) & 1) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::label::{address_key, port_key, V4_MAPPED, V4_MAPPED_LEN};
    use rand::{Rng, SeedableRng};

    fn v4(s: &str) -> u128 {
        address_key(s.parse().unwrap())
    }

    fn sums(t: &PatriciaTree) -> (u64, u64) {
        t.nodes()
            .iter()
            .fold((0, 0), |a, n| (a.0 + n.bytes, a.1 + n.packets))
    }

    #[test]
    fn coarsening_gives_fewer_coarser_entries_and_the_same_counts() {
        // A port scan: one packet to each of 2,048 ports, beside a web server.
        let mut t = PatriciaTree::new(KeyKind::Port, 8192, &[(port_key(4, 0, 0), 8)]);
        for port in 1..=2048u16 {
            t.add(port_key(4, 6, port), 60, 1);
        }
        t.add(port_key(4, 6, 443), 60 * 2048, 2048);
        let fine = t.aggregate(Metric::Either, 1.0);
        let coarse = t.aggregate_with(Metric::Either, 1.0, true);
        let sum = |v: &[Entry]| {
            v.iter()
                .fold((0, 0), |a, e| (a.0 + e.bytes, a.1 + e.packets))
        };
        assert_eq!(sum(&fine), sum(&coarse));
        assert!(
            coarse.len() * 4 < fine.len(),
            "{} vs {}",
            coarse.len(),
            fine.len()
        );
        assert!(coarse.iter().any(|e| e.prefix.to_string() == "4:6:443"));
        // Two halves of a /24 with nearly the same traffic: one /24.
        let mut t = PatriciaTree::new(KeyKind::Address, 8192, &[(V4_MAPPED, V4_MAPPED_LEN)]);
        for h in 0..128u32 {
            t.add(v4(&format!("10.0.0.{h}")), 1000, 1);
            t.add(v4(&format!("10.0.0.{}", h + 128)), 1010, 1);
        }
        t.add(v4("192.0.2.1"), 100_000, 100);
        let labels = |v: &[Entry]| v.iter().map(|e| e.prefix.to_string()).collect::<Vec<_>>();
        let coarse = t.aggregate_with(Metric::Either, 10.0, true);
        assert!(
            labels(&coarse).contains(&"10.0.0.0/24".to_string()),
            "{:?}",
            labels(&coarse)
        );
        let fine = t.aggregate(Metric::Either, 10.0);
        assert!(
            labels(&fine).contains(&"10.0.0.0/26".to_string()),
            "{:?}",
            labels(&fine)
        );
        assert_eq!(sum(&fine), sum(&coarse));
    }

    #[test]
    fn counts_exactly_without_reclaim() {
        let mut t = PatriciaTree::new(KeyKind::Address, 1000, &[(V4_MAPPED, V4_MAPPED_LEN)]);
        t.add(v4("10.0.0.1"), 100, 1);
        t.add(v4("10.0.0.2"), 50, 1);
        t.add(v4("10.0.0.1"), 100, 1);
        t.add(v4("192.168.0.1"), 10, 1);
        let nodes = t.nodes();
        let host = nodes
            .iter()
            .find(|n| n.prefix.to_string() == "10.0.0.1")
            .unwrap();
        assert_eq!((host.bytes, host.packets), (200, 2));
        assert_eq!(sums(&t), (260, 4));
        // Branch nodes where the paths part: 10.0.0.0/30 and 0.0.0.0/0's child.
        assert!(nodes.iter().any(|n| n.prefix.to_string() == "10.0.0.0/30"));
    }

    #[test]
    fn budget_holds_and_nothing_is_lost() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let mut t = PatriciaTree::new(KeyKind::Address, 64, &[(V4_MAPPED, V4_MAPPED_LEN)]);
        let mut total = 0u64;
        for i in 0..100_000u64 {
            let b = rng.gen_range(40..1500);
            total += b;
            if i % 3 == 0 {
                t.add(u128::from(rng.gen::<u64>()) << 64, b, 1);
            } else {
                t.add(V4_MAPPED | u128::from(rng.gen::<u32>()), b, 1);
            }
            assert!(t.len() <= t.budget());
        }
        assert_eq!(sums(&t), (total, 100_000));
        assert_eq!((t.total_bytes(), t.total_packets()), (total, 100_000));
        // The aggregation pass keeps the totals too.
        let agg = t.aggregate(Metric::Bytes, 1.0);
        let s = agg.iter().fold(0, |a, n| a + n.bytes);
        assert_eq!(s, total);
    }

    #[test]
    fn lru_keeps_the_busy_leaf() {
        let mut t = PatriciaTree::new(KeyKind::Port, 16, &[]);
        for i in 0..1000u16 {
            t.add(port_key(4, 6, 80), 1000, 1);
            t.add(port_key(4, 17, 1024 + i), 1, 1);
        }
        assert!(t
            .nodes()
            .iter()
            .any(|n| n.prefix.to_string() == "4:6:80" && n.packets == 1000));
    }

    #[test]
    fn aggregation_folds_small_entries_into_their_parents() {
        let mut t = PatriciaTree::new(KeyKind::Address, 1000, &[(V4_MAPPED, V4_MAPPED_LEN)]);
        for i in 0..100u32 {
            // 100 hosts of 150.65.0.0/16, 1% each...
            t.add(V4_MAPPED | u128::from(0x9641_0000 + i * 7), 10, 1);
        }
        // ...and one host with half the traffic.
        t.add(v4("10.1.2.3"), 1000, 1);
        let agg = t.aggregate(Metric::Bytes, 5.0);
        let labels: Vec<String> = agg.iter().map(|a| a.prefix.to_string()).collect();
        assert!(labels.contains(&"10.1.2.3".to_string()), "{labels:?}");
        // No host of 150.65.0.0/16 reaches 5% alone: they are reported as
        // prefixes inside it, and the remainders stay at the points where
        // reported prefixes meet, so the entries inside add up to its 50%.
        let jaist = Prefix::parse(KeyKind::Address, "150.65.0.0/16").unwrap();
        let inside: Vec<&Entry> = agg.iter().filter(|a| jaist.contains(&a.prefix)).collect();
        assert!(inside.iter().all(|a| a.prefix.len < 128), "{labels:?}");
        let sum = inside.iter().map(|a| a.bytes).sum::<u64>();
        assert_eq!(sum, 1000, "{labels:?}");
        assert_eq!(agg.iter().map(|a| a.bytes).sum::<u64>(), 2000);
    }

    /// Drives the fast tree and the reference tree (the straightforward
    /// walk-from-the-root one it replaced) with the same keys and checks
    /// that they hold the same nodes with the same counts after every step.
    fn same_as_reference(
        kind: KeyKind,
        budget: usize,
        pinned: &[(u128, u8)],
        keys: &[(u128, u8, u64)],
    ) {
        let mut fast = PatriciaTree::new(kind, budget, pinned);
        let mut slow = crate::reference::ReferenceTree::new(kind, budget, pinned);
        for (i, &(key, len, bytes)) in keys.iter().enumerate() {
            if len >= kind.width() {
                fast.add(key, bytes, 1);
                slow.add(key, bytes, 1);
            } else {
                fast.add_prefix(key, len, bytes, 1);
                slow.add_prefix(key, len, bytes, 1);
            }
            if i % 97 == 0 || i + 1 == keys.len() {
                assert_eq!(fast.nodes(), slow.nodes(), "after {} keys", i + 1);
                assert_eq!(fast.len(), slow.len());
            }
        }
        for t in [0.0, 1.0, 5.0] {
            for m in [Metric::Bytes, Metric::Packets, Metric::Either] {
                assert_eq!(fast.aggregate(m, t), slow.aggregate(m, t), "{m:?} {t}");
            }
        }
    }

    /// aguri2's rule: an entry is kept when its bytes or its packets reach
    /// the threshold. A flood of small packets (0.1% of the bytes, 5% of the
    /// packets) is an entry by packets and by either, folded by bytes; the
    /// entries add up to the totals in every case.
    #[test]
    fn a_flood_of_small_packets_is_kept_by_either_count() {
        let mut t = PatriciaTree::new(KeyKind::Address, 1024, &[(V4_MAPPED, V4_MAPPED_LEN)]);
        for i in 0..10_000u32 {
            t.add(v4(&format!("10.0.{}.{}", i % 200 / 100, i % 100)), 1500, 1);
        }
        for _ in 0..500 {
            t.add(v4("192.0.2.9"), 40, 1);
        }
        let flood = |m: Metric| {
            let e = t.aggregate(m, 1.0);
            let sums = e
                .iter()
                .fold((0, 0), |a, x| (a.0 + x.bytes, a.1 + x.packets));
            assert_eq!(sums, (15_020_000, 10_500), "{m:?}");
            e.iter().any(|x| x.prefix.to_string() == "192.0.2.9")
        };
        assert!(!flood(Metric::Bytes));
        assert!(flood(Metric::Packets));
        assert!(flood(Metric::Either));
        assert!(Metric::Either.reaches((40, 500), (15_020_000, 10_500), 1.0));
        assert!(
            !Metric::Either.reaches((0, 0), (0, 0), 0.0),
            "nothing never reaches"
        );
    }

    #[test]
    fn hints_and_tables_change_nothing_addresses() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(11);
        // Clustered IPv4 (a few /16s, so hints are shared and go stale),
        // random IPv6, repeats, and the odd prefix as merging adds them.
        let nets: Vec<u32> = (0..6).map(|_| rng.gen::<u32>() & 0xffff_0000).collect();
        let mut keys = Vec::new();
        let mut recent: Vec<u128> = Vec::new();
        for _ in 0..20_000 {
            let r = rng.gen_range(0..100);
            let key = if r < 30 && !recent.is_empty() {
                recent[rng.gen_range(0..recent.len())]
            } else if r < 85 {
                let net = nets[rng.gen_range(0..nets.len())];
                V4_MAPPED | u128::from(net | rng.gen_range(0..4096u32))
            } else {
                (u128::from(rng.gen::<u32>() & 0xff) << 120) | u128::from(rng.gen::<u64>())
            };
            recent.push(key);
            if recent.len() > 64 {
                recent.remove(0);
            }
            let len = if rng.gen_range(0..50) == 0 {
                rng.gen_range(90..128)
            } else {
                128
            };
            keys.push((key, len, rng.gen_range(40..1500)));
        }
        for budget in [16, 64, 300] {
            same_as_reference(
                KeyKind::Address,
                budget,
                &[(V4_MAPPED, V4_MAPPED_LEN)],
                &keys,
            );
        }
    }

    #[test]
    fn hints_and_tables_change_nothing_ports() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(12);
        let pinned = [(port_key(4, 0, 0), 8), (port_key(6, 0, 0), 8)];
        let keys: Vec<(u128, u8, u64)> = (0..20_000)
            .map(|_| {
                let v = if rng.gen_range(0..5) == 0 { 6 } else { 4 };
                let proto = [6u8, 17, 1][rng.gen_range(0..3)];
                let port = if rng.gen_bool(0.5) {
                    [80u16, 443, 53, 22, 8080][rng.gen_range(0..5)]
                } else {
                    rng.gen_range(1024..=u16::MAX)
                };
                let len = if rng.gen_range(0..50) == 0 {
                    rng.gen_range(8..32)
                } else {
                    32
                };
                (port_key(v, proto, port), len, rng.gen_range(40..1500))
            })
            .collect();
        for budget in [16, 40, 500] {
            same_as_reference(KeyKind::Port, budget, &pinned, &keys);
        }
    }

    #[test]
    fn exact_table_survives_deletions_in_long_runs() {
        // Every key in one small table, added and removed in a shuffled
        // order: backward-shift deletion must keep every remaining key
        // findable.
        let mut rng = rand::rngs::SmallRng::seed_from_u64(13);
        let mut links = Vec::new();
        let mut table = ExactTable::new(16);
        let mut present: Vec<(u32, u32)> = Vec::new();
        for round in 0..20_000u32 {
            if present.len() < 30 && rng.gen_bool(0.6) {
                let n = links.len() as u32;
                let key = u128::from(round);
                links.push(Node {
                    key,
                    bytes: 0,
                    packets: 0,
                    child: [NIL; 2],
                    parent: NIL,
                    prev: NIL,
                    next: NIL,
                    hash: 0,
                    len: 128,
                    pinned: false,
                    in_lru: false,
                });
                // Few distinct hashes: long runs that wrap around the table.
                let h = rng.gen_range(0..8u32) * 5;
                table.insert(h, n);
                present.push((h, n));
            } else if !present.is_empty() {
                let (h, n) = present.swap_remove(rng.gen_range(0..present.len()));
                table.remove(h, n);
                assert_eq!(table.find(links[n as usize].key, h, &links), None);
            }
            for &(h, n) in &present {
                assert_eq!(table.find(links[n as usize].key, h, &links), Some(n));
            }
        }
    }

    #[test]
    fn prefixes_insert_between_and_beside() {
        let mut t = PatriciaTree::new(KeyKind::Address, 100, &[]);
        t.add(v4("150.65.1.1"), 1, 1);
        t.add_prefix(v4("150.65.0.0"), 96 + 16, 5, 5);
        t.add_prefix(v4("150.0.0.0"), 96 + 8, 7, 7);
        t.add_prefix(v4("150.65.0.0"), 96 + 16, 5, 5);
        let n = t.nodes();
        let get = |s: &str| {
            n.iter()
                .find(|a| a.prefix.to_string() == s)
                .map(|a| a.bytes)
        };
        assert_eq!(get("150.65.0.0/16"), Some(10));
        assert_eq!(get("150.0.0.0/8"), Some(7));
        assert_eq!(get("150.65.1.1"), Some(1));
    }
}

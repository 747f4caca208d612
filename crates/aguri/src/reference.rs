//! The straightforward Patricia tree that the fast one in [`crate::tree`]
//! replaced, kept for tests only: the fast tree must build exactly the same
//! nodes with the same counts (same LRU order, same reclaims) for any input.

#![allow(dead_code)]

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::label::{mask, KeyKind, Prefix};
use crate::tree::{Entry, Metric};

const NIL: u32 = u32::MAX;

/// The smallest budget accepted: room for the pinned nodes and a few more.
pub const MIN_BUDGET: usize = 16;

#[derive(Clone, Debug)]
struct Node {
    key: u128,
    bytes: u64,
    packets: u64,
    parent: u32,
    child: [u32; 2],
    /// LRU neighbours (towards the most and the least recently used).
    prev: u32,
    next: u32,
    len: u8,
    /// Never reclaimed nor spliced out: the root and the family roots.
    pinned: bool,
    in_lru: bool,
}

/// A multiply-fold hash for `u128` keys; keys come from the wire, but the
/// table never holds more than the budget, so a collision flood costs at
/// most a slower lookup, never memory.
#[derive(Default)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    #[inline]
    fn write_u128(&mut self, k: u128) {
        let x = (k as u64) ^ ((k >> 64) as u64).rotate_left(29);
        let m = u128::from(x ^ 0x9e37_79b9_7f4a_7c15) * 0xbf58_476d_1ce4_e5b9u128;
        self.0 = (m as u64) ^ ((m >> 64) as u64);
    }
}

/// A Patricia tree over one key space, holding at most `budget` nodes.
pub struct ReferenceTree {
    kind: KeyKind,
    width: u8,
    nodes: Vec<Node>,
    free: Vec<u32>,
    live: usize,
    budget: usize,
    lru_head: u32,
    lru_tail: u32,
    exact: HashMap<u128, u32, BuildHasherDefault<KeyHasher>>,
    pinned: Vec<(u128, u8)>,
    bytes: u64,
    packets: u64,
}

impl ReferenceTree {
    /// An empty tree over `kind` keys with room for `budget` nodes
    /// (at least [`MIN_BUDGET`]). `pinned` prefixes are always present.
    pub fn new(kind: KeyKind, budget: usize, pinned: &[(u128, u8)]) -> ReferenceTree {
        let budget = budget.max(MIN_BUDGET).max(2 * pinned.len() + 8);
        let mut t = ReferenceTree {
            kind,
            width: kind.width(),
            nodes: Vec::with_capacity(budget),
            free: Vec::new(),
            live: 0,
            budget,
            lru_head: NIL,
            lru_tail: NIL,
            exact: HashMap::with_capacity_and_hasher(budget, Default::default()),
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
        self.lru_head = NIL;
        self.lru_tail = NIL;
        self.live = 0;
        self.bytes = 0;
        self.packets = 0;
        self.alloc(0, 0, 0, 0);
        self.nodes[0].pinned = true;
        for (key, len) in self.pinned.clone() {
            let n = self.insert(key, len, 0, 0);
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

    /// Counts a full-length key. The hot path: one hash lookup when the key
    /// is already a leaf.
    #[inline]
    pub fn add(&mut self, key: u128, bytes: u64, packets: u64) {
        if let Some(&n) = self.exact.get(&key) {
            self.bytes += bytes;
            self.packets += packets;
            let node = &mut self.nodes[n as usize];
            node.bytes += bytes;
            node.packets += packets;
            self.touch(n);
            return;
        }
        self.add_prefix(key, self.width, bytes, packets);
    }

    /// Counts a prefix (a summary entry being re-aggregated, or a key).
    pub fn add_prefix(&mut self, key: u128, len: u8, bytes: u64, packets: u64) {
        self.bytes = self.bytes.saturating_add(bytes);
        self.packets = self.packets.saturating_add(packets);
        // An insertion needs at most two new nodes (a branch and a leaf).
        while self.live + 2 > self.budget {
            if !self.reclaim_one() {
                break;
            }
        }
        self.insert(key, len.min(self.width), bytes, packets);
    }

    fn alloc(&mut self, key: u128, len: u8, bytes: u64, packets: u64) -> u32 {
        let node = Node {
            key,
            bytes,
            packets,
            parent: NIL,
            child: [NIL; 2],
            prev: NIL,
            next: NIL,
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
            self.exact.insert(key, n);
        }
        n
    }

    fn release(&mut self, n: u32) {
        let node = &self.nodes[n as usize];
        if node.len == self.width {
            let key = node.key;
            self.exact.remove(&key);
        }
        self.lru_remove(n);
        self.live -= 1;
        self.free.push(n);
    }

    /// Walks down and counts `key/len`, creating what is missing; returns the node.
    fn insert(&mut self, key: u128, len: u8, bytes: u64, packets: u64) -> u32 {
        let key = key & mask(len);
        let mut n = 0u32;
        loop {
            let node = &self.nodes[n as usize];
            if node.len == len {
                let node = &mut self.nodes[n as usize];
                node.bytes += bytes;
                node.packets += packets;
                self.touch(n);
                return n;
            }
            let d = bit(key, node.len);
            let c = node.child[d];
            if c == NIL {
                let l = self.alloc(key, len, bytes, packets);
                self.link(n, d, l);
                self.lru_remove(n);
                self.lru_push(l);
                return l;
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
                let x = self.alloc(key, len, bytes, packets);
                self.link(n, d, x);
                self.link(x, bit(ckey, len), c);
                return x;
            }
            // The paths part at `common`: a branch node with both below it.
            let b = self.alloc(key & mask(common), common, 0, 0);
            let l = self.alloc(key, len, bytes, packets);
            self.link(n, d, b);
            self.link(b, bit(ckey, common), c);
            self.link(b, bit(key, common), l);
            self.lru_push(l);
            return l;
        }
    }

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
        let pn = &mut self.nodes[p as usize];
        pn.bytes += bytes;
        pn.packets += packets;
        let d = usize::from(pn.child[1] == t);
        pn.child[d] = NIL;
        self.release(t);
        let pn = &self.nodes[p as usize];
        if pn.pinned {
            return true;
        }
        let other = pn.child[1 - d];
        if other == NIL {
            // The parent is a leaf now, holding what its children held.
            self.lru_push(p);
        } else if pn.bytes == 0 && pn.packets == 0 {
            // A bare branch with one child left: splice it out.
            let gp = pn.parent;
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
            let node = &mut self.nodes[n as usize];
            node.prev = NIL;
            node.next = head;
            node.in_lru = true;
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
        let node = &mut self.nodes[n as usize];
        if !node.in_lru {
            return;
        }
        node.in_lru = false;
        let (prev, next) = (node.prev, node.next);
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

    /// Every node with its counts, in preorder (for tests and re-aggregation).
    pub fn nodes(&self) -> Vec<Entry> {
        let mut out = Vec::with_capacity(self.live);
        let mut stack = vec![0u32];
        while let Some(n) = stack.pop() {
            let node = &self.nodes[n as usize];
            out.push(Entry {
                prefix: Prefix::new(self.kind, node.key, node.len),
                bytes: node.bytes,
                packets: node.packets,
            });
            for &c in node.child.iter().rev() {
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
        let totals = (self.bytes, self.packets);
        // Post-order pass: acc[n] is what n reports, or folds up if it is small.
        let mut acc = vec![(0u64, 0u64); self.nodes.len()];
        let mut keep = vec![false; self.nodes.len()];
        // Whether a node's subtree holds a reported entry.
        let mut below = vec![false; self.nodes.len()];
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
            let node = &self.nodes[n as usize];
            let (b, p) = acc[n as usize];
            let (b, p) = (b + node.bytes, p + node.packets);
            let is_family_root = node.pinned && (b > 0 || p > 0);
            let branches = node
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
                let pa = &mut acc[node.parent as usize];
                pa.0 += b;
                pa.1 += p;
            }
        }
        // Entries in preorder, the 0 side first.
        let mut out = Vec::new();
        let mut stack = vec![0u32];
        while let Some(n) = stack.pop() {
            let node = &self.nodes[n as usize];
            if keep[n as usize] {
                let (bytes, packets) = acc[n as usize];
                out.push(Entry {
                    prefix: Prefix::new(self.kind, node.key, node.len),
                    bytes,
                    packets,
                });
            }
            for &c in node.child.iter().rev() {
                if c != NIL {
                    stack.push(c);
                }
            }
        }
        out
    }
}

#[inline]
fn bit(key: u128, i: u8) -> usize {
    // `i` is below the width (at most 127) wherever this is called.
    ((key >> (127 - u32::from(i.min(127)))) & 1) as usize
}

//! The Patricia tree with a node budget and LRU reclaim (paper 004 §2.2).
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
//! Cost model: the nodes live in one `Vec` indexed by `u32`, the LRU list is
//! threaded through them, and full-length keys (hosts, exact ports) are also
//! found through a small hash table, so a key already in the tree costs one
//! hash lookup and an LRU move, without walking. A new key walks at most
//! `width` levels and allocates nothing once the budget is reached.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::label::{mask, KeyKind, Prefix};

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
pub enum Metric {
    Bytes,
    Packets,
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
    exact: HashMap<u128, u32, BuildHasherDefault<KeyHasher>>,
    pinned: Vec<(u128, u8)>,
    bytes: u64,
    packets: u64,
}

impl PatriciaTree {
    /// An empty tree over `kind` keys with room for `budget` nodes
    /// (at least [`MIN_BUDGET`]). `pinned` prefixes are always present.
    pub fn new(kind: KeyKind, budget: usize, pinned: &[(u128, u8)]) -> PatriciaTree {
        let budget = budget.max(MIN_BUDGET).max(2 * pinned.len() + 8);
        let mut t = PatriciaTree {
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
        let total = match metric {
            Metric::Bytes => self.bytes,
            Metric::Packets => self.packets,
        } as f64;
        let limit = total * threshold / 100.0;
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
            let v = match metric {
                Metric::Bytes => b,
                Metric::Packets => p,
            } as f64;
            let is_family_root = node.pinned && (b > 0 || p > 0);
            let branches = node
                .child
                .iter()
                .filter(|&&c| c != NIL && below[c as usize])
                .count();
            below[n as usize] = branches > 0;
            let meeting_point = branches == 2 && (b > 0 || p > 0);
            if n == 0 || is_family_root || meeting_point || (v >= limit && v > 0.0) {
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

//! A fixed-size flow table in front of the four trees: packets of one flow
//! are counted together, and a flow reaches the trees as one update when it
//! leaves the table (pushed out by a newer flow, or at the end of the
//! interval) instead of as one update per packet in each of four trees.
//!
//! Why: a tree update costs a few hundred instructions when the key is new
//! (a walk, a leaf and a branch made, the least-recently-used leaf folded
//! away) and a packet makes four of them, while a table hit is one hash and
//! one cache line. agurim, aguri's successor from the same group, makes the
//! same split: a primary aggregation of flows by hashing, a secondary one by
//! prefix. The counts stay exact: a flow's bytes and packets are added to the
//! trees whole, and at the end of an interval every flow still held is
//! flushed before the summary is made, so a summary's totals are exactly the
//! packets and bytes counted (`tests::flushes_everything_exactly`).
//!
//! What changes in the trees is the order in which they see their keys: a
//! busy flow is counted when it leaves the table, so its leaves are as
//! recent as its last departure. The aggregation pass that makes the
//! summary runs after the final flush, when every held flow has just been
//! counted. With the table off (`flow_slots: 0`) the trees see every packet
//! in arrival order, exactly as aguri does.
//!
//! Layout: slots of one cache line each (both addresses, both port keys,
//! counts and the last-use stamp), two candidate slots a flow (the older of
//! the two is replaced), so a lookup reads at most two lines.

use std::hash::BuildHasher;

/// A flow's keys in the four trees: the two addresses as tree keys and the
/// two port keys' 32 significant bits (`version:protocol:port`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FlowKeys {
    pub src: u128,
    pub dst: u128,
    pub sport: u32,
    pub dport: u32,
}

impl FlowKeys {
    /// The key of tree `i` (source, destination, source port, destination port).
    #[inline]
    pub fn tree_key(&self, i: usize) -> u128 {
        match i {
            0 => self.src,
            1 => self.dst,
            2 => u128::from(self.sport) << 96,
            _ => u128::from(self.dport) << 96,
        }
    }
}

/// A flow leaving the table, with what it counted while held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Departed {
    pub keys: FlowKeys,
    pub bytes: u64,
    pub packets: u64,
}

#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Slot {
    keys: FlowKeys,
    bytes: u64,
    packets: u64,
    /// When the flow was last counted (0: the slot is empty).
    stamp: u64,
}

const EMPTY: Slot = Slot {
    keys: FlowKeys {
        src: 0,
        dst: 0,
        sport: 0,
        dport: 0,
    },
    bytes: 0,
    packets: 0,
    stamp: 0,
};

/// The table: `slots` slots (a power of two), two choices a flow.
pub(crate) struct FlowTable {
    slots: Vec<Slot>,
    mask: usize,
    clock: u64,
    seed: u64,
    held: usize,
}

impl FlowTable {
    /// A table of `slots` slots, rounded up to a power of two (at least 2).
    pub fn new(slots: usize) -> FlowTable {
        let n = slots.max(2).next_power_of_two();
        FlowTable {
            slots: vec![EMPTY; n],
            mask: n - 1,
            clock: 0,
            seed: std::collections::hash_map::RandomState::new().hash_one(1u8),
            held: 0,
        }
    }

    /// The two candidate slots of a flow. The seed is random per table, so
    /// that traffic cannot be aimed at one pair of slots; a collision only
    /// sends flows to the trees sooner, it never loses a count.
    #[inline]
    fn slots_of(&self, k: &FlowKeys) -> (usize, usize) {
        let a = (k.src as u64) ^ ((k.src >> 64) as u64).rotate_left(21);
        let b = (k.dst as u64).rotate_left(7) ^ ((k.dst >> 64) as u64).rotate_left(43);
        let c = (u64::from(k.sport) << 32 | u64::from(k.dport)) ^ self.seed;
        let m =
            u128::from(a ^ b.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ c) * 0xbf58_476d_1ce4_e5b9u128;
        let h = (m as u64) ^ ((m >> 64) as u64);
        let i = h as usize & self.mask;
        let j = (h >> 32) as usize & self.mask;
        (i, if j == i { i ^ 1 } else { j })
    }

    /// Counts a batch of packets, `(flow, bytes)`, in order; flows that
    /// leave the table go to `out`.
    ///
    /// The table is larger than a core's L2 cache, so a lookup is a cache
    /// miss, and one packet's lookup waits for the last one's when they are
    /// made one after another (each ends in branches on what it read). A
    /// first pass computes every packet's slots and reads them, loads that
    /// do not depend on each other and so overlap; the second pass then
    /// finds them in the cache.
    pub fn add_batch(&mut self, batch: &[(FlowKeys, u64)], out: &mut Vec<Departed>) {
        const CHUNK: usize = 64;
        let mut at = [(0usize, 0usize); CHUNK];
        for chunk in batch.chunks(CHUNK) {
            let mut sum = 0u64;
            for (a, (k, _)) in at.iter_mut().zip(chunk) {
                *a = self.slots_of(k);
                sum = sum.wrapping_add(self.slots[a.0].stamp ^ self.slots[a.1].stamp);
            }
            std::hint::black_box(sum);
            for (&(i, j), (k, bytes)) in at.iter().zip(chunk) {
                out.extend(self.add_at(k, *bytes, i, j));
            }
        }
    }

    /// Counts one packet of flow `k`. If the flow was not held and both its
    /// slots were taken, the older of the two flows leaves the table and is
    /// returned, to be counted in the trees.
    #[cfg(test)]
    pub fn add(&mut self, k: &FlowKeys, bytes: u64) -> Option<Departed> {
        let (i, j) = self.slots_of(k);
        self.add_at(k, bytes, i, j)
    }

    #[inline]
    fn add_at(&mut self, k: &FlowKeys, bytes: u64, i: usize, j: usize) -> Option<Departed> {
        self.clock += 1;
        for s in [i, j] {
            let slot = &mut self.slots[s];
            if slot.stamp != 0 && slot.keys == *k {
                slot.bytes += bytes;
                slot.packets += 1;
                slot.stamp = self.clock;
                return None;
            }
        }
        let (si, sj) = (self.slots[i].stamp, self.slots[j].stamp);
        let victim = if si <= sj { i } else { j };
        let old = std::mem::replace(
            &mut self.slots[victim],
            Slot {
                keys: *k,
                bytes,
                packets: 1,
                stamp: self.clock,
            },
        );
        if old.stamp == 0 {
            self.held += 1;
            return None;
        }
        Some(Departed {
            keys: old.keys,
            bytes: old.bytes,
            packets: old.packets,
        })
    }

    /// Empties the table, handing every held flow to `out`, least recently
    /// counted first (so that the trees' LRU order follows the flows' own).
    pub fn drain(&mut self, out: &mut Vec<Departed>) {
        if self.held == 0 {
            return;
        }
        let start = out.len();
        let mut stamps = Vec::with_capacity(self.held);
        for slot in &mut self.slots {
            if slot.stamp != 0 {
                stamps.push(slot.stamp);
                out.push(Departed {
                    keys: slot.keys,
                    bytes: slot.bytes,
                    packets: slot.packets,
                });
                *slot = EMPTY;
            }
        }
        // Sort the drained flows by when they were last counted.
        let mut order: Vec<usize> = (0..stamps.len()).collect();
        order.sort_unstable_by_key(|&i| stamps[i]);
        let drained: Vec<Departed> = order.iter().map(|&i| out[start + i]).collect();
        out.truncate(start);
        out.extend(drained);
        self.held = 0;
    }

    /// Flows held now.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.held
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn keys(i: u32) -> FlowKeys {
        FlowKeys {
            src: u128::from(i),
            dst: u128::from(i / 3),
            sport: i % 7,
            dport: 80,
        }
    }

    #[test]
    fn flushes_everything_exactly() {
        let mut t = FlowTable::new(64);
        let mut rng = rand::rngs::SmallRng::seed_from_u64(5);
        let mut out = Vec::new();
        let (mut bytes, mut packets) = (0u64, 0u64);
        for _ in 0..10_000 {
            let b = rng.gen_range(64..1519u64);
            bytes += b;
            packets += 1;
            // A few busy flows and many rare ones: both hits and departures.
            let f = if rng.gen_bool(0.5) {
                rng.gen_range(0..8)
            } else {
                rng.gen_range(0..5000)
            };
            out.extend(t.add(&keys(f), b));
        }
        assert!(!out.is_empty(), "no flow ever left the table");
        let departed = out.len();
        t.drain(&mut out);
        assert_eq!(t.held(), 0);
        assert!(out.len() > departed, "the drain flushed nothing");
        assert_eq!(out.iter().map(|d| d.bytes).sum::<u64>(), bytes);
        assert_eq!(out.iter().map(|d| d.packets).sum::<u64>(), packets);
        // A drained table starts again empty.
        out.clear();
        t.drain(&mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn a_busy_flow_stays_and_is_counted_whole() {
        let mut t = FlowTable::new(8);
        let busy = keys(1_000_000);
        let mut out = Vec::new();
        for i in 0..1000 {
            out.extend(t.add(&busy, 100));
            // One rare flow between the busy flow's packets: the busy flow
            // is always the more recent of any pair, so it never leaves.
            out.extend(t.add(&keys(i), 1));
        }
        assert!(out.iter().all(|d| d.keys != busy));
        t.drain(&mut out);
        let b: Vec<&Departed> = out.iter().filter(|d| d.keys == busy).collect();
        assert_eq!(b.len(), 1);
        assert_eq!((b[0].bytes, b[0].packets), (100_000, 1000));
        // Drained least recently counted first: the busy flow was counted
        // just before the last rare one.
        assert_eq!(out.last().map(|d| d.keys), Some(keys(999)));
    }

    #[test]
    fn tree_keys_are_the_four_summaries_keys() {
        let k = FlowKeys {
            src: crate::label::address_key("10.1.2.3".parse().unwrap()),
            dst: crate::label::address_key("2001:db8::1".parse().unwrap()),
            sport: (crate::label::port_key(4, 6, 1234) >> 96) as u32,
            dport: (crate::label::port_key(4, 6, 80) >> 96) as u32,
        };
        assert_eq!(k.tree_key(2), crate::label::port_key(4, 6, 1234));
        assert_eq!(k.tree_key(3), crate::label::port_key(4, 6, 80));
        assert_eq!(k.tree_key(0), k.src);
        assert_eq!(k.tree_key(1), k.dst);
    }
}

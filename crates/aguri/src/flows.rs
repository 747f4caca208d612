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
//! Layout: slots of one aligned cache line each (both addresses, both port
//! keys, counts and a 32-bit last-use stamp). A flow has four candidate
//! slots, two adjacent pairs chosen by two hashes; a new flow takes the
//! least recently counted of the four. A pair is two adjacent lines, which
//! the core's adjacent-line prefetch brings in together, so a lookup costs
//! about two misses. Four candidates are what make the table hold the flows
//! that are still active: on the benchmark's active-flows trace (16,384
//! flows at once in 32,768 slots) a flow leaves the table 1.00 times on
//! average, the least possible, against 1.27 times with two single-slot
//! candidates, and tree updates fall by the same share
//! (bench/profile-throughput.md). A table starts at 4,096 slots and
//! grows fourfold whenever it would be more than a quarter full, up to its
//! size, so that a small capture does not pay for slots it never uses.

use std::hash::BuildHasher;

use crate::label::{port_key, V4_MAPPED};

/// A flow's keys in the four trees: the two addresses as tree keys (each a
/// `u128` kept as two `u64` halves, high first, so that the struct needs no
/// 16-byte alignment and a slot fits one cache line) and the two port keys'
/// 32 significant bits (`version:protocol:port`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FlowKeys {
    pub src: [u64; 2],
    pub dst: [u64; 2],
    pub sport: u32,
    pub dport: u32,
}

impl FlowKeys {
    /// The keys of a flow of IP `version` and `protocol` between addresses
    /// whose tree keys are `src` and `dst`, with these ports.
    #[inline]
    pub fn new(
        version: u8,
        protocol: u8,
        src: u128,
        dst: u128,
        sport: u16,
        dport: u16,
    ) -> FlowKeys {
        let halves = |k: u128| [(k >> 64) as u64, k as u64];
        let port = |p: u16| (port_key(version, protocol, p) >> 96) as u32;
        FlowKeys {
            src: halves(src),
            dst: halves(dst),
            sport: port(sport),
            dport: port(dport),
        }
    }

    /// The keys of a sliced frame's flow (what [`crate::FlowKey`] would give).
    #[inline]
    pub fn of_bits(b: &wire::FlowBits) -> FlowKeys {
        // `address_key` for an address given as an integer.
        let addr = |a: u128| if b.version == 4 { V4_MAPPED | a } else { a };
        FlowKeys::new(
            b.version,
            b.protocol,
            addr(b.src),
            addr(b.dst),
            b.src_port,
            b.dst_port,
        )
    }

    /// The key of tree `i` (source, destination, source port, destination port).
    #[inline]
    pub fn tree_key(&self, i: usize) -> u128 {
        let join = |h: [u64; 2]| u128::from(h[0]) << 64 | u128::from(h[1]);
        match i {
            0 => join(self.src),
            1 => join(self.dst),
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

/// One held flow: 40 bytes of keys, its counts and when it was last
/// counted, in one aligned cache line (a lookup reads one line a candidate).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Slot {
    keys: FlowKeys,
    bytes: u64,
    /// Packets counted while held; 0: the slot is empty. A flow that
    /// reaches `u32::MAX` packets leaves the table and starts again.
    packets: u32,
    /// The table's clock when the flow was last counted. It wraps; ages are
    /// taken modulo 2^32, which at worst misjudges which of two flows is
    /// older after four billion packets without a touch (a choice of
    /// victim, never a count).
    stamp: u32,
}

const _: () = assert!(core::mem::size_of::<Slot>() == 64);

const EMPTY: Slot = Slot {
    keys: FlowKeys {
        src: [0; 2],
        dst: [0; 2],
        sport: 0,
        dport: 0,
    },
    bytes: 0,
    packets: 0,
    stamp: 0,
};

impl Slot {
    #[inline]
    fn departed(&self) -> Departed {
        Departed {
            keys: self.keys,
            bytes: self.bytes,
            packets: u64::from(self.packets),
        }
    }
}

/// A random seed for a table, so that traffic cannot be aimed at its
/// slots.
fn table_seed() -> u64 {
    std::collections::hash_map::RandomState::new().hash_one(1u8)
}

/// The table: up to `max` slots (a power of two, at least 4), four
/// candidates a flow in two pairs. It starts at [`FIRST_SLOTS`] and grows
/// fourfold whenever it would be more than a quarter full, up to `max`.
pub(crate) struct FlowTable {
    slots: Vec<Slot>,
    mask: usize,
    /// The most slots it grows to.
    max: usize,
    /// New flows taken in so far (each let one go or filled an empty
    /// slot); it wraps.
    taken: usize,
    clock: u32,
    seed: u64,
    held: usize,
    /// The drain's order, kept from one drain to the next.
    order: Vec<u64>,
}

/// The most slots a table has: a slot's index fits in 32 bits (see
/// [`FlowTable::drain`]); 2^30 slots are 64 GiB.
const MAX_SLOTS: usize = 1 << 30;

/// The slots a table starts with: 256 KiB. A table made at its full size
/// (4 MiB by default) was written whole before the first packet, and a
/// profiler holds two (the interval being read and the one being
/// summarized): 2,000 page faults and 4 ms of an 8 ms run on a
/// 1,000-packet capture, where aguri2 takes 5. Growing as flows come
/// costs a move of each held flow at each step, and a capture with few
/// flows never pays for slots it does not use. Steps of four, not two
/// (4,096, 16,384, 65,536): the tables left behind are fresh memory too,
/// 3.7 MiB of them when doubling against 1.3 MiB, and on the project's VM
/// a fresh page costs 1.35 us (`profile -r` of 2,000,000 new flows: 6,000
/// page faults against 6,900).
const FIRST_SLOTS: usize = 4096;

/// Starts bringing `slot`'s cache line in without waiting for it. A
/// prefetch, not a load: loads that miss hold their instructions in the
/// core's reorder window until the line comes, so a first pass that read
/// the slots could run only a few packets ahead of the misses; prefetches
/// retire at once. `cargo bench -p aguri` on one thread: 13.7 against
/// 11.9 Mpps (heavy-tailed), 14.7 against 12.9 (active-flows); the whole
/// `profile -r` of 2,000,000 frames from 16,384 active flows 0.21-0.23 s
/// against 0.22-0.25 s, 96-byte frames (bench/profile-throughput.md).
#[inline(always)]
fn fetch(slot: &Slot) {
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    // SAFETY: a prefetch is only a hint: it never faults and changes no
    // memory, and `slot` is a live reference anyway.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(slot).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    std::hint::black_box(slot.stamp);
}

impl FlowTable {
    /// A table of up to `slots` slots, rounded up to a power of two (at
    /// least 4, at most 2^30).
    #[cfg(test)]
    pub fn new(slots: usize) -> FlowTable {
        FlowTable::with_seed(slots, None)
    }

    /// A table of up to `slots` slots whose hash takes `seed` (`None`: a
    /// random one), so that the same packets leave it in the same order on
    /// every run.
    pub fn with_seed(slots: usize, seed: Option<u64>) -> FlowTable {
        let max = slots.clamp(4, MAX_SLOTS).next_power_of_two();
        let n = max.min(FIRST_SLOTS);
        FlowTable {
            slots: vec![EMPTY; n],
            mask: n - 1,
            max,
            taken: 0,
            clock: 0,
            seed: seed.unwrap_or_else(table_seed),
            held: 0,
            order: Vec::new(),
        }
    }

    /// The first slots of a flow's two candidate pairs (even indices, never
    /// the same pair). The seed is random per table unless the profiler
    /// gives one ([`crate::ProfilerConfig::table_seed`]), so that traffic
    /// cannot be aimed at one pair of slots; a collision only sends flows
    /// to the trees sooner, it never loses a count.
    #[inline]
    fn slots_of(&self, k: &FlowKeys) -> (usize, usize) {
        let a = k.src[1] ^ k.src[0].rotate_left(21);
        let b = k.dst[1].rotate_left(7) ^ k.dst[0].rotate_left(43);
        let c = (u64::from(k.sport) << 32 | u64::from(k.dport)) ^ self.seed;
        let m =
            u128::from(a ^ b.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ c) * 0xbf58_476d_1ce4_e5b9u128;
        let h = (m as u64) ^ ((m >> 64) as u64);
        let i = h as usize & self.mask & !1;
        let j = (h >> 32) as usize & self.mask & !1;
        (i, if j == i { i ^ 2 } else { j })
    }

    /// Counts a batch of packets, `(flow, bytes)`, in order; flows that
    /// leave the table go to `out`.
    ///
    /// The table is larger than a core's L2 cache, so a lookup is a cache
    /// miss, and one packet's lookup waits for the last one's when they are
    /// made one after another (each ends in branches on what it read). A
    /// first pass computes every packet's slots and starts fetching them,
    /// fetches that do not depend on each other and so overlap; the second
    /// pass then finds them in the cache.
    pub fn add_batch(&mut self, batch: &[(FlowKeys, u64)], out: &mut Vec<Departed>) {
        const CHUNK: usize = 64;
        let mut at = [(0usize, 0usize); CHUNK];
        for chunk in batch.chunks(CHUNK) {
            self.room_for(chunk.len(), out);
            for (a, (k, _)) in at.iter_mut().zip(chunk) {
                *a = self.slots_of(k);
                for s in [a.0, a.0 + 1, a.1, a.1 + 1] {
                    fetch(&self.slots[s]);
                }
            }
            for (&(i, j), (k, bytes)) in at.iter().zip(chunk) {
                out.extend(self.add_at(k, *bytes, i, j));
            }
        }
    }

    /// Counts one packet of flow `k`. If the flow was not held and all four
    /// of its slots were taken, the least recently counted of those flows leaves the table and is
    /// returned, to be counted in the trees.
    ///
    /// (It does not grow the table: the tests that use it make tables of
    /// at most [`FIRST_SLOTS`].)
    #[cfg(test)]
    pub fn add(&mut self, k: &FlowKeys, bytes: u64) -> Option<Departed> {
        let (i, j) = self.slots_of(k);
        self.add_at(k, bytes, i, j)
    }

    /// Grows the table until `n` more flows would leave it at most a
    /// quarter full, or it has its most slots. (Growing at half full,
    /// the table let 6% of new flows go while it grew, when all four of
    /// their candidates were taken; `cargo bench -p aguri` on one thread
    /// was 5% slower than with the table made whole at the start.)
    #[inline]
    fn room_for(&mut self, n: usize, out: &mut Vec<Departed>) {
        while self.slots.len() < self.max && 4 * (self.held + n) > self.slots.len() {
            self.grow(out);
        }
    }

    /// Grows the table fourfold (to `max` at most), moving every held flow
    /// to a free one of its four candidates in the larger table. The larger
    /// table is at most a sixteenth full (an eighth when it reaches `max`
    /// from half of it), so all four are taken only rarely; a flow that finds
    /// them so leaves for `out` (its counts go to the trees whole, as when
    /// it is pushed out).
    #[cold]
    fn grow(&mut self, out: &mut Vec<Departed>) {
        let n = (self.slots.len() * 4).min(self.max);
        let old = std::mem::replace(&mut self.slots, vec![EMPTY; n]);
        self.mask = n - 1;
        for slot in old.iter().filter(|s| s.packets != 0) {
            let (i, j) = self.slots_of(&slot.keys);
            match [i, i + 1, j, j + 1]
                .into_iter()
                .find(|&s| self.slots[s].packets == 0)
            {
                Some(s) => self.slots[s] = *slot,
                None => {
                    self.held -= 1;
                    out.push(slot.departed());
                }
            }
        }
    }

    #[inline]
    fn add_at(&mut self, k: &FlowKeys, bytes: u64, i: usize, j: usize) -> Option<Departed> {
        self.clock = self.clock.wrapping_add(1);
        let clock = self.clock;
        for s in [i, i + 1, j, j + 1] {
            let slot = &mut self.slots[s];
            if slot.packets != 0 && slot.keys == *k {
                if slot.packets < u32::MAX {
                    slot.bytes += bytes;
                    slot.packets += 1;
                    slot.stamp = clock;
                    return None;
                }
                // Full: the flow so far leaves, and it starts again here.
                return self.replace(s, k, bytes);
            }
        }
        let mut victim = i;
        let mut oldest = self.age(i);
        for s in [i + 1, j, j + 1] {
            let a = self.age(s);
            if a > oldest {
                (victim, oldest) = (s, a);
            }
        }
        self.replace(victim, k, bytes)
    }

    /// Puts the first packet of flow `k` in slot `s`, returning the flow
    /// that held it.
    #[inline]
    fn replace(&mut self, s: usize, k: &FlowKeys, bytes: u64) -> Option<Departed> {
        self.taken = self.taken.wrapping_add(1);
        let fresh = self.fresh(k, bytes);
        let old = std::mem::replace(&mut self.slots[s], fresh);
        if old.packets == 0 {
            self.held += 1;
            return None;
        }
        Some(old.departed())
    }

    /// A slot holding the first packet of flow `k`.
    #[inline]
    fn fresh(&self, k: &FlowKeys, bytes: u64) -> Slot {
        Slot {
            keys: *k,
            bytes,
            packets: 1,
            stamp: self.clock,
        }
    }

    /// Packets counted since slot `s` was last touched (an empty slot is
    /// older than any flow).
    #[inline]
    fn age(&self, s: usize) -> u32 {
        let slot = &self.slots[s];
        if slot.packets == 0 {
            u32::MAX
        } else {
            self.clock.wrapping_sub(slot.stamp)
        }
    }

    /// Empties the table, handing every held flow to `out`, least recently
    /// counted first (so that the trees' LRU order follows the flows' own).
    pub fn drain(&mut self, out: &mut Vec<Departed>) {
        if self.held == 0 {
            return;
        }
        // Each held flow as one integer, its age (inverted: the oldest
        // sorts first) over its slot; ages differ (each is a packet's
        // clock), so the order is the ages' alone. One sort of integers,
        // in a vector kept for the next drain: sorting slot numbers by a
        // key looked up elsewhere, into vectors allocated each time, took
        // 4-11 ms for 67,000 flows (bench/profile-throughput.md).
        let mut order = std::mem::take(&mut self.order);
        order.clear();
        for (s, slot) in self.slots.iter().enumerate() {
            if slot.packets != 0 {
                let age = u64::from(u32::MAX - self.clock.wrapping_sub(slot.stamp));
                order.push(age << 32 | s as u64);
            }
        }
        order.sort_unstable();
        out.reserve(order.len());
        out.extend(
            order
                .iter()
                .map(|&k| self.slots[(k & 0xffff_ffff) as usize].departed()),
        );
        self.slots.fill(EMPTY);
        self.held = 0;
        self.order = order;
    }

    /// New flows taken in since the table was made, wrapping: the
    /// difference of two readings is how many came in between.
    pub fn taken(&self) -> usize {
        self.taken
    }

    /// Flows held now.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.held
    }

    /// Whether the table is past its start, when it takes every new flow
    /// into an empty slot and lets few go: seven eighths of its most slots
    /// taken.
    pub fn settled(&self) -> bool {
        8 * self.held >= 7 * self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn keys(i: u32) -> FlowKeys {
        FlowKeys::new(4, 6, u128::from(i), u128::from(i / 3), (i % 7) as u16, 80)
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

    /// The drain hands flows over least recently counted first, also when
    /// the table's clock wraps in between, and empties every slot.
    #[test]
    fn the_drain_goes_oldest_first() {
        for clock in [0, u32::MAX - 20] {
            let mut t = FlowTable::new(1024);
            t.clock = clock;
            let mut out = Vec::new();
            for f in 0..40 {
                out.extend(t.add(&keys(f), 100));
            }
            // Flows 5 and 17 counted again, last.
            out.extend(t.add(&keys(5), 100));
            out.extend(t.add(&keys(17), 100));
            assert!(out.is_empty(), "a flow left a table far from full");
            t.drain(&mut out);
            let order: Vec<FlowKeys> = out.iter().map(|d| d.keys).collect();
            let want: Vec<FlowKeys> = (0..40)
                .filter(|f| ![5, 17].contains(f))
                .chain([5, 17])
                .map(keys)
                .collect();
            assert_eq!(order, want, "clock from {clock}");
            assert!(t.slots.iter().all(|s| s.packets == 0));
        }
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

    /// A flow whose packet count would pass `u32::MAX` leaves the table with
    /// what it has and starts again: nothing wraps, nothing is lost.
    #[test]
    fn a_flow_at_the_packet_limit_leaves_and_starts_again() {
        let mut t = FlowTable::new(4);
        let k = keys(7);
        assert_eq!(t.add(&k, 10), None);
        let s = (0..t.slots.len())
            .find(|&s| t.slots[s].packets != 0)
            .unwrap();
        t.slots[s].packets = u32::MAX - 1;
        assert_eq!(t.add(&k, 10), None, "one below the limit: still counted");
        let d = t.add(&k, 10).expect("the full flow leaves");
        assert_eq!((d.keys, d.bytes, d.packets), (k, 20, u64::from(u32::MAX)));
        let mut out = Vec::new();
        t.drain(&mut out);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].bytes, out[0].packets), (10, 1));
    }

    /// A table grows as flows come, up to its size and no further, and
    /// what it counts while growing comes out whole.
    #[test]
    fn grows_as_flows_come_and_counts_exactly() {
        let mut t = FlowTable::new(1 << 16);
        assert_eq!((t.slots.len(), t.max), (FIRST_SLOTS, 1 << 16));
        let mut out = Vec::new();
        let (mut bytes, mut packets) = (0u64, 0u64);
        let mut batch = Vec::new();
        // 1,000 flows: the table stays at its first size.
        for f in 0..1000 {
            batch.push((keys(f), 100));
        }
        t.add_batch(&batch, &mut out);
        (bytes, packets) = (bytes + 100_000, packets + 1000);
        assert_eq!(t.slots.len(), FIRST_SLOTS);
        // (A flow leaves only when its four candidates are taken: under a
        // quarter full, fewer than one new flow in a thousand.)
        assert!(out.len() < 20, "{} left", out.len());
        // 100,000 more, each flow twice: it grows to its size and stops.
        let mut rng = rand::rngs::SmallRng::seed_from_u64(9);
        for round in 0..20u32 {
            batch.clear();
            for f in 0..5000u32 {
                let b = rng.gen_range(64..1519u64);
                batch.push((keys(1000 + round * 5000 + f), b));
                batch.push((keys(1000 + round * 5000 + f), b));
                (bytes, packets) = (bytes + 2 * b, packets + 2);
            }
            t.add_batch(&batch, &mut out);
            assert!(t.slots.len() <= 1 << 16);
            assert!(t.slots.len().is_power_of_two());
        }
        assert_eq!(t.slots.len(), 1 << 16);
        assert!(t.settled(), "{} held", t.held());
        // 101,000 flows in 65,536 slots: at least 35,464 had to leave; a
        // flow left besides only when its four candidates were taken, or
        // as the table grew.
        let departed = out.len();
        assert!((35_464..41_000).contains(&departed), "{departed} left");
        // Every flow was taken in once, and again for each second packet
        // that came after its flow had left.
        let again = t.taken() - 101_000;
        assert!(again <= departed, "{again} taken again, {departed} left");
        t.drain(&mut out);
        assert_eq!(t.held(), 0);
        assert_eq!(out.iter().map(|d| d.bytes).sum::<u64>(), bytes);
        assert_eq!(out.iter().map(|d| d.packets).sum::<u64>(), packets);
        // Every flow came out, and once (its two packets counted together
        // unless it left in between).
        let mut seen = std::collections::HashMap::new();
        for d in &out {
            *seen.entry(d.keys.tree_key(0)).or_insert(0u64) += d.packets;
        }
        assert_eq!(seen.len(), 101_000);
        assert!(seen.values().all(|&p| p == 1 || p == 2));
    }

    #[test]
    fn tree_keys_are_the_four_summaries_keys() {
        let (src, dst) = (
            crate::label::address_key("10.1.2.3".parse().unwrap()),
            crate::label::address_key("2001:db8::1".parse().unwrap()),
        );
        let k = FlowKeys::new(4, 6, src, dst, 1234, 80);
        assert_eq!(k.tree_key(2), crate::label::port_key(4, 6, 1234));
        assert_eq!(k.tree_key(3), crate::label::port_key(4, 6, 80));
        assert_eq!(k.tree_key(0), src);
        assert_eq!(k.tree_key(1), dst);
    }
}

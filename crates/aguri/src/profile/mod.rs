//! The profiler stage: packets in, one [`Summary`] per interval out.
//!
//! Four views, as aguri keeps (MAWI WG 2001, §2.2): source address, destination
//! address, `version:protocol:srcport` and `version:protocol:dstport`. Each
//! packet is counted once in each, in bytes and in packets: in an exact
//! store of the interval's keys ([`crate::exact`], the summary aggregated
//! from every key; the default), or in aguri's trees with LRU reclaim
//! (`exact_keys: 0`). Intervals are
//! aligned to multiples of their length in Unix time; the first interval
//! starts at the first packet and the last ends at the last packet, so the
//! partial intervals at both ends are reported, and every packet is in
//! exactly one summary. A packet whose time is earlier than its interval
//! (traces merged from several interfaces are not always in order) is
//! counted in the current interval rather than dropped.

//!
//! The stage is split by the chain a packet goes through:
//! - `config`: the settings, their checks, and the profiler they build;
//! - `trees`: the four views' stores (aguri's trees or exact counts) and
//!   the updates they take;
//! - `counting`: the flow table in front of the trees and the trees
//!   behind it, each step usable on either thread;
//! - `counter`: where packets are counted, inline or on the trees' own
//!   thread, and the jobs the reading thread sends there;
//! - `split`: where the work splits between the two threads, and the
//!   measurements that move it.

mod config;
mod counter;
mod counting;
mod split;
mod trees;

use core::net::IpAddr;

use wire::{FlowBits, LinkType, Slice};

use crate::flows::FlowKeys;
use crate::label::address_key;
use crate::summary::Summary;

pub use config::{
    ConfigError, ProfilerConfig, DEFAULT_BUDGET, DEFAULT_EXACT_KEYS, DEFAULT_FLOW_SLOTS,
    DEFAULT_PAIRS, DEFAULT_THRESHOLD, MIN_EXACT_KEYS,
};
pub(crate) use trees::Trees;

use counter::Counter;
use trees::Pending;

#[cfg(test)]
use counter::{HERE, PORTS_HERE};
#[cfg(test)]
use counting::{InlineCounts, BYPASS_PACKETS, BYPASS_WINDOW, CHUNK, PACKET_BATCH};
#[cfg(test)]
use split::ALWAYS_SWITCH;
#[cfg(test)]
use std::sync::atomic::Ordering;

/// What the profiler needs of a packet: its addresses, protocol and ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowKey {
    pub src: IpAddr,
    pub dst: IpAddr,
    /// The IP protocol number (after IPv6 extension headers).
    pub protocol: u8,
    /// 0 for protocols without ports and for non-first fragments.
    pub src_port: u16,
    pub dst_port: u16,
}

impl FlowKey {
    /// The key of a sliced frame; `None` when it has no IP layer.
    #[inline]
    pub fn of(s: &Slice<'_>) -> Option<FlowKey> {
        // `five_tuple` reads the IP layer itself: ask it first, and the IP
        // layer alone only for packets whose ports are missing, so that
        // the usual packet reads its headers once.
        if let Some(t) = s.five_tuple() {
            // ICMP's type and code are its port, as aguri keys it.
            let (src_port, dst_port) = match s.icmp() {
                Some((ty, code)) => (wire::icmp_port(ty, code), wire::icmp_port(ty, code)),
                None => (t.src_port, t.dst_port),
            };
            return Some(FlowKey {
                src: t.src,
                dst: t.dst,
                protocol: t.protocol.into(),
                src_port,
                dst_port,
            });
        }
        let n = s.network()?;
        Some(FlowKey {
            src: n.src,
            dst: n.dst,
            protocol: n.protocol.into(),
            src_port: 0,
            dst_port: 0,
        })
    }

    fn version(&self) -> u8 {
        if self.src.is_ipv4() {
            4
        } else {
            6
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Current {
    index: u64,
    start_ns: u64,
    /// Where the next interval starts (`u64::MAX` with one interval): a
    /// packet before it belongs to this one, found without a division.
    next_ns: u64,
    last_ns: u64,
}

/// The running profiler: feed it packets with [`add`](Self::add) or
/// [`add_frame`](Self::add_frame); it hands back each interval's summary,
/// in order, after the first packet of a later interval arrives (counting
/// inline, from that packet's call; on the counting thread, from the first
/// call to `add`, [`advance`](Self::advance) or [`finish`](Self::finish)
/// after the summary is made), and the last ones from `finish`. Memory is
/// bounded by the node budget, or by the exact keys (`exact_keys`).
///
/// Packets are counted in batches: every `CHUNK` (64) packets' keys are
/// counted in the flow table (`aguri::flows`), and the flows it lets go
/// wait until there are `TREE_BATCH` (4096) of them; then they are counted
/// in the source port tree, then in the destination port tree, the source
/// address tree and the destination address tree, so that each tree's
/// nodes stay in the core's cache while it works (the four trees together
/// are larger than a typical L2 cache). Everything held,
/// and every flow the table holds, is counted before its interval's
/// summary is made, so each summary's totals are exactly its packets and
/// bytes. Batching never changes a summary: the trees are independent, and
/// each sees its updates in the order they were made. Without the table
/// (`flow_slots: 0`) each tree sees its keys in arrival order, exactly what
/// counting packet by packet gives; with it, the order the flows leave in,
/// which its seed decides ([`ProfilerConfig::table_seed`]: a file's
/// summaries are the same on every run).
///
/// With `tree_thread` (the default) and a second CPU, the address trees
/// count on a thread of their own, batches taken in the order they were
/// made, while the caller's thread reads and slices; the flow table, and
/// the port trees after it, count on whichever of the two leaves the run
/// faster, as measured while it runs (see `Counter`, `WorkSplit` and
/// `SplitTuner`). A summary counts every batch before it, and is made on
/// the counting thread while this one reads the next interval into a
/// fresh table (see `Counter::begin_summary`); one is made at a time. The
/// summaries are the same (tests compare them entry for entry, the split
/// moved at every batch in one). bench/profile-throughput.md measures the
/// trees' thread (21.5 Mpps against 17.1 on one thread, active-flows from
/// frames), the table's and the port trees' place on either thread, and
/// the summaries made while reading on.
pub struct Profiler {
    cfg: ProfilerConfig,
    counter: Counter,
    /// Packets held before they are handed to the counter: [`CHUNK`](counting::CHUNK) when
    /// the table counts them on this thread, [`PACKET_BATCH`](counting::PACKET_BATCH) when they
    /// are sent to the counting thread (the counter says which).
    batch: usize,
    pending: Vec<Pending>,
    current: Option<Current>,
    non_ip: (u64, u64),
    /// An interval was closed by [`advance`](Self::advance): the next one
    /// starts at its boundary, not at its first packet (only the first
    /// interval of a run starts at its first packet, as aguri's does).
    closed_by_time: bool,
    /// The interval whose summary is being made, if one is.
    closing: Option<Closing>,
}

/// What a summary being made needs besides the counts.
struct Closing {
    start_ns: u64,
    end_ns: u64,
    non_ip: (u64, u64),
}

impl Profiler {
    /// The settings it was built with.
    pub fn config(&self) -> &ProfilerConfig {
        &self.cfg
    }

    /// Whether an interval is open (a packet came since the last summary).
    pub fn in_interval(&self) -> bool {
        self.current.is_some()
    }

    fn index(&self, ts_ns: u64) -> u64 {
        ts_ns.checked_div(self.cfg.interval_ns).unwrap_or(0)
    }

    /// Whether `ts_ns` lies in the current interval (nearly every packet),
    /// noting it as the interval's latest time if so.
    #[inline(always)]
    fn in_current(&mut self, ts_ns: u64) -> bool {
        match self.current.as_mut() {
            Some(c) if ts_ns < c.next_ns => {
                c.last_ns = c.last_ns.max(ts_ns);
                true
            }
            _ => false,
        }
    }

    /// Moves to the interval of `ts_ns`, returning the finished one if the
    /// packet starts a later interval. Out of line: most packets need only
    /// [`in_current`](Self::in_current), and a caller that inlined this
    /// would build and copy an `Option<Summary>` (240 bytes) every packet.
    #[inline(never)]
    fn enter(&mut self, ts_ns: u64) -> Option<Summary> {
        if self.in_current(ts_ns) {
            return None;
        }
        let index = self.index(ts_ns);
        let next_ns = self.next_start(index);
        match self.current {
            Some(c) if index <= c.index => {
                // Only when the next interval's start saturated at u64::MAX.
                self.current = Some(Current {
                    last_ns: c.last_ns.max(ts_ns),
                    ..c
                });
                None
            }
            Some(c) => {
                let done = self.summary(c.start_ns, c.next_ns);
                self.current = Some(Current {
                    index,
                    start_ns: index_start(index, self.cfg.interval_ns),
                    next_ns,
                    last_ns: ts_ns,
                });
                done
            }
            None => {
                let start_ns = if self.closed_by_time {
                    index_start(index, self.cfg.interval_ns)
                } else {
                    ts_ns
                };
                self.current = Some(Current {
                    index,
                    start_ns,
                    next_ns,
                    last_ns: ts_ns,
                });
                None
            }
        }
    }

    /// Where the interval after interval `index` starts.
    fn next_start(&self, index: u64) -> u64 {
        if self.cfg.interval_ns == 0 {
            u64::MAX
        } else {
            index_start(index.saturating_add(1), self.cfg.interval_ns)
        }
    }

    /// Counts one packet of `bytes` bytes (its length on the wire).
    #[inline]
    pub fn add(&mut self, ts_ns: u64, key: &FlowKey, bytes: u32) -> Option<Summary> {
        let keys = FlowKeys::new(
            key.version(),
            key.protocol,
            address_key(key.src),
            address_key(key.dst),
            key.src_port,
            key.dst_port,
        );
        self.add_keys(ts_ns, keys, bytes)
    }

    /// Always inlined, as are [`add_frame`](Self::add_frame) and
    /// [`add_bits`](Self::add_bits): a call here returns an
    /// `Option<Summary>` through memory for every packet, and the reading
    /// thread of `profile -r` is the one that bounds it
    /// (bench/profile-throughput.md, "the reading thread's per-packet path
    /// inlined whole").
    #[inline(always)]
    fn add_keys(&mut self, ts_ns: u64, keys: FlowKeys, bytes: u32) -> Option<Summary> {
        if self.in_current(ts_ns) {
            return self.hold(keys, bytes);
        }
        let done = self.enter(ts_ns);
        // (The summary just begun is taken at a later batch.)
        self.pending.push((keys, u64::from(bytes)));
        if self.pending.len() >= self.batch {
            self.batch = self.counter.count(&mut self.pending);
        }
        done
    }

    /// Holds one packet for the counter, which takes them every `batch`;
    /// then, a summary made since the last batch, if any.
    #[inline(always)]
    fn hold(&mut self, keys: FlowKeys, bytes: u32) -> Option<Summary> {
        self.pending.push((keys, u64::from(bytes)));
        if self.pending.len() >= self.batch {
            return self.count_held();
        }
        None
    }

    #[inline(never)]
    fn count_held(&mut self) -> Option<Summary> {
        self.batch = self.counter.count(&mut self.pending);
        self.take_closing(false)
    }

    /// Counts a captured frame: slices it and counts it under its IP
    /// header, or as non-IP traffic (kept in the summary's totals).
    #[inline(always)]
    pub fn add_frame(
        &mut self,
        link: LinkType,
        ts_ns: u64,
        orig_len: u32,
        frame: &[u8],
    ) -> Option<Summary> {
        // The frame's flow as integers, straight into the trees' keys: the
        // same keys as `FlowKey::of` gives `add`, without the detour through
        // `IpAddr` (a third of the cost of slicing).
        self.add_bits(ts_ns, wire::flow_bits(link, frame).as_ref(), orig_len)
    }

    /// Counts a frame whose flow is known already (`Slice::flow_bits` of a
    /// frame another stage has sliced); `None` is non-IP traffic.
    #[inline(always)]
    pub fn add_bits(
        &mut self,
        ts_ns: u64,
        bits: Option<&FlowBits>,
        orig_len: u32,
    ) -> Option<Summary> {
        match bits {
            Some(b) => self.add_keys(ts_ns, FlowKeys::of_bits(b), orig_len),
            None => {
                let done = if self.in_current(ts_ns) {
                    None
                } else {
                    self.enter(ts_ns)
                };
                self.non_ip.0 += u64::from(orig_len);
                self.non_ip.1 += 1;
                done
            }
        }
    }

    /// For a live source with no packets for a while: if `now_ns` lies in a
    /// later interval than the current one, the current one is finished.
    /// Returns the summaries made since the last call, oldest first: one
    /// being made when the call came, if it is ready (or, if the current
    /// interval finishes, once it is), and the current interval's.
    pub fn advance(&mut self, now_ns: u64) -> Vec<Summary> {
        let mut out = Vec::new();
        let ends = self
            .current
            .filter(|c| self.cfg.interval_ns > 0 && self.index(now_ns) > c.index);
        let Some(c) = ends else {
            out.extend(self.take_closing(false));
            return out;
        };
        self.current = None;
        self.closed_by_time = true;
        out.extend(self.summary(c.start_ns, c.next_ns));
        out.extend(self.take_closing(true));
        out
    }

    /// The last, partial interval (ending at its last packet), if any packet
    /// came, after the one before it if its summary is still being made.
    pub fn finish(&mut self) -> Vec<Summary> {
        let mut out: Vec<Summary> = self.take_closing(true).into_iter().collect();
        if let Some(c) = self.current.take() {
            out.extend(self.summary_with(c.start_ns, c.last_ns, true));
            out.extend(self.take_closing(true));
        }
        out
    }

    /// Ends an interval: everything held is counted, and its summary begun
    /// (on the counting thread, made while the next interval's packets are
    /// read; taken at a later batch, see [`Counter::begin_summary`]).
    /// Returns the summary before it if that was still being made (it is
    /// waited for: one at a time), or this one if it is made already.
    fn summary(&mut self, start_ns: u64, end_ns: u64) -> Option<Summary> {
        self.summary_with(start_ns, end_ns, false)
    }

    /// [`summary`](Self::summary); `last`: no packet comes after it, so
    /// both threads can make it (see [`Counter::begin_summary`]).
    fn summary_with(&mut self, start_ns: u64, end_ns: u64, last: bool) -> Option<Summary> {
        // The held packets and flows belong to this interval.
        self.batch = self.counter.count(&mut self.pending);
        let before = self.take_closing(true);
        self.closing = Some(Closing {
            start_ns,
            end_ns,
            non_ip: std::mem::take(&mut self.non_ip),
        });
        self.batch = self.counter.begin_summary(last);
        before.or_else(|| self.take_closing(false))
    }

    /// The summary being made, if it is (`wait`: once it is).
    fn take_closing(&mut self, wait: bool) -> Option<Summary> {
        self.closing.as_ref()?;
        let (sections, flows) = self.counter.take_summary(wait)?;
        let c = self.closing.take()?;
        Some(Summary {
            start_ns: c.start_ns,
            end_ns: c.end_ns,
            metric: self.cfg.metric,
            threshold: self.cfg.threshold,
            non_ip_bytes: c.non_ip.0,
            non_ip_packets: c.non_ip.1,
            sections,
            flows,
        })
    }
}

fn index_start(index: u64, interval_ns: u64) -> u64 {
    index.saturating_mul(interval_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Profiler {
        /// The table and trees of a profiler that counts on its caller's
        /// thread.
        fn behind(&self) -> &InlineCounts {
            match &self.counter {
                Counter::Inline { behind, .. } => behind,
                Counter::Thread { .. } => panic!("this profiler counts on a thread"),
            }
        }
    }

    fn key(src: &str, dst: &str, proto: u8, sp: u16, dp: u16) -> FlowKey {
        FlowKey {
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            protocol: proto,
            src_port: sp,
            dst_port: dp,
        }
    }

    #[test]
    fn the_trees_thread_gives_the_summaries_counting_inline_gives() {
        use rand::{Rng, SeedableRng};
        // Several intervals, a flood from random sources in the middle, the
        // 2-D view, small budgets so the trees reclaim (with aguri's trees,
        // `exact_keys: 0`) or the exact stores collapse (1,024 keys).
        let exact_keys = std::cell::Cell::new(MIN_EXACT_KEYS);
        let seed = std::cell::Cell::new(None);
        let run = |tree_thread: bool, flow_slots: usize| {
            let mut p = ProfilerConfig {
                interval_ns: 1_000_000_000,
                budget: 64,
                exact_keys: exact_keys.get(),
                table_seed: seed.get(),
                flow_slots,
                pairs: 512,
                tree_thread,
                // Every node with a count is an entry: a change in what the
                // trees saw, or in what order, shows.
                threshold: 0.0,
                ..ProfilerConfig::default()
            }
            .build()
            .unwrap();
            let mut rng = rand::rngs::StdRng::seed_from_u64(7);
            let mut out = Vec::new();
            for i in 0..400_000u64 {
                let flood = (150_000..250_000).contains(&i);
                let src: u32 = if flood {
                    rng.gen()
                } else {
                    0x0a00_0000 | rng.gen_range(0..300)
                };
                let k = FlowKey {
                    src: IpAddr::from(src.to_be_bytes()),
                    dst: IpAddr::from([192, 0, 2, rng.gen_range(0..40)]),
                    protocol: if rng.gen_bool(0.7) { 6 } else { 17 },
                    src_port: rng.gen_range(1024..1100),
                    dst_port: [80, 443, 53][rng.gen_range(0..3)],
                };
                out.extend(p.add(i * 10_000, &k, rng.gen_range(40..1500)));
            }
            out.extend(p.finish());
            out
        };
        // Without the flow table (whose slots hang on its seed, random
        // here, so that two runs of either kind let flows go in different
        // orders), every summary is the same, entry for entry.
        let (inline, threaded) = (run(false, 0), run(true, 0));
        assert_eq!(inline.len(), 4);
        assert!(inline
            .iter()
            .all(|s| !s.flows.is_empty() && s.sections[0].entries.len() > 2));
        assert!(inline == threaded, "the trees' thread changed a summary");
        // With it, the same intervals and totals.
        let totals = |v: &[Summary]| -> Vec<Vec<(u64, u64)>> {
            v.iter()
                .map(|s| s.sections.iter().map(|c| (c.bytes, c.packets)).collect())
                .collect()
        };
        let (inline, threaded) = (run(false, 256), run(true, 256));
        assert_eq!(totals(&inline), totals(&threaded));
        assert_eq!(totals(&inline), totals(&run(false, 0)));
        // With every table on the same seed, the table counted on the
        // counting thread (through the flood's bypass and back) gives what
        // it gives here, entry for entry.
        seed.set(Some(0x5eed));
        let (inline, threaded) = (run(false, 256), run(true, 256));
        assert!(inline.iter().all(|s| s.sections[0].entries.len() > 2));
        assert!(inline == threaded, "the counting thread changed a summary");
        // And with the table moving between the threads at every batch.
        ALWAYS_SWITCH.store(true, Ordering::Relaxed);
        let before = HERE.load(Ordering::Relaxed);
        let ports_before = PORTS_HERE.load(Ordering::Relaxed);
        let switching = run(true, 256);
        assert!(HERE.load(Ordering::Relaxed) >= before + 40);
        assert!(PORTS_HERE.load(Ordering::Relaxed) >= ports_before + 20);
        assert!(inline == switching, "moving the table changed a summary");
        // aguri's trees, reclaiming.
        exact_keys.set(0);
        let (inline, threaded) = (run(false, 256), run(true, 256));
        assert!(inline.iter().all(|s| s.sections[0].entries.len() > 2));
        assert!(inline == threaded, "the counting thread changed a summary");
    }

    /// Summaries made on the counting thread while the next interval is
    /// read come back in order, each with its own interval's counts: with
    /// intervals that end before the summary before them is made (it is
    /// waited for), gaps closed by `advance` (which hands back the summary
    /// in flight with the one it closes), and a last interval after one
    /// still being made.
    #[test]
    fn summaries_made_while_reading_on_come_back_in_order() {
        use rand::{Rng, SeedableRng};
        const S: u64 = 1_000_000_000;
        let run = |tree_thread: bool| {
            let mut p = ProfilerConfig {
                interval_ns: S,
                budget: 64,
                flow_slots: 256,
                tree_thread,
                threshold: 0.0,
                table_seed: Some(0x5eed),
                ..ProfilerConfig::default()
            }
            .build()
            .unwrap();
            let mut rng = rand::rngs::StdRng::seed_from_u64(11);
            let (mut out, mut fed) = (Vec::new(), Vec::new());
            let mut t = 0u64;
            for interval in 0..40u64 {
                // Long and short intervals (a short one ends while the
                // summary before it may still be made), a few gaps.
                let n = [30_000, 3, 1, 5_000][(interval % 4) as usize];
                t = t.max(interval * 3 * S);
                let mut packets = 0u64;
                for _ in 0..n {
                    let k = FlowKey {
                        src: IpAddr::from(rng.gen::<u32>().to_be_bytes()),
                        dst: IpAddr::from([192, 0, 2, rng.gen_range(0..40)]),
                        protocol: 6,
                        src_port: rng.gen_range(1024..1100),
                        dst_port: 80,
                    };
                    out.extend(p.add(t, &k, 100));
                    packets += 1;
                    t += S / 100_000;
                }
                fed.push(packets);
                if interval % 5 == 4 {
                    // A quiet second: the interval closes by time.
                    let v = p.advance(t + 2 * S);
                    assert!(v.len() <= 2);
                    out.extend(v);
                }
            }
            out.extend(p.finish());
            (out, fed)
        };
        let (inline, fed) = run(false);
        let (threaded, _) = run(true);
        assert_eq!(inline.len(), 40);
        let packets: Vec<u64> = threaded.iter().map(|s| s.sections[0].packets).collect();
        assert_eq!(packets, fed, "a summary came back out of order or mixed");
        assert!(threaded.windows(2).all(|w| w[0].end_ns <= w[1].start_ns));
        assert!(inline == threaded, "the counting thread changed a summary");
        // A live source that goes quiet after an interval's end gets its
        // summary from `advance` within the interval after it.
        let mut p = ProfilerConfig {
            interval_ns: S,
            ..ProfilerConfig::default()
        }
        .build()
        .unwrap();
        let k = key("10.0.0.1", "10.0.0.2", 6, 1, 2);
        let mut got = Vec::new();
        for i in 0..10_000 {
            got.extend(p.add(i * 1000, &k, 100));
        }
        got.extend(p.add(S, &k, 100));
        let begun = std::time::Instant::now();
        while got.is_empty() && begun.elapsed() < std::time::Duration::from_secs(20) {
            got.extend(p.advance(S + 1));
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].start_ns, got[0].sections[0].packets), (0, 10_000));
        assert_eq!(p.finish().len(), 1);
    }

    /// Packets handed over in the counting thread's batches reach the
    /// trees as the same updates, in the same order, as packets handed over
    /// a chunk at a time on the caller's thread: through the table, past it
    /// while a flood has it bypassed (where a long run goes to the trees
    /// straight from the batch), and through it again.
    #[test]
    fn batches_give_the_trees_the_updates_chunks_give() {
        use rand::{Rng, SeedableRng};
        let cfg = ProfilerConfig {
            budget: 64,
            flow_slots: 256,
            table_seed: Some(0x5eed),
            ..ProfilerConfig::default()
        };
        let mut rng = rand::rngs::SmallRng::seed_from_u64(11);
        let mut packets: Vec<Pending> = Vec::new();
        let busy = |i: u64| {
            FlowKeys::new(
                4,
                6,
                0x0a00_0000 | u128::from(i % 40),
                0x0a00_0001,
                40000,
                80,
            )
        };
        for i in 0..20_000u64 {
            packets.push((busy(i), 100 + i % 7));
        }
        for _ in 0..30_000 {
            let k = FlowKeys::new(
                4,
                17,
                u128::from(rng.gen::<u32>()),
                0x0a00_0001,
                rng.gen(),
                53,
            );
            packets.push((k, rng.gen_range(64..1519)));
        }
        for i in 0..BYPASS_PACKETS as u64 + 20_000 {
            packets.push((busy(i), 200));
        }
        let (mut chunks, mut batches) = (InlineCounts::new(cfg), InlineCounts::new(cfg));
        for c in packets.chunks(CHUNK) {
            chunks.count(c);
        }
        for b in packets.chunks(PACKET_BATCH) {
            batches.count(b);
        }
        chunks.summarize();
        batches.summarize();
        let (a, b) = (
            &chunks.back.counted.addresses.log,
            &batches.back.counted.addresses.log,
        );
        assert!(a.len() > 30_000 && a.len() < packets.len(), "{}", a.len());
        assert!(
            a == b,
            "the batches gave the trees other updates, or in another order"
        );
        assert!(
            chunks.ports.log == *a && batches.ports.log == *a,
            "the port trees were given other updates than the address trees"
        );
    }

    #[test]
    fn intervals_are_aligned_and_partial_ends_reported() {
        let mut p = ProfilerConfig {
            interval_ns: 10,
            ..Default::default()
        }
        .build()
        .unwrap();
        let k = key("10.0.0.1", "10.0.0.2", 6, 1234, 80);
        let mut out = Vec::new();
        for ts in [7u64, 9, 10, 15, 35, 36] {
            out.extend(p.add(ts, &k, 100));
        }
        out.extend(p.finish());
        let spans: Vec<(u64, u64, u64)> = out
            .iter()
            .map(|s| (s.start_ns, s.end_ns, s.sections[0].packets))
            .collect();
        assert_eq!(spans, vec![(7, 10, 2), (10, 20, 2), (30, 36, 2)]);
    }

    /// The flow table changes when the trees see a flow, not what is
    /// counted: with and without it, every interval's totals are the same,
    /// and so are the heavy hitters and their counts.
    #[test]
    fn the_flow_table_keeps_totals_and_heavy_hitters() {
        use rand::{Rng, SeedableRng};
        let run = |flow_slots: usize| {
            let mut rng = rand::rngs::SmallRng::seed_from_u64(11);
            let mut p = ProfilerConfig {
                interval_ns: 1_000_000,
                budget: 256,
                flow_slots,
                ..Default::default()
            }
            .build()
            .unwrap();
            let mut out = Vec::new();
            for i in 0..200_000u64 {
                // A third of the packets from one host to port 80, the rest
                // from random hosts and ports: the table both holds flows
                // and lets them go.
                let k = if rng.gen_bool(0.33) {
                    key("150.65.1.2", "10.0.0.1", 6, 40000, 80)
                } else {
                    let a: u32 = rng.gen();
                    FlowKey {
                        src: IpAddr::V4(a.into()),
                        dst: "10.0.0.1".parse().unwrap(),
                        protocol: 17,
                        src_port: rng.gen(),
                        dst_port: rng.gen(),
                    }
                };
                out.extend(p.add(i * 20, &k, rng.gen_range(64..1519)));
            }
            out.extend(p.finish());
            out
        };
        let (with, without) = (run(1024), run(0));
        assert_eq!(with.len(), 4);
        assert_eq!(with.len(), without.len());
        for (a, b) in with.iter().zip(&without) {
            assert_eq!((a.start_ns, a.end_ns), (b.start_ns, b.end_ns));
            for (sa, sb) in a.sections.iter().zip(&b.sections) {
                assert_eq!((sa.bytes, sa.packets), (sb.bytes, sb.packets));
                assert_eq!(
                    sa.entries.iter().map(|e| e.bytes).sum::<u64>(),
                    sa.bytes,
                    "entries add up to the total"
                );
            }
            // The heavy host and its port, with exactly its counts.
            let find = |s: &Summary, sec: usize, label: &str| {
                s.sections[sec]
                    .entries
                    .iter()
                    .find(|e| e.prefix.to_string() == label)
                    .map(|e| (e.bytes, e.packets))
            };
            for (sec, label) in [(0, "150.65.1.2"), (2, "4:6:40000"), (3, "4:6:80")] {
                let (x, y) = (find(a, sec, label), find(b, sec, label));
                assert!(x.is_some(), "{label} missing with the table");
                assert_eq!(x, y, "{label}");
            }
        }
    }

    /// Under a flood from random sources the table lets a flow go for
    /// nearly every packet, so the profiler sends packets past it for a
    /// while, then tries it again; the counts are exact throughout.
    /// A packet of a flood from random sources.
    fn flood_key(rng: &mut impl rand::Rng) -> FlowKey {
        FlowKey {
            src: IpAddr::V4(rng.gen::<u32>().into()),
            dst: "10.0.0.1".parse().unwrap(),
            protocol: 17,
            src_port: rng.gen(),
            dst_port: 53,
        }
    }

    /// A flood into a table far from full (at the start, or just emptied
    /// at an interval's end), where no flow has to leave, still goes past
    /// it after one window: the table judges by new flows, not by flows
    /// let go. Busy flows into an empty table do not.
    #[test]
    fn a_flood_bypasses_an_empty_table_after_one_window() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(9);
        let build = || {
            ProfilerConfig {
                flow_slots: 1 << 16,
                tree_thread: false,
                interval_ns: 1_000_000_000,
                ..Default::default()
            }
            .build()
            .unwrap()
        };
        let mut flood = |p: &mut Profiler, t0: u64| {
            for i in 0..2 * BYPASS_WINDOW as u64 {
                p.add(t0 + i, &flood_key(&mut rng), 100);
            }
        };
        let mut p = build();
        flood(&mut p, 0);
        let front = &p.behind().front;
        assert!(
            front.bypass > 0,
            "a flood into an empty table did not bypass it"
        );
        assert!(front.flows.as_ref().unwrap().held() <= BYPASS_WINDOW);
        // An interval ends: the emptied table is bypassed again after one
        // window once the bypass has run out.
        let mut p = build();
        let k = key("10.0.0.1", "10.0.0.2", 6, 1, 2);
        p.add(0, &k, 100);
        assert_eq!(
            p.add(1_000_000_000, &k, 100).map(|s| s.sections[0].packets),
            Some(1)
        );
        flood(&mut p, 1_000_000_001);
        assert!(p.behind().front.bypass > 0);
        // Busy flows: hits after their first packets, no bypass.
        let mut p = build();
        for i in 0..2 * BYPASS_WINDOW {
            let k = key("10.0.0.1", "10.0.0.2", 6, (i % 64) as u16, 80);
            p.add(i as u64, &k, 100);
        }
        assert_eq!(p.behind().front.bypass, 0);
    }

    #[test]
    fn a_flood_bypasses_the_flow_table_and_counts_stay_exact() {
        use rand::{Rng, SeedableRng};
        // On this thread, so that the table's state can be looked at.
        let cfg = |flow_slots| ProfilerConfig {
            budget: 256,
            flow_slots,
            tree_thread: false,
            ..Default::default()
        };
        let (mut p, mut q) = (cfg(1024).build().unwrap(), cfg(0).build().unwrap());
        let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
        let mut t = 0;
        let mut both = |p: &mut Profiler, q: &mut Profiler, k: &FlowKey, b: u32| {
            assert!(p.add(t, k, b).is_none() && q.add(t, k, b).is_none());
            t += 1;
        };
        for _ in 0..4 * BYPASS_WINDOW {
            let k = flood_key(&mut rng);
            both(&mut p, &mut q, &k, rng.gen_range(64..1519));
        }
        assert!(
            p.behind().front.bypass > 0,
            "a flood did not bypass the table"
        );
        // A few busy flows: once the bypass runs out the table is used again.
        let busy: Vec<FlowKey> = (0..8)
            .map(|i| key(&format!("150.65.1.{i}"), "10.0.0.1", 6, 40000 + i, 80))
            .collect();
        for i in 0..BYPASS_PACKETS + 4 * BYPASS_WINDOW {
            both(&mut p, &mut q, &busy[i % busy.len()], 100);
        }
        assert_eq!(p.behind().front.bypass, 0, "the table was not tried again");
        assert!(
            p.behind()
                .front
                .flows
                .as_ref()
                .is_some_and(|f| f.held() >= busy.len()),
            "the busy flows are not held in the table"
        );
        let (a, b) = (p.finish().pop().unwrap(), q.finish().pop().unwrap());
        for (sa, sb) in a.sections.iter().zip(&b.sections) {
            assert_eq!((sa.bytes, sa.packets), (sb.bytes, sb.packets));
        }
        let port80 = |s: &Summary| {
            s.sections[3]
                .entries
                .iter()
                .find(|e| e.prefix.to_string() == "4:6:80")
                .map(|e| (e.bytes, e.packets))
        };
        let n = (BYPASS_PACKETS + 4 * BYPASS_WINDOW) as u64;
        assert_eq!(port80(&a), Some((100 * n, n)));
        assert_eq!(port80(&a), port80(&b));
    }

    /// A frame counted with `add_frame` is counted as `add` counts its
    /// `FlowKey`: the same summaries, on IPv4, IPv6, TCP, UDP and ICMP.
    #[test]
    fn add_frame_counts_as_add_does() {
        use synth::{FrameSize, IpVersion, PayloadPattern, ProtoMix, Synth, SynthConfig};
        for ip in [IpVersion::V4, IpVersion::V6, IpVersion::Mix] {
            let mut s = Synth::new(SynthConfig {
                count: 3000,
                size: FrameSize::Fixed(96),
                payload: PayloadPattern::Fixed(0),
                proto: ProtoMix::Mix,
                ip,
                seed: 9,
                ..SynthConfig::default()
            })
            .unwrap();
            let cfg = ProfilerConfig {
                budget: 64,
                flow_slots: 0,
                ..Default::default()
            };
            let (mut by_frame, mut by_key) = (cfg.build().unwrap(), cfg.build().unwrap());
            let mut i = 0u64;
            while let Some((_, f)) = s.next_frame() {
                by_frame.add_frame(LinkType::Ethernet, i, 100 + i as u32 % 7, f);
                let k = FlowKey::of(&wire::slice(LinkType::Ethernet, f)).unwrap();
                by_key.add(i, &k, 100 + i as u32 % 7);
                i += 1;
            }
            let (a, b) = (
                by_frame.finish().pop().unwrap(),
                by_key.finish().pop().unwrap(),
            );
            assert_eq!(a, b, "{ip:?}");
            assert!(
                a.sections[2].entries.len() > 3,
                "{ip:?}: too few port entries to compare"
            );
        }
    }

    #[test]
    fn ipv6_and_ports_get_the_paper_labels() {
        let mut p = ProfilerConfig::default().build().unwrap();
        p.add(0, &key("2001:db8::1", "2001:db8::2", 17, 53, 5353), 100);
        p.add(1, &key("150.65.1.1", "10.0.0.1", 1, 0, 0), 100);
        let s = p.finish().pop().unwrap();
        let labels = |i: usize| -> Vec<String> {
            s.sections[i]
                .entries
                .iter()
                .map(|e| e.prefix.to_string())
                .collect()
        };
        assert!(
            labels(0).contains(&"2001:db8::1".to_string()),
            "{:?}",
            labels(0)
        );
        assert!(labels(0).contains(&"150.65.1.1".to_string()));
        assert!(
            labels(2).contains(&"6:17:53".to_string()),
            "{:?}",
            labels(2)
        );
        assert!(labels(3).contains(&"4:1:0".to_string()), "{:?}", labels(3));
    }

    /// ICMP and ICMPv6 messages are told apart by type and code, which are
    /// their port (`type << 8 | code`), as aguri keys them: echo request
    /// 4:1:2048, echo reply 4:1:0, port unreachable 4:1:771, time exceeded
    /// 4:1:2816, ICMPv6 echo request 6:58:32768.
    #[test]
    fn icmp_type_and_code_are_the_port() {
        let v4 = |ty: u8, code: u8| {
            let mut f = vec![0u8; 14 + 20 + 8];
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            f[14] = 0x45;
            f[16..18].copy_from_slice(&28u16.to_be_bytes());
            f[22] = 64;
            f[23] = 1;
            f[26..30].copy_from_slice(&[10, 0, 0, 1]);
            f[30..34].copy_from_slice(&[10, 0, 0, 2]);
            f[34] = ty;
            f[35] = code;
            f
        };
        let mut v6 = vec![0u8; 14 + 40 + 8];
        v6[12..14].copy_from_slice(&[0x86, 0xdd]);
        v6[14] = 0x60;
        v6[18..20].copy_from_slice(&8u16.to_be_bytes());
        v6[20] = 58;
        v6[21] = 64;
        v6[37] = 1;
        v6[53] = 2;
        v6[54] = 128;
        let frames = [v4(8, 0), v4(0, 0), v4(3, 3), v4(11, 0), v6];
        for flow_slots in [0, DEFAULT_FLOW_SLOTS] {
            let mut p = ProfilerConfig {
                threshold: 0.0,
                flow_slots,
                ..ProfilerConfig::default()
            }
            .build()
            .unwrap();
            for (i, f) in frames.iter().enumerate() {
                p.add_frame(LinkType::Ethernet, i as u64, 100, f);
            }
            let s = p.finish().pop().unwrap();
            for section in [2, 3] {
                let labels: Vec<String> = s.sections[section]
                    .entries
                    .iter()
                    .filter(|e| e.packets > 0)
                    .map(|e| e.prefix.to_string())
                    .collect();
                for want in ["4:1:2048", "4:1:0", "4:1:771", "4:1:2816", "6:58:32768"] {
                    assert!(labels.iter().any(|l| l == want), "{want}: {labels:?}");
                }
            }
        }
    }
}

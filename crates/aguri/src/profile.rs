//! The profiler stage: packets in, one [`Summary`] per interval out.
//!
//! Four trees, as aguri keeps (paper 004 §2.2): source address, destination
//! address, `version:protocol:srcport` and `version:protocol:dstport`. Each
//! packet is counted once in each, in bytes and in packets. Intervals are
//! aligned to multiples of their length in Unix time; the first interval
//! starts at the first packet and the last ends at the last packet, so the
//! partial intervals at both ends are reported, and every packet is in
//! exactly one summary. A packet whose time is earlier than its interval
//! (traces merged from several interfaces are not always in order) is
//! counted in the current interval rather than dropped.

use core::fmt;
use core::net::IpAddr;

use wire::{FlowBits, LinkType, Slice};

use crate::flows::{Departed, FlowKeys, FlowTable};
use crate::flows2d::PairTable;
use crate::label::{address_key, port_key, KeyKind, V4_MAPPED, V4_MAPPED_LEN};
use crate::summary::{Section, SectionKind, Summary};
use crate::tree::{Metric, PatriciaTree, MIN_BUDGET};

/// Packets held back before the flow table counts them: one of its chunks
/// ([`FlowTable::add_batch`] reads a chunk's slots first, then counts), 3 KiB
/// of keys that stay in L1.
const CHUNK: usize = 64;

/// Tree updates (flows that left the table, or packets when there is none)
/// held back before they are counted tree by tree (see [`Profiler`]): each
/// tree then gets a long run of updates while its nodes are in the cache.
/// With the table, 4096 updates are the departures of some 28,000 packets
/// on the benchmark's active-flows trace; 224 KiB of updates.
const TREE_BATCH: usize = 4096;

/// Packets over which the table's departures are judged (see `flush`).
const BYPASS_WINDOW: usize = 4096;

/// Packets sent straight to the trees once the flow table is found to let
/// a flow go for nearly every packet; then the table is tried again.
const BYPASS_PACKETS: usize = 64 * BYPASS_WINDOW;

/// A packet waiting to be counted: its flow's keys and its length.
type Pending = (FlowKeys, u64);

/// aguri's usual node budget per tree.
pub const DEFAULT_BUDGET: usize = 4096;
/// Flows the flow table in front of the trees holds by default (one
/// 64-byte slot each: 4 MiB, well inside a server's L3 cache). See
/// [`crate::flows`]: on the benchmark's active-flows trace (16,384 flows
/// at once) every flow reaches the trees once, and on its heavy-tailed
/// trace (100,000 flows drawn at random) one packet in seven pushes a
/// flow out, against one in three with 32,768 slots (1.4x the speed there,
/// the same on active-flows; 131,072 slots, 8 MiB, were slower on
/// active-flows). bench/profile-throughput.md has the figures.
pub const DEFAULT_FLOW_SLOTS: usize = 64 * 1024;
/// The default threshold, in percent of the interval's total.
pub const DEFAULT_THRESHOLD: f64 = 1.0;

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

/// A profiler's settings. [`build`](Self::build) checks them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProfilerConfig {
    /// Interval length in nanoseconds; 0 makes one summary of everything.
    pub interval_ns: u64,
    /// Nodes per tree.
    pub budget: usize,
    /// Percent of the interval's total an entry needs to be reported.
    pub threshold: f64,
    /// What the threshold and the shares are measured in.
    pub metric: Metric,
    /// Slots of the flow table in front of the trees ([`crate::flows`]);
    /// 0 counts every packet in the trees directly, as aguri does.
    pub flow_slots: usize,
    /// Entries of the 5-tuple table behind the 2-D view (source ×
    /// destination with protocols, [`crate::flows2d`]); 0: no 2-D view.
    pub pairs: usize,
    /// aguri2's coarsening ([`PatriciaTree::aggregate_with`]): thresholds
    /// scaled by prefix length, similar siblings merged.
    pub coarsen: bool,
    /// Count in the trees on a thread of their own (when the host has a
    /// second CPU), beside the thread that reads packets and keeps the
    /// flow table; the summaries are the same either way.
    pub tree_thread: bool,
}

impl Default for ProfilerConfig {
    fn default() -> Self {
        ProfilerConfig {
            interval_ns: 0,
            budget: DEFAULT_BUDGET,
            threshold: DEFAULT_THRESHOLD,
            metric: Metric::Either,
            flow_slots: DEFAULT_FLOW_SLOTS,
            pairs: 0,
            coarsen: false,
            tree_thread: true,
        }
    }
}

/// Entries of the 5-tuple table behind the 2-D view by default (about
/// 80 bytes each: 20 MiB).
pub const DEFAULT_PAIRS: usize = 256 * 1024;

/// A setting that cannot work.
#[derive(Clone, Debug, PartialEq)]
pub enum ConfigError {
    /// The threshold is not within 0..=100 percent.
    Threshold(f64),
    /// The node budget is below [`MIN_BUDGET`].
    Budget(usize),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Threshold(t) => {
                write!(f, "bad threshold {t}% (expected 0 to 100)")
            }
            ConfigError::Budget(b) => {
                write!(
                    f,
                    "node budget {b} is too small (expected at least {MIN_BUDGET})"
                )
            }
        }
    }
}

impl std::error::Error for ConfigError {}

impl ProfilerConfig {
    /// Checks the settings.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(0.0..=100.0).contains(&self.threshold) {
            return Err(ConfigError::Threshold(self.threshold));
        }
        if self.budget < MIN_BUDGET {
            return Err(ConfigError::Budget(self.budget));
        }
        Ok(())
    }

    /// The profiler these settings describe.
    pub fn build(self) -> Result<Profiler, ConfigError> {
        self.validate()?;
        let second_cpu = std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
        let counter = if self.tree_thread && second_cpu {
            Counter::on_thread(self)
        } else {
            Counter::Inline(Box::new(Counted::new(self)))
        };
        Ok(Profiler {
            counter,
            flows: (self.flow_slots > 0).then(|| FlowTable::new(self.flow_slots)),
            departed: Vec::with_capacity(TREE_BATCH + CHUNK),
            bypass: 0,
            window: (0, 0),
            pending: Vec::with_capacity(CHUNK),
            cfg: self,
            current: None,
            non_ip: (0, 0),
            closed_by_time: false,
        })
    }
}

/// The four trees of one period.
pub(crate) struct Trees {
    pub(crate) t: [PatriciaTree; 4],
}

impl Trees {
    pub(crate) fn new(budget: usize) -> Trees {
        let addr = || PatriciaTree::new(KeyKind::Address, budget, &[(V4_MAPPED, V4_MAPPED_LEN)]);
        let v4 = port_key(4, 0, 0);
        let v6 = port_key(6, 0, 0);
        let port = || PatriciaTree::new(KeyKind::Port, budget, &[(v4, 8), (v6, 8)]);
        Trees {
            t: [addr(), addr(), port(), port()],
        }
    }

    pub(crate) fn clear(&mut self) {
        for t in &mut self.t {
            t.clear();
        }
    }

    /// Counts flows in the trees, one tree at a time.
    fn count(&mut self, flows: &[Departed]) {
        for (i, tree) in self.t.iter_mut().enumerate() {
            for d in flows {
                tree.add(d.keys.tree_key(i), d.bytes, d.packets);
            }
        }
    }

    pub(crate) fn sections(&self, metric: Metric, threshold: f64, coarsen: bool) -> [Section; 4] {
        let sec = |i: usize, kind| {
            let t = &self.t[i];
            Section {
                kind,
                bytes: t.total_bytes(),
                packets: t.total_packets(),
                entries: t.aggregate_with(metric, threshold, coarsen),
            }
        };
        [
            sec(0, SectionKind::SrcAddress),
            sec(1, SectionKind::DstAddress),
            sec(2, SectionKind::SrcPort),
            sec(3, SectionKind::DstPort),
        ]
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
/// [`add_frame`](Self::add_frame); it hands back each interval's summary
/// when the first packet of a later interval arrives, and the last one from
/// [`finish`](Self::finish). Memory is fixed by the node budget.
///
/// Packets are counted in batches: every `CHUNK` (64) packets' keys are
/// counted in the flow table ([`crate::flows`]), and the flows it lets go
/// wait until there are `TREE_BATCH` (4096) of them; then they are counted
/// in the source tree, then in the destination tree, and so on, so that
/// each tree's nodes stay in the core's cache while it works (the four
/// trees together are larger than a typical L2 cache). Everything held,
/// and every flow the table holds, is counted before its interval's
/// summary is made, so each summary's totals are exactly its packets and
/// bytes. Batching never changes a summary: the trees are independent, and
/// each sees its updates in the order they were made. Without the table
/// (`flow_slots: 0`) each tree sees its keys in arrival order, exactly what
/// counting packet by packet gives.
///
/// With `tree_thread` (the default) and a second CPU, the batches are
/// counted in the trees on a thread of their own, in the order they were
/// made, while the caller's thread reads, slices and keeps the flow table;
/// a summary waits for every batch before it. The summaries are the same
/// (a test compares them entry for entry); `cargo bench -p aguri` on the
/// active-flows trace from frames: 21.5 Mpps against 17.1 on one thread,
/// and the whole `profile -r` of 2M new flows 0.33 s against 0.49.
pub struct Profiler {
    cfg: ProfilerConfig,
    counter: Counter,
    flows: Option<FlowTable>,
    /// Flows that left the table, waiting to be counted in the trees.
    departed: Vec<Departed>,
    /// Packets still to send past the flow table (see `flush`).
    bypass: usize,
    /// Packets the table counted, and flows it let go, since the last
    /// judgement on bypassing it.
    window: (usize, usize),
    pending: Vec<Pending>,
    current: Option<Current>,
    non_ip: (u64, u64),
    /// An interval was closed by [`advance`](Self::advance): the next one
    /// starts at its boundary, not at its first packet (only the first
    /// interval of a run starts at its first packet, as aguri's does).
    closed_by_time: bool,
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
                Some(done)
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

    #[inline]
    fn add_keys(&mut self, ts_ns: u64, keys: FlowKeys, bytes: u32) -> Option<Summary> {
        if self.in_current(ts_ns) {
            self.hold(keys, bytes);
            return None;
        }
        let done = self.enter(ts_ns);
        self.hold(keys, bytes);
        done
    }

    /// Holds one packet for the flow table, which counts every `CHUNK`.
    #[inline(always)]
    fn hold(&mut self, keys: FlowKeys, bytes: u32) {
        self.pending.push((keys, u64::from(bytes)));
        if self.pending.len() >= CHUNK {
            self.flush();
        }
    }

    /// Counts the held packets in the flow table, or hands them on as
    /// tree updates when there is no table; counts the updates in the trees
    /// once `TREE_BATCH` are waiting.
    fn flush(&mut self) {
        match self.flows.as_mut() {
            Some(table) if self.bypass == 0 => {
                let before = self.departed.len();
                table.add_batch(&self.pending, &mut self.departed);
                // A table that lets a flow go for (nearly) every packet, as
                // under a flood from random sources, only adds a lookup to
                // what the trees do anyway: send the next packets past it.
                self.window.0 += self.pending.len();
                self.window.1 += self.departed.len() - before;
                if self.window.0 >= BYPASS_WINDOW {
                    if self.window.1 * 16 >= self.window.0 * 15 {
                        self.bypass = BYPASS_PACKETS;
                    }
                    self.window = (0, 0);
                }
            }
            _ => {
                self.bypass = self.bypass.saturating_sub(self.pending.len());
                self.departed
                    .extend(self.pending.iter().map(|&(keys, bytes)| Departed {
                        keys,
                        bytes,
                        packets: 1,
                    }));
            }
        }
        self.pending.clear();
        if self.departed.len() >= TREE_BATCH {
            self.count_departed();
        }
    }

    /// Counts everything held, in the flow table too, in the trees.
    fn flush_all(&mut self) {
        self.flush();
        if let Some(table) = self.flows.as_mut() {
            table.drain(&mut self.departed);
        }
        self.count_departed();
    }

    /// Counts the departed flows in the trees (and the 2-D view's table),
    /// here or on the trees' thread.
    fn count_departed(&mut self) {
        self.counter.count(&mut self.departed);
    }

    /// Counts a captured frame: slices it and counts it under its IP
    /// header, or as non-IP traffic (kept in the summary's totals).
    #[inline]
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
    #[inline]
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
    pub fn advance(&mut self, now_ns: u64) -> Option<Summary> {
        let c = self.current?;
        if self.cfg.interval_ns == 0 || self.index(now_ns) <= c.index {
            return None;
        }
        self.current = None;
        self.closed_by_time = true;
        Some(self.summary(c.start_ns, c.next_ns))
    }

    /// The last, partial interval (ending at its last packet), if any packet came.
    pub fn finish(&mut self) -> Option<Summary> {
        let c = self.current.take()?;
        Some(self.summary(c.start_ns, c.last_ns))
    }

    fn summary(&mut self, start_ns: u64, end_ns: u64) -> Summary {
        // The held packets and flows belong to this interval.
        self.flush_all();
        let (sections, flows) = self.counter.summarize();
        let s = Summary {
            start_ns,
            end_ns,
            metric: self.cfg.metric,
            threshold: self.cfg.threshold,
            non_ip_bytes: self.non_ip.0,
            non_ip_packets: self.non_ip.1,
            sections,
            flows,
        };
        self.non_ip = (0, 0);
        s
    }
}

/// What is counted behind the flow table: the four trees and the 2-D
/// view's table, with the settings their summaries need.
struct Counted {
    trees: Trees,
    pairs: Option<PairTable>,
    cfg: ProfilerConfig,
}

/// A summary's sections and 2-D flows.
type Summarized = ([Section; 4], Vec<crate::flows2d::Flow>);

impl Counted {
    fn new(cfg: ProfilerConfig) -> Counted {
        Counted {
            trees: Trees::new(cfg.budget),
            pairs: (cfg.pairs > 0).then(|| PairTable::new(cfg.pairs)),
            cfg,
        }
    }

    fn count(&mut self, departed: &[Departed]) {
        self.trees.count(departed);
        if let Some(t) = self.pairs.as_mut() {
            for d in departed {
                let k = &d.keys;
                t.add(
                    k.tree_key(0),
                    k.tree_key(1),
                    k.sport,
                    k.dport,
                    d.bytes,
                    d.packets,
                );
            }
        }
    }

    /// The interval's sections and 2-D flows; then empties the trees.
    fn summarize(&mut self) -> Summarized {
        let cfg = &self.cfg;
        let sections = self.trees.sections(cfg.metric, cfg.threshold, cfg.coarsen);
        let flows = match self.pairs.as_mut() {
            Some(t) => {
                let aggs = |i: usize| -> Vec<crate::label::Prefix> {
                    sections[i].entries.iter().map(|e| e.prefix).collect()
                };
                let f = crate::flows2d::aggregate(
                    t.items(),
                    &aggs(0),
                    &aggs(1),
                    cfg.metric,
                    cfg.threshold,
                );
                t.clear();
                f
            }
            None => Vec::new(),
        };
        self.trees.clear();
        (sections, flows)
    }
}

/// Batches of departed flows a trees' thread may have waiting: enough to
/// keep it busy while the reading thread fills the next, few enough to
/// bound the memory (224 KiB a batch).
const QUEUED_BATCHES: usize = 4;

enum Job {
    Count(Vec<Departed>),
    Summarize,
    Stop,
}

/// Where the trees are counted: on the caller's thread, or on a thread of
/// their own that takes batches in order (so each tree sees its updates in
/// the order they were made, and summaries are what counting inline gives)
/// and hands the emptied batch vectors back.
enum Counter {
    Inline(Box<Counted>),
    Thread {
        jobs: std::sync::mpsc::SyncSender<Job>,
        spare: std::sync::mpsc::Receiver<Vec<Departed>>,
        done: std::sync::mpsc::Receiver<Summarized>,
        worker: Option<std::thread::JoinHandle<()>>,
    },
}

impl Counter {
    /// A thread of their own for the trees; counting here if the system
    /// gives no thread.
    fn on_thread(cfg: ProfilerConfig) -> Counter {
        use std::sync::mpsc::{channel, sync_channel};
        let (jobs, jobs_rx) = sync_channel::<Job>(QUEUED_BATCHES);
        let (spare_tx, spare) = channel();
        let (done_tx, done) = channel();
        let spawned = std::thread::Builder::new()
            .name("aguri-trees".into())
            .spawn(move || {
                let mut counted = Counted::new(cfg);
                for job in jobs_rx {
                    match job {
                        Job::Count(mut batch) => {
                            counted.count(&batch);
                            batch.clear();
                            let _ = spare_tx.send(batch);
                        }
                        Job::Summarize => {
                            if done_tx.send(counted.summarize()).is_err() {
                                return;
                            }
                        }
                        Job::Stop => return,
                    }
                }
            });
        match spawned {
            Ok(worker) => Counter::Thread {
                jobs,
                spare,
                done,
                worker: Some(worker),
            },
            Err(_) => Counter::Inline(Box::new(Counted::new(cfg))),
        }
    }

    /// Counts `batch` (left empty, its capacity kept or replaced).
    fn count(&mut self, batch: &mut Vec<Departed>) {
        match self {
            Counter::Inline(c) => {
                c.count(batch);
                batch.clear();
            }
            Counter::Thread { jobs, spare, .. } => {
                if batch.is_empty() {
                    return;
                }
                let next = spare
                    .try_recv()
                    .unwrap_or_else(|_| Vec::with_capacity(batch.capacity()));
                let full = std::mem::replace(batch, next);
                jobs.send(Job::Count(full))
                    .unwrap_or_else(|_| worker_gone());
            }
        }
    }

    fn summarize(&mut self) -> Summarized {
        match self {
            Counter::Inline(c) => c.summarize(),
            Counter::Thread { jobs, done, .. } => {
                jobs.send(Job::Summarize).unwrap_or_else(|_| worker_gone());
                done.recv().unwrap_or_else(|_| worker_gone())
            }
        }
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        if let Counter::Thread { jobs, worker, .. } = self {
            // After the batches before it (a worker that panicked has
            // closed its queue: nothing to send, nothing to wait for).
            let _ = jobs.send(Job::Stop);
            if let Some(w) = worker.take() {
                let _ = w.join();
            }
        }
    }
}

/// The trees' thread ended: only a panic in the counting (a bug, never
/// input) does that; it is passed on rather than summaries made short.
#[cold]
fn worker_gone() -> ! {
    panic!("the profiler's tree thread ended early (a panic on it is reported above)")
}

fn index_start(index: u64, interval_ns: u64) -> u64 {
    index.saturating_mul(interval_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // 2-D view, small budgets so the trees reclaim.
        let run = |tree_thread: bool, flow_slots: usize| {
            let mut p = ProfilerConfig {
                interval_ns: 1_000_000_000,
                budget: 64,
                flow_slots,
                pairs: 512,
                tree_thread,
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
        // Without the flow table (whose slots hang on a random seed, so
        // that two runs of either kind let flows go in different orders),
        // every summary is the same, entry for entry.
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
    #[test]
    fn a_flood_bypasses_the_flow_table_and_counts_stay_exact() {
        use rand::{Rng, SeedableRng};
        let cfg = |flow_slots| ProfilerConfig {
            budget: 256,
            flow_slots,
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
            let k = FlowKey {
                src: IpAddr::V4(rng.gen::<u32>().into()),
                dst: "10.0.0.1".parse().unwrap(),
                protocol: 17,
                src_port: rng.gen(),
                dst_port: 53,
            };
            both(&mut p, &mut q, &k, rng.gen_range(64..1519));
        }
        assert!(p.bypass > 0, "a flood did not bypass the table");
        // A few busy flows: once the bypass runs out the table is used again.
        let busy: Vec<FlowKey> = (0..8)
            .map(|i| key(&format!("150.65.1.{i}"), "10.0.0.1", 6, 40000 + i, 80))
            .collect();
        for i in 0..BYPASS_PACKETS + 4 * BYPASS_WINDOW {
            both(&mut p, &mut q, &busy[i % busy.len()], 100);
        }
        assert_eq!(p.bypass, 0, "the table was not tried again");
        assert!(
            p.flows.as_ref().is_some_and(|f| f.held() >= busy.len()),
            "the busy flows are not held in the table"
        );
        let (a, b) = (p.finish().unwrap(), q.finish().unwrap());
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
            let (a, b) = (by_frame.finish().unwrap(), by_key.finish().unwrap());
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
        let s = p.finish().unwrap();
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
            let s = p.finish().unwrap();
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

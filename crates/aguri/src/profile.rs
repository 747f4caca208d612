//! The profiler stage: packets in, one [`Summary`] per interval out.
//!
//! Four views, as aguri keeps (paper 004 §2.2): source address, destination
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

use core::fmt;
use core::net::IpAddr;

use wire::{FlowBits, LinkType, Slice};

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex};

use crate::exact::ExactCounts;
use crate::flows::{Departed, FlowKeys, FlowTable};
use crate::flows2d::PairTable;
use crate::label::{address_key, port_key, KeyKind, V4_MAPPED, V4_MAPPED_LEN};
use crate::summary::{Section, SectionKind, Summary};
use crate::tree::{Entry, Metric, PatriciaTree, MIN_BUDGET};

/// Packets held back before the flow table counts them: one of its chunks
/// ([`FlowTable::add_batch`] reads a chunk's slots first, then counts), 3 KiB
/// of keys that stay in L1.
const CHUNK: usize = 64;

/// Packets handed at once to the counting thread (see [`Profiler`]): 192 KiB
/// of keys, a multiple of [`CHUNK`], so that the table there counts the
/// same chunks as it would on the caller's thread.
const PACKET_BATCH: usize = 64 * CHUNK;

/// Tree updates (flows that left the table, or packets when there is none)
/// held back before they are counted tree by tree (see [`Profiler`]): each
/// tree then gets a long run of updates while its nodes are in the cache.
/// With the table, 4096 updates are the departures of some 28,000 packets
/// on the benchmark's active-flows trace; 224 KiB of updates.
const TREE_BATCH: usize = 4096;

/// The shortest run of packets past the flow table that is counted in the
/// trees straight from a batch (see `Back::count`); shorter runs wait with
/// the table (`Front::left`) for a longer batch, so that each tree gets a
/// long run of updates while its nodes are in the cache.
const DIRECT_RUN: usize = 1024;

/// Packets over which the table's new flows are judged (see `flush`).
const BYPASS_WINDOW: usize = 4096;

/// Packets sent straight to the trees once the flow table is found to take
/// a new flow for nearly every packet; then the table is tried again.
const BYPASS_PACKETS: usize = 64 * BYPASS_WINDOW;

/// A packet waiting to be counted: its flow's keys and its length.
type Pending = (FlowKeys, u64);

/// One update of the trees: a flow that left the table with what it
/// counted there, or a packet that went past the table.
trait Update {
    fn keys(&self) -> &FlowKeys;
    fn bytes(&self) -> u64;
    fn packets(&self) -> u64;
}

impl Update for Departed {
    #[inline(always)]
    fn keys(&self) -> &FlowKeys {
        &self.keys
    }
    #[inline(always)]
    fn bytes(&self) -> u64 {
        self.bytes
    }
    #[inline(always)]
    fn packets(&self) -> u64 {
        self.packets
    }
}

impl Update for Pending {
    #[inline(always)]
    fn keys(&self) -> &FlowKeys {
        &self.0
    }
    #[inline(always)]
    fn bytes(&self) -> u64 {
        self.1
    }
    #[inline(always)]
    fn packets(&self) -> u64 {
        1
    }
}

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
    /// Nodes per tree, with `exact_keys: 0`.
    pub budget: usize,
    /// Keys each of the four views counts exactly in an interval before
    /// it collapses what it holds ([`crate::exact`]: 32 bytes a key, and as
    /// much again to sort them when the summary is made; by default
    /// [`DEFAULT_EXACT_KEYS`]); 0: aguri's trees of `budget` nodes with LRU
    /// reclaim instead.
    pub exact_keys: usize,
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
    /// Count in the flow table and the trees on a thread of their own
    /// (when the host has a second CPU), beside the thread that reads and
    /// slices packets; the summaries are the same either way.
    pub tree_thread: bool,
    /// The flow table's hash seed. `None`: a random one for each table, so
    /// that nobody can aim traffic at its slots. The table decides the
    /// order in which the views see their keys (a flow is counted when it
    /// leaves), and aguri's trees (`exact_keys: 0`), or an exact store
    /// that has collapsed, give summaries that depend on that order below
    /// the threshold's margin; so a run that must be repeatable byte for
    /// byte (`profile -r FILE` takes one from the file's first bytes) gives
    /// a seed. Aimed traffic costs no count, only the table's help: each
    /// packet then counted in the trees, as under a flood of new flows.
    pub table_seed: Option<u64>,
}

impl Default for ProfilerConfig {
    fn default() -> Self {
        ProfilerConfig {
            interval_ns: 0,
            budget: DEFAULT_BUDGET,
            exact_keys: DEFAULT_EXACT_KEYS,
            threshold: DEFAULT_THRESHOLD,
            metric: Metric::Either,
            flow_slots: DEFAULT_FLOW_SLOTS,
            pairs: 0,
            coarsen: false,
            tree_thread: true,
            table_seed: None,
        }
    }
}

/// Keys each view counts exactly in an interval by default: 4 MiB a view
/// at most (64 bytes a key with the room to sort them), taken only as
/// keys come; an interval with fewer than half as many distinct keys in a
/// view is counted exactly. A smaller buffer stays in the caches: a flood
/// of new addresses took 0.238 s with 65,536 against 0.268 with 262,144.
pub const DEFAULT_EXACT_KEYS: usize = 64 * 1024;

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
    /// Exact keys set, but below [`MIN_EXACT_KEYS`].
    ExactKeys(usize),
}

/// The fewest exact keys accepted (other than 0).
pub const MIN_EXACT_KEYS: usize = crate::exact::MIN_CAP;

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
            ConfigError::ExactKeys(k) => {
                write!(
                    f,
                    "{k} exact keys are too few (expected 0, or at least {MIN_EXACT_KEYS})"
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
        if self.exact_keys > 0 && self.exact_keys < MIN_EXACT_KEYS {
            return Err(ConfigError::ExactKeys(self.exact_keys));
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
            Counter::Inline {
                behind: Box::new(Behind::new(self)),
                finished: None,
            }
        };
        // Held before the first count: where the table starts counts.
        let batch = match &counter {
            Counter::Inline { .. } => CHUNK,
            Counter::Thread { placement, .. } => batch_for(placement.cut),
        };
        Ok(Profiler {
            counter,
            batch,
            pending: Vec::with_capacity(PACKET_BATCH),
            cfg: self,
            current: None,
            non_ip: (0, 0),
            closed_by_time: false,
            closing: None,
        })
    }
}

/// One view's counts: aguri's tree, or every key exactly.
pub(crate) enum Store {
    Lru(PatriciaTree),
    Exact(ExactCounts),
}

impl Store {
    fn new(
        kind: KeyKind,
        budget: usize,
        exact: Option<&ProfilerConfig>,
        pinned: &[(u128, u8)],
    ) -> Store {
        match exact {
            Some(c) => Store::Exact(ExactCounts::new(
                kind,
                c.exact_keys,
                pinned,
                c.metric,
                c.threshold,
            )),
            None => Store::Lru(PatriciaTree::new(kind, budget, pinned)),
        }
    }

    fn clear(&mut self) {
        match self {
            Store::Lru(t) => t.clear(),
            Store::Exact(e) => e.clear(),
        }
    }

    fn totals(&self) -> (u64, u64) {
        match self {
            Store::Lru(t) => (t.total_bytes(), t.total_packets()),
            Store::Exact(e) => (e.total_bytes(), e.total_packets()),
        }
    }

    /// The aggregation pass (an exact store is empty afterwards).
    fn entries(&mut self, metric: Metric, threshold: f64, coarsen: bool) -> Vec<Entry> {
        match self {
            Store::Lru(t) => t.aggregate_with(metric, threshold, coarsen),
            Store::Exact(e) => e.summarize(metric, threshold, coarsen),
        }
    }

    /// Counts a prefix (a summary's entry being merged).
    pub(crate) fn add_prefix(&mut self, key: u128, len: u8, bytes: u64, packets: u64) {
        match self {
            Store::Lru(t) => t.add_prefix(key, len, bytes, packets),
            Store::Exact(_) => unreachable!("merges count in trees"),
        }
    }
}

/// Trees of one period, each over one of a flow's keys: all four (a
/// merge), or the two address trees or the two port trees (the profiler
/// counts these apart, see [`Front`]). A profiler's may be exact stores
/// ([`ProfilerConfig::exact_keys`]).
pub(crate) struct Trees {
    /// The key (`FlowKeys::tree_key`) and section of the first tree.
    first: usize,
    pub(crate) t: Vec<Store>,
    /// Every update counted, in order (tests).
    #[cfg(test)]
    log: Vec<(FlowKeys, u64, u64)>,
}

impl Trees {
    /// All four aguri trees: source and destination address, source and
    /// destination port (a merge's).
    pub(crate) fn new(budget: usize) -> Trees {
        let mut t = Trees::addresses(budget, None);
        t.t.extend(Trees::ports(budget, None).t);
        t
    }

    /// The source and destination address trees (exact stores with
    /// `exact`'s settings, when given).
    fn addresses(budget: usize, exact: Option<&ProfilerConfig>) -> Trees {
        let addr = || {
            Store::new(
                KeyKind::Address,
                budget,
                exact,
                &[(V4_MAPPED, V4_MAPPED_LEN)],
            )
        };
        Trees {
            first: 0,
            t: vec![addr(), addr()],
            #[cfg(test)]
            log: Vec::new(),
        }
    }

    /// The source and destination port trees.
    fn ports(budget: usize, exact: Option<&ProfilerConfig>) -> Trees {
        let v4 = port_key(4, 0, 0);
        let v6 = port_key(6, 0, 0);
        let port = || Store::new(KeyKind::Port, budget, exact, &[(v4, 8), (v6, 8)]);
        Trees {
            first: 2,
            t: vec![port(), port()],
            #[cfg(test)]
            log: Vec::new(),
        }
    }

    /// The profiler's address trees for `cfg`.
    fn addresses_for(cfg: &ProfilerConfig) -> Trees {
        Trees::addresses(cfg.budget, (cfg.exact_keys > 0).then_some(cfg))
    }

    /// The profiler's port trees for `cfg`.
    fn ports_for(cfg: &ProfilerConfig) -> Trees {
        Trees::ports(cfg.budget, (cfg.exact_keys > 0).then_some(cfg))
    }

    /// The last tree taken out, as trees of their own (counted on another
    /// thread meanwhile); [`rejoin`](Self::rejoin) puts it back.
    fn split_off_last(&mut self) -> Trees {
        let t = self.t.split_off(self.t.len().saturating_sub(1));
        Trees {
            first: self.first + self.t.len(),
            t,
            #[cfg(test)]
            log: Vec::new(),
        }
    }

    /// Trees split off by [`split_off_last`](Self::split_off_last) back in
    /// their place.
    fn rejoin(&mut self, last: Trees) {
        debug_assert_eq!(last.first, self.first + self.t.len());
        self.t.extend(last.t);
    }

    pub(crate) fn clear(&mut self) {
        for t in &mut self.t {
            t.clear();
        }
    }

    /// Counts flows in the trees, one tree at a time.
    fn count<U: Update>(&mut self, flows: &[U]) {
        #[cfg(test)]
        self.log
            .extend(flows.iter().map(|u| (*u.keys(), u.bytes(), u.packets())));
        /// One tree's run, its key chosen outside the loop.
        fn run<U: Update>(tree: &mut Store, flows: &[U], key: impl Fn(&FlowKeys) -> u128) {
            match tree {
                Store::Lru(t) => {
                    for d in flows {
                        t.add(key(d.keys()), d.bytes(), d.packets());
                    }
                }
                Store::Exact(e) => {
                    for d in flows {
                        e.add(key(d.keys()), d.bytes(), d.packets());
                    }
                }
            }
        }
        for (i, tree) in self.t.iter_mut().enumerate() {
            match self.first + i {
                0 => run(tree, flows, |k| k.tree_key(0)),
                1 => run(tree, flows, |k| k.tree_key(1)),
                2 => run(tree, flows, |k| k.tree_key(2)),
                _ => run(tree, flows, |k| k.tree_key(3)),
            }
        }
    }

    /// The section of tree `i` (an exact store is empty afterwards).
    fn section(&mut self, i: usize, metric: Metric, threshold: f64, coarsen: bool) -> Section {
        let kind = SectionKind::ALL[self.first + i];
        let t = &mut self.t[i];
        let (bytes, packets) = t.totals();
        Section {
            kind,
            bytes,
            packets,
            entries: t.entries(metric, threshold, coarsen),
        }
    }

    /// The four sections, of a `Trees` that holds all four trees.
    pub(crate) fn sections(
        &mut self,
        metric: Metric,
        threshold: f64,
        coarsen: bool,
    ) -> [Section; 4] {
        std::array::from_fn(|i| self.section(i, metric, threshold, coarsen))
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
/// counted in the flow table ([`crate::flows`]), and the flows it lets go
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
/// faster, as measured while it runs (see `Counter`, `Cut` and
/// `Placement`). A summary counts every batch before it, and is made on
/// the counting thread while this one reads the next interval into a
/// fresh table (see `Counter::begin_summary`); one is made at a time. The
/// summaries are the same (tests compare them entry for entry, the split
/// moved at every batch in one). Round 6 in bench/profile-throughput.md
/// measured the trees' thread (21.5 Mpps against 17.1 on one thread,
/// active-flows from frames), round 8 the table's placement, round 9 the
/// port trees', round 10 the summaries made while reading on.
pub struct Profiler {
    cfg: ProfilerConfig,
    counter: Counter,
    /// Packets held before they are handed to the counter: [`CHUNK`] when
    /// the table counts them on this thread, [`PACKET_BATCH`] when they
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
    /// thread of `profile -r` is the one that bounds it (round 13 of
    /// bench/profile-throughput.md).
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

/// What is counted behind the flow table: the two address trees and the
/// 2-D view's table, with the settings their summaries need (the port
/// trees count with the table, in [`Front`]).
struct Counted {
    addresses: Trees,
    pairs: Option<PairTable>,
    cfg: ProfilerConfig,
}

/// A summary's sections and 2-D flows.
type Summarized = ([Section; 4], Vec<crate::flows2d::Flow>);

impl Counted {
    fn new(cfg: ProfilerConfig) -> Counted {
        Counted {
            addresses: Trees::addresses_for(&cfg),
            pairs: (cfg.pairs > 0).then(|| PairTable::new(cfg.pairs)),
            cfg,
        }
    }

    fn count<U: Update>(&mut self, updates: &[U]) {
        self.addresses.count(updates);
        if let Some(t) = self.pairs.as_mut() {
            for d in updates {
                let k = d.keys();
                t.add(
                    k.tree_key(0),
                    k.tree_key(1),
                    k.sport,
                    k.dport,
                    d.bytes(),
                    d.packets(),
                );
            }
        }
    }

    /// The interval's sections, from the address trees and `ports`, and
    /// its 2-D flows; then empties the trees.
    fn summarize(&mut self, ports: &mut Trees) -> Summarized {
        let cfg = &self.cfg;
        let (metric, threshold, coarsen) = (cfg.metric, cfg.threshold, cfg.coarsen);
        let sections = std::array::from_fn(|i| match i {
            0 | 1 => self.addresses.section(i, metric, threshold, coarsen),
            _ => ports.section(i - 2, metric, threshold, coarsen),
        });
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
        self.addresses.clear();
        ports.clear();
        (sections, flows)
    }
}

/// The flow table ([`crate::flows`]) and its bypass state, and the flows
/// it let go (or that went past it) that wait to be counted in the trees:
/// counted on whichever thread has room for it (see [`Counter`]). The
/// flows wait until there are `TREE_BATCH` of them; then the port trees
/// count them, and the address trees after them, wherever those are, each
/// tree a long run while its nodes are in the cache.
struct Front {
    flows: Option<FlowTable>,
    /// Packets still to send past the flow table (see `flush`).
    bypass: usize,
    /// Packets the table counted, and new flows it took in (each let one
    /// go, or filled an empty slot), since the last judgement on bypassing
    /// it.
    window: (usize, usize),
    /// Flows that left the table, counted in no tree yet.
    left: Vec<Departed>,
}

impl Front {
    fn new(cfg: &ProfilerConfig) -> Front {
        Front {
            flows: (cfg.flow_slots > 0)
                .then(|| FlowTable::with_seed(cfg.flow_slots, cfg.table_seed)),
            bypass: 0,
            window: (0, 0),
            left: Vec::with_capacity(PACKET_BATCH + CHUNK),
        }
    }

    /// Counts a chunk of packets in the flow table, or hands them on as
    /// tree updates when there is no table or it is bypassed; the flows
    /// that leave wait in `left`.
    fn flush(&mut self, chunk: &[Pending]) {
        match self.flows.as_mut() {
            Some(table) if self.bypass == 0 => {
                let out = &mut self.left;
                let taken = table.taken();
                table.add_batch(chunk, out);
                // A table that takes a new flow for (nearly) every packet,
                // as under a flood from random sources, only adds a lookup
                // to what the trees do anyway: send the next packets past
                // it. (New flows, not flows let go: a table emptied at an
                // interval's end lets none go until it is full again.)
                self.window.0 += chunk.len();
                self.window.1 += table.taken().wrapping_sub(taken);
                if self.window.0 >= BYPASS_WINDOW {
                    if self.window.1 * 16 >= self.window.0 * 15 {
                        self.bypass = BYPASS_PACKETS;
                    }
                    self.window = (0, 0);
                }
            }
            _ => {
                self.pass(chunk.len());
                self.left
                    .extend(chunk.iter().map(|&(keys, bytes)| Departed {
                        keys,
                        bytes,
                        packets: 1,
                    }));
            }
        }
    }

    /// How many of the next `n` packets go past the table, chunk by chunk.
    fn past(&self, n: usize) -> usize {
        match self.flows {
            None => n,
            Some(_) => (self.bypass.div_ceil(CHUNK) * CHUNK).min(n),
        }
    }

    /// `n` packets went past the table.
    fn pass(&mut self, n: usize) {
        self.bypass = self.bypass.saturating_sub(n);
    }

    /// Whether the table is past its start, when it takes every new flow
    /// into an empty slot and lets few go: settled ([`FlowTable::settled`]),
    /// or bypassed, or absent. (A table that never fills holds every flow
    /// of the run, and where it is counted matters little.)
    fn warm(&self) -> bool {
        self.bypass > 0 || self.flows.as_ref().is_none_or(FlowTable::settled)
    }

    /// Every flow the table holds leaves, least recently counted first.
    fn drain(&mut self) {
        if let Some(table) = self.flows.as_mut() {
            table.drain(&mut self.left);
        }
    }
}

/// What is behind the table and the port trees: the address trees and the
/// 2-D view's table ([`Counted`]), and the time spent counting there and
/// in the port trees when they are counted on this thread. The port trees
/// (`Trees::ports`) are apart from the address trees, on the thread that
/// counts the table or on this one, so that under a flood of new flows,
/// when the table is bypassed and the trees are most of the work, the two
/// threads can share the trees (round 9 in bench/profile-throughput.md).
struct Back {
    counted: Counted,
    /// Nanoseconds spent counting in the address trees and in the port
    /// trees (see [`Placement`]).
    trees_ns: u64,
    ports_ns: u64,
}

impl Back {
    fn new(cfg: ProfilerConfig) -> Back {
        Back {
            counted: Counted::new(cfg),
            trees_ns: 0,
            ports_ns: 0,
        }
    }

    /// Counts packets through `front` and `ports`, `CHUNK` at a time, as
    /// they were held. A long run of them that goes past the table (there
    /// is none, or it is bypassed) is counted in the trees straight from
    /// `packets`, after the flows that left the table before it: the same
    /// updates in the same order as through `front.left`, without copying
    /// every packet into it.
    fn count(&mut self, front: &mut Front, ports: &mut Trees, packets: &[Pending]) {
        let mut rest = packets;
        while !rest.is_empty() {
            let past = front.past(rest.len());
            let n = if past >= DIRECT_RUN {
                front.pass(past);
                self.count_left(front, ports);
                self.count_ports(ports, &rest[..past]);
                self.count_trees(&rest[..past]);
                past
            } else {
                let n = CHUNK.min(rest.len());
                front.flush(&rest[..n]);
                if front.left.len() >= TREE_BATCH {
                    self.count_left(front, ports);
                }
                n
            };
            rest = &rest[n..];
        }
    }

    /// Counts the flows waiting in `front` in the port trees and here.
    fn count_left(&mut self, front: &mut Front, ports: &mut Trees) {
        if front.left.is_empty() {
            return;
        }
        self.count_ports(ports, &front.left);
        self.count_trees(&front.left);
        front.left.clear();
    }

    /// Counts updates in the port trees, timed.
    fn count_ports<U: Update>(&mut self, ports: &mut Trees, updates: &[U]) {
        let t = std::time::Instant::now();
        ports.count(updates);
        self.ports_ns += ns_since(t);
    }

    /// Counts updates in the address trees (and the 2-D view's table),
    /// timed.
    fn count_trees<U: Update>(&mut self, updates: &[U]) {
        let t = std::time::Instant::now();
        self.counted.count(updates);
        self.trees_ns += ns_since(t);
    }

    /// Everything held, in `front`'s table too, counted; then the
    /// interval's sections and 2-D flows, the trees emptied.
    fn summarize(&mut self, front: &mut Front, ports: &mut Trees) -> Summarized {
        front.drain();
        self.count_left(front, ports);
        self.counted.summarize(ports)
    }
}

/// The table and what is behind it, on one thread.
struct Behind {
    front: Front,
    ports: Trees,
    back: Back,
}

impl Behind {
    fn new(cfg: ProfilerConfig) -> Behind {
        Behind {
            front: Front::new(&cfg),
            ports: Trees::ports_for(&cfg),
            back: Back::new(cfg),
        }
    }

    fn count(&mut self, packets: &[Pending]) {
        self.back.count(&mut self.front, &mut self.ports, packets);
    }

    fn summarize(&mut self) -> Summarized {
        self.back.summarize(&mut self.front, &mut self.ports)
    }
}

/// Batches a counting thread may have waiting: enough to keep it busy
/// while the reading thread fills the next, few enough to bound the memory
/// (192 KiB a batch of packets, 224 KiB of departed flows).
const QUEUED_BATCHES: usize = 4;

enum Job {
    /// Packets, to count through the table there.
    Packets(Vec<Pending>),
    /// Flows that left the table on the reading thread, counted in the
    /// port trees there or not.
    Departed {
        flows: Vec<Departed>,
        ported: bool,
    },
    /// The last summary (see [`Counter::begin_summary`]): the destination
    /// address tree goes to the reading thread, which counts the last
    /// flows in it and in the port trees.
    Lend,
    /// The last summary's flows, shared with the reading thread: counted
    /// here in the trees not lent.
    Last(Arc<Vec<Departed>>),
    /// The lent tree back, before the summary is made.
    Rejoin(Trees),
    /// The table set aside (`Shared::closing`) drained into the trees, and
    /// the interval's summary made from them.
    Summarize,
    Stop,
}

/// What the reading thread and the counting thread share.
struct Shared {
    /// The table, and the port trees, each on the thread that counts it
    /// at the moment (see [`Cut`]).
    front: Mutex<Front>,
    ports: Mutex<Trees>,
    /// The table of the interval being summarized on the counting thread,
    /// while the next interval's counts in `front` (see
    /// [`Counter::begin_summary`]); empty between summaries.
    closing: Mutex<Front>,
    /// Batches sent and not yet counted: the reading thread takes a part
    /// over only when there are none, so that each part sees every update
    /// in order.
    queued: AtomicUsize,
    /// Nanoseconds the counting thread has spent on its jobs, and of those
    /// counting in the address trees and in the port trees.
    busy_ns: AtomicU64,
    trees_ns: AtomicU64,
    ports_ns: AtomicU64,
    /// Jobs the counting thread has done.
    jobs_done: AtomicU64,
    /// The table has been warm (`Front::warm`) on the counting thread.
    table_warm: AtomicBool,
    /// The reading thread while it waits for `queued` to fall to 0, to be
    /// woken then (the profiler may have been built on another).
    waiting: Mutex<Option<std::thread::Thread>>,
}

impl Shared {
    /// A job begun at `begun` is done; `back`'s times so far.
    fn account(&self, begun: std::time::Instant, back: &Back) {
        self.busy_ns.fetch_add(ns_since(begun), Ordering::Relaxed);
        self.trees_ns.store(back.trees_ns, Ordering::Relaxed);
        self.ports_ns.store(back.ports_ns, Ordering::Relaxed);
        self.jobs_done.fetch_add(1, Ordering::Relaxed);
    }
}

/// How far along the chain of work the reading thread goes: it always
/// reads and slices; then the flow table, then the port trees, can be
/// counted there or on the counting thread; the address trees and the 2-D
/// view are always counted on the counting thread. Each part takes what
/// the one before it gives, so the work splits at one place in the chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Cut {
    /// The reading thread sends packets.
    Reading,
    /// It counts the table and sends the flows that leave.
    Table,
    /// It also counts them in the port trees.
    Ports,
}

impl Cut {
    /// One part more on the reading thread, or one fewer.
    fn later(self) -> Option<Cut> {
        match self {
            Cut::Reading => Some(Cut::Table),
            Cut::Table => Some(Cut::Ports),
            Cut::Ports => None,
        }
    }

    fn earlier(self) -> Option<Cut> {
        match self {
            Cut::Reading => None,
            Cut::Table => Some(Cut::Reading),
            Cut::Ports => Some(Cut::Table),
        }
    }
}

/// Where packets are counted: on the caller's thread, or on a thread of
/// their own that takes batches in order (so the table and each tree see
/// their updates in the order they were made, and summaries are what
/// counting inline gives) and hands the emptied batch vectors back.
///
/// On their own thread, the work splits where there is room for it (see
/// [`Cut`] and [`Placement`]): the reading thread sends packets, or counts
/// the table itself (once every batch sent has been through it) and sends
/// the flows that leave, or also counts those in the port trees. Where the
/// reading is the larger part (a capture file read from the page cache,
/// and traffic the table aggregates) the table goes to the counting
/// thread: `profile -r` of 2,000,000 frames from 16,384 active flows
/// 0.38-0.42 s against 0.46-0.47 with the table always on the reading
/// thread (round 8 in bench/profile-throughput.md); where the trees are
/// (floods of new flows), the port trees come to the reading thread too
/// (round 9).
// One a profiler, reached once a batch: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Counter {
    Inline {
        behind: Box<Behind>,
        /// The last summary made, not yet taken.
        finished: Option<Summarized>,
    },
    Thread {
        jobs: SyncSender<Job>,
        spare: Receiver<Vec<Pending>>,
        spare_departed: Receiver<Vec<Departed>>,
        done: Receiver<Summarized>,
        /// The destination address tree, lent for the last summary.
        lent: Receiver<Trees>,
        worker: Option<std::thread::JoinHandle<()>>,
        shared: Arc<Shared>,
        /// Where the work splits, and the measurements that move it.
        placement: Placement,
        /// Packets counted in the table here since the last judgement.
        here_packets: usize,
        /// A summary is being made on the counting thread: where the split
        /// was when it began (see [`Counter::begin_summary`]).
        in_flight: Option<Cut>,
        /// A summary made, not yet taken.
        finished: Option<Summarized>,
    },
}

/// Where the work splits ([`Cut`]). Over a window of batches, each
/// thread's busy time is measured (the reading thread's wall time less its
/// waits on the queue, the counting thread's time on its jobs), and with
/// it the time of the parts that can move, where they run: the table (on
/// this thread timed each batch; on the counting thread its jobs less the
/// trees' time) and the port trees. The split moves by one part if the
/// busier thread, with that part's time moved to the other side, would
/// take a tenth less than the busier thread now does. A part that comes to
/// the reading thread costs it a wait (for what was sent to go through the
/// part first), so a window starts at [`PLACEMENT_WINDOW`] batches and
/// doubles, up to [`MAX_WINDOW`], each time the split moves back soon
/// after it moved.
struct Placement {
    cut: Cut,
    /// The latest the split may be: `Table` while a summary is made on the
    /// counting thread (which reads the port trees then).
    ceiling: Cut,
    /// The table is past its start (see `Front::warm`): until then its
    /// cost and the trees' say nothing of what follows, and nothing is
    /// judged.
    warm: bool,
    /// Batches and packets in the current window.
    batches: u32,
    packets: u64,
    /// Just after a move: where the split was, and the time a packet took
    /// in the window before the move.
    trial: Option<(Cut, f64)>,
    window: u32,
    /// Batches since the split last moved.
    since_move: u32,
    /// The window's start, and what was measured since.
    start: std::time::Instant,
    /// This thread's waits for the queue.
    waited_ns: u64,
    /// This thread's time in the table and in the port trees.
    table_ns: u64,
    ports_ns: u64,
    /// The counting thread's counters at the window's start.
    busy0: u64,
    trees0: u64,
    ports0: u64,
    jobs0: u64,
    /// Which way the split moves next under `always_switch` (tests).
    #[cfg(test)]
    forward: bool,
}

/// The first window: 16 batches of 4096 packets.
const PLACEMENT_WINDOW: u32 = 16;
/// The longest window: 16 million packets.
const MAX_WINDOW: u32 = 4096;
/// The fewest jobs of the counting thread a window needs to be judged.
const MIN_JOBS: u64 = 4;

impl Placement {
    /// The table starts on the counting thread: while it fills, no flow
    /// leaves it and the trees get nothing, so the counting thread would
    /// have nothing else to do, and the reading thread only reads (with the
    /// table here from the start, the counting thread waited idle for the
    /// first sixth of a 100 s trace of 16,384 active flows). Once it is
    /// warm (full, or passed by under a flood) it comes here, where the
    /// split is judged from (judged from the start on the counting thread,
    /// a flood took two moves and their trial windows to reach the split it
    /// needs, and a flood of 2,000,000 frames took a third longer).
    fn new() -> Placement {
        Placement {
            cut: Cut::Reading,
            ceiling: Cut::Ports,
            warm: false,
            batches: 0,
            packets: 0,
            trial: None,
            window: PLACEMENT_WINDOW,
            since_move: 0,
            start: std::time::Instant::now(),
            waited_ns: 0,
            table_ns: 0,
            ports_ns: 0,
            busy0: 0,
            trees0: 0,
            ports0: 0,
            jobs0: 0,
            #[cfg(test)]
            forward: true,
        }
    }

    /// One batch counted; `cut` may change.
    fn judge(&mut self, shared: &Shared, packets: usize) {
        #[cfg(test)]
        if ALWAYS_SWITCH.load(Ordering::Relaxed) {
            let next = if self.forward {
                self.later()
            } else {
                self.cut.earlier()
            };
            match next {
                Some(c) => self.cut = c,
                None => {
                    self.forward = !self.forward;
                    self.judge(shared, packets);
                }
            }
            return;
        }
        self.packets += packets as u64;
        self.batches += 1;
        self.since_move = self.since_move.saturating_add(1);
        if !self.warm {
            return;
        }
        // A window ends once the counting thread has done a few jobs in it
        // (while the table holds most flows, the flows it lets go come
        // seldom, and a window without them would not show the trees).
        let jobs = shared.jobs_done.load(Ordering::Relaxed) - self.jobs0;
        if self.batches < self.window || jobs < MIN_JOBS {
            return;
        }
        let wall = self.start.elapsed().as_nanos() as u64;
        let busy = shared.busy_ns.load(Ordering::Relaxed) - self.busy0;
        let trees = shared.trees_ns.load(Ordering::Relaxed) - self.trees0;
        let ports = shared.ports_ns.load(Ordering::Relaxed) - self.ports0;
        let reading = wall.saturating_sub(self.waited_ns);
        // The time of the part that would come here, and of the one that
        // would go there.
        let coming = match self.cut {
            Cut::Reading => busy.saturating_sub(trees + ports),
            Cut::Table => ports.min(busy),
            Cut::Ports => 0,
        };
        let going = match self.cut {
            Cut::Reading => 0,
            Cut::Table => self.table_ns.min(reading),
            Cut::Ports => self.ports_ns.min(reading),
        };
        let now = reading.max(busy);
        let later = (reading + coming).max(busy - coming);
        let earlier = (reading - going).max(busy + going);
        let per_packet = wall as f64 / self.packets.max(1) as f64;
        match self.trial.take() {
            // The first window after a move: if the run went slower than
            // in the window before it (the reading thread's own work can
            // change with the split, which the estimate does not see), the
            // split goes back.
            Some((before, t)) if per_packet > t => self.moved(before),
            Some(_) => {}
            None => {
                let to = match (self.later(), self.cut.earlier()) {
                    (Some(l), _) if later * 10 < now * 9 && later <= earlier => Some(l),
                    (_, Some(e)) if earlier * 10 < now * 9 => Some(e),
                    _ => None,
                };
                if let Some(to) = to {
                    let from = self.cut;
                    self.moved(to);
                    self.trial = Some((from, per_packet));
                }
            }
        }
        self.restart(shared);
    }

    /// One part more on the reading thread, if the ceiling allows it.
    fn later(&self) -> Option<Cut> {
        self.cut.later().filter(|&c| c <= self.ceiling)
    }

    /// The split moves.
    fn moved(&mut self, to: Cut) {
        self.cut = to;
        if self.since_move <= 2 * self.window {
            self.window = (self.window * 2).min(MAX_WINDOW);
        }
        self.since_move = 0;
    }

    /// Whether the table is past its start now; the first window starts
    /// when it first is.
    fn warmed(&mut self, shared: &Shared, warm: bool) {
        if warm && !self.warm {
            self.warm = true;
            self.restart(shared);
        }
    }

    /// A new window starts.
    fn restart(&mut self, shared: &Shared) {
        self.batches = 0;
        self.packets = 0;
        self.start = std::time::Instant::now();
        self.waited_ns = 0;
        self.table_ns = 0;
        self.ports_ns = 0;
        self.busy0 = shared.busy_ns.load(Ordering::Relaxed);
        self.trees0 = shared.trees_ns.load(Ordering::Relaxed);
        self.ports0 = shared.ports_ns.load(Ordering::Relaxed);
        self.jobs0 = shared.jobs_done.load(Ordering::Relaxed);
    }
}

/// Nanoseconds since `t`.
fn ns_since(t: std::time::Instant) -> u64 {
    t.elapsed().as_nanos() as u64
}

impl Counter {
    /// A thread of their own for the table and the trees; counting here if
    /// the system gives no thread.
    fn on_thread(cfg: ProfilerConfig) -> Counter {
        use std::sync::mpsc::{channel, sync_channel};
        let (jobs, jobs_rx) = sync_channel::<Job>(QUEUED_BATCHES);
        let (spare_tx, spare) = channel();
        let (spare_departed_tx, spare_departed) = channel();
        let (done_tx, done) = channel();
        let (lent_tx, lent) = channel();
        let shared = Arc::new(Shared {
            front: Mutex::new(Front::new(&cfg)),
            ports: Mutex::new(Trees::ports_for(&cfg)),
            closing: Mutex::new(Front::new(&cfg)),
            queued: AtomicUsize::new(0),
            busy_ns: AtomicU64::new(0),
            trees_ns: AtomicU64::new(0),
            ports_ns: AtomicU64::new(0),
            jobs_done: AtomicU64::new(0),
            table_warm: AtomicBool::new(false),
            waiting: Mutex::new(None),
        });
        let theirs = Arc::clone(&shared);
        let spawned = std::thread::Builder::new()
            .name("aguri-trees".into())
            .spawn(move || {
                let shared = theirs;
                let mut back = Back::new(cfg);
                for job in jobs_rx {
                    let begun = std::time::Instant::now();
                    match job {
                        Job::Packets(mut batch) => {
                            let mut front = lock(&shared.front);
                            back.count(&mut front, &mut lock(&shared.ports), &batch);
                            if front.warm() {
                                shared.table_warm.store(true, Ordering::Relaxed);
                            }
                            drop(front);
                            shared.account(begun, &back);
                            done_one(&shared);
                            batch.clear();
                            let _ = spare_tx.send(batch);
                        }
                        Job::Departed { mut flows, ported } => {
                            if !ported {
                                back.count_ports(&mut lock(&shared.ports), &flows);
                            }
                            back.count_trees(&flows);
                            shared.account(begun, &back);
                            done_one(&shared);
                            flows.clear();
                            let _ = spare_departed_tx.send(flows);
                        }
                        Job::Lend => {
                            let dst = back.counted.addresses.split_off_last();
                            let _ = lent_tx.send(dst);
                            done_one(&shared);
                        }
                        Job::Last(flows) => {
                            back.count_trees(&flows[..]);
                            drop(flows);
                            shared.account(begun, &back);
                            done_one(&shared);
                        }
                        Job::Rejoin(dst) => {
                            back.counted.addresses.rejoin(dst);
                            done_one(&shared);
                        }
                        Job::Summarize => {
                            let s = back
                                .summarize(&mut lock(&shared.closing), &mut lock(&shared.ports));
                            if done_tx.send(s).is_err() {
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
                spare_departed,
                done,
                lent,
                worker: Some(worker),
                shared,
                placement: Placement::new(),
                here_packets: 0,
                in_flight: None,
                finished: None,
            },
            Err(_) => Counter::Inline {
                behind: Box::new(Behind::new(cfg)),
                finished: None,
            },
        }
    }

    /// Counts `batch` (left empty, its capacity kept or replaced); returns
    /// how many packets to hold before the next call.
    fn count(&mut self, batch: &mut Vec<Pending>) -> usize {
        self.land(false);
        match self {
            Counter::Inline { behind, .. } => {
                behind.count(batch);
                batch.clear();
                CHUNK
            }
            Counter::Thread {
                jobs,
                spare,
                spare_departed,
                shared,
                placement,
                here_packets,
                worker,
                ..
            } => {
                let before = placement.cut;
                if before == Cut::Reading {
                    if batch.is_empty() {
                        return PACKET_BATCH;
                    }
                    let full = swap_out(batch, spare, PACKET_BATCH);
                    let n = full.len();
                    placement.waited_ns += send(shared, jobs, Job::Packets(full));
                    if !placement.warm && shared.table_warm.load(Ordering::Relaxed) {
                        // The table has filled there (or is passed by, under
                        // a flood): it comes here, and from now on the split
                        // is judged (see `Placement::new`).
                        placement.warm = true;
                        placement.cut = Cut::Table;
                        cut_moved(shared, worker, placement, before);
                        return batch_for(placement.cut);
                    }
                    placement.judge(shared, n);
                } else {
                    // The table counts here, a chunk at a time while the
                    // keys are in L1; the flows that leave go over in
                    // batches, counted in the port trees here or there.
                    let t = std::time::Instant::now();
                    let (warm, left) = {
                        let mut front = lock(&shared.front);
                        for chunk in batch.chunks(CHUNK) {
                            front.flush(chunk);
                        }
                        let full = front.left.len() >= PACKET_BATCH;
                        (
                            placement.warm || front.warm(),
                            full.then(|| take_left(&mut front, spare_departed)),
                        )
                    };
                    placement.table_ns += ns_since(t);
                    placement.warmed(shared, warm);
                    *here_packets += batch.len();
                    batch.clear();
                    if let Some(flows) = left {
                        placement.waited_ns += send_left(shared, jobs, placement, flows);
                    }
                    if *here_packets < PACKET_BATCH {
                        return CHUNK;
                    }
                    #[cfg(test)]
                    {
                        HERE.fetch_add(1, Ordering::Relaxed);
                        if before == Cut::Ports {
                            PORTS_HERE.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    placement.judge(shared, std::mem::take(here_packets));
                }
                cut_moved(shared, worker, placement, before);
                batch_for(placement.cut)
            }
        }
    }

    /// Begins the summary of everything counted so far (every batch
    /// given to [`count`](Self::count) before); take it with
    /// [`take_summary`](Self::take_summary). None may be in flight or
    /// waiting to be taken.
    ///
    /// On the counting thread, the interval's table is set aside (once no
    /// batch sent is still to go through it) and a fresh one takes its
    /// place; the counting thread drains the old one into the trees and
    /// makes the summary while this thread reads on, counting the next
    /// interval's packets in the fresh table and sending the flows that
    /// leave it to be counted, after the summary, in the emptied trees.
    /// Meanwhile the port trees stay on the counting thread (the summary
    /// reads them); the split comes back when the summary is taken.
    /// The `last` summary (no packet comes after it) is made by both
    /// threads instead, while this one would only wait: once every batch
    /// sent is counted, the counting thread lends this one its destination
    /// address tree, the table is drained here, and its flows (shared, not
    /// copied) are counted there in the source address tree and here in
    /// the port trees and the lent tree, which then goes back; the summary
    /// is made there from the trees (each tree sees the updates, in the
    /// order, that one thread gives it). The last summary of a 100 s trace
    /// of 16,384 active flows cut to 96 bytes (67,000 flows): the drain
    /// 3.3 ms, then the source tree 9 ms there against the port trees' 4.4
    /// and the destination tree's 6.5 here, 14-15 ms in all; 21-22 ms with
    /// both address trees there and the flows copied to send, 24 ms on the
    /// counting thread alone.
    /// Returns how many packets to hold before the next `count`.
    fn begin_summary(&mut self, last: bool) -> usize {
        match self {
            Counter::Inline { behind, finished } => {
                debug_assert!(finished.is_none());
                *finished = Some(behind.summarize());
                CHUNK
            }
            Counter::Thread {
                jobs,
                lent,
                shared,
                placement,
                worker,
                in_flight,
                finished,
                ..
            } => {
                debug_assert!(in_flight.is_none() && finished.is_none());
                if last {
                    wait_for_queue(shared, worker);
                    send(shared, jobs, Job::Lend);
                    let flows = {
                        let mut front = lock(&shared.front);
                        front.drain();
                        Arc::new(std::mem::take(&mut front.left))
                    };
                    send(shared, jobs, Job::Last(Arc::clone(&flows)));
                    lock(&shared.ports).count(&flows[..]);
                    let mut dst = lent.recv().unwrap_or_else(|_| worker_gone());
                    dst.count(&flows[..]);
                    send(shared, jobs, Job::Rejoin(dst));
                } else if placement.cut == Cut::Reading {
                    wait_for_queue(shared, worker);
                }
                {
                    let (mut front, mut closing) = (lock(&shared.front), lock(&shared.closing));
                    std::mem::swap(&mut *front, &mut *closing);
                    // The bypass goes on as with one table (the flows'
                    // order into the trees, and so the summaries, are
                    // what counting inline gives).
                    (front.bypass, front.window) = (closing.bypass, closing.window);
                }
                jobs.send(Job::Summarize).unwrap_or_else(|_| worker_gone());
                *in_flight = Some(placement.cut);
                placement.cut = Cut::Table;
                placement.ceiling = Cut::Table;
                placement.trial = None;
                placement.restart(shared);
                batch_for(placement.cut)
            }
        }
    }

    /// The summary begun last, if it is made (`wait`: once it is).
    fn take_summary(&mut self, wait: bool) -> Option<Summarized> {
        self.land(wait);
        match self {
            Counter::Inline { finished, .. } | Counter::Thread { finished, .. } => finished.take(),
        }
    }

    /// A summary in flight that the counting thread has made (`wait`: once
    /// it has) is kept to be taken, and the split goes back to where it was
    /// when the summary began.
    fn land(&mut self, wait: bool) {
        let Counter::Thread {
            done,
            in_flight,
            finished,
            placement,
            shared,
            worker,
            ..
        } = self
        else {
            return;
        };
        let Some(resume) = *in_flight else {
            return;
        };
        let made = if wait {
            done.recv().unwrap_or_else(|_| worker_gone())
        } else {
            match done.try_recv() {
                Ok(s) => s,
                Err(TryRecvError::Empty) => return,
                Err(TryRecvError::Disconnected) => worker_gone(),
            }
        };
        *finished = Some(made);
        *in_flight = None;
        placement.ceiling = Cut::Ports;
        let before = std::mem::replace(&mut placement.cut, resume);
        cut_moved(shared, worker, placement, before);
    }
}

/// The split has moved from `before` to `placement.cut` (or stayed): a
/// part that comes to the reading thread first takes in everything sent
/// (a wait for the queue), and a new window starts. (The flows that left
/// the table here and wait go with it, to be counted before the packets
/// sent next.)
fn cut_moved(
    shared: &Shared,
    worker: &Option<std::thread::JoinHandle<()>>,
    placement: &mut Placement,
    before: Cut,
) {
    if placement.cut > before {
        wait_for_queue(shared, worker);
    }
    if placement.cut != before {
        placement.restart(shared);
    }
}

/// Packets to hold before the next `count` with the split at `cut`: a
/// batch to send, or a chunk to count in the table here.
fn batch_for(cut: Cut) -> usize {
    match cut {
        Cut::Reading => PACKET_BATCH,
        _ => CHUNK,
    }
}

/// Waits until every batch sent has been counted.
fn wait_for_queue(shared: &Shared, worker: &Option<std::thread::JoinHandle<()>>) {
    set_waiting(shared, Some(std::thread::current()));
    while shared.queued.load(Ordering::Acquire) > 0 {
        if worker.as_ref().is_none_or(|w| w.is_finished()) {
            worker_gone();
        }
        std::thread::park_timeout(std::time::Duration::from_millis(1));
    }
    set_waiting(shared, None);
}

/// The flows waiting with the table, taken out to send, an emptied vector
/// in their place.
fn take_left(front: &mut Front, spare: &Receiver<Vec<Departed>>) -> Vec<Departed> {
    swap_out(&mut front.left, spare, PACKET_BATCH + CHUNK)
}

/// Sends flows that left the table here to the counting thread, counted
/// in the port trees first if they are here; returns how long it waited
/// for room in the queue, in nanoseconds.
fn send_left(
    shared: &Shared,
    jobs: &SyncSender<Job>,
    placement: &mut Placement,
    flows: Vec<Departed>,
) -> u64 {
    let ported = placement.cut == Cut::Ports;
    if ported {
        let t = std::time::Instant::now();
        lock(&shared.ports).count(&flows);
        placement.ports_ns += ns_since(t);
    }
    send(shared, jobs, Job::Departed { flows, ported })
}

/// A job is done: the reading thread, if it waits for the queue to empty,
/// is woken when it has.
fn done_one(shared: &Shared) {
    if shared.queued.fetch_sub(1, Ordering::AcqRel) == 1 {
        if let Some(t) = shared.waiting.lock().ok().and_then(|w| w.clone()) {
            t.unpark();
        }
    }
}

/// Takes the filled `v` out, leaving in its place an emptied vector the
/// counting thread handed back, or a new one of `capacity`.
fn swap_out<T>(v: &mut Vec<T>, spare: &Receiver<Vec<T>>, capacity: usize) -> Vec<T> {
    let next = spare
        .try_recv()
        .unwrap_or_else(|_| Vec::with_capacity(capacity));
    std::mem::replace(v, next)
}

/// Sends `job`, a batch counted in `shared.queued` until the counting
/// thread is done with it; returns how long it waited for room in the
/// queue, in nanoseconds (0 without a wait).
fn send(shared: &Shared, jobs: &SyncSender<Job>, job: Job) -> u64 {
    shared.queued.fetch_add(1, Ordering::AcqRel);
    match jobs.try_send(job) {
        Ok(()) => 0,
        Err(TrySendError::Full(job)) => {
            let t = std::time::Instant::now();
            jobs.send(job).unwrap_or_else(|_| worker_gone());
            ns_since(t)
        }
        Err(TrySendError::Disconnected(_)) => worker_gone(),
    }
}

/// Says which thread waits for the batches sent to be counted (`None`: no
/// thread waits).
fn set_waiting(shared: &Shared, t: Option<std::thread::Thread>) {
    if let Ok(mut w) = shared.waiting.lock() {
        *w = t;
    }
}

/// The lock of a part that moves between the threads: only the two
/// counting threads take it, one at a time by construction; a panic while
/// one held it (a bug, never input) is passed on.
fn lock<T>(part: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    part.lock().unwrap_or_else(|_| worker_gone())
}

/// Tests set this to move the split by one part at every batch, back and
/// forth between its ends, whatever the load.
#[cfg(test)]
static ALWAYS_SWITCH: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Batches counted in the table on the reading thread, and of those with
/// the port trees there too (tests).
#[cfg(test)]
static HERE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
#[cfg(test)]
static PORTS_HERE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

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

    impl Profiler {
        /// The table and trees of a profiler that counts on its caller's
        /// thread.
        fn behind(&self) -> &Behind {
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
        let (mut chunks, mut batches) = (Behind::new(cfg), Behind::new(cfg));
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

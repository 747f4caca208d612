//! The chain that counts a packet: the flow table in front of the trees
//! ([`FlowTableStage`]), then the port trees, then the address trees and
//! the 2-D view ([`AddressViews`]). [`TreeWork`] counts through the chain
//! and times the trees, so that the two threads can share the work (see
//! the `split` module); [`InlineCounts`] is the whole chain on one thread.

use crate::flows::{Departed, FlowTable};
use crate::flows2d::PairTable;
use crate::summary::Section;

use super::trees::{Pending, Trees, Update};
use super::ProfilerConfig;

/// Packets held back before the flow table counts them: one of its chunks
/// ([`FlowTable::add_batch`] reads a chunk's slots first, then counts), 3 KiB
/// of keys that stay in L1.
pub(super) const CHUNK: usize = 64;

/// Packets handed at once to the counting thread (see [`Profiler`](super::Profiler)): 192 KiB
/// of keys, a multiple of [`CHUNK`], so that the table there counts the
/// same chunks as it would on the caller's thread.
pub(super) const PACKET_BATCH: usize = 64 * CHUNK;

/// Tree updates (flows that left the table, or packets when there is none)
/// held back before they are counted tree by tree (see [`Profiler`](super::Profiler)): each
/// tree then gets a long run of updates while its nodes are in the cache.
/// With the table, 4096 updates are the departures of some 28,000 packets
/// on the benchmark's active-flows trace; 224 KiB of updates.
const TREE_BATCH: usize = 4096;

/// The shortest run of packets past the flow table that is counted in the
/// trees straight from a batch (see `TreeWork::count`); shorter runs wait with
/// the table (`FlowTableStage::left`) for a longer batch, so that each tree gets a
/// long run of updates while its nodes are in the cache.
const DIRECT_RUN: usize = 1024;

/// Packets over which the table's new flows are judged (see `flush`).
pub(super) const BYPASS_WINDOW: usize = 4096;

/// Packets sent straight to the trees once the flow table is found to take
/// a new flow for nearly every packet; then the table is tried again.
pub(super) const BYPASS_PACKETS: usize = 64 * BYPASS_WINDOW;

/// What is counted behind the flow table: the two address trees and the
/// 2-D view's table, with the settings their summaries need (the port
/// trees count with the table, in [`FlowTableStage`]).
pub(super) struct AddressViews {
    pub(super) addresses: Trees,
    pub(super) pairs: Option<PairTable>,
    pub(super) cfg: ProfilerConfig,
}

/// A summary's sections and 2-D flows.
pub(super) type Summarized = ([Section; 4], Vec<crate::flows2d::Flow>);

impl AddressViews {
    pub(super) fn new(cfg: ProfilerConfig) -> AddressViews {
        AddressViews {
            addresses: Trees::addresses_for(&cfg),
            pairs: (cfg.pairs > 0).then(|| PairTable::new(cfg.pairs)),
            cfg,
        }
    }

    pub(super) fn count<U: Update>(&mut self, updates: &[U]) {
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
    pub(super) fn summarize(&mut self, ports: &mut Trees) -> Summarized {
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
/// counted on whichever thread has room for it (see [`Counter`](super::counter::Counter)). The
/// flows wait until there are `TREE_BATCH` of them; then the port trees
/// count them, and the address trees after them, wherever those are, each
/// tree a long run while its nodes are in the cache.
pub(super) struct FlowTableStage {
    pub(super) flows: Option<FlowTable>,
    /// Packets still to send past the flow table (see `flush`).
    pub(super) bypass: usize,
    /// Packets the table counted, and new flows it took in (each let one
    /// go, or filled an empty slot), since the last judgement on bypassing
    /// it.
    pub(super) window: (usize, usize),
    /// Flows that left the table, counted in no tree yet.
    pub(super) left: Vec<Departed>,
}

impl FlowTableStage {
    pub(super) fn new(cfg: &ProfilerConfig) -> FlowTableStage {
        FlowTableStage {
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
    pub(super) fn flush(&mut self, chunk: &[Pending]) {
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
    pub(super) fn past(&self, n: usize) -> usize {
        match self.flows {
            None => n,
            Some(_) => (self.bypass.div_ceil(CHUNK) * CHUNK).min(n),
        }
    }

    /// `n` packets went past the table.
    pub(super) fn pass(&mut self, n: usize) {
        self.bypass = self.bypass.saturating_sub(n);
    }

    /// Whether the table is past its start, when it takes every new flow
    /// into an empty slot and lets few go: settled ([`FlowTable::settled`]),
    /// or bypassed, or absent. (A table that never fills holds every flow
    /// of the run, and where it is counted matters little.)
    pub(super) fn warm(&self) -> bool {
        self.bypass > 0 || self.flows.as_ref().is_none_or(FlowTable::settled)
    }

    /// Every flow the table holds leaves, least recently counted first.
    pub(super) fn drain(&mut self) {
        if let Some(table) = self.flows.as_mut() {
            table.drain(&mut self.left);
        }
    }
}

/// What is behind the table and the port trees: the address trees and the
/// 2-D view's table ([`AddressViews`]), and the time spent counting there and
/// in the port trees when they are counted on this thread. The port trees
/// (`Trees::ports`) are apart from the address trees, on the thread that
/// counts the table or on this one, so that under a flood of new flows,
/// when the table is bypassed and the trees are most of the work, the two
/// threads can share the trees (bench/profile-throughput.md, "the port
/// trees go with the table").
pub(super) struct TreeWork {
    pub(super) counted: AddressViews,
    /// Nanoseconds spent counting in the address trees and in the port
    /// trees (see [`SplitTuner`](super::split::SplitTuner)).
    pub(super) trees_ns: u64,
    pub(super) ports_ns: u64,
}

impl TreeWork {
    pub(super) fn new(cfg: ProfilerConfig) -> TreeWork {
        TreeWork {
            counted: AddressViews::new(cfg),
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
    pub(super) fn count(
        &mut self,
        front: &mut FlowTableStage,
        ports: &mut Trees,
        packets: &[Pending],
    ) {
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
    pub(super) fn count_left(&mut self, front: &mut FlowTableStage, ports: &mut Trees) {
        if front.left.is_empty() {
            return;
        }
        self.count_ports(ports, &front.left);
        self.count_trees(&front.left);
        front.left.clear();
    }

    /// Counts updates in the port trees, timed.
    pub(super) fn count_ports<U: Update>(&mut self, ports: &mut Trees, updates: &[U]) {
        let t = std::time::Instant::now();
        ports.count(updates);
        self.ports_ns += ns_since(t);
    }

    /// Counts updates in the address trees (and the 2-D view's table),
    /// timed.
    pub(super) fn count_trees<U: Update>(&mut self, updates: &[U]) {
        let t = std::time::Instant::now();
        self.counted.count(updates);
        self.trees_ns += ns_since(t);
    }

    /// Everything held, in `front`'s table too, counted; then the
    /// interval's sections and 2-D flows, the trees emptied.
    pub(super) fn summarize(
        &mut self,
        front: &mut FlowTableStage,
        ports: &mut Trees,
    ) -> Summarized {
        front.drain();
        self.count_left(front, ports);
        self.counted.summarize(ports)
    }
}

/// The table and what is behind it, on one thread.
pub(super) struct InlineCounts {
    pub(super) front: FlowTableStage,
    pub(super) ports: Trees,
    pub(super) back: TreeWork,
}

impl InlineCounts {
    pub(super) fn new(cfg: ProfilerConfig) -> InlineCounts {
        InlineCounts {
            front: FlowTableStage::new(&cfg),
            ports: Trees::ports_for(&cfg),
            back: TreeWork::new(cfg),
        }
    }

    pub(super) fn count(&mut self, packets: &[Pending]) {
        self.back.count(&mut self.front, &mut self.ports, packets);
    }

    pub(super) fn summarize(&mut self) -> Summarized {
        self.back.summarize(&mut self.front, &mut self.ports)
    }
}

/// Nanoseconds since `t`.
pub(super) fn ns_since(t: std::time::Instant) -> u64 {
    t.elapsed().as_nanos() as u64
}

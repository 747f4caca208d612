//! The stores behind the profiler's four views: aguri's Patricia trees
//! with LRU reclaim, or exact counts of every key, and the updates they
//! take (a flow that left the flow table, or a packet that went past it).
//! Each tree is counted a long run at a time so that its nodes stay in
//! the core's cache.

use crate::exact::ExactCounts;
use crate::flows::{Departed, FlowKeys};
use crate::label::{port_key, KeyKind, V4_MAPPED, V4_MAPPED_LEN};
use crate::summary::{Section, SectionKind};
use crate::tree::{Entry, Metric, PatriciaTree};

use super::ProfilerConfig;

/// A packet waiting to be counted: its flow's keys and its length.
pub(super) type Pending = (FlowKeys, u64);

/// One update of the trees: a flow that left the table with what it
/// counted there, or a packet that went past the table.
pub(super) trait Update {
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

/// One view's counts: aguri's tree, or every key exactly.
pub(crate) enum Store {
    Lru(PatriciaTree),
    Exact(ExactCounts),
}

impl Store {
    pub(super) fn new(
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

    pub(super) fn clear(&mut self) {
        match self {
            Store::Lru(t) => t.clear(),
            Store::Exact(e) => e.clear(),
        }
    }

    pub(super) fn totals(&self) -> (u64, u64) {
        match self {
            Store::Lru(t) => (t.total_bytes(), t.total_packets()),
            Store::Exact(e) => (e.total_bytes(), e.total_packets()),
        }
    }

    /// The aggregation pass (an exact store is empty afterwards).
    pub(super) fn entries(&mut self, metric: Metric, threshold: f64, coarsen: bool) -> Vec<Entry> {
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
/// counts these apart, see [`FlowTableStage`](super::counting::FlowTableStage)). A profiler's may be exact stores
/// ([`ProfilerConfig::exact_keys`]).
pub(crate) struct Trees {
    /// The key (`FlowKeys::tree_key`) and section of the first tree.
    pub(super) first: usize,
    pub(crate) t: Vec<Store>,
    /// Every update counted, in order (tests).
    #[cfg(test)]
    pub(super) log: Vec<(FlowKeys, u64, u64)>,
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
    pub(super) fn addresses(budget: usize, exact: Option<&ProfilerConfig>) -> Trees {
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
    pub(super) fn ports(budget: usize, exact: Option<&ProfilerConfig>) -> Trees {
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
    pub(super) fn addresses_for(cfg: &ProfilerConfig) -> Trees {
        Trees::addresses(cfg.budget, (cfg.exact_keys > 0).then_some(cfg))
    }

    /// The profiler's port trees for `cfg`.
    pub(super) fn ports_for(cfg: &ProfilerConfig) -> Trees {
        Trees::ports(cfg.budget, (cfg.exact_keys > 0).then_some(cfg))
    }

    /// The last tree taken out, as trees of their own (counted on another
    /// thread meanwhile); [`rejoin`](Self::rejoin) puts it back.
    pub(super) fn split_off_last(&mut self) -> Trees {
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
    pub(super) fn rejoin(&mut self, last: Trees) {
        debug_assert_eq!(last.first, self.first + self.t.len());
        self.t.extend(last.t);
    }

    pub(crate) fn clear(&mut self) {
        for t in &mut self.t {
            t.clear();
        }
    }

    /// Counts flows in the trees, one tree at a time.
    pub(super) fn count<U: Update>(&mut self, flows: &[U]) {
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
    pub(super) fn section(
        &mut self,
        i: usize,
        metric: Metric,
        threshold: f64,
        coarsen: bool,
    ) -> Section {
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

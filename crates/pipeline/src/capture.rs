//! A live capture: one lane per ring (a fanout group has several), run on
//! threads of their own until a signal, a count or a time limit, and the
//! accounting of every packet the kernel saw.
//!
//! Accounting, exact at the end and summed over the rings:
//! `kernel_packets = received + kernel_drops` and
//! `received = written + rejected + dropped_kansoku + skipped`.

use std::io::{self, IsTerminal};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;

use crate::chain::Chain;
use crate::error::Error;
use crate::report::Report;
use crate::sink::trace::SinkSummary;
use crate::sink::PacketSink;
use crate::source::lane::{run_lane, CaptureStats, LiveStats, PipelineConfig, Ring};
use crate::stage::filter::{merge_rule_sets, Reloader, RuleSetHits};
use crate::stage::profile::ProfileCounts;

/// One ring and the chain its consumer runs.
pub struct Lane<R, S> {
    pub ring: R,
    pub chain: Chain<S>,
}

/// Runs every lane on a thread of its own until `signal` is set (Ctrl-C),
/// any lane stops (`count`, `duration`), or one fails; all stop together.
/// Each consumer then drains what its queue holds, unless `abort` is set:
/// then it stops where it is, and what it did not take counts as dropped
/// by kansoku.
/// On a terminal, a line of live counts is redrawn once a second. With a
/// `reload` (a reloader and its request flag, SIGHUP's), the rule file is
/// read again and swapped into every lane on each request. `note` adds to
/// the live line (the fleet store's counts). Returns each ring's counters,
/// in the order of `lanes`, and the report of a live run.
pub fn run_lanes<R, S>(
    lanes: &mut [Lane<R, S>],
    cfg: &PipelineConfig,
    signal: &AtomicBool,
    abort: &AtomicBool,
    reload: Option<(&mut Reloader, &AtomicBool)>,
    note: &(dyn Fn() -> String + Sync),
) -> (Vec<CaptureStats>, Report)
where
    R: Ring,
    S: PacketSink + Send,
{
    let stop = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    let live: Vec<LiveStats> = lanes.iter().map(|_| LiveStats::default()).collect();
    let results: Vec<(CaptureStats, Report)> = std::thread::scope(|s| {
        let watch = s.spawn(|| watch(&live, signal, &stop, &done, note));
        let reloader = reload.map(|(r, request)| {
            let done = &done;
            s.spawn(move || r.serve(request, done, |m| eprintln!("kansoku: {m}")))
        });
        let handles: Vec<_> = lanes
            .iter_mut()
            .zip(&live)
            .map(|(lane, live)| {
                let stop = &stop;
                s.spawn(move || {
                    let r = run_lane(&mut lane.ring, cfg, stop, abort, live, &mut lane.chain);
                    stop.store(true, Ordering::Relaxed);
                    r
                })
            })
            .collect();
        let results = handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    let mut r = Report::default();
                    r.failed(Error::input("a capture thread panicked"));
                    (CaptureStats::default(), r)
                })
            })
            .collect();
        done.store(true, Ordering::Relaxed);
        let _ = watch.join();
        if let Some(r) = reloader {
            let _ = r.join();
        }
        results
    });
    let mut report = Report::live();
    let mut per_ring = Vec::with_capacity(results.len());
    for (s, r) in results {
        per_ring.push(s);
        report.absorb(r);
    }
    let stats = CaptureStats::sum(&per_ring);
    report.drops.kernel = stats.kernel.drops;
    report.drops.kansoku = stats.dropped_queue;
    if signal.load(Ordering::Relaxed) {
        report.interrupted = Some("capture".into());
    }
    (per_ring, report)
}

/// Until `done`: passes `signal` on to the lanes, and once a second on a
/// terminal prints what the capture has seen so far.
fn watch(
    lanes: &[LiveStats],
    signal: &AtomicBool,
    stop: &AtomicBool,
    done: &AtomicBool,
    note: &(dyn Fn() -> String + Sync),
) {
    let progress = io::stderr().is_terminal();
    let sum = |f: fn(&LiveStats) -> &AtomicU64| -> u64 {
        lanes.iter().map(|l| f(l).load(Ordering::Relaxed)).sum()
    };
    let mut ticks = 0u32;
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(10));
        if signal.load(Ordering::Relaxed) {
            stop.store(true, Ordering::Relaxed);
        }
        ticks += 1;
        if !progress || !ticks.is_multiple_of(100) {
            continue;
        }
        eprint!(
            "\r{} received, {} dropped by the kernel, {} dropped by kansoku, {} handed to the writer{}   ",
            sum(|l| &l.received),
            sum(|l| &l.kernel_drops),
            sum(|l| &l.dropped_queue),
            sum(|l| &l.delivered),
            note(),
        );
    }
    if progress {
        eprint!("\r\x1b[K");
    }
}

/// A run's summaries in the fleet store: sent, and waiting in the spool.
#[derive(Clone, Debug, Default, Serialize)]
pub struct StoreCounts {
    pub sent: u64,
    pub waiting: u64,
    pub spool: String,
    /// Summaries the spool could not hold (its disk full or failing): in
    /// the run's own outputs, never sent to the store.
    pub not_spooled: u64,
}

/// The accounting of a capture, as `kansoku capture --json` prints it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CaptureReport {
    pub interface: String,
    /// The filter expression the kernel ran on every ring, if any: the
    /// kernel's counts below are of the packets it passed (those it rejected
    /// are neither counted nor dropped).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expression: Option<String>,
    /// Rings in the fanout group (1 without --fanout).
    pub rings: usize,
    /// Packets the kernel passed to the sockets (PACKET_STATISTICS tp_packets):
    /// with an expression, those its filter passed.
    pub kernel_packets: u64,
    /// Dropped by the kernel: a ring was full (tp_drops).
    pub kernel_drops: u64,
    /// Times a ring froze (tp_freeze_q_cnt).
    pub kernel_freezes: u64,
    /// Taken from the rings.
    pub received: u64,
    /// Dropped by kansoku: a writer's queue was full, or the run ended before they were written.
    pub dropped_kansoku: u64,
    /// Taken from the ring after -c was reached, not written.
    pub skipped: u64,
    /// Ring blocks the writer read in place, where the kernel wrote them.
    pub ring_blocks_in_place: u64,
    /// Ring blocks copied into the writer's queue and given straight back
    /// (the writer held its share of the ring, or --hold-blocks 0).
    pub ring_blocks_copied: u64,
    /// Where kansoku's drops happened: `dropped_kansoku` is their sum.
    pub dropped_at: DropPlaces,
    /// Of the copied blocks, those the rescuer copied out of the ring while
    /// a writer was stalled.
    pub ring_blocks_rescued: u64,
    /// Rejected by the --rules filter (non-IP packets included: no rule matches them).
    pub rejected: u64,
    /// Kept: written to the trace, printed, or (with --profile and no -w) profiled.
    pub written: u64,
    /// Packets counted by the --profile profiler (every kept packet).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profiled: Option<u64>,
    /// Summary files written by --profile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile_summaries: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<SinkSummary>,
    /// With --store: summaries sent to the fleet store, and those that wait
    /// in the spool for a later run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreCounts>,
    /// With --rules: what each rule set counted, one per generation of the
    /// rule file (0: the rules the capture started with; one more per
    /// reload on SIGHUP), summed over the rings.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rule_sets: Vec<RuleSetHits>,
    /// Each ring's figures (one without --fanout): where its packets went
    /// and where its writer waited.
    pub lanes: Vec<LaneReport>,
}

/// Where kansoku dropped packets it had taken from a ring.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct DropPlaces {
    /// The writer's queue was full.
    pub queue_full: u64,
    /// The run ended (an abort, a failed writer) before they were written.
    pub unread_at_end: u64,
}

/// One ring's figures in a capture's report.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LaneReport {
    pub kernel_packets: u64,
    /// Dropped by the kernel: the ring was full.
    pub kernel_drops: u64,
    pub received: u64,
    pub dropped_at: DropPlaces,
    pub ring_blocks_in_place: u64,
    /// Copied and given straight back: blocks the kernel's timeout retired
    /// half empty, and those the rescuer copied (`ring_blocks_rescued`).
    pub ring_blocks_copied: u64,
    pub ring_blocks_rescued: u64,
    /// The most bytes of packets the rescued queue held at once.
    pub queue_high_water_bytes: u64,
    /// The longest the writer held one ring block without progress, as the
    /// rescuer saw it (sampled every 2 ms; 0 below 5 ms), in milliseconds.
    pub longest_stall_ms: f64,
    /// The lane's trace writer: blocks written compressed and stored raw,
    /// and the time it was blocked on the file system.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writer: Option<LaneWriter>,
}

/// A lane's trace writer, as the capture's report gives it.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct LaneWriter {
    pub blocks: u64,
    pub raw_blocks: u64,
    /// Stored raw without a trial of the compressor (it did not pay).
    pub skipped_blocks: u64,
    /// Milliseconds blocked in writes (of the trace and its index), syncs
    /// and waits for a write thread; the longest single one; the part in
    /// syncs.
    pub blocked_ms: f64,
    pub longest_block_ms: f64,
    pub sync_ms: f64,
}

impl DropPlaces {
    fn of(s: &CaptureStats) -> DropPlaces {
        DropPlaces {
            queue_full: s.dropped_queue - s.dropped_unread,
            unread_at_end: s.dropped_unread,
        }
    }
}

impl LaneReport {
    fn of(s: &CaptureStats, out: Option<&SinkSummary>) -> LaneReport {
        let ms = |ns: u64| ns as f64 / 1e6;
        LaneReport {
            kernel_packets: s.kernel.packets,
            kernel_drops: s.kernel.drops,
            received: s.received,
            dropped_at: DropPlaces::of(s),
            ring_blocks_in_place: s.blocks_in_place,
            ring_blocks_copied: s.blocks_copied,
            ring_blocks_rescued: s.blocks_rescued,
            queue_high_water_bytes: s.queue_high_water,
            longest_stall_ms: ms(s.longest_stall_ns),
            writer: out.map(|o| LaneWriter {
                blocks: o.blocks,
                raw_blocks: o.raw_blocks,
                skipped_blocks: o.skipped_blocks,
                blocked_ms: ms(o.blocked_ns),
                longest_block_ms: ms(o.longest_block_ns),
                sync_ms: ms(o.sync_ns),
            }),
        }
    }
}

impl CaptureReport {
    /// The report of lanes that ran on `interface`. `close` closes a
    /// lane's sink (and its profiler) and returns what it wrote; failures
    /// go into `report`, so that every output is closed whatever happened.
    pub fn close_lanes<R, S>(
        interface: &str,
        lanes: Vec<Lane<R, S>>,
        per_ring: &[CaptureStats],
        report: &mut Report,
        mut close: impl FnMut(S) -> crate::Result<Option<SinkSummary>>,
    ) -> CaptureReport {
        let stats = &CaptureStats::sum(per_ring);
        let mut r = CaptureReport {
            interface: interface.to_string(),
            expression: None,
            rings: lanes.len(),
            kernel_packets: stats.kernel.packets,
            kernel_drops: stats.kernel.drops,
            kernel_freezes: stats.kernel.freeze_count,
            received: stats.received,
            dropped_kansoku: stats.dropped_queue,
            skipped: stats.skipped,
            ring_blocks_in_place: stats.blocks_in_place,
            ring_blocks_copied: stats.blocks_copied,
            ring_blocks_rescued: stats.blocks_rescued,
            dropped_at: DropPlaces::of(stats),
            ..CaptureReport::default()
        };
        let mut kept = 0;
        let mut profiled: Option<ProfileCounts> = None;
        let mut rule_sets = Vec::new();
        for (i, mut lane) in lanes.into_iter().enumerate() {
            let ring = per_ring.get(i).copied().unwrap_or_default();
            let c = lane.chain.counts;
            kept += c.passed;
            r.rejected += c.rejected;
            let stages = &mut lane.chain.stages;
            if let Some(reload) = stages.reload.take() {
                rule_sets.push(reload.report(stages.filter.as_ref()));
            }
            if let Some(p) = lane.chain.stages.profile {
                match p.finish() {
                    Ok(x) => profiled = Some(x),
                    Err(e) => report.failed(e),
                }
            }
            let out = match lane.chain.passed.map(&mut close) {
                Some(Ok(Some(s))) => Some(s),
                Some(Err(e)) => {
                    report.failed(e);
                    None
                }
                _ => None,
            };
            if let Some(s) = &out {
                r.output.get_or_insert_with(SinkSummary::default).add(s);
            }
            r.lanes.push(LaneReport::of(&ring, out.as_ref()));
        }
        r.rule_sets = merge_rule_sets(rule_sets);
        r.written = r.output.as_ref().map_or(kept, |x| x.packets);
        r.profiled = profiled.map(|p| p.packets);
        r.profile_summaries = profiled.map(|p| p.summaries);
        r
    }

    /// The report as one line: `N packets received by the kernel on IF, ...`.
    pub fn describe(&self) -> String {
        let passed = match &self.expression {
            Some(e) => format!(" (passed by the filter `{e}`)"),
            None => String::new(),
        };
        format!(
            "{} packets received by the kernel on {}{passed}, {} dropped by the kernel ({} ring freezes), \
             {} taken from the ring ({} blocks read in place, {} copied, {} of them rescued from a stalled \
             writer), {} dropped by kansoku ({} with the writer's queue full, {} unread at the end), \
             {} rejected by the rules, {} written",
            self.kernel_packets,
            self.interface,
            self.kernel_drops,
            self.kernel_freezes,
            self.received,
            self.ring_blocks_in_place,
            self.ring_blocks_copied,
            self.ring_blocks_rescued,
            self.dropped_kansoku,
            self.dropped_at.queue_full,
            self.dropped_at.unread_at_end,
            self.rejected,
            self.written
        )
    }
}

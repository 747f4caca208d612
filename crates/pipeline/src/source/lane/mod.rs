//! A capture ring's lane: the [`run`] loop of a consumer (filter, profiler,
//! trace writer) over the ring's packets, read where the kernel wrote them.
//!
//! **Direct** ([`PipelineConfig::direct`], what `kansoku capture` does): the
//! consumer's thread takes each block from the ring itself, hands its
//! packets to the consumer in place (no copy; VLAN tags the kernel moved
//! into metadata are put back in a small scratch frame) and gives the block
//! back once they are written, as tcpdump and netsniff-ng do. A second
//! thread, the rescuer, looks every 2 ms at whether the consumer has been
//! stuck in one block for 5 ms (a write to a slow disk) with half the ring
//! waiting: only then does it take the blocks the kernel has filled behind
//! it, copy their packets into memory (up to
//! [`PipelineConfig::queue_bytes`]) and give them back, so a slow disk does
//! not fill the ring; the consumer reads those copies before the ring's
//! next block. Blocks the kernel's timeout retired less than half full (a
//! quiet link) are copied at once, so that a stalled consumer never holds
//! one while the ring fills. A consumer that is merely busy is left alone: on a
//! core that also runs the kernel's receive work (a NIC queue's interrupt,
//! RPS), copying would take the very time it lacks, and a ring thread
//! handing every block to a writer thread cost half the load the core could
//! take (bench/capture-results.md).
//!
//! **Ring thread** (the design before, kept only as the baseline `kansoku
//! bench capture-worker --ring-thread` measures against; `kansoku capture`
//! no longer offers it, bench/busy-box-results.md): a thread of its own
//! takes each block and queues it for the consumer, in place while the
//! consumer holds fewer than [`PipelineConfig::hold_blocks`] blocks; beyond
//! that the oldest block the consumer has not started on is copied and given
//! back (the kernel fills blocks in ring order, so that is the block it
//! needs first), and with `hold_blocks` 0 every block is copied. If the
//! queue is full — the consumer is behind — the block's packets are counted
//! as dropped by kansoku: no loss is ever silent, and the ring keeps
//! draining. Tsukahara et al. n.d., §3.1–§3.2, found disk I/O to be the
//! first bottleneck of a capture box; both designs keep a stalled disk
//! away from the ring.
//!
//! The queue is sized in bytes, not in batches, because a batch is one ring
//! block and the kernel retires a block when it is full *or* when its timeout
//! (10 ms) expires: at a few thousand packets a second a batch holds a few
//! dozen packets, so a queue of 32 batches buffered well under a second of
//! traffic and a slow disk lost packets that many megabytes of memory would
//! have absorbed. Counting bytes buffers the same amount of traffic at any
//! rate. The ring thread adds a batch's bytes to a counter shared with the
//! consumer before queueing it, and the consumer subtracts them once it is
//! done with the batch; a batch that would take the count past the limit is
//! dropped, unless nothing is in flight (so that a limit smaller than one
//! block never drops everything: one batch is always let through).
//!
//! Accounting, exact at the end of a run:
//! `kernel.packets = received + kernel.drops` (what the kernel saw) and
//! `received = delivered + dropped_queue + skipped` (skipped: past `-c`).
//! A stop closes the ring to new packets and reads on until the kernel has
//! handed over its last block and every block has been read; a run that
//! ends before that (an abort, a failed consumer) takes the blocks left in
//! the ring and counts their packets as dropped by kansoku, so that nothing
//! the kernel counted goes unaccounted.
//!
//! When the ring is idle, the consumer can be sent empty heartbeat batches
//! whose watermark says how far in time the capture is complete, so that
//! interval-based consumers close intervals on time.
//!
//! The code follows the packets: `batch` holds a block's packets, copied
//! or read in place; `ring_thread` and `direct` are the two designs, and
//! `rescue` is the direct lane's rescuer; `consumer` is the consumer's end
//! of either ([`LaneSource`]); `stats` keeps the counters above. This
//! module holds what both designs share: the [`Ring`] they read, their
//! settings, the [`run_lane`] entry point, and the end-of-run accounting.

mod batch;
mod consumer;
mod direct;
mod rescue;
mod ring_thread;
mod stats;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use capture::ring::{KernelStats, OwnedBlock, TpacketRing};
use wire::LinkType;

use crate::error::Error;
use crate::report::Report;
use crate::run::{run, Consumer, Control};

pub use batch::{Batch, BatchPacket};
pub use consumer::{LaneItem, LaneSource};
pub use stats::{CaptureStats, LiveStats};

use consumer::Feed;
use direct::run_direct;
use ring_thread::{ring_loop, Handed, Handoff};

/// What a lane reads from: a capture ring, or in tests a simulated one.
pub trait Ring: Send {
    /// The link type of every packet.
    fn link_type(&self) -> LinkType;

    /// Waits up to `timeout` for the next block the kernel hands over; the
    /// block stays out of the kernel's hands until it is dropped (on any
    /// thread). `None` when no block came in time.
    fn take_block(&mut self, timeout: Duration) -> io::Result<Option<OwnedBlock>>;

    /// Blocks in the ring.
    fn block_count(&self) -> usize;

    /// Blocks the kernel has filled that wait to be taken.
    fn ready_blocks(&self) -> usize;

    /// Stops the kernel from passing packets, so that once the ring is
    /// drained its counters and what was read agree exactly.
    fn stop_receiving(&mut self) -> io::Result<()>;

    /// The kernel's counters so far.
    fn kernel_stats(&mut self) -> io::Result<KernelStats>;
}

impl Ring for TpacketRing {
    fn link_type(&self) -> LinkType {
        TpacketRing::link_type(self)
    }

    fn take_block(&mut self, timeout: Duration) -> io::Result<Option<OwnedBlock>> {
        self.acquire_block(timeout)
    }

    fn block_count(&self) -> usize {
        TpacketRing::block_count(self)
    }

    fn ready_blocks(&self) -> usize {
        TpacketRing::ready_blocks(self)
    }

    fn stop_receiving(&mut self) -> io::Result<()> {
        TpacketRing::stop_receiving(self)
    }

    fn kernel_stats(&mut self) -> io::Result<KernelStats> {
        TpacketRing::kernel_stats(self)
    }
}

/// Emptied batches kept for reuse; the consumer frees any beyond these. A
/// kept batch keeps its capacity (up to a ring block), so the pool is small:
/// the ring thread allocates a fresh batch when it finds the pool empty.
const SPARE_BATCHES: usize = 32;

/// When to stop, and how deep the queue is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PipelineConfig {
    /// Stop after this many packets.
    pub count: Option<u64>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Bytes of packet data ([`Batch::bytes`]) the queue may hold, counting
    /// the batches waiting and the one the consumer is working on; a batch
    /// that would go past it is dropped and counted. One batch is always
    /// accepted when nothing is in flight, so even 0 lets one block through
    /// at a time.
    pub queue_bytes: usize,
    /// How long to keep draining the ring after a stop, for blocks the
    /// kernel retires late (a little more than the block timeout); the lane
    /// reads on past it while blocks wait in the ring.
    pub drain: Duration,
    /// When the ring has been idle this long since the last batch, hand the
    /// consumer an empty batch carrying a [`Batch::watermark_ns`]; `None`
    /// for never.
    pub heartbeat: Option<Duration>,
    /// How far the watermark lags the clock: more than the ring's block
    /// timeout, so that packets in a block the kernel has not yet retired
    /// are never behind it.
    pub heartbeat_lag: Duration,
    /// The consumer is told ([`crate::Consumer::idle`])
    /// when no batch has come for this long, and at least this often while
    /// they come, so a trace's partial block reaches the file and a kill
    /// loses at most this long of a quiet capture; `None` for never.
    pub idle_flush: Option<Duration>,
    /// Ring blocks the consumer may hold, reading their packets where the
    /// kernel wrote them. A block that comes while the consumer holds this
    /// many is copied into the queue (bounded by `queue_bytes`) and given
    /// straight back, so the kernel always keeps the rest of the ring.
    /// `None`: half the ring's blocks; `Some(0)`: copy every block.
    pub hold_blocks: Option<usize>,
    /// The consumer takes the ring's blocks itself and reads each in place,
    /// as tcpdump and netsniff-ng do, with no ring thread: nothing is
    /// copied and no thread hand-over is paid, which counts where the
    /// kernel's receive work shares the core. A rescuer thread copies
    /// waiting blocks into memory (up to `queue_bytes`) only while the
    /// consumer is stalled with half the ring waiting (see the module).
    /// `hold_blocks` is the ring thread's, not this lane's.
    pub direct: bool,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            count: None,
            duration: None,
            queue_bytes: 64 << 20,
            drain: Duration::from_millis(50),
            heartbeat: None,
            heartbeat_lag: Duration::from_millis(200),
            idle_flush: None,
            hold_blocks: None,
            direct: false,
        }
    }
}

/// Runs a lane: the ring thread on the calling thread, and the [`run`]
/// loop of `consumer` over a [`LaneSource`] on a second one (which stops
/// short of the queue's end only when `abort` is set), until `stop`
/// is set, `count` packets were taken, `duration` passed, or the consumer
/// fails. Returns the final counters and the consumer's report (its output
/// failure, if any; the ring's own failure is an input error in it).
pub fn run_lane<R, C>(
    ring: &mut R,
    cfg: &PipelineConfig,
    stop: &AtomicBool,
    abort: &AtomicBool,
    live: &LiveStats,
    consumer: &mut C,
) -> (CaptureStats, Report)
where
    R: Ring,
    C: for<'q> Consumer<LaneSource<'q>> + Send,
{
    if cfg.direct {
        return run_direct(ring, cfg, stop, abort, live, consumer);
    }
    // Unbounded as a channel (it allocates a slot block per 31 batches):
    // `Handoff` bounds it, in bytes and in batches, and never waits.
    let (full_tx, full_rx) = mpsc::channel::<Handed>();
    // Emptied batches come back for reuse, so packets are copied into memory
    // that is already there. The consumer never waits on this channel: when
    // it is full, the batch is freed.
    let (empty_tx, empty_rx) = mpsc::sync_channel::<Batch>(SPARE_BATCHES);
    let in_flight = InFlight::default();
    let consumer_failed = AtomicBool::new(false);
    let link_type = ring.link_type();
    std::thread::scope(|s| {
        let consumer = s.spawn(|| {
            let mut source = LaneSource::new(
                Feed::Queue {
                    rx: full_rx,
                    back: empty_tx,
                },
                &in_flight,
                &consumer_failed,
                link_type,
                cfg.idle_flush,
            );
            // The ring thread decides when to stop; the consumer drains
            // every batch it was handed, unless the run is aborted (what it
            // leaves then counts as dropped, below).
            let report = run(&mut source, consumer, Control::new(abort));
            (report, source.taken)
        });
        let blocks = ring.block_count();
        let handoff = Handoff {
            tx: full_tx,
            in_flight: &in_flight,
            limit_bytes: cfg.queue_bytes,
            // Never the whole ring: the kernel keeps at least one block.
            hold_blocks: cfg
                .hold_blocks
                .unwrap_or(blocks / 2)
                .min(blocks.saturating_sub(1)),
            handed: VecDeque::new(),
        };
        let ring_result = ring_loop(ring, cfg, stop, live, handoff, empty_rx, &consumer_failed);
        let (mut report, taken) = consumer.join().unwrap_or_else(|_| {
            let mut r = Report::default();
            r.failed(Error::input("the consumer thread panicked"));
            (r, 0)
        });
        // A consumer that failed left batches in the queue: they were
        // handed over but never taken, so they count as dropped by kansoku.
        live.untaken_are_dropped(taken);
        // And the ring thread left what was still in the ring (the consumer
        // failed first); the consumer has given back every block it held.
        let ring_result = ring_result.and_then(|()| discard_rest(ring, live));
        let kernel = ring.kernel_stats().unwrap_or_default();
        store_kernel(live, &kernel);
        let stats = live.totals(kernel);
        if let Err(e) = ring_result {
            report.failed(Error::input(format!("the capture ring: {e}")));
        }
        (stats, report)
    })
}

/// How long the ring thread (or a direct lane) waits for a block at a time.
const RING_POLL: Duration = Duration::from_millis(20);

/// How many of a block's `packets` to hand over when `taken` were before
/// it: all, or those up to `count`.
fn deliverable(packets: u32, count: Option<u64>, taken: u64) -> u32 {
    match count {
        Some(c) => u64::from(packets).min(c.saturating_sub(taken)) as u32,
        None => packets,
    }
}

fn store_kernel(live: &LiveStats, k: &KernelStats) {
    live.kernel_packets.store(k.packets, Ordering::Relaxed);
    live.kernel_drops.store(k.drops, Ordering::Relaxed);
    live.kernel_freezes.store(k.freeze_count, Ordering::Relaxed);
}

/// What the consumer has not finished with yet: the batches in the queue
/// and the one it is working on, and the ring blocks it holds. Only the
/// ring thread adds (before it queues a chunk) and only the consumer
/// subtracts (after it is done), so a count the ring thread reads can only
/// shrink before its own next add, and a subtraction never comes before its
/// addition (the channel orders them).
#[derive(Debug, Default)]
struct InFlight {
    bytes: AtomicUsize,
    batches: AtomicUsize,
    blocks: AtomicUsize,
}

impl InFlight {
    /// The consumer is done with a batch of `bytes` bytes.
    fn done(&self, bytes: usize) {
        self.bytes.fetch_sub(bytes, Ordering::Release);
        self.batches.fetch_sub(1, Ordering::Release);
    }

    /// The consumer gave a block back to the kernel.
    fn block_done(&self) {
        self.blocks.fetch_sub(1, Ordering::Release);
    }
}

/// Whether a lane stopped at `stopping_since` has read its ring empty: the
/// drain time has passed (the kernel has retired its last, partly filled
/// block) and no block waits. Either lane ends on this.
fn drained<R: Ring + ?Sized>(
    stopping_since: Option<Instant>,
    cfg: &PipelineConfig,
    ring: &R,
) -> bool {
    stopping_since.is_some_and(|t| t.elapsed() >= cfg.drain) && ring.ready_blocks() == 0
}

/// At the end of a lane, with no block held: stops the ring (if it was not
/// stopped) and takes every block the kernel still hands over, counting
/// their packets as taken and dropped by kansoku. A run that ended by a stop
/// has read the ring empty and finds nothing; one that was aborted, or
/// whose consumer failed, would otherwise leave packets the kernel counted
/// that were neither read nor dropped. The wait covers the kernel's retiring
/// of its last, partly filled block.
fn discard_rest<R: Ring + ?Sized>(ring: &mut R, live: &LiveStats) -> io::Result<()> {
    ring.stop_receiving()?;
    // After the stop the kernel fills no block: at most the ring's blocks.
    for _ in 0..=ring.block_count() {
        let Some(block) = ring.take_block(RING_POLL)? else {
            break;
        };
        let n = u64::from(block.count());
        live.received.fetch_add(n, Ordering::Relaxed);
        live.dropped_unread(n);
    }
    Ok(())
}

/// The time `lag` ago, in nanoseconds since the epoch: every packet the
/// kernel stamped before it has been handed over.
fn heartbeat_watermark(lag: Duration) -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(now.saturating_sub(lag).as_nanos()).unwrap_or(u64::MAX)
}

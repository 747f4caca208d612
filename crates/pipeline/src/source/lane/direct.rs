//! The direct lane ([`PipelineConfig::direct`](super::PipelineConfig::direct)): the consumer's thread
//! takes each block from the ring itself and reads it in place, doing
//! the ring thread's bookkeeping (stopping, the kernel's counters,
//! `count`, heartbeats) between blocks. The rescuer (the `rescue` module)
//! shares the ring with it, behind a lock.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use capture::ring::KernelStats;

use crate::error::Error;
use crate::report::Report;
use crate::run::{run, Consumer, Control};

use super::batch::{Batch, Held};
use super::consumer::{Feed, LaneSource};
use super::rescue::rescue;
use super::stats::{CaptureStats, LiveStats};
use super::{
    deliverable, discard_rest, drained, heartbeat_watermark, store_kernel, InFlight,
    PipelineConfig, Ring, RING_POLL,
};

/// [`run_lane`](super::run_lane) on one thread: the consumer reads the ring's blocks in
/// place itself ([`PipelineConfig::direct`](super::PipelineConfig::direct)).
pub(super) fn run_direct<R, C>(
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
    let in_flight = InFlight::default();
    let failed = AtomicBool::new(false);
    let link_type = ring.link_type();
    let now = Instant::now();
    let share = Mutex::new(RingShare {
        ring: &mut *ring,
        rescued: VecDeque::new(),
        rescued_bytes: 0,
        taken: 0,
        closed: false,
    });
    let progress = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let (mut report, taken) = std::thread::scope(|s| {
        let writer = capture::usage::current_thread_id();
        let (share, progress, done) = (&share, &progress, &done);
        s.spawn(move || rescue(share, cfg, live, progress, now, done, writer));
        let ring = DirectFeed {
            share,
            cfg,
            stop,
            live,
            start: now,
            stopping_since: None,
            last_stats: now,
            last_handover: now,
        };
        let mut source = LaneSource::new(
            Feed::Direct { ring, progress },
            &in_flight,
            &failed,
            link_type,
            cfg.idle_flush,
        );
        let report = run(&mut source, consumer, Control::new(abort));
        let taken = source.taken;
        drop(source);
        done.store(true, Ordering::Relaxed);
        (report, taken)
    });
    let mut share = share.lock().unwrap_or_else(PoisonError::into_inner);
    let ring = &mut share.ring;
    // Stopped early (a failure, an abort): the block it was reading counted
    // as delivered; what it did not take is dropped by kansoku.
    live.untaken_are_dropped(taken);
    if let Err(e) = discard_rest(&mut **ring, live) {
        report.failed(Error::input(format!("the capture ring: {e}")));
    }
    let kernel = match ring.kernel_stats() {
        Ok(k) => k,
        Err(e) => {
            report.failed(Error::input(format!("the capture ring: {e}")));
            KernelStats::default()
        }
    };
    store_kernel(live, &kernel);
    let stats = live.totals(kernel);
    (stats, report)
}

/// A lane's consumer reading the ring itself ([`PipelineConfig::direct`](super::PipelineConfig::direct)):
/// the ring thread's bookkeeping (stopping, the kernel's counters, `count`,
/// heartbeats), done between blocks on the consumer's own thread.
pub(super) struct DirectFeed<'q> {
    pub(super) share: &'q Mutex<RingShare<'q>>,
    pub(super) cfg: &'q PipelineConfig,
    pub(super) stop: &'q AtomicBool,
    pub(super) live: &'q LiveStats,
    pub(super) start: Instant,
    pub(super) stopping_since: Option<Instant>,
    pub(super) last_stats: Instant,
    pub(super) last_handover: Instant,
}

/// The ring of a direct lane, shared by its consumer and its rescuer.
pub(super) struct RingShare<'q> {
    pub(super) ring: &'q mut dyn Ring,
    /// Blocks the rescuer copied out of the ring while the consumer was
    /// stalled, in ring order: they come before the ring's next block.
    pub(super) rescued: VecDeque<Batch>,
    pub(super) rescued_bytes: usize,
    /// Packets handed over (by either), against `count`.
    pub(super) taken: u64,
    /// The consumer has ended: the rescuer takes nothing more.
    pub(super) closed: bool,
}

impl RingShare<'_> {
    /// Counts a block's packets: how many to hand over (fewer once `count`
    /// is reached; the rest are skipped).
    pub(super) fn admit(&mut self, packets: u32, cfg: &PipelineConfig, live: &LiveStats) -> u32 {
        let deliver = deliverable(packets, cfg.count, self.taken);
        self.taken += u64::from(deliver);
        live.received
            .fetch_add(u64::from(packets), Ordering::Relaxed);
        live.skipped
            .fetch_add(u64::from(packets - deliver), Ordering::Relaxed);
        live.delivered
            .fetch_add(u64::from(deliver), Ordering::Relaxed);
        deliver
    }
}

/// What a direct lane found when it looked at the ring.
pub(super) enum Step {
    Block(Held),
    Copied(Batch),
    Heartbeat(u64),
    /// No block within the wait.
    Nothing,
    /// Stopped and drained.
    End,
}

impl DirectFeed<'_> {
    /// Waits up to `wait` for the next block with packets to hand over
    /// (a block the rescuer copied first).
    pub(super) fn step(&mut self, wait: Duration, in_flight: &InFlight) -> io::Result<Step> {
        let cfg = self.cfg;
        let live = self.live;
        let mut share = self.share.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(b) = share.rescued.pop_front() {
            share.rescued_bytes -= b.bytes();
            self.last_handover = Instant::now();
            return Ok(Step::Copied(b));
        }
        let want_stop = self.stop.load(Ordering::Relaxed)
            || cfg.count.is_some_and(|c| share.taken >= c)
            || cfg.duration.is_some_and(|d| self.start.elapsed() >= d);
        if want_stop && self.stopping_since.is_none() {
            share.ring.stop_receiving()?;
            self.stopping_since = Some(Instant::now());
        }
        if drained(self.stopping_since, cfg, &*share.ring) {
            share.closed = true;
            return Ok(Step::End);
        }
        if self.last_stats.elapsed() >= Duration::from_secs(1) {
            store_kernel(live, &share.ring.kernel_stats()?);
            self.last_stats = Instant::now();
        }
        // Waiting here holds the lock: a consumer waiting for packets is
        // not stalled, and the rescuer leaves the ring alone.
        let Some(block) = share.ring.take_block(wait.min(RING_POLL))? else {
            if cfg
                .heartbeat
                .is_some_and(|h| self.last_handover.elapsed() >= h)
            {
                self.last_handover = Instant::now();
                return Ok(Step::Heartbeat(heartbeat_watermark(cfg.heartbeat_lag)));
            }
            return Ok(Step::Nothing);
        };
        let deliver = share.admit(block.count(), cfg, live);
        if deliver == 0 {
            return Ok(Step::Nothing);
        }
        self.last_handover = Instant::now();
        if block.len() < block.capacity() / 2 {
            // A block the timeout retired half empty (a quiet link) is
            // copied, cheaply, and given back at once: a consumer that
            // stalls while holding one would stop the rescuer at it, and
            // the kernel too, after a ring of such blocks (a fraction of a
            // second at a low rate).
            drop(share);
            let mut batch = Batch::default();
            Held::new(block, deliver).copy_into(&mut batch);
            live.blocks_copied.fetch_add(1, Ordering::Relaxed);
            return Ok(Step::Copied(batch));
        }
        live.blocks_in_place.fetch_add(1, Ordering::Relaxed);
        in_flight.blocks.fetch_add(1, Ordering::AcqRel);
        Ok(Step::Block(Held::new(block, deliver)))
    }
}

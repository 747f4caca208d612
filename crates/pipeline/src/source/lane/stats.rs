//! A lane's counters: [`LiveStats`] while the capture runs (for a
//! progress line, updated by whichever thread moves the packets), and
//! [`CaptureStats`] at its end, where `received = delivered +
//! dropped_queue + skipped` holds exactly.

use std::sync::atomic::{AtomicU64, Ordering};

use capture::ring::KernelStats;

/// Counters updated while the capture runs, for a progress line.
#[derive(Debug, Default)]
pub struct LiveStats {
    /// Packets taken from the ring.
    pub received: AtomicU64,
    /// Packets handed to the consumer.
    pub delivered: AtomicU64,
    /// Packets dropped because the consumer's queue was full (held
    /// [`PipelineConfig::queue_bytes`](super::PipelineConfig::queue_bytes)), or left in the ring when the run
    /// ended before they were read.
    pub dropped_queue: AtomicU64,
    /// Packets taken from the ring after `count` was reached.
    pub skipped: AtomicU64,
    /// Kernel counters as of the last read (about once a second).
    pub kernel_packets: AtomicU64,
    /// Kernel drops as of the last read.
    pub kernel_drops: AtomicU64,
    /// Ring freezes as of the last read.
    pub kernel_freezes: AtomicU64,
    /// Ring blocks the consumer read in place.
    pub blocks_in_place: AtomicU64,
    /// Ring blocks copied into the queue (the consumer held its share of
    /// the ring, or a block the timeout retired half empty) and given
    /// straight back.
    pub blocks_copied: AtomicU64,
    /// Of `blocks_copied`, those the direct lane's rescuer copied out while
    /// the consumer was stalled.
    pub blocks_rescued: AtomicU64,
    /// Of `dropped_queue`, the packets dropped because the run ended (an
    /// abort, a failed consumer) before they were read, not because the
    /// queue was full.
    pub dropped_unread: AtomicU64,
    /// The most bytes of packets the queue held at once.
    pub queue_high_water: AtomicU64,
    /// The longest the consumer held one block without progress, as the
    /// rescuer saw it (sampled every few milliseconds), in nanoseconds.
    pub longest_stall_ns: AtomicU64,
}

impl LiveStats {
    /// The consumer took only `taken` packets (it failed, or the run was
    /// aborted): the ones handed over beyond them count as dropped by
    /// kansoku.
    pub(super) fn untaken_are_dropped(&self, taken: u64) {
        let delivered = self.delivered.load(Ordering::Relaxed);
        if taken < delivered {
            self.delivered.store(taken, Ordering::Relaxed);
            self.dropped_unread(delivered - taken);
        }
    }

    /// `n` packets taken from the ring that the consumer will never read
    /// (it ended): dropped by kansoku, at the end.
    pub(super) fn dropped_unread(&self, n: u64) {
        self.dropped_queue.fetch_add(n, Ordering::Relaxed);
        self.dropped_unread.fetch_add(n, Ordering::Relaxed);
    }

    /// The final counters, with the kernel's.
    pub(super) fn totals(&self, kernel: KernelStats) -> CaptureStats {
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        CaptureStats {
            kernel,
            received: n(&self.received),
            delivered: n(&self.delivered),
            dropped_queue: n(&self.dropped_queue),
            skipped: n(&self.skipped),
            blocks_in_place: n(&self.blocks_in_place),
            blocks_copied: n(&self.blocks_copied),
            blocks_rescued: n(&self.blocks_rescued),
            dropped_unread: n(&self.dropped_unread),
            queue_high_water: n(&self.queue_high_water),
            longest_stall_ns: n(&self.longest_stall_ns),
        }
    }
}

/// Final counters of a capture.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CaptureStats {
    /// Kernel counters (PACKET_STATISTICS), summed over the run.
    pub kernel: KernelStats,
    /// Packets taken from the ring.
    pub received: u64,
    /// Packets handed to the consumer.
    pub delivered: u64,
    /// Packets dropped by kansoku: the consumer's queue was full, or the
    /// run ended (an abort, a failed consumer) before they were read.
    pub dropped_queue: u64,
    /// Packets taken from the ring after `count` was reached.
    pub skipped: u64,
    /// Ring blocks the consumer read in place.
    pub blocks_in_place: u64,
    /// Ring blocks copied into the queue and given straight back.
    pub blocks_copied: u64,
    /// Of `blocks_copied`, those the rescuer copied out of a stalled lane.
    pub blocks_rescued: u64,
    /// Of `dropped_queue`, those left unread when the run ended.
    pub dropped_unread: u64,
    /// The most bytes of packets the queue held at once.
    pub queue_high_water: u64,
    /// The longest the consumer held one block without progress (sampled
    /// by the rescuer every few milliseconds), in nanoseconds.
    pub longest_stall_ns: u64,
}

impl CaptureStats {
    /// The counters of a fanout group's rings, summed.
    pub fn sum(rings: &[CaptureStats]) -> CaptureStats {
        let mut total = CaptureStats::default();
        for r in rings {
            total += r;
        }
        total
    }
}

impl std::ops::AddAssign<&CaptureStats> for CaptureStats {
    /// Sums the counters of the rings of a fanout group.
    fn add_assign(&mut self, o: &CaptureStats) {
        self.kernel.packets += o.kernel.packets;
        self.kernel.drops += o.kernel.drops;
        self.kernel.freeze_count += o.kernel.freeze_count;
        self.received += o.received;
        self.delivered += o.delivered;
        self.dropped_queue += o.dropped_queue;
        self.skipped += o.skipped;
        self.blocks_in_place += o.blocks_in_place;
        self.blocks_copied += o.blocks_copied;
        self.blocks_rescued += o.blocks_rescued;
        self.dropped_unread += o.dropped_unread;
        // The lanes' queues are apart: the highest of them, as the stall.
        self.queue_high_water = self.queue_high_water.max(o.queue_high_water);
        self.longest_stall_ns = self.longest_stall_ns.max(o.longest_stall_ns);
    }
}

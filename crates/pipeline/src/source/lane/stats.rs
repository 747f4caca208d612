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
    /// the ring) and given straight back.
    pub blocks_copied: AtomicU64,
}

impl LiveStats {
    /// The consumer took only `taken` packets (it failed, or the run was
    /// aborted): the ones handed over beyond them count as dropped by
    /// kansoku.
    pub(super) fn untaken_are_dropped(&self, taken: u64) {
        let delivered = self.delivered.load(Ordering::Relaxed);
        if taken < delivered {
            self.delivered.store(taken, Ordering::Relaxed);
            self.dropped_queue
                .fetch_add(delivered - taken, Ordering::Relaxed);
        }
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
    }
}

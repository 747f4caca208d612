//! The direct lane's rescuer: a second thread that copies the blocks
//! waiting in the ring into memory while the consumer is stalled in one
//! block (a write to a slow disk) with half the ring waiting, so that a
//! slow disk does not fill the ring, and otherwise leaves the core to
//! the consumer.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::batch::{Batch, Held};
use super::direct::RingShare;
use super::stats::LiveStats;
use super::PipelineConfig;

/// How often a direct lane's rescuer looks at its consumer.
const RESCUE_EVERY: Duration = Duration::from_millis(2);

/// How long a direct lane's consumer may hold one block (a write to a slow
/// disk) before the rescuer starts copying the blocks behind it out of the
/// ring.
const STALLED_AFTER: Duration = Duration::from_millis(5);

/// The rescuer of a direct lane, until `done`: while the consumer is
/// stalled in a block for longer than [`STALLED_AFTER`] (its `progress`,
/// nanoseconds since `start`, stands still) and half the ring waits, it
/// copies the blocks the kernel has handed over into the rescued queue, up to
/// [`PipelineConfig::queue_bytes`], and gives them back, so a slow disk
/// does not fill the ring. A consumer that is merely busy, or runnable and
/// waiting for the CPU (thread `writer`), keeps the core to itself:
/// copying would only take the time it needs.
pub(super) fn rescue(
    share: &Mutex<RingShare<'_>>,
    cfg: &PipelineConfig,
    live: &LiveStats,
    progress: &AtomicU64,
    start: Instant,
    done: &AtomicBool,
    writer: u32,
) {
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(RESCUE_EVERY);
        let since = Duration::from_nanos(progress.load(Ordering::Relaxed));
        let stalled = start.elapsed().saturating_sub(since);
        if stalled < STALLED_AFTER {
            continue;
        }
        // The consumer waiting for packets holds the lock: not stalled.
        let Ok(mut share) = share.try_lock() else {
            continue;
        };
        live.longest_stall_ns.fetch_max(
            u64::try_from(stalled.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        // Only once the ring runs short: a consumer that is merely slow to
        // be scheduled (the kernel's receive work has the core) catches up
        // by itself, and copying would take the time it needs.
        if share.ring.ready_blocks() < share.ring.block_count() / 2 {
            continue;
        }
        // Nor while the consumer is runnable: then it is not stalled but
        // waiting for the CPU (the kernel's receive work has it), and the
        // copies would take that CPU's time from it. A consumer asleep in
        // a write, on a disk, or stopped could use no time it is given.
        if capture::usage::thread_waits(writer) == Some(false) {
            continue;
        }
        while !share.closed && share.rescued_bytes < cfg.queue_bytes.max(1) {
            let Ok(Some(block)) = share.ring.take_block(Duration::ZERO) else {
                break;
            };
            let deliver = share.admit(block.count(), cfg, live);
            if deliver == 0 {
                continue;
            }
            let mut batch = Batch::default();
            Held::new(block, deliver).copy_into(&mut batch);
            live.blocks_copied.fetch_add(1, Ordering::Relaxed);
            live.blocks_rescued.fetch_add(1, Ordering::Relaxed);
            share.rescued_bytes += batch.bytes();
            live.queue_high_water
                .fetch_max(share.rescued_bytes as u64, Ordering::Relaxed);
            share.rescued.push_back(batch);
        }
    }
}

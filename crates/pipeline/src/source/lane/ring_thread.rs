//! The ring-thread lane (`--ring-thread`): a thread of its own takes each
//! block from the ring and queues it for the consumer, in place while the
//! consumer holds fewer than its share of the ring, else as a copy; a
//! queue that would go past its byte limit drops the block's packets and
//! counts them, so the ring keeps draining and no loss is silent.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use capture::ring::OwnedBlock;

use super::batch::{Batch, Held};
use super::consumer::Chunk;
use super::stats::LiveStats;
use super::{
    deliverable, drained, heartbeat_watermark, store_kernel, InFlight, PipelineConfig, Ring,
    RING_POLL,
};

/// Most batches in flight, whatever their bytes. The byte limit bounds the
/// packet data; this bounds the bookkeeping (about a hundred bytes a batch),
/// which matters for nearly empty blocks and for heartbeats, which carry no
/// bytes at all. At the 100 block timeouts a second of an idle ring it is
/// more than ten minutes of blocks.
const MAX_BATCHES_IN_FLIGHT: usize = 65_536;

/// A block handed to the consumer in place. Until the consumer starts on
/// it, the ring thread may take it back as a copy: the kernel fills blocks
/// in ring order, so the oldest block the consumer holds is the one it
/// will need first, and giving that one back early keeps the kernel going
/// while a slow consumer works through the queue.
pub(super) struct Slot(Mutex<SlotState>);

enum SlotState {
    Held(Held),
    /// Copied by the ring thread; the block went back to the kernel.
    Copied(Batch),
    /// The consumer has started on it.
    Taken,
}

impl Slot {
    /// The consumer takes what the slot holds.
    pub(super) fn take(&self) -> Option<Chunk> {
        let mut s = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match std::mem::replace(&mut *s, SlotState::Taken) {
            SlotState::Held(h) => Some(Chunk::InPlace(h)),
            SlotState::Copied(b) => Some(Chunk::Copied(b)),
            SlotState::Taken => None,
        }
    }
}

/// What the ring thread queues for the consumer, in ring order.
pub(super) enum Handed {
    Slot(Arc<Slot>),
    Copied(Batch),
}

/// The ring thread's end of the queue to the consumer.
pub(super) struct Handoff<'a> {
    pub(super) tx: Sender<Handed>,
    pub(super) in_flight: &'a InFlight,
    pub(super) limit_bytes: usize,
    /// Blocks the consumer may hold ([`PipelineConfig::hold_blocks`]).
    pub(super) hold_blocks: usize,
    /// The blocks handed over in place, oldest first, that the consumer
    /// may not have started on yet.
    pub(super) handed: VecDeque<Arc<Slot>>,
}

/// Why [`Handoff::offer`] did not queue a batch.
pub(super) enum Refused {
    /// The queue holds its limit; here is the batch back, for reuse.
    Full(Batch),
    /// The consumer has stopped (it failed).
    Closed,
}

impl Handoff<'_> {
    /// Queues `batch` unless that would put more than the byte limit in
    /// flight, or nothing is in flight. Never waits.
    pub(super) fn offer(&self, batch: Batch) -> Result<(), Refused> {
        let bytes = batch.bytes();
        if !self.has_room(bytes) {
            return Err(Refused::Full(batch));
        }
        // Added before the send, so the consumer's subtraction, which comes
        // after its receive, can never take the counts below zero.
        self.in_flight.bytes.fetch_add(bytes, Ordering::AcqRel);
        self.in_flight.batches.fetch_add(1, Ordering::AcqRel);
        self.tx.send(Handed::Copied(batch)).map_err(|_| {
            self.in_flight.done(bytes);
            Refused::Closed
        })
    }

    /// Whether one more batch of `bytes` may be in flight: under the byte
    /// limit (or nothing in flight) and under the batch count.
    pub(super) fn has_room(&self, bytes: usize) -> bool {
        let batches = self.in_flight.batches.load(Ordering::Acquire);
        let held = self.in_flight.bytes.load(Ordering::Acquire);
        batches < MAX_BATCHES_IN_FLIGHT
            && (batches == 0 || held.saturating_add(bytes) <= self.limit_bytes)
    }

    /// Whether the consumer may hold one more block.
    pub(super) fn may_hold(&self) -> bool {
        self.in_flight.blocks.load(Ordering::Acquire) < self.hold_blocks
    }

    /// Queues a block for the consumer to read in place. `Err` when the
    /// consumer has stopped (the block then goes back to the kernel).
    pub(super) fn hold(&mut self, held: Held) -> Result<(), ()> {
        self.in_flight.blocks.fetch_add(1, Ordering::AcqRel);
        let slot = Arc::new(Slot(Mutex::new(SlotState::Held(held))));
        self.handed.push_back(Arc::clone(&slot));
        self.tx.send(Handed::Slot(slot)).map_err(|_| {
            self.in_flight.block_done();
        })
    }

    /// Gives the oldest block the consumer holds but has not started on
    /// back to the kernel, leaving a copy of its packets in its place, if
    /// the queue's byte limit has room for them. Whether a block went back.
    pub(super) fn give_back_oldest(&mut self, live: &LiveStats) -> bool {
        while let Some(slot) = self.handed.pop_front() {
            let mut state = slot.0.lock().unwrap_or_else(PoisonError::into_inner);
            let SlotState::Held(h) = &*state else {
                // The consumer has it: it goes back once read.
                continue;
            };
            let bytes = h.copy_bytes();
            if !self.has_room(bytes) {
                drop(state);
                self.handed.push_front(slot);
                return false;
            }
            let SlotState::Held(h) = std::mem::replace(&mut *state, SlotState::Taken) else {
                return false;
            };
            let mut batch = Batch::default();
            batch.buf.reserve(bytes);
            h.copy_into(&mut batch);
            self.in_flight
                .bytes
                .fetch_add(batch.bytes(), Ordering::AcqRel);
            self.in_flight.batches.fetch_add(1, Ordering::AcqRel);
            self.in_flight.block_done();
            *state = SlotState::Copied(batch);
            live.blocks_in_place.fetch_sub(1, Ordering::Relaxed);
            live.blocks_copied.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        false
    }
}

/// Counts a block's packets (`batch`, and `skipped` past `count`) and offers
/// the batch to the consumer: its packets are delivered, or dropped by
/// kansoku when the queue is full (or the consumer has stopped), so that
/// `received = delivered + dropped_queue + skipped` holds after every call.
/// Returns the batch, emptied, when it was not queued, so the ring thread
/// can reuse it; `Err` when the consumer has stopped.
pub(super) fn hand_over(
    handoff: &Handoff<'_>,
    live: &LiveStats,
    batch: Batch,
    skipped: u64,
) -> Result<Option<Batch>, ()> {
    let n = u64::from(batch.len());
    live.received.fetch_add(n + skipped, Ordering::Relaxed);
    live.skipped.fetch_add(skipped, Ordering::Relaxed);
    if n == 0 {
        return Ok(Some(batch));
    }
    match handoff.offer(batch) {
        Ok(()) => {
            live.delivered.fetch_add(n, Ordering::Relaxed);
            Ok(None)
        }
        Err(Refused::Full(mut batch)) => {
            live.dropped_queue.fetch_add(n, Ordering::Relaxed);
            batch.clear();
            Ok(Some(batch))
        }
        Err(Refused::Closed) => {
            live.dropped_unread(n);
            Err(())
        }
    }
}

/// Hands a ring block to the consumer: in place while it holds fewer than
/// its share of the ring, else as a copy of its packets (the block then
/// goes straight back to the kernel), with the accounting of
/// [`hand_over`]. `deliver` is how many of the block's `packets` to hand
/// over (fewer once `count` is reached; the rest are skipped). `spare` is
/// the batch a copy is made into; it comes back when it was not queued.
fn hand_over_block(
    handoff: &mut Handoff<'_>,
    live: &LiveStats,
    block: OwnedBlock,
    packets: u32,
    deliver: u32,
    spare: Batch,
) -> Result<Option<Batch>, ()> {
    let skipped = u64::from(packets - deliver);
    if deliver > 0 && !handoff.may_hold() {
        handoff.give_back_oldest(live);
    }
    if deliver > 0 && handoff.may_hold() {
        live.received
            .fetch_add(u64::from(packets), Ordering::Relaxed);
        live.skipped.fetch_add(skipped, Ordering::Relaxed);
        live.blocks_in_place.fetch_add(1, Ordering::Relaxed);
        return match handoff.hold(Held::new(block, deliver)) {
            Ok(()) => {
                live.delivered
                    .fetch_add(u64::from(deliver), Ordering::Relaxed);
                Ok(Some(spare))
            }
            Err(()) => {
                live.dropped_unread(u64::from(deliver));
                Err(())
            }
        };
    }
    let mut batch = spare;
    // The kernel can refill the block while the copy waits in the queue.
    Held::new(block, deliver).copy_into(&mut batch);
    if deliver > 0 {
        live.blocks_copied.fetch_add(1, Ordering::Relaxed);
    }
    hand_over(handoff, live, batch, skipped)
}

pub(super) fn ring_loop<R: Ring>(
    ring: &mut R,
    cfg: &PipelineConfig,
    stop: &AtomicBool,
    live: &LiveStats,
    mut handoff: Handoff<'_>,
    empties: Receiver<Batch>,
    consumer_failed: &AtomicBool,
) -> io::Result<()> {
    let start = Instant::now();
    let mut last_stats = Instant::now();
    let mut taken = 0u64;
    let mut stopping_since: Option<Instant> = None;
    let mut last_handover = Instant::now();
    // A batch that was not queued (dropped, or empty), reused next.
    let mut spare: Option<Batch> = None;
    loop {
        if consumer_failed.load(Ordering::Relaxed) {
            return Ok(());
        }
        let want_stop = stop.load(Ordering::Relaxed)
            || cfg.count.is_some_and(|c| taken >= c)
            || cfg.duration.is_some_and(|d| start.elapsed() >= d);
        if want_stop && stopping_since.is_none() {
            // Close the door, then drain what is already in the ring: the
            // kernel's count then covers exactly the packets read or dropped.
            ring.stop_receiving()?;
            stopping_since = Some(Instant::now());
        }
        if drained(stopping_since, cfg, ring) {
            return Ok(());
        }
        if last_stats.elapsed() >= Duration::from_secs(1) {
            store_kernel(live, &ring.kernel_stats()?);
            last_stats = Instant::now();
        }
        let batch = spare
            .take()
            .or_else(|| empties.try_recv().ok())
            .unwrap_or_default();
        let Some(block) = ring.take_block(RING_POLL)? else {
            spare = Some(batch);
            if cfg.heartbeat.is_some_and(|h| last_handover.elapsed() >= h) {
                last_handover = Instant::now();
                let batch = spare
                    .take()
                    .or_else(|| empties.try_recv().ok())
                    .unwrap_or_default();
                send_heartbeat(&handoff, batch, cfg.heartbeat_lag);
            }
            continue;
        };
        let packets = block.count();
        let deliver = deliverable(packets, cfg.count, taken);
        taken += u64::from(deliver);
        if deliver > 0 {
            last_handover = Instant::now();
        }
        match hand_over_block(&mut handoff, live, block, packets, deliver, batch) {
            Ok(back) => spare = back,
            Err(()) => return Ok(()),
        }
    }
}

/// Offers the consumer an empty batch stamped with a watermark. If the queue
/// is full the consumer is busy with packets anyway, and the heartbeat is
/// simply not sent.
fn send_heartbeat(handoff: &Handoff<'_>, mut batch: Batch, lag: Duration) {
    batch.clear();
    batch.watermark_ns = Some(heartbeat_watermark(lag));
    let _ = handoff.offer(batch);
}

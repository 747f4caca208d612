//! A capture ring's lane: a ring thread that never waits for the disk, and a
//! consumer thread that runs the pipeline (filter, profiler, trace writer)
//! on what the ring thread hands over, through the same [`run`] loop as
//! every other source.
//!
//! The ring thread takes each block the kernel hands over, copies its packets
//! into a [`Batch`] (putting back VLAN tags the kernel stripped), gives the
//! block straight back to the kernel, and offers the batch to a queue bounded
//! in bytes ([`PipelineConfig::queue_bytes`]). If the queue is full — the
//! consumer is behind — the batch's packets are counted as dropped by
//! kansoku and the batch is reused: no loss is ever silent, and the ring
//! keeps draining, so the kernel drops only when even the copy cannot keep
//! up. Paper 003 found disk I/O to be the first bottleneck of a capture box;
//! this structure keeps it away from the ring.
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
//!
//! When the ring is idle, the consumer can be sent empty heartbeat batches
//! whose watermark says how far in time the capture is complete, so that
//! interval-based consumers close intervals on time.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender};
use std::time::{Duration, Instant};

use capture::ring::{KernelStats, RingPacket, TpacketRing};
use wire::LinkType;

use crate::error::Error;
use crate::packet::Frame;
use crate::report::Report;
use crate::run::{run, Consumer, Control, Source};

/// What a lane reads from: a capture ring, or in tests a scripted one.
pub trait Ring: Send {
    /// The link type of every packet.
    fn link_type(&self) -> LinkType;

    /// Waits up to `timeout` for the next block and calls `each` on its
    /// packets, in order; the block goes back to the kernel afterwards.
    /// `false` when no block came in time.
    fn read_block<F: FnMut(&RingPacket<'_>)>(
        &mut self,
        timeout: Duration,
        each: F,
    ) -> io::Result<bool>;

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

    fn read_block<F: FnMut(&RingPacket<'_>)>(
        &mut self,
        timeout: Duration,
        mut each: F,
    ) -> io::Result<bool> {
        let Some(block) = self.acquire_block(timeout)? else {
            return Ok(false);
        };
        for p in block.packets() {
            each(&p);
        }
        Ok(true)
    }

    fn stop_receiving(&mut self) -> io::Result<()> {
        TpacketRing::stop_receiving(self)
    }

    fn kernel_stats(&mut self) -> io::Result<KernelStats> {
        TpacketRing::kernel_stats(self)
    }
}

/// Bytes of a record header inside a batch: ts_ns u64, orig_len u32, caplen u32.
const RECORD_HEADER: usize = 16;

/// Most batches in flight, whatever their bytes. The byte limit bounds the
/// packet data; this bounds the bookkeeping (about a hundred bytes a batch),
/// which matters for nearly empty blocks and for heartbeats, which carry no
/// bytes at all. At the 100 block timeouts a second of an idle ring it is
/// more than ten minutes of blocks.
const MAX_BATCHES_IN_FLIGHT: usize = 65_536;

/// Emptied batches kept for reuse; the consumer frees any beyond these. A
/// kept batch keeps its capacity (up to a ring block), so the pool is small:
/// the ring thread allocates a fresh batch when it finds the pool empty.
const SPARE_BATCHES: usize = 32;

/// Packets copied out of one ring block.
#[derive(Debug, Default)]
pub struct Batch {
    buf: Vec<u8>,
    packets: u32,
    watermark_ns: Option<u64>,
}

/// One packet of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchPacket<'a> {
    /// Nanoseconds since the epoch.
    pub ts_ns: u64,
    /// Length on the wire, a re-inserted VLAN tag included.
    pub orig_len: u32,
    /// Captured bytes.
    pub data: &'a [u8],
}

impl Batch {
    /// Packets in the batch.
    pub fn len(&self) -> u32 {
        self.packets
    }

    /// Whether the batch holds no packet.
    pub fn is_empty(&self) -> bool {
        self.packets == 0
    }

    /// Bytes the batch holds: its packets' captured bytes, plus 16 bytes of
    /// record header each. This is what counts against
    /// [`PipelineConfig::queue_bytes`].
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// On an empty heartbeat batch (see [`PipelineConfig::heartbeat`]):
    /// every packet the kernel stamped before this time (nanoseconds since
    /// the epoch) was in an earlier batch or counted as dropped. A consumer
    /// that works in time intervals (the profiler) can close them on time
    /// even when traffic stops.
    pub fn watermark_ns(&self) -> Option<u64> {
        self.watermark_ns
    }

    fn clear(&mut self) {
        self.buf.clear();
        self.packets = 0;
        self.watermark_ns = None;
    }

    /// Appends a ring packet, putting back the VLAN tag the kernel removed
    /// (after the two MAC addresses, as it stood on the wire).
    fn push(&mut self, p: &RingPacket) {
        let (tag, extra) = match p.vlan {
            Some((tpid, tci)) if p.data.len() >= 12 => {
                let mut t = [0u8; 4];
                t[..2].copy_from_slice(&tpid.to_be_bytes());
                t[2..].copy_from_slice(&tci.to_be_bytes());
                (Some(t), 4u32)
            }
            _ => (None, 0),
        };
        let caplen = p.data.len() as u32 + extra;
        self.buf.extend_from_slice(&p.ts_ns.to_le_bytes());
        self.buf
            .extend_from_slice(&p.orig_len.saturating_add(extra).to_le_bytes());
        self.buf.extend_from_slice(&caplen.to_le_bytes());
        match tag {
            Some(t) => {
                self.buf.extend_from_slice(&p.data[..12]);
                self.buf.extend_from_slice(&t);
                self.buf.extend_from_slice(&p.data[12..]);
            }
            None => self.buf.extend_from_slice(p.data),
        }
        self.packets += 1;
    }

    /// The packets, in arrival order.
    pub fn iter(&self) -> impl Iterator<Item = BatchPacket<'_>> {
        let mut at = 0usize;
        std::iter::from_fn(move || {
            let (p, next) = self.packet_at(at)?;
            at = next;
            Some(p)
        })
    }

    /// The packet whose record starts at byte `at`, and where the next starts.
    fn packet_at(&self, at: usize) -> Option<(BatchPacket<'_>, usize)> {
        let buf = &self.buf;
        let h = buf.get(at..at.checked_add(RECORD_HEADER)?)?;
        let ts_ns = u64::from_le_bytes(h[0..8].try_into().ok()?);
        let orig_len = u32::from_le_bytes(h[8..12].try_into().ok()?);
        let caplen = u32::from_le_bytes(h[12..16].try_into().ok()?) as usize;
        let end = at + RECORD_HEADER + caplen;
        let data = buf.get(at + RECORD_HEADER..end)?;
        Some((
            BatchPacket {
                ts_ns,
                orig_len,
                data,
            },
            end,
        ))
    }
}

/// Counters updated while the capture runs, for a progress line.
#[derive(Debug, Default)]
pub struct LiveStats {
    /// Packets taken from the ring.
    pub received: AtomicU64,
    /// Packets handed to the consumer.
    pub delivered: AtomicU64,
    /// Packets dropped because the consumer's queue was full (held
    /// [`PipelineConfig::queue_bytes`]).
    pub dropped_queue: AtomicU64,
    /// Packets taken from the ring after `count` was reached.
    pub skipped: AtomicU64,
    /// Kernel counters as of the last read (about once a second).
    pub kernel_packets: AtomicU64,
    /// Kernel drops as of the last read.
    pub kernel_drops: AtomicU64,
    /// Ring freezes as of the last read.
    pub kernel_freezes: AtomicU64,
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
    /// Packets dropped by kansoku: the consumer's queue was full.
    pub dropped_queue: u64,
    /// Packets taken from the ring after `count` was reached.
    pub skipped: u64,
}

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
    /// kernel retires late (a little more than the block timeout).
    pub drain: Duration,
    /// When the ring has been idle this long since the last batch, hand the
    /// consumer an empty batch carrying a [`Batch::watermark_ns`]; `None`
    /// for never.
    pub heartbeat: Option<Duration>,
    /// How far the watermark lags the clock: more than the ring's block
    /// timeout, so that packets in a block the kernel has not yet retired
    /// are never behind it.
    pub heartbeat_lag: Duration,
    /// The consumer is told ([`Consumer::idle`](crate::Consumer::idle))
    /// when no batch has come for this long, and at least this often while
    /// they come, so a trace's partial block reaches the file and a kill
    /// loses at most this long of a quiet capture; `None` for never.
    pub idle_flush: Option<Duration>,
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
    // Unbounded as a channel (it allocates a slot block per 31 batches):
    // `Handoff` bounds it, in bytes and in batches, and never waits.
    let (full_tx, full_rx) = mpsc::channel::<Batch>();
    // Emptied batches come back for reuse, so packets are copied into memory
    // that is already there. The consumer never waits on this channel: when
    // it is full, the batch is freed.
    let (empty_tx, empty_rx) = mpsc::sync_channel::<Batch>(SPARE_BATCHES);
    let in_flight = InFlight::default();
    let consumer_failed = AtomicBool::new(false);
    let link_type = ring.link_type();
    std::thread::scope(|s| {
        let consumer = s.spawn(|| {
            let mut source = LaneSource {
                rx: full_rx,
                back: empty_tx,
                in_flight: &in_flight,
                failed: &consumer_failed,
                link_type,
                current: None,
                at: 0,
                taken: 0,
                idle: cfg.idle_flush,
                last_tick: Instant::now(),
                waiting: false,
            };
            // The ring thread decides when to stop; the consumer drains
            // every batch it was handed, unless the run is aborted (what it
            // leaves then counts as dropped, below).
            let report = run(&mut source, consumer, Control::new(abort));
            (report, source.taken)
        });
        let handoff = Handoff {
            tx: full_tx,
            in_flight: &in_flight,
            limit_bytes: cfg.queue_bytes,
        };
        let ring_result = ring_loop(ring, cfg, stop, live, handoff, empty_rx, &consumer_failed);
        let (mut report, taken) = consumer.join().unwrap_or_else(|_| {
            let mut r = Report::default();
            r.failed(Error::input("the consumer thread panicked"));
            (r, 0)
        });
        // A consumer that failed left batches in the queue: they were
        // handed over but never taken, so they count as dropped by kansoku.
        let delivered = live.delivered.load(Ordering::Relaxed);
        if taken < delivered {
            live.delivered.store(taken, Ordering::Relaxed);
            live.dropped_queue
                .fetch_add(delivered - taken, Ordering::Relaxed);
        }
        let kernel = ring.kernel_stats().unwrap_or_default();
        store_kernel(live, &kernel);
        let stats = CaptureStats {
            kernel,
            received: live.received.load(Ordering::Relaxed),
            delivered: live.delivered.load(Ordering::Relaxed),
            dropped_queue: live.dropped_queue.load(Ordering::Relaxed),
            skipped: live.skipped.load(Ordering::Relaxed),
        };
        if let Err(e) = ring_result {
            report.failed(Error::input(format!("the capture ring: {e}")));
        }
        (stats, report)
    })
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
    }
}

/// One step of a lane: a packet, or the end of a batch (the consumer may
/// flush what it prints). A batch end with a watermark (a heartbeat when
/// the ring is idle) says that every packet stamped before that time
/// (nanoseconds since the epoch) has been handed over.
#[derive(Clone, Copy, Debug)]
pub enum LaneItem<'a> {
    Frame(Frame<'a>),
    BatchEnd { watermark: Option<u64> },
}

/// The consumer's end of a lane: the batches the ring thread hands over,
/// packet by packet. A batch counts against the queue's limit until the
/// consumer asks for what comes after it.
pub struct LaneSource<'q> {
    rx: Receiver<Batch>,
    back: SyncSender<Batch>,
    in_flight: &'q InFlight,
    failed: &'q AtomicBool,
    link_type: LinkType,
    current: Option<Batch>,
    /// Byte offset of the next packet in `current`.
    at: usize,
    /// Packets given to the consumer.
    taken: u64,
    /// Tell the consumer when the queue has been empty this long, and at
    /// least this often while batches flow ([`PipelineConfig::idle_flush`]).
    idle: Option<Duration>,
    last_tick: Instant,
    /// The last `None` was such a tick, not the end.
    waiting: bool,
}

impl LaneSource<'_> {
    /// Whether the idle time has passed since the last tick (and starts a
    /// new one if so).
    fn tick_due(&mut self) -> bool {
        match self.idle {
            Some(every) if self.last_tick.elapsed() >= every => {
                self.last_tick = Instant::now();
                true
            }
            _ => false,
        }
    }

    /// Done with the current batch: its bytes are free again, and it goes
    /// back for reuse (freed if the pool is full or the ring thread is gone).
    fn end_batch(&mut self) -> LaneItem<'static> {
        let mut watermark = None;
        if let Some(mut b) = self.current.take() {
            self.in_flight.done(b.bytes());
            watermark = b.watermark_ns();
            b.clear();
            let _ = self.back.try_send(b);
        }
        LaneItem::BatchEnd { watermark }
    }
}

impl Source for LaneSource<'_> {
    type Item<'a>
        = LaneItem<'a>
    where
        Self: 'a;

    fn name(&self) -> &str {
        "the capture ring"
    }

    fn waiting(&self) -> bool {
        self.waiting
    }

    fn next(&mut self) -> crate::Result<Option<LaneItem<'_>>> {
        self.waiting = false;
        loop {
            match &mut self.current {
                Some(b) if self.at < b.bytes() => break,
                Some(_) => return Ok(Some(self.end_batch())),
                None => {
                    if self.tick_due() {
                        self.waiting = true;
                        return Ok(None);
                    }
                    let got = match self.idle {
                        Some(every) => {
                            let left = every.saturating_sub(self.last_tick.elapsed());
                            self.rx.recv_timeout(left)
                        }
                        None => self.rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                    };
                    match got {
                        Ok(b) => {
                            self.current = Some(b);
                            self.at = 0;
                        }
                        // Checked again at the loop's top: the idle time is up.
                        Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => return Ok(None),
                    }
                }
            }
        }
        let Some(b) = self.current.as_ref() else {
            return Ok(None);
        };
        let Some((p, next)) = b.packet_at(self.at) else {
            // A batch the ring thread built is never malformed; should one
            // be, its remaining bytes are passed over.
            self.at = usize::MAX;
            return Err(Error::input("a capture batch is malformed"));
        };
        self.at = next;
        self.taken += 1;
        Ok(Some(LaneItem::Frame(Frame {
            link_type: self.link_type,
            ts_ns: p.ts_ns,
            orig_len: p.orig_len,
            data: p.data,
        })))
    }

    fn close(&mut self, _report: &mut Report) {
        // The drops and counts are the ring thread's; see `run_lane`.
    }
}

impl Drop for LaneSource<'_> {
    /// The consumer stopped (at the end, or because it failed): the ring
    /// thread stops too, and counts what it can no longer hand over as
    /// dropped.
    fn drop(&mut self) {
        if let Some(b) = self.current.take() {
            self.in_flight.done(b.bytes());
        }
        self.failed.store(true, Ordering::Relaxed);
    }
}

fn store_kernel(live: &LiveStats, k: &KernelStats) {
    live.kernel_packets.store(k.packets, Ordering::Relaxed);
    live.kernel_drops.store(k.drops, Ordering::Relaxed);
    live.kernel_freezes.store(k.freeze_count, Ordering::Relaxed);
}

/// What the consumer has not finished with yet: the batches in the queue
/// and the one it is working on. Only the ring thread adds (before it
/// queues a batch) and only the consumer subtracts (after it is done), so a
/// count the ring thread reads can only shrink before its own next add, and
/// a subtraction never comes before its addition (the channel orders them).
#[derive(Debug, Default)]
struct InFlight {
    bytes: AtomicUsize,
    batches: AtomicUsize,
}

impl InFlight {
    /// The consumer is done with a batch of `bytes` bytes.
    fn done(&self, bytes: usize) {
        self.bytes.fetch_sub(bytes, Ordering::Release);
        self.batches.fetch_sub(1, Ordering::Release);
    }
}

/// The ring thread's end of the queue to the consumer.
struct Handoff<'a> {
    tx: Sender<Batch>,
    in_flight: &'a InFlight,
    limit_bytes: usize,
}

/// Why [`Handoff::offer`] did not queue a batch.
enum Refused {
    /// The queue holds its limit; here is the batch back, for reuse.
    Full(Batch),
    /// The consumer has stopped (it failed).
    Closed,
}

impl Handoff<'_> {
    /// Queues `batch` unless that would put more than the byte limit in
    /// flight, or nothing is in flight. Never waits.
    fn offer(&self, batch: Batch) -> Result<(), Refused> {
        let bytes = batch.bytes();
        let batches = self.in_flight.batches.load(Ordering::Acquire);
        let held = self.in_flight.bytes.load(Ordering::Acquire);
        if batches >= MAX_BATCHES_IN_FLIGHT
            || (batches > 0 && held.saturating_add(bytes) > self.limit_bytes)
        {
            return Err(Refused::Full(batch));
        }
        // Added before the send, so the consumer's subtraction, which comes
        // after its receive, can never take the counts below zero.
        self.in_flight.bytes.fetch_add(bytes, Ordering::AcqRel);
        self.in_flight.batches.fetch_add(1, Ordering::AcqRel);
        self.tx.send(batch).map_err(|_| {
            self.in_flight.done(bytes);
            Refused::Closed
        })
    }
}

/// Counts a block's packets (`batch`, and `skipped` past `count`) and offers
/// the batch to the consumer: its packets are delivered, or dropped by
/// kansoku when the queue is full (or the consumer has stopped), so that
/// `received = delivered + dropped_queue + skipped` holds after every call.
/// Returns the batch, emptied, when it was not queued, so the ring thread
/// can reuse it; `Err` when the consumer has stopped.
fn hand_over(
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
            live.dropped_queue.fetch_add(n, Ordering::Relaxed);
            Err(())
        }
    }
}

fn ring_loop<R: Ring>(
    ring: &mut R,
    cfg: &PipelineConfig,
    stop: &AtomicBool,
    live: &LiveStats,
    handoff: Handoff<'_>,
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
    let poll = Duration::from_millis(20);
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
        if stopping_since.is_some_and(|t| t.elapsed() >= cfg.drain) {
            return Ok(());
        }
        if last_stats.elapsed() >= Duration::from_secs(1) {
            store_kernel(live, &ring.kernel_stats()?);
            last_stats = Instant::now();
        }
        let mut batch = spare
            .take()
            .or_else(|| empties.try_recv().ok())
            .unwrap_or_default();
        let mut skipped = 0u64;
        // The block goes back to the kernel before the batch is queued: the
        // kernel can refill it while the batch waits.
        let got = ring.read_block(poll, |p| {
            if cfg.count.is_some_and(|c| taken >= c) {
                skipped += 1;
                return;
            }
            taken += 1;
            batch.push(p);
        })?;
        if !got {
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
        }
        if !batch.is_empty() {
            last_handover = Instant::now();
        }
        match hand_over(&handoff, live, batch, skipped) {
            Ok(back) => spare = back,
            Err(()) => return Ok(()),
        }
    }
}

/// Offers the consumer an empty batch stamped with a watermark. If the queue
/// is full the consumer is busy with packets anyway, and the heartbeat is
/// simply not sent.
fn send_heartbeat(handoff: &Handoff<'_>, mut batch: Batch, lag: Duration) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    batch.clear();
    batch.watermark_ns =
        Some(u64::try_from(now.saturating_sub(lag).as_nanos()).unwrap_or(u64::MAX));
    let _ = handoff.offer(batch);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_round_trip_and_put_vlan_tags_back() {
        let mut b = Batch::default();
        let frame: Vec<u8> = (0u8..60).collect();
        b.push(&RingPacket {
            ts_ns: 7,
            orig_len: 60,
            data: &frame,
            vlan: None,
        });
        b.push(&RingPacket {
            ts_ns: 8,
            orig_len: 100,
            data: &frame,
            vlan: Some((0x8100, 0x2007)),
        });
        let v: Vec<BatchPacket> = b.iter().collect();
        assert_eq!(v.len(), 2);
        assert_eq!(
            v[0],
            BatchPacket {
                ts_ns: 7,
                orig_len: 60,
                data: &frame
            }
        );
        assert_eq!(v[1].ts_ns, 8);
        assert_eq!(v[1].orig_len, 104);
        assert_eq!(v[1].data.len(), 64);
        assert_eq!(&v[1].data[..12], &frame[..12]);
        assert_eq!(&v[1].data[12..16], &[0x81, 0x00, 0x20, 0x07]);
        assert_eq!(&v[1].data[16..], &frame[12..]);
        b.clear();
        assert_eq!(b.iter().count(), 0);
    }

    /// A batch of `packets` frames of `len` bytes, as the ring thread builds it.
    fn batch_of(packets: usize, len: usize) -> Batch {
        let frame = vec![0x5au8; len];
        let mut b = Batch::default();
        for i in 0..packets {
            b.push(&RingPacket {
                ts_ns: i as u64,
                orig_len: len as u32,
                data: &frame,
                vlan: None,
            });
        }
        b
    }

    /// A consumer that stalls at the start of each batch of three packets
    /// (the batches of the test are of 3 packets, or 1) until released.
    struct Stall<'c> {
        took: mpsc::Sender<u32>,
        release: mpsc::Receiver<()>,
        consumed: &'c mut u64,
        left: u32,
    }

    impl Consumer<LaneSource<'_>> for Stall<'_> {
        fn consume(&mut self, item: LaneItem<'_>) -> crate::Result<crate::run::Flow> {
            if let LaneItem::Frame(f) = item {
                if self.left == 0 {
                    // A new batch: 1000-byte packets come three to a batch.
                    let n = if f.data.len() == 1000 { 3 } else { 1 };
                    self.left = n;
                    let _ = self.took.send(n);
                    // A closed release channel releases everything.
                    let _ = self.release.recv();
                }
                self.left -= 1;
                *self.consumed += 1;
            }
            Ok(crate::run::Flow::Continue)
        }
    }

    fn assert_accounting(live: &LiveStats) {
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        assert_eq!(
            n(&live.received),
            n(&live.delivered) + n(&live.dropped_queue) + n(&live.skipped),
            "{live:?}"
        );
    }

    #[test]
    fn the_byte_limit_decides_which_batches_wait_for_a_stalled_writer() {
        // Three 1000-byte packets make a batch of 3 * 1016 = 3048 bytes, so a
        // limit of 10,000 bytes holds three batches, whatever the batch count.
        let per_batch = batch_of(3, 1000).bytes();
        assert_eq!(per_batch, 3048);
        let in_flight = InFlight::default();
        let live = LiveStats::default();
        let failed = AtomicBool::new(false);
        let (tx, rx) = mpsc::channel();
        let (back_tx, back_rx) = mpsc::sync_channel(SPARE_BATCHES);
        // The writer tells when it has taken a batch, then stalls until released.
        let (took_tx, took_rx) = mpsc::channel::<u32>();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let mut consumed = 0u64;
        std::thread::scope(|s| {
            let (in_flight, failed, consumed) = (&in_flight, &failed, &mut consumed);
            let consumer = s.spawn(move || {
                let mut source = LaneSource {
                    rx,
                    back: back_tx,
                    in_flight,
                    failed,
                    link_type: LinkType::Ethernet,
                    current: None,
                    at: 0,
                    taken: 0,
                    idle: None,
                    last_tick: Instant::now(),
                    waiting: false,
                };
                // The writer tells when it starts on a batch (its first
                // packet), then stalls until released.
                let mut stall = Stall {
                    took: took_tx,
                    release: release_rx,
                    consumed,
                    left: 0,
                };
                let never = AtomicBool::new(false);
                run(&mut source, &mut stall, Control::new(&never))
            });
            let handoff = Handoff {
                tx,
                in_flight,
                limit_bytes: 10_000,
            };
            let offer = |b: Batch, skipped: u64| hand_over(&handoff, &live, b, skipped);
            // The writer takes the first batch and stalls: it still counts.
            assert!(matches!(offer(batch_of(3, 1000), 0), Ok(None)));
            assert_eq!(took_rx.recv(), Ok(3));
            // Two more fit (9,144 bytes in flight); the fourth would make 12,192.
            assert!(matches!(offer(batch_of(3, 1000), 0), Ok(None)));
            assert!(matches!(offer(batch_of(3, 1000), 0), Ok(None)));
            assert_eq!(in_flight.bytes.load(Ordering::Relaxed), 3 * per_batch);
            let back = offer(batch_of(3, 1000), 2).expect("consumer running");
            // The dropped batch comes back emptied, for reuse.
            assert!(back.is_some_and(|b| b.is_empty() && b.bytes() == 0));
            // A small batch still fits; then the queue is full to the byte.
            assert!(matches!(offer(batch_of(1, 840), 0), Ok(None)));
            assert_eq!(in_flight.bytes.load(Ordering::Relaxed), 10_000);
            assert!(matches!(offer(batch_of(1, 1), 0), Ok(Some(_))));
            assert_eq!(live.dropped_queue.load(Ordering::Relaxed), 4);
            assert_eq!(live.skipped.load(Ordering::Relaxed), 2);
            assert_accounting(&live);
            // The writer finishes one batch and takes the next: its bytes
            // are free again, and a new batch is queued in their place.
            release_tx.send(()).unwrap();
            assert_eq!(took_rx.recv(), Ok(3));
            assert_eq!(in_flight.bytes.load(Ordering::Relaxed), 10_000 - per_batch);
            assert!(matches!(offer(batch_of(3, 1000), 0), Ok(None)));
            assert!(matches!(offer(batch_of(3, 1000), 0), Ok(Some(_))));
            assert_accounting(&live);
            // Release the writer and close the queue: everything queued is consumed.
            drop(release_tx);
            drop(handoff);
            let report = consumer.join().unwrap();
            assert!(report.output_error.is_none() && report.read_error.is_none());
        });
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        assert_eq!(n(&live.received), 3 * 6 + 1 + 1 + 2);
        assert_eq!(n(&live.delivered), 3 * 4 + 1);
        assert_eq!(n(&live.dropped_queue), 3 * 2 + 1);
        assert_eq!(consumed, n(&live.delivered));
        assert_accounting(&live);
        assert_eq!(in_flight.bytes.load(Ordering::Relaxed), 0);
        assert_eq!(in_flight.batches.load(Ordering::Relaxed), 0);
        // Emptied batches came back for reuse.
        assert!(back_rx.try_iter().all(|b| b.is_empty()));
    }

    #[test]
    fn a_batch_larger_than_the_limit_passes_when_nothing_is_in_flight() {
        let in_flight = InFlight::default();
        let live = LiveStats::default();
        let (tx, rx) = mpsc::channel();
        let handoff = Handoff {
            tx,
            in_flight: &in_flight,
            limit_bytes: 0,
        };
        assert!(matches!(
            hand_over(&handoff, &live, batch_of(5, 100), 0),
            Ok(None)
        ));
        assert!(matches!(
            hand_over(&handoff, &live, batch_of(1, 60), 0),
            Ok(Some(_))
        ));
        // The consumer finishes the first batch: the next one passes again.
        let first = rx.try_recv().unwrap();
        in_flight.done(first.bytes());
        assert!(matches!(
            hand_over(&handoff, &live, batch_of(1, 60), 0),
            Ok(None)
        ));
        assert_eq!(live.delivered.load(Ordering::Relaxed), 6);
        assert_eq!(live.dropped_queue.load(Ordering::Relaxed), 1);
        assert_accounting(&live);
        // A stopped consumer: the packets are counted as dropped, never lost.
        drop(rx);
        in_flight.done(batch_of(1, 60).bytes());
        assert!(hand_over(&handoff, &live, batch_of(2, 60), 0).is_err());
        assert_eq!(live.dropped_queue.load(Ordering::Relaxed), 3);
        assert_accounting(&live);
        assert_eq!(in_flight.batches.load(Ordering::Relaxed), 0);
    }

    /// A ring that is not a ring: scripted blocks of packets, with the
    /// kernel's counters kept as a kernel would (every packet offered is
    /// counted; the ones of a block the "kernel" drops count as drops).
    struct ScriptedRing {
        /// Per block: (packets, dropped by the kernel instead of delivered).
        blocks: std::collections::VecDeque<(u32, bool)>,
        frame: Vec<u8>,
        next_ts: u64,
        kernel: KernelStats,
        stopped: bool,
        /// Time between blocks, as traffic arriving.
        pace: Duration,
    }

    impl ScriptedRing {
        fn new(blocks: &[(u32, bool)]) -> ScriptedRing {
            ScriptedRing {
                blocks: blocks.iter().copied().collect(),
                frame: vec![0x11; 200],
                next_ts: 1,
                kernel: KernelStats::default(),
                stopped: false,
                pace: Duration::ZERO,
            }
        }
    }

    impl Ring for ScriptedRing {
        fn link_type(&self) -> LinkType {
            LinkType::Ethernet
        }

        fn read_block<F: FnMut(&RingPacket<'_>)>(
            &mut self,
            _timeout: Duration,
            mut each: F,
        ) -> io::Result<bool> {
            std::thread::sleep(self.pace);
            let Some((n, dropped)) = self.blocks.pop_front() else {
                std::thread::sleep(Duration::from_millis(1));
                return Ok(false);
            };
            self.kernel.packets += u64::from(n);
            if dropped {
                self.kernel.drops += u64::from(n);
                return Ok(false);
            }
            for _ in 0..n {
                let ts_ns = self.next_ts;
                self.next_ts += 1;
                each(&RingPacket {
                    ts_ns,
                    orig_len: self.frame.len() as u32,
                    data: &self.frame,
                    vlan: None,
                });
            }
            Ok(true)
        }

        fn stop_receiving(&mut self) -> io::Result<()> {
            self.stopped = true;
            Ok(())
        }

        fn kernel_stats(&mut self) -> io::Result<KernelStats> {
            Ok(self.kernel)
        }
    }

    /// The abort flag of a run that is never aborted.
    static NOT_ABORTED: AtomicBool = AtomicBool::new(false);

    /// Counts what it is given, slowly: a writer that falls behind.
    #[derive(Default)]
    struct SlowCounter {
        packets: u64,
        last_ts: u64,
        in_order: bool,
        batch_ends: u64,
    }

    impl Consumer<LaneSource<'_>> for SlowCounter {
        fn consume(&mut self, item: LaneItem<'_>) -> crate::Result<crate::run::Flow> {
            match item {
                LaneItem::Frame(f) => {
                    if self.packets == 0 {
                        self.in_order = true;
                    }
                    self.in_order &= f.ts_ns > self.last_ts;
                    self.last_ts = f.ts_ns;
                    self.packets += 1;
                    std::thread::sleep(Duration::from_micros(200));
                }
                LaneItem::BatchEnd { .. } => self.batch_ends += 1,
            }
            Ok(crate::run::Flow::Continue)
        }
    }

    #[test]
    fn a_lane_accounts_for_every_packet_of_a_source_that_is_not_a_ring() {
        // 60 blocks of 50 packets; every tenth block dropped by the "kernel";
        // a writer queue of 4 blocks' bytes and a slow writer, so kansoku
        // drops too; and `count` stops the lane before the last blocks.
        let blocks: Vec<(u32, bool)> = (0..60).map(|i| (50, i % 10 == 9)).collect();
        let mut ring = ScriptedRing::new(&blocks);
        let per_block = 50 * (200 + RECORD_HEADER);
        let cfg = PipelineConfig {
            count: Some(2000),
            queue_bytes: 4 * per_block,
            drain: Duration::from_millis(30),
            ..PipelineConfig::default()
        };
        let stop = AtomicBool::new(false);
        let live = LiveStats::default();
        let mut consumer = SlowCounter::default();
        let (stats, report) = run_lane(&mut ring, &cfg, &stop, &NOT_ABORTED, &live, &mut consumer);
        assert!(report.output_error.is_none() && report.read_error.is_none());
        assert!(ring.stopped, "the ring is told to stop receiving");
        // What the kernel saw = taken from the ring + dropped by the kernel.
        assert_eq!(stats.kernel.packets, stats.received + stats.kernel.drops);
        // Taken = handed to the consumer + dropped by kansoku + past -c.
        assert_eq!(
            stats.received,
            stats.delivered + stats.dropped_queue + stats.skipped
        );
        assert!(
            stats.kernel.drops > 0 && stats.dropped_queue > 0,
            "{stats:?}"
        );
        assert_eq!(stats.delivered + stats.dropped_queue, 2000, "{stats:?}");
        assert!(stats.skipped > 0, "{stats:?}");
        // The consumer got every packet delivered, each once, in order.
        assert_eq!(consumer.packets, stats.delivered);
        assert!(consumer.in_order);
        assert!(consumer.batch_ends > 0);
    }

    #[test]
    fn a_failing_consumer_stops_the_lane_and_its_packets_count_as_dropped() {
        struct Fails(u64);
        impl Consumer<LaneSource<'_>> for Fails {
            fn consume(&mut self, item: LaneItem<'_>) -> crate::Result<crate::run::Flow> {
                if let LaneItem::Frame(_) = item {
                    self.0 += 1;
                    if self.0 == 120 {
                        let full = io::Error::from_raw_os_error(28);
                        return Err(Error::output("out.pcap", &full));
                    }
                }
                Ok(crate::run::Flow::Continue)
            }
        }
        let blocks: Vec<(u32, bool)> = (0..40).map(|_| (50, false)).collect();
        let mut ring = ScriptedRing::new(&blocks);
        ring.pace = Duration::from_millis(2);
        let cfg = PipelineConfig {
            drain: Duration::from_millis(10),
            ..PipelineConfig::default()
        };
        let stop = AtomicBool::new(false);
        let live = LiveStats::default();
        let mut consumer = Fails(0);
        let (stats, report) = run_lane(&mut ring, &cfg, &stop, &NOT_ABORTED, &live, &mut consumer);
        assert_eq!(report.exit_code(), crate::ExitCode::Output);
        assert_eq!(
            stats.received,
            stats.delivered + stats.dropped_queue + stats.skipped
        );
        assert_eq!(stats.kernel.packets, stats.received + stats.kernel.drops);
        // The lane stopped long before the script's 2000 packets were
        // taken, and what the consumer never took is counted as dropped.
        assert!(stats.received < 2000, "{stats:?}");
        assert_eq!(stats.delivered, consumer.0, "{stats:?}");
    }

    #[test]
    fn an_abort_leaves_the_queue_and_counts_it_as_dropped() {
        // 40 blocks of 50 packets come at once; the writer takes 200 us a
        // packet, so most wait in the (large) queue when the stop comes.
        let blocks: Vec<(u32, bool)> = (0..40).map(|_| (50, false)).collect();
        let mut ring = ScriptedRing::new(&blocks);
        let cfg = PipelineConfig {
            drain: Duration::from_millis(10),
            ..PipelineConfig::default()
        };
        let (stop, abort) = (AtomicBool::new(false), AtomicBool::new(false));
        let live = LiveStats::default();
        let mut consumer = SlowCounter::default();
        let (stats, report) = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(30));
                stop.store(true, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(30));
                abort.store(true, Ordering::Relaxed);
            });
            run_lane(&mut ring, &cfg, &stop, &abort, &live, &mut consumer)
        });
        assert!(report.output_error.is_none(), "{report:?}");
        assert_eq!(stats.kernel.packets, 2000);
        assert_eq!(stats.kernel.packets, stats.received + stats.kernel.drops);
        assert_eq!(
            stats.received,
            stats.delivered + stats.dropped_queue + stats.skipped
        );
        // The consumer stopped early, and what it left is counted, not lost.
        assert_eq!(consumer.packets, stats.delivered, "{stats:?}");
        assert!(
            stats.delivered < 1000 && stats.dropped_queue > 1000,
            "{stats:?}"
        );
    }
}

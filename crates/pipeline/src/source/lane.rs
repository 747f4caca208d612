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
//! **Ring thread** (`--ring-thread`, the design before): a thread of its own
//! takes each block and queues it for the consumer, in place while the
//! consumer holds fewer than [`PipelineConfig::hold_blocks`] blocks; beyond
//! that the oldest block the consumer has not started on is copied and given
//! back (the kernel fills blocks in ring order, so that is the block it
//! needs first), and with `hold_blocks` 0 every block is copied. If the
//! queue is full — the consumer is behind — the block's packets are counted
//! as dropped by kansoku: no loss is ever silent, and the ring keeps
//! draining. Paper 003 found disk I/O to be the first bottleneck of a
//! capture box; both designs keep a stalled disk away from the ring.
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

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use capture::ring::{BlockCursor, KernelStats, OwnedBlock, RingPacket, TpacketRing};
use wire::LinkType;

use crate::error::Error;
use crate::packet::Frame;
use crate::report::Report;
use crate::run::{run, Consumer, Control, Source};

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
        let tag = tag_of(p);
        let extra = if tag.is_some() { 4 } else { 0 };
        let caplen = p.data.len() as u32 + extra;
        self.buf.extend_from_slice(&p.ts_ns.to_le_bytes());
        self.buf
            .extend_from_slice(&p.orig_len.saturating_add(extra).to_le_bytes());
        self.buf.extend_from_slice(&caplen.to_le_bytes());
        put_frame(p, tag, &mut self.buf);
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

/// The VLAN tag the kernel removed from `p`, as it stood on the wire; only
/// put back into a frame long enough to have both MAC addresses.
fn tag_of(p: &RingPacket) -> Option<[u8; 4]> {
    match p.vlan {
        Some((tpid, tci)) if p.data.len() >= 12 => {
            let mut t = [0u8; 4];
            t[..2].copy_from_slice(&tpid.to_be_bytes());
            t[2..].copy_from_slice(&tci.to_be_bytes());
            Some(t)
        }
        _ => None,
    }
}

/// Appends `p`'s frame to `out`, with `tag` (its [`tag_of`]) back after
/// the two MAC addresses.
fn put_frame(p: &RingPacket, tag: Option<[u8; 4]>, out: &mut Vec<u8>) {
    match tag {
        Some(t) => {
            out.extend_from_slice(&p.data[..12]);
            out.extend_from_slice(&t);
            out.extend_from_slice(&p.data[12..]);
        }
        None => out.extend_from_slice(p.data),
    }
}

/// A ring block the consumer reads in place: the packets stay where the
/// kernel wrote them, and the block goes back to the kernel when the
/// consumer is done with it.
struct Held {
    block: OwnedBlock,
    cursor: BlockCursor,
    /// Packets still to hand to the consumer (fewer than the block holds
    /// when `count` cut it).
    left: u32,
}

impl Held {
    /// All of `block`'s packets up to `deliver`, from its start.
    fn new(block: OwnedBlock, deliver: u32) -> Held {
        Held {
            cursor: block.cursor(),
            block,
            left: deliver,
        }
    }

    /// The packets still to hand over.
    fn packets(&self) -> impl Iterator<Item = RingPacket<'_>> {
        let mut cursor = self.cursor;
        (0..self.left).map_while(move |_| self.block.next_packet(&mut cursor))
    }

    /// The bytes its packets would take in a [`Batch`].
    fn copy_bytes(&self) -> usize {
        self.packets()
            .map(|p| RECORD_HEADER + p.data.len() + if tag_of(&p).is_some() { 4 } else { 0 })
            .sum()
    }

    /// Copies the packets into `batch` and gives the block back to the
    /// kernel.
    fn copy_into(self, batch: &mut Batch) {
        for p in self.packets() {
            batch.push(&p);
        }
    }
}

/// What the consumer works on: a block it reads in place, or packets
/// copied out of one (or an empty heartbeat).
enum Chunk {
    InPlace(Held),
    Copied(Batch),
}

/// A block handed to the consumer in place. Until the consumer starts on
/// it, the ring thread may take it back as a copy: the kernel fills blocks
/// in ring order, so the oldest block the consumer holds is the one it
/// will need first, and giving that one back early keeps the kernel going
/// while a slow consumer works through the queue.
struct Slot(Mutex<SlotState>);

enum SlotState {
    Held(Held),
    /// Copied by the ring thread; the block went back to the kernel.
    Copied(Batch),
    /// The consumer has started on it.
    Taken,
}

impl Slot {
    /// The consumer takes what the slot holds.
    fn take(&self) -> Option<Chunk> {
        let mut s = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match std::mem::replace(&mut *s, SlotState::Taken) {
            SlotState::Held(h) => Some(Chunk::InPlace(h)),
            SlotState::Copied(b) => Some(Chunk::Copied(b)),
            SlotState::Taken => None,
        }
    }
}

/// What the ring thread queues for the consumer, in ring order.
enum Handed {
    Slot(Arc<Slot>),
    Copied(Batch),
}

/// Counters updated while the capture runs, for a progress line.
#[derive(Debug, Default)]
pub struct LiveStats {
    /// Packets taken from the ring.
    pub received: AtomicU64,
    /// Packets handed to the consumer.
    pub delivered: AtomicU64,
    /// Packets dropped because the consumer's queue was full (held
    /// [`PipelineConfig::queue_bytes`]), or left in the ring when the run
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
    fn untaken_are_dropped(&self, taken: u64) {
        let delivered = self.delivered.load(Ordering::Relaxed);
        if taken < delivered {
            self.delivered.store(taken, Ordering::Relaxed);
            self.dropped_queue
                .fetch_add(delivered - taken, Ordering::Relaxed);
        }
    }

    /// The final counters, with the kernel's.
    fn totals(&self, kernel: KernelStats) -> CaptureStats {
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
    /// The consumer is told ([`Consumer::idle`](crate::Consumer::idle))
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

/// [`run_lane`] on one thread: the consumer reads the ring's blocks in
/// place itself ([`PipelineConfig::direct`]).
fn run_direct<R, C>(
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
    feed: Feed<'q>,
    in_flight: &'q InFlight,
    failed: &'q AtomicBool,
    link_type: LinkType,
    current: Option<Chunk>,
    /// Byte offset of the next packet in a copied batch.
    at: usize,
    /// A frame of a block read in place whose VLAN tag is put back.
    scratch: Vec<u8>,
    /// Packets given to the consumer.
    taken: u64,
    /// Tell the consumer when the queue has been empty this long, and at
    /// least this often while batches flow ([`PipelineConfig::idle_flush`]).
    idle: Option<Duration>,
    last_tick: Instant,
    /// The last `None` was such a tick, not the end.
    waiting: bool,
}

/// Where a lane's consumer gets its chunks.
enum Feed<'q> {
    /// The ring itself ([`PipelineConfig::direct`]), and when the consumer
    /// last finished a chunk, in nanoseconds since the lane started (the
    /// rescuer watches it).
    Direct {
        ring: DirectFeed<'q>,
        progress: &'q AtomicU64,
    },
    /// The queue the ring thread fills, and the way back for spent batches.
    Queue {
        rx: Receiver<Handed>,
        back: SyncSender<Batch>,
    },
}

impl<'q> LaneSource<'q> {
    fn new(
        feed: Feed<'q>,
        in_flight: &'q InFlight,
        failed: &'q AtomicBool,
        link_type: LinkType,
        idle: Option<Duration>,
    ) -> LaneSource<'q> {
        LaneSource {
            feed,
            in_flight,
            failed,
            link_type,
            current: None,
            at: 0,
            scratch: Vec::new(),
            taken: 0,
            idle,
            last_tick: Instant::now(),
            waiting: false,
        }
    }

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

    /// Done with the current chunk: a block read in place goes back to the
    /// kernel; a batch's bytes are free again, and it goes back for reuse
    /// (freed if the pool is full or the ring thread is gone).
    fn end_chunk(&mut self) -> LaneItem<'static> {
        if let Feed::Direct { ring, progress } = &self.feed {
            progress.store(ring.start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
        let mut watermark = None;
        match self.current.take() {
            Some(Chunk::Copied(mut b)) => {
                self.in_flight.done(b.bytes());
                watermark = b.watermark_ns();
                if let Feed::Queue { back, .. } = &self.feed {
                    b.clear();
                    let _ = back.try_send(b);
                }
            }
            Some(Chunk::InPlace(held)) => {
                drop(held);
                self.in_flight.block_done();
            }
            None => {}
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
            match &self.current {
                Some(Chunk::Copied(b)) if self.at < b.bytes() => break,
                Some(Chunk::InPlace(h)) if h.left > 0 => break,
                Some(_) => return Ok(Some(self.end_chunk())),
                None => {
                    if self.tick_due() {
                        self.waiting = true;
                        return Ok(None);
                    }
                    let rx = match &mut self.feed {
                        Feed::Queue { rx, .. } => rx,
                        Feed::Direct { ring, .. } => {
                            let wait = match self.idle {
                                Some(every) => every.saturating_sub(self.last_tick.elapsed()),
                                None => RING_POLL,
                            };
                            match ring.step(wait, self.in_flight) {
                                Ok(Step::Block(held)) => self.current = Some(Chunk::InPlace(held)),
                                Ok(Step::Copied(b)) => {
                                    self.at = 0;
                                    self.current = Some(Chunk::Copied(b));
                                }
                                Ok(Step::Heartbeat(watermark)) => {
                                    return Ok(Some(LaneItem::BatchEnd {
                                        watermark: Some(watermark),
                                    }))
                                }
                                Ok(Step::Nothing) => {}
                                Ok(Step::End) => return Ok(None),
                                Err(e) => {
                                    return Err(Error::input(format!("the capture ring: {e}")))
                                }
                            }
                            continue;
                        }
                    };
                    let got = match self.idle {
                        Some(every) => {
                            let left = every.saturating_sub(self.last_tick.elapsed());
                            rx.recv_timeout(left)
                        }
                        None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                    };
                    match got {
                        Ok(Handed::Copied(b)) => {
                            self.current = Some(Chunk::Copied(b));
                            self.at = 0;
                        }
                        Ok(Handed::Slot(slot)) => {
                            self.current = slot.take();
                            self.at = 0;
                        }
                        // Checked again at the loop's top: the idle time is up.
                        Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => return Ok(None),
                    }
                }
            }
        }
        let (ts_ns, orig_len, data) = match self.current.as_mut() {
            Some(Chunk::InPlace(h)) => {
                let Some(p) = h.block.next_packet(&mut h.cursor) else {
                    // The ring thread walked the same bytes to count the
                    // packets, so this never happens; should it, the rest
                    // of the block is passed over.
                    h.left = 0;
                    return Err(Error::input("a capture ring block is malformed"));
                };
                h.left -= 1;
                if let Some(tag) = tag_of(&p) {
                    self.scratch.clear();
                    put_frame(&p, Some(tag), &mut self.scratch);
                    (p.ts_ns, p.orig_len.saturating_add(4), &self.scratch[..])
                } else {
                    (p.ts_ns, p.orig_len, p.data)
                }
            }
            Some(Chunk::Copied(b)) => {
                let Some((p, next)) = b.packet_at(self.at) else {
                    // A batch the ring thread built is never malformed;
                    // should one be, its remaining bytes are passed over.
                    self.at = usize::MAX;
                    return Err(Error::input("a capture batch is malformed"));
                };
                self.at = next;
                (p.ts_ns, p.orig_len, p.data)
            }
            None => return Ok(None),
        };
        self.taken += 1;
        Ok(Some(LaneItem::Frame(Frame {
            link_type: self.link_type,
            ts_ns,
            orig_len,
            data,
        })))
    }

    fn close(&mut self, _report: &mut Report) {
        // The drops and counts are the ring thread's; see `run_lane`.
    }
}

impl Drop for LaneSource<'_> {
    /// The consumer stopped (at the end, or because it failed): the ring
    /// thread stops too, and counts what it can no longer hand over as
    /// dropped. The blocks still queued go back to the kernel as the queue
    /// is dropped.
    fn drop(&mut self) {
        match self.current.take() {
            Some(Chunk::Copied(b)) => self.in_flight.done(b.bytes()),
            Some(Chunk::InPlace(_)) => self.in_flight.block_done(),
            None => {}
        }
        self.failed.store(true, Ordering::Relaxed);
    }
}

/// How long the ring thread (or a direct lane) waits for a block at a time.
const RING_POLL: Duration = Duration::from_millis(20);

/// A lane's consumer reading the ring itself ([`PipelineConfig::direct`]):
/// the ring thread's bookkeeping (stopping, the kernel's counters, `count`,
/// heartbeats), done between blocks on the consumer's own thread.
struct DirectFeed<'q> {
    share: &'q Mutex<RingShare<'q>>,
    cfg: &'q PipelineConfig,
    stop: &'q AtomicBool,
    live: &'q LiveStats,
    start: Instant,
    stopping_since: Option<Instant>,
    last_stats: Instant,
    last_handover: Instant,
}

/// The ring of a direct lane, shared by its consumer and its rescuer.
struct RingShare<'q> {
    ring: &'q mut dyn Ring,
    /// Blocks the rescuer copied out of the ring while the consumer was
    /// stalled, in ring order: they come before the ring's next block.
    rescued: VecDeque<Batch>,
    rescued_bytes: usize,
    /// Packets handed over (by either), against `count`.
    taken: u64,
    /// The consumer has ended: the rescuer takes nothing more.
    closed: bool,
}

/// How many of a block's `packets` to hand over when `taken` were before
/// it: all, or those up to `count`.
fn deliverable(packets: u32, count: Option<u64>, taken: u64) -> u32 {
    match count {
        Some(c) => u64::from(packets).min(c.saturating_sub(taken)) as u32,
        None => packets,
    }
}

impl RingShare<'_> {
    /// Counts a block's packets: how many to hand over (fewer once `count`
    /// is reached; the rest are skipped).
    fn admit(&mut self, packets: u32, cfg: &PipelineConfig, live: &LiveStats) -> u32 {
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
enum Step {
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
    fn step(&mut self, wait: Duration, in_flight: &InFlight) -> io::Result<Step> {
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
fn rescue(
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
        if start.elapsed().saturating_sub(since) < STALLED_AFTER {
            continue;
        }
        // The consumer waiting for packets holds the lock: not stalled.
        let Ok(mut share) = share.try_lock() else {
            continue;
        };
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
            share.rescued_bytes += batch.bytes();
            share.rescued.push_back(batch);
        }
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

/// The ring thread's end of the queue to the consumer.
struct Handoff<'a> {
    tx: Sender<Handed>,
    in_flight: &'a InFlight,
    limit_bytes: usize,
    /// Blocks the consumer may hold ([`PipelineConfig::hold_blocks`]).
    hold_blocks: usize,
    /// The blocks handed over in place, oldest first, that the consumer
    /// may not have started on yet.
    handed: VecDeque<Arc<Slot>>,
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
    fn has_room(&self, bytes: usize) -> bool {
        let batches = self.in_flight.batches.load(Ordering::Acquire);
        let held = self.in_flight.bytes.load(Ordering::Acquire);
        batches < MAX_BATCHES_IN_FLIGHT
            && (batches == 0 || held.saturating_add(bytes) <= self.limit_bytes)
    }

    /// Whether the consumer may hold one more block.
    fn may_hold(&self) -> bool {
        self.in_flight.blocks.load(Ordering::Acquire) < self.hold_blocks
    }

    /// Queues a block for the consumer to read in place. `Err` when the
    /// consumer has stopped (the block then goes back to the kernel).
    fn hold(&mut self, held: Held) -> Result<(), ()> {
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
    fn give_back_oldest(&mut self, live: &LiveStats) -> bool {
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
                live.dropped_queue
                    .fetch_add(u64::from(deliver), Ordering::Relaxed);
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

fn ring_loop<R: Ring>(
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
        live.dropped_queue.fetch_add(n, Ordering::Relaxed);
    }
    Ok(())
}

/// Offers the consumer an empty batch stamped with a watermark. If the queue
/// is full the consumer is busy with packets anyway, and the heartbeat is
/// simply not sent.
fn send_heartbeat(handoff: &Handoff<'_>, mut batch: Batch, lag: Duration) {
    batch.clear();
    batch.watermark_ns = Some(heartbeat_watermark(lag));
    let _ = handoff.offer(batch);
}

/// The time `lag` ago, in nanoseconds since the epoch: every packet the
/// kernel stamped before it has been handed over.
fn heartbeat_watermark(lag: Duration) -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(now.saturating_sub(lag).as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use capture::ring::SimRing;

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
                let mut source = LaneSource::new(
                    Feed::Queue { rx, back: back_tx },
                    in_flight,
                    failed,
                    LinkType::Ethernet,
                    None,
                );
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
                hold_blocks: 0,
                handed: VecDeque::new(),
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
            hold_blocks: 0,
            handed: VecDeque::new(),
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
        let Ok(Handed::Copied(first)) = rx.try_recv() else {
            panic!("a batch was queued")
        };
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

    /// A ring that is not the kernel's: scripted blocks of packets, put
    /// into a simulated TPACKET_V3 ring ([`SimRing`]) as the kernel puts
    /// them, with the kernel's counters kept as a kernel would (every packet
    /// offered is counted; the ones of a block the "kernel" drops, or finds
    /// no free block for, count as drops).
    struct ScriptedRing {
        /// Per block: (packets, dropped by the kernel instead of delivered).
        blocks: std::collections::VecDeque<(u32, bool)>,
        sim: SimRing,
        frame: Vec<u8>,
        /// Every how many packets one carries a VLAN tag the kernel removed
        /// (0: none).
        tag_every: u64,
        next_ts: u64,
        scripted_drops: u64,
        stopped: bool,
        /// Time between blocks, as traffic arriving.
        pace: Duration,
        /// Fill every free block at each look, as traffic faster than the
        /// reader.
        eager: bool,
    }

    impl ScriptedRing {
        fn new(blocks: &[(u32, bool)]) -> ScriptedRing {
            // Room for 200 packets of 200 bytes a block.
            ScriptedRing::with_blocks(blocks, 64 << 10)
        }

        fn with_blocks(blocks: &[(u32, bool)], block_size: usize) -> ScriptedRing {
            ScriptedRing {
                blocks: blocks.iter().copied().collect(),
                sim: SimRing::new(block_size, 8),
                frame: vec![0x11; 200],
                tag_every: 0,
                next_ts: 1,
                scripted_drops: 0,
                stopped: false,
                pace: Duration::ZERO,
                eager: false,
            }
        }
    }

    impl ScriptedRing {
        /// Puts the script's next block into the ring as the kernel would;
        /// false when there is none, or no room (the consumer holds the
        /// block the "kernel" fills next: the traffic waits, the script is
        /// a sender that does not lose).
        fn deliver_next(&mut self) -> bool {
            let Some(&(n, dropped)) = self.blocks.front() else {
                return false;
            };
            if dropped {
                self.blocks.pop_front();
                self.scripted_drops += u64::from(n);
                return true;
            }
            if !self.sim.has_room() {
                return false;
            }
            self.blocks.pop_front();
            let packets: Vec<RingPacket> = (0..u64::from(n))
                .map(|i| {
                    let ts_ns = self.next_ts + i;
                    let tagged = self.tag_every > 0 && ts_ns.is_multiple_of(self.tag_every);
                    RingPacket {
                        ts_ns,
                        orig_len: self.frame.len() as u32,
                        data: &self.frame,
                        vlan: tagged.then_some((0x8100, ts_ns as u16 & 0x0fff)),
                    }
                })
                .collect();
            let written = self.sim.deliver(&packets);
            assert_eq!(written, packets.len(), "a scripted block fits");
            self.next_ts += u64::from(n);
            true
        }
    }

    impl Ring for ScriptedRing {
        fn link_type(&self) -> LinkType {
            LinkType::Ethernet
        }

        fn take_block(&mut self, _timeout: Duration) -> io::Result<Option<OwnedBlock>> {
            std::thread::sleep(self.pace);
            if self.blocks.is_empty() {
                std::thread::sleep(Duration::from_millis(1));
            }
            // One block a call, or with `eager` every block there is room
            // for (traffic faster than the reader); none once stopped, as
            // the kernel's filter then passes nothing.
            while !self.stopped && self.deliver_next() && self.eager {}
            Ok(self.sim.acquire_block())
        }

        fn block_count(&self) -> usize {
            self.sim.block_count()
        }

        fn ready_blocks(&self) -> usize {
            self.sim.ready_blocks()
        }

        fn stop_receiving(&mut self) -> io::Result<()> {
            self.stopped = true;
            Ok(())
        }

        fn kernel_stats(&mut self) -> io::Result<KernelStats> {
            let mut k = self.sim.kernel_stats();
            k.packets += self.scripted_drops;
            k.drops += self.scripted_drops;
            Ok(k)
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
        // drops too; and `count` stops the lane in the middle of a block
        // (the rest of it is skipped), before the last blocks.
        let blocks: Vec<(u32, bool)> = (0..60).map(|i| (50, i % 10 == 9)).collect();
        let mut ring = ScriptedRing::new(&blocks);
        let per_block = 50 * (200 + RECORD_HEADER);
        let cfg = PipelineConfig {
            count: Some(1975),
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
        assert_eq!(stats.delivered + stats.dropped_queue, 1975, "{stats:?}");
        assert_eq!(stats.skipped, 25, "{stats:?}");
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

    /// Keeps every frame it is given, optionally slowly.
    #[derive(Default)]
    struct Recorder {
        frames: Vec<(u64, u32, Vec<u8>)>,
        per_packet: Duration,
    }

    impl Consumer<LaneSource<'_>> for Recorder {
        fn consume(&mut self, item: LaneItem<'_>) -> crate::Result<crate::run::Flow> {
            if let LaneItem::Frame(f) = item {
                self.frames.push((f.ts_ns, f.orig_len, f.data.to_vec()));
                std::thread::sleep(self.per_packet);
            }
            Ok(crate::run::Flow::Continue)
        }
    }

    /// Runs a lane over `blocks` (packets each) with every third packet
    /// VLAN-tagged, and returns its counters and what the consumer got.
    fn record(
        blocks: &[u32],
        pace: Duration,
        per_packet: Duration,
        cfg: PipelineConfig,
    ) -> (CaptureStats, Vec<(u64, u32, Vec<u8>)>) {
        let script: Vec<(u32, bool)> = blocks.iter().map(|&n| (n, false)).collect();
        // 16 KiB blocks: 29 or more 200-byte packets fill half of one.
        let block_size = if cfg.direct { 16 << 10 } else { 64 << 10 };
        let mut ring = ScriptedRing::with_blocks(&script, block_size);
        ring.tag_every = 3;
        ring.pace = pace;
        // A burst all at once fills the ring ahead of the reader.
        ring.eager = pace.is_zero();
        let total: u32 = blocks.iter().sum();
        let cfg = PipelineConfig {
            count: Some(cfg.count.unwrap_or(u64::from(total))),
            drain: Duration::from_millis(20),
            ..cfg
        };
        let stop = AtomicBool::new(false);
        let live = LiveStats::default();
        let mut consumer = Recorder {
            per_packet,
            ..Recorder::default()
        };
        let (stats, report) = run_lane(&mut ring, &cfg, &stop, &NOT_ABORTED, &live, &mut consumer);
        assert!(report.output_error.is_none() && report.read_error.is_none());
        assert_eq!(stats.kernel.packets, stats.received + stats.kernel.drops);
        assert_eq!(
            stats.received,
            stats.delivered + stats.dropped_queue + stats.skipped
        );
        assert_eq!(consumer.frames.len() as u64, stats.delivered);
        (stats, consumer.frames)
    }

    /// [`record`] through a ring thread that copies every block, blocks
    /// 2 ms apart: the reference the in-place reads are compared with.
    fn by_copy(blocks: &[u32]) -> (CaptureStats, Vec<(u64, u32, Vec<u8>)>) {
        let copy_cfg = PipelineConfig {
            hold_blocks: Some(0),
            ..PipelineConfig::default()
        };
        record(blocks, Duration::from_millis(2), Duration::ZERO, copy_cfg)
    }

    #[test]
    fn a_keeping_up_consumer_reads_every_block_in_place_and_gets_what_a_copy_gives() {
        let blocks = [50, 7, 50, 1, 33, 50];
        let (held, in_place) = record(
            &blocks,
            Duration::from_millis(2),
            Duration::ZERO,
            PipelineConfig::default(),
        );
        assert_eq!(held.delivered, 191);
        assert_eq!(
            (held.blocks_in_place, held.blocks_copied),
            (6, 0),
            "{held:?}"
        );
        let (copied, copies) = by_copy(&blocks);
        assert_eq!(
            (copied.blocks_in_place, copied.blocks_copied),
            (0, 6),
            "{copied:?}"
        );
        // The same frames either way: tags put back, lengths grown by them.
        assert_eq!(in_place, copies);
        let tagged = &in_place[2];
        assert_eq!(tagged.0 % 3, 0);
        assert_eq!((tagged.1, tagged.2.len()), (204, 204));
        assert_eq!(&tagged.2[12..14], &[0x81, 0x00]);
        assert_eq!(in_place[0].2.len(), 200);
        assert!(in_place.windows(2).all(|w| w[0].0 < w[1].0));
    }

    /// The 24 blocks of 40 packets of the slow-consumer tests all arrived,
    /// in order and whole, some read in place and some copied, with no drop.
    fn assert_every_block_came_some_in_place(stats: &CaptureStats, frames: &[(u64, u32, Vec<u8>)]) {
        assert_eq!(stats.delivered, 960, "{stats:?}");
        assert_eq!(
            (stats.kernel.drops, stats.dropped_queue),
            (0, 0),
            "{stats:?}"
        );
        assert!(
            stats.blocks_copied > 0 && stats.blocks_in_place > 0,
            "{stats:?}"
        );
        assert_eq!(stats.blocks_copied + stats.blocks_in_place, 24);
        assert!(frames.windows(2).all(|w| w[0].0 + 1 == w[1].0));
    }

    #[test]
    fn behind_a_slow_consumer_the_oldest_held_blocks_go_back_as_copies() {
        // 24 blocks at once into a ring of 8; the consumer may hold 4 and
        // takes 100 us a packet. Blocks it has not started on are copied
        // and given back, so the "kernel" never finds the ring held, and
        // every packet arrives, once, in order.
        let blocks = [40u32; 24];
        let (stats, frames) = record(
            &blocks,
            Duration::ZERO,
            Duration::from_micros(100),
            PipelineConfig::default(),
        );
        assert_every_block_came_some_in_place(&stats, &frames);
    }

    #[test]
    fn a_count_ends_inside_a_block_read_in_place() {
        let cfg = PipelineConfig {
            count: Some(75),
            ..PipelineConfig::default()
        };
        let (stats, frames) = record(&[50, 50, 50], Duration::from_millis(1), Duration::ZERO, cfg);
        assert_eq!((stats.delivered, frames.len()), (75, 75), "{stats:?}");
        assert_eq!(stats.skipped, stats.received - 75);
        assert_eq!(frames.last().map(|f| f.0), Some(75));
    }

    #[test]
    fn the_oldest_block_not_yet_started_goes_back_to_the_kernel_as_a_copy() {
        let mut sim = SimRing::new(4096, 3);
        let frame = vec![7u8; 100];
        let pk = |ts_ns| RingPacket {
            ts_ns,
            orig_len: 100,
            data: &frame,
            vlan: None,
        };
        assert_eq!(sim.deliver(&[pk(1), pk(2)]), 2);
        assert_eq!(sim.deliver(&[pk(3)]), 1);
        assert_eq!(sim.deliver(&[pk(4)]), 1);
        let (tx, rx) = mpsc::channel();
        let in_flight = InFlight::default();
        let live = LiveStats::default();
        let mut handoff = Handoff {
            tx,
            in_flight: &in_flight,
            limit_bytes: 1 << 20,
            hold_blocks: 3,
            handed: VecDeque::new(),
        };
        for _ in 0..3 {
            let block = sim.acquire_block().expect("delivered");
            let held = Held {
                cursor: block.cursor(),
                left: block.count(),
                block,
            };
            assert!(handoff.hold(held).is_ok());
        }
        assert!(!sim.has_room(), "the consumer holds the whole ring");
        // The consumer starts on the first block.
        let Ok(Handed::Slot(first)) = rx.try_recv() else {
            panic!("a block in place")
        };
        let Some(Chunk::InPlace(reading)) = first.take() else {
            panic!("still in place")
        };
        // That one stays; the next goes back as a copy.
        assert!(handoff.give_back_oldest(&live));
        assert_eq!(in_flight.blocks.load(Ordering::Relaxed), 2);
        assert_eq!(in_flight.batches.load(Ordering::Relaxed), 1);
        assert_eq!(in_flight.bytes.load(Ordering::Relaxed), RECORD_HEADER + 100);
        assert_eq!(live.blocks_copied.load(Ordering::Relaxed), 1);
        // The kernel fills in ring order: the block being read comes first.
        assert!(!sim.has_room());
        drop(reading);
        in_flight.block_done();
        assert!(sim.has_room());
        assert_eq!(sim.deliver(&[pk(5)]), 1);
        // ... and then the block given back.
        assert!(sim.has_room());
        let Ok(Handed::Slot(second)) = rx.try_recv() else {
            panic!("the second slot")
        };
        let Some(Chunk::Copied(copy)) = second.take() else {
            panic!("copied")
        };
        assert_eq!(copy.iter().map(|p| p.ts_ns).collect::<Vec<_>>(), [3]);
        // With no room in the queue's byte limit the last one stays in place.
        handoff.limit_bytes = 150;
        assert!(!handoff.give_back_oldest(&live));
        assert_eq!(in_flight.blocks.load(Ordering::Relaxed), 1);
        let Ok(Handed::Slot(third)) = rx.try_recv() else {
            panic!("the third slot")
        };
        assert!(matches!(third.take(), Some(Chunk::InPlace(h)) if h.left == 1));
    }

    #[test]
    fn a_direct_lane_reads_in_place_on_one_thread_and_gets_what_a_copy_gives() {
        let blocks = [50, 7, 50, 1, 33, 50];
        let direct = PipelineConfig {
            direct: true,
            ..PipelineConfig::default()
        };
        let (stats, frames) = record(&blocks, Duration::from_millis(2), Duration::ZERO, direct);
        assert_eq!(stats.delivered, 191);
        // The blocks of 7 and 1 packets, under half full, are copied.
        assert_eq!(
            (stats.blocks_in_place, stats.blocks_copied),
            (4, 2),
            "{stats:?}"
        );
        let (_, copies) = by_copy(&blocks);
        assert_eq!(frames, copies);
        // A count that ends inside a block.
        let cut = PipelineConfig {
            direct: true,
            count: Some(60),
            ..PipelineConfig::default()
        };
        let (stats, frames) = record(&blocks, Duration::from_millis(1), Duration::ZERO, cut);
        assert_eq!((stats.delivered, frames.len()), (60, 60), "{stats:?}");
        assert_eq!(frames.last().map(|f| f.0), Some(60));
    }

    #[test]
    fn a_stalled_direct_consumer_is_rescued_by_copies_and_loses_nothing() {
        // 24 blocks of 40 at once into a ring of 8; the consumer takes 250
        // us a packet, 10 ms a block: stalled, by the rescuer's measure,
        // which copies the blocks behind it out of the ring.
        let direct = PipelineConfig {
            direct: true,
            ..PipelineConfig::default()
        };
        let (stats, frames) = record(
            &[40u32; 24],
            Duration::ZERO,
            Duration::from_micros(250),
            direct,
        );
        assert_every_block_came_some_in_place(&stats, &frames);
    }

    /// A lane over a ring filled ahead of a slow consumer (traffic faster
    /// than the writer), stopped after `stop_after` by the stop flag, or
    /// aborted after it with `abort`.
    fn stopped_while_full(direct: bool, abort: bool, stop_after: Duration) -> (CaptureStats, u64) {
        let blocks: Vec<(u32, bool)> = (0..400).map(|_| (50, false)).collect();
        let mut ring = ScriptedRing::with_blocks(&blocks, 16 << 10);
        ring.eager = true;
        // A queue of one block: the rescuer of a direct lane cannot empty
        // the ring for its consumer.
        let cfg = PipelineConfig {
            direct,
            drain: Duration::from_millis(10),
            queue_bytes: 16 << 10,
            ..PipelineConfig::default()
        };
        let (stop, abort_flag) = (AtomicBool::new(false), AtomicBool::new(false));
        let live = LiveStats::default();
        let mut consumer = SlowCounter::default();
        let (stats, report) = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(stop_after);
                stop.store(true, Ordering::Relaxed);
                if abort {
                    abort_flag.store(true, Ordering::Relaxed);
                }
            });
            run_lane(&mut ring, &cfg, &stop, &abort_flag, &live, &mut consumer)
        });
        assert!(report.output_error.is_none(), "{report:?}");
        assert!(ring.stopped);
        assert!(ring.sim.ready_blocks() == 0, "the ring is left empty");
        // Every packet the kernel counted was taken or dropped by it; every
        // packet taken was handed over or dropped by kansoku.
        assert_eq!(
            stats.kernel.packets,
            stats.received + stats.kernel.drops,
            "{stats:?}"
        );
        assert_eq!(
            stats.received,
            stats.delivered + stats.dropped_queue + stats.skipped,
            "{stats:?}"
        );
        assert_eq!(consumer.packets, stats.delivered, "{stats:?}");
        assert!(consumer.in_order);
        (stats, consumer.packets)
    }

    #[test]
    fn a_stop_while_the_ring_is_full_reads_the_ring_empty() {
        // 200 us a packet, 50 packets a block: a full ring of 8 blocks takes
        // the consumer 80 ms, far past the 10 ms drain.
        for direct in [true, false] {
            let (stats, packets) = stopped_while_full(direct, false, Duration::from_millis(40));
            assert!(stats.kernel.packets >= 8 * 50, "{stats:?}");
            if direct {
                // Nothing dropped by kansoku: what the kernel stored was
                // read, by the consumer or the rescuer.
                assert_eq!(stats.dropped_queue, 0, "{stats:?}");
                assert_eq!(packets, stats.kernel.packets - stats.kernel.drops);
            }
        }
    }

    #[test]
    fn an_abort_while_the_ring_is_full_counts_what_it_leaves_as_dropped() {
        for direct in [true, false] {
            let (stats, _) = stopped_while_full(direct, true, Duration::from_millis(40));
            assert!(stats.dropped_queue > 0, "{stats:?}");
        }
    }
}

//! The lane's tests: the batch format, the ring thread's queue and its
//! byte limit, and both designs run over a scripted ring, checked against
//! each other and against the accounting every run must satisfy.

use super::batch::{Held, RECORD_HEADER};
use super::consumer::Chunk;
use super::ring_thread::hand_over;
use super::*;
use capture::ring::{OwnedBlock, RingPacket, SimRing};
use std::sync::atomic::AtomicU64;

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
    // Every copy was a rescue (the blocks are full), the queue held some,
    // and the rescuer saw the consumer hold a block past its 5 ms.
    assert!(stats.blocks_rescued > 0, "{stats:?}");
    assert_eq!(stats.blocks_rescued, stats.blocks_copied, "{stats:?}");
    assert!(stats.queue_high_water > 0, "{stats:?}");
    assert!(
        stats.longest_stall_ns >= 5_000_000,
        "a 10 ms block: {stats:?}"
    );
    assert_eq!(stats.dropped_unread, 0, "{stats:?}");
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
        if direct {
            // The direct lane's queue never drops: its rescuer stops at
            // the limit and the ring fills. What it lost, it lost at the
            // end, and says so.
            assert_eq!(stats.dropped_unread, stats.dropped_queue, "{stats:?}");
        }
    }
}

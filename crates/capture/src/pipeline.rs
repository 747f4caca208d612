//! The capture pipeline: a ring thread that never waits for the disk, and a
//! consumer thread that does the slow work (compression, writing).
//!
//! The ring thread takes each block the kernel hands over, copies its packets
//! into a [`Batch`] (putting back VLAN tags the kernel stripped), gives the
//! block straight back to the kernel, and offers the batch to a bounded
//! queue. If the queue is full — the consumer is behind — the batch's packets
//! are counted as dropped by kansoku and the batch is reused: no loss is ever
//! silent, and the ring keeps draining, so the kernel drops only when even
//! the copy cannot keep up. Paper 003 found disk I/O to be the first
//! bottleneck of a capture box; this structure keeps it away from the ring.
//!
//! Accounting, exact at the end of a run:
//! `kernel.packets = received + kernel.drops` (what the kernel saw) and
//! `received = delivered + dropped_queue + skipped` (skipped: past `-c`).
//!
//! When the ring is idle, the consumer can be sent empty heartbeat batches
//! whose watermark says how far in time the capture is complete, so that
//! interval-based consumers close intervals on time.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::time::{Duration, Instant};

use crate::ring::{KernelStats, RingPacket, TpacketRing};

/// Bytes of a record header inside a batch: ts_ns u64, orig_len u32, caplen u32.
const RECORD_HEADER: usize = 16;

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
        let buf = &self.buf;
        std::iter::from_fn(move || {
            let h = buf.get(at..at + RECORD_HEADER)?;
            let ts_ns = u64::from_le_bytes(h[0..8].try_into().ok()?);
            let orig_len = u32::from_le_bytes(h[8..12].try_into().ok()?);
            let caplen = u32::from_le_bytes(h[12..16].try_into().ok()?) as usize;
            let data = buf.get(at + RECORD_HEADER..at + RECORD_HEADER + caplen)?;
            at += RECORD_HEADER + caplen;
            Some(BatchPacket {
                ts_ns,
                orig_len,
                data,
            })
        })
    }
}

/// Counters updated while the capture runs, for a progress line.
#[derive(Debug, Default)]
pub struct LiveStats {
    /// Packets taken from the ring.
    pub received: AtomicU64,
    /// Packets handed to the consumer.
    pub delivered: AtomicU64,
    /// Packets dropped because the consumer's queue was full.
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
    /// Batches the queue holds (one batch is one ring block's packets).
    pub queue_batches: usize,
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
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            count: None,
            duration: None,
            queue_batches: 32,
            drain: Duration::from_millis(50),
            heartbeat: None,
            heartbeat_lag: Duration::from_millis(200),
        }
    }
}

/// Runs the capture on the calling thread and `consume` on a second one
/// until `stop` is set, `count` packets were taken, `duration` passed, or
/// `consume` fails. Returns the final counters and the consumer's error, if any.
pub fn run<F>(
    ring: &mut TpacketRing,
    cfg: &PipelineConfig,
    stop: &AtomicBool,
    live: &LiveStats,
    consume: F,
) -> (CaptureStats, io::Result<()>)
where
    F: FnMut(&Batch) -> io::Result<()> + Send,
{
    let queue = cfg.queue_batches.max(1);
    let (full_tx, full_rx) = mpsc::sync_channel::<Batch>(queue);
    // Emptied batches come back for reuse, so the steady state allocates nothing.
    let (empty_tx, empty_rx) = mpsc::sync_channel::<Batch>(queue + 2);
    let consumer_failed = AtomicBool::new(false);
    std::thread::scope(|s| {
        let consumer = s.spawn(|| consumer_loop(full_rx, empty_tx, consume, &consumer_failed));
        let ring_result = ring_loop(ring, cfg, stop, live, full_tx, empty_rx, &consumer_failed);
        let consumer_result = consumer
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the writer thread panicked")));
        let kernel = ring.kernel_stats().unwrap_or_default();
        store_kernel(live, &kernel);
        let stats = CaptureStats {
            kernel,
            received: live.received.load(Ordering::Relaxed),
            delivered: live.delivered.load(Ordering::Relaxed),
            dropped_queue: live.dropped_queue.load(Ordering::Relaxed),
            skipped: live.skipped.load(Ordering::Relaxed),
        };
        (stats, ring_result.and(consumer_result))
    })
}

fn store_kernel(live: &LiveStats, k: &KernelStats) {
    live.kernel_packets.store(k.packets, Ordering::Relaxed);
    live.kernel_drops.store(k.drops, Ordering::Relaxed);
    live.kernel_freezes.store(k.freeze_count, Ordering::Relaxed);
}

fn consumer_loop<F>(
    rx: Receiver<Batch>,
    back: SyncSender<Batch>,
    mut consume: F,
    failed: &AtomicBool,
) -> io::Result<()>
where
    F: FnMut(&Batch) -> io::Result<()>,
{
    while let Ok(mut batch) = rx.recv() {
        if let Err(e) = consume(&batch) {
            failed.store(true, Ordering::Relaxed);
            return Err(e);
        }
        batch.clear();
        // The ring thread may be gone (stopping); then the batch is freed.
        let _ = back.try_send(batch);
    }
    Ok(())
}

fn ring_loop(
    ring: &mut TpacketRing,
    cfg: &PipelineConfig,
    stop: &AtomicBool,
    live: &LiveStats,
    tx: SyncSender<Batch>,
    empties: Receiver<Batch>,
    consumer_failed: &AtomicBool,
) -> io::Result<()> {
    let start = Instant::now();
    let mut last_stats = Instant::now();
    let mut taken = 0u64;
    let mut stopping_since: Option<Instant> = None;
    let mut last_handover = Instant::now();
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
        let Some(block) = ring.acquire_block(poll)? else {
            if cfg.heartbeat.is_some_and(|h| last_handover.elapsed() >= h) {
                last_handover = Instant::now();
                send_heartbeat(&tx, &empties, cfg.heartbeat_lag);
            }
            continue;
        };
        let mut batch = empties.try_recv().unwrap_or_default();
        let mut skipped = 0u64;
        for p in block.packets() {
            if cfg.count.is_some_and(|c| taken >= c) {
                skipped += 1;
                continue;
            }
            taken += 1;
            batch.push(&p);
        }
        // Give the block back before the queue: the kernel can refill it
        // while the batch waits.
        drop(block);
        let n = u64::from(batch.len());
        live.received.fetch_add(n + skipped, Ordering::Relaxed);
        live.skipped.fetch_add(skipped, Ordering::Relaxed);
        if n == 0 {
            continue;
        }
        last_handover = Instant::now();
        match tx.try_send(batch) {
            Ok(()) => {
                live.delivered.fetch_add(n, Ordering::Relaxed);
            }
            Err(TrySendError::Full(_)) => {
                live.dropped_queue.fetch_add(n, Ordering::Relaxed);
            }
            Err(TrySendError::Disconnected(_)) => return Ok(()),
        }
    }
}

/// Offers the consumer an empty batch stamped with a watermark. If the queue
/// is full the consumer is busy with packets anyway, and the heartbeat is
/// simply not sent.
fn send_heartbeat(tx: &SyncSender<Batch>, empties: &Receiver<Batch>, lag: Duration) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let mut batch = empties.try_recv().unwrap_or_default();
    batch.watermark_ns =
        Some(u64::try_from(now.saturating_sub(lag).as_nanos()).unwrap_or(u64::MAX));
    let _ = tx.try_send(batch);
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
}

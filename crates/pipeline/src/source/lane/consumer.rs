//! The consumer's end of a lane ([`LaneSource`]): the chunks that the
//! ring thread queues, or that a direct lane takes from the ring itself,
//! handed to the consumer packet by packet, each chunk given back (to the
//! kernel, or to the pool of spare batches) once the consumer is done
//! with it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::time::{Duration, Instant};

use wire::LinkType;

use crate::error::Error;
use crate::packet::Frame;
use crate::report::Report;
use crate::run::Source;

use super::batch::{put_frame, tag_of, Batch, Held};
use super::direct::{DirectFeed, Step};
use super::ring_thread::Handed;
use super::{InFlight, RING_POLL};

/// What the consumer works on: a block it reads in place, or packets
/// copied out of one (or an empty heartbeat).
pub(super) enum Chunk {
    InPlace(Held),
    Copied(Batch),
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
    pub(super) feed: Feed<'q>,
    pub(super) in_flight: &'q InFlight,
    pub(super) failed: &'q AtomicBool,
    pub(super) link_type: LinkType,
    pub(super) current: Option<Chunk>,
    /// Byte offset of the next packet in a copied batch.
    pub(super) at: usize,
    /// A frame of a block read in place whose VLAN tag is put back.
    pub(super) scratch: Vec<u8>,
    /// Packets given to the consumer.
    pub(super) taken: u64,
    /// Tell the consumer when the queue has been empty this long, and at
    /// least this often while batches flow ([`PipelineConfig::idle_flush`](super::PipelineConfig::idle_flush)).
    pub(super) idle: Option<Duration>,
    pub(super) last_tick: Instant,
    /// The last `None` was such a tick, not the end.
    pub(super) waiting: bool,
}

/// Where a lane's consumer gets its chunks.
pub(super) enum Feed<'q> {
    /// The ring itself ([`PipelineConfig::direct`](super::PipelineConfig::direct)), and when the consumer
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
    pub(super) fn new(
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
    pub(super) fn tick_due(&mut self) -> bool {
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
    pub(super) fn end_chunk(&mut self) -> LaneItem<'static> {
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
                        Feed::Direct { ring, progress } => {
                            let wait = match self.idle {
                                Some(every) => every.saturating_sub(self.last_tick.elapsed()),
                                None => RING_POLL,
                            };
                            let step = ring.step(wait, self.in_flight);
                            // The consumer is not stalled: it looked at the
                            // ring just now, whatever it found there.
                            progress
                                .store(ring.start.elapsed().as_nanos() as u64, Ordering::Relaxed);
                            match step {
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

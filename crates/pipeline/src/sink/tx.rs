//! The wire as a sink: frames sent out of an interface at an exact packet
//! rate, bit rate, or the trace's recorded timing (`kansoku generate`).
//!
//! Frames leave through `sendmmsg` in batches of up to 64. The pace is kept
//! against the start time, not between packets, so rounding and scheduling
//! delays do not accumulate: after `t` seconds at `pps`, exactly
//! `floor(t * pps) + 1` packets have been offered. A full device queue is
//! retried, never skipped, so what is reported sent was sent.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use capture::tx::{PacketSender, MAX_BATCH};
use serde::Serialize;
use trace::Record;
use wire::LinkType;

use crate::error::{Error, Result};
use crate::packet::Frame;
use crate::sink::trace::TraceSink;
use crate::sink::PacketSink;

/// How fast to send.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pace {
    TopSpeed,
    Pps(f64),
    /// Bytes per second of frame data.
    Bytes(f64),
    /// Each frame at its recorded time offset from the first.
    Recorded,
}

/// What was sent.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TxReport {
    pub interface: String,
    pub packets: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub pps: f64,
    pub mbps: f64,
    /// Times the device queue was full and a batch was offered again.
    pub queue_full_retries: u64,
}

/// Frames waiting to go: their bytes, and (start, len, recorded ts) each.
#[derive(Default)]
struct Pending {
    arena: Vec<u8>,
    frames: Vec<(usize, usize, u64)>,
    next: usize,
}

impl Pending {
    fn remaining(&self) -> &[(usize, usize, u64)] {
        &self.frames[self.next..]
    }
}

/// Sends the frames it is given, paced; optionally logs each one sent,
/// stamped with its send time, to a trace.
pub struct TxSink<'s> {
    sender: PacketSender,
    interface: String,
    pace: Pace,
    deadline: Option<Duration>,
    stop: &'s AtomicBool,
    log: Option<TraceSink>,
    start: Instant,
    first_ts: Option<u64>,
    pending: Pending,
    sent: u64,
    bytes: u64,
    retries: u64,
    /// The deadline passed or a stop was asked for: nothing more is sent.
    done: bool,
}

impl<'s> TxSink<'s> {
    /// Opens `interface` for sending (root). The clock starts now.
    pub fn open(
        interface: &str,
        pace: Pace,
        deadline: Option<Duration>,
        stop: &'s AtomicBool,
        log: Option<TraceSink>,
    ) -> Result<TxSink<'s>> {
        let sender =
            PacketSender::open(interface).map_err(|e| Error::usage(format!("generate: {e}")))?;
        Ok(TxSink {
            sender,
            interface: interface.to_string(),
            pace,
            deadline,
            stop,
            log,
            start: Instant::now(),
            first_ts: None,
            pending: Pending::default(),
            sent: 0,
            bytes: 0,
            retries: 0,
            done: false,
        })
    }

    fn push(&mut self, f: &Frame<'_>) -> Result<()> {
        if self.done {
            return Ok(());
        }
        if f.link_type != LinkType::Ethernet {
            return Err(Error::input(format!(
                "link type {} cannot be sent on an Ethernet interface",
                f.link_type
            )));
        }
        let at = self.pending.arena.len();
        self.pending.arena.extend_from_slice(f.data);
        self.pending.frames.push((at, f.data.len(), f.ts_ns));
        if self.pending.frames.len() >= MAX_BATCH {
            self.send_pending()?;
        }
        Ok(())
    }

    /// Sends every pending frame as its time comes, unless stopped first.
    fn send_pending(&mut self) -> Result<()> {
        while !self.pending.remaining().is_empty() {
            if self.stop.load(Ordering::Relaxed)
                || self.deadline.is_some_and(|d| self.start.elapsed() >= d)
            {
                self.done = true;
                break;
            }
            let now = self.start.elapsed();
            let first = *self.first_ts.get_or_insert(self.pending.remaining()[0].2);
            let p = &self.pending;
            let due = due_now(self.pace, now, self.sent, self.bytes, first, p.remaining());
            if due == 0 {
                wait_for_next(
                    self.pace,
                    self.start,
                    self.sent,
                    self.bytes,
                    first,
                    p.remaining(),
                );
                continue;
            }
            let frames: Vec<&[u8]> = p.remaining()[..due]
                .iter()
                .map(|&(at, len, _)| &p.arena[at..at + len])
                .collect();
            let n = self
                .sender
                .send_batch(&frames)
                .map_err(|e| Error::output(format!("generate on {}", self.interface), &e))?;
            if n == 0 {
                self.retries += 1;
                std::thread::sleep(Duration::from_micros(50));
                continue;
            }
            let send_ns = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            for f in &frames[..n] {
                self.bytes += f.len() as u64;
                if let Some(log) = &mut self.log {
                    log.frame(&Frame {
                        link_type: LinkType::Ethernet,
                        ts_ns: send_ns,
                        orig_len: f.len() as u32,
                        data: f,
                    })?;
                }
            }
            self.sent += n as u64;
            self.pending.next += n;
        }
        self.pending.arena.clear();
        self.pending.frames.clear();
        self.pending.next = 0;
        Ok(())
    }

    /// Sends what is pending, closes the log, and says what was sent.
    pub fn finish(mut self) -> Result<TxReport> {
        let sent = self.send_pending();
        let seconds = self.start.elapsed().as_secs_f64();
        let closed = self.log.take().map(TraceSink::finish).transpose();
        sent?;
        closed?;
        Ok(TxReport {
            interface: self.interface.clone(),
            packets: self.sent,
            bytes: self.bytes,
            seconds,
            pps: self.sent as f64 / seconds.max(1e-9),
            mbps: self.bytes as f64 * 8.0 / 1e6 / seconds.max(1e-9),
            queue_full_retries: self.retries,
        })
    }
}

impl PacketSink for TxSink<'_> {
    fn record(&mut self, rec: &Record<'_>) -> Result<()> {
        match rec {
            Record::Packet(p) => self.push(&Frame::of(p)),
            _ => Ok(()),
        }
    }

    fn frame(&mut self, f: &Frame<'_>) -> Result<()> {
        self.push(f)
    }

    fn done(&self) -> bool {
        self.done
    }
}

/// How many of the pending frames may go at `now` (at most one batch).
fn due_now(
    pace: Pace,
    now: Duration,
    sent: u64,
    bytes: u64,
    first_ts: u64,
    pending: &[(usize, usize, u64)],
) -> usize {
    let t = now.as_secs_f64();
    match pace {
        Pace::TopSpeed => pending.len(),
        Pace::Pps(pps) => {
            let allowed = (t * pps).floor() as u64 + 1;
            allowed.saturating_sub(sent).min(pending.len() as u64) as usize
        }
        Pace::Bytes(bps) => {
            // A frame may start once the bytes before it fit in the elapsed time.
            let budget = t * bps;
            let mut n = 0;
            let mut b = bytes as f64;
            for &(_, len, _) in pending {
                if b > budget {
                    break;
                }
                b += len as f64;
                n += 1;
            }
            n
        }
        Pace::Recorded => {
            let elapsed_ns = now.as_nanos() as u64;
            pending
                .iter()
                .take_while(|&&(_, _, ts)| ts.saturating_sub(first_ts) <= elapsed_ns)
                .count()
        }
    }
}

/// Sleeps until the next frame is due: most of the wait asleep, the last
/// stretch yielding, so the rate holds at tens of thousands of packets a second.
fn wait_for_next(
    pace: Pace,
    start: Instant,
    sent: u64,
    bytes: u64,
    first_ts: u64,
    pending: &[(usize, usize, u64)],
) {
    let next_at = match pace {
        Pace::TopSpeed => return,
        Pace::Pps(pps) => Duration::from_secs_f64(sent as f64 / pps),
        Pace::Bytes(bps) => Duration::from_secs_f64(bytes as f64 / bps),
        Pace::Recorded => {
            Duration::from_nanos(pending.first().map_or(0, |f| f.2.saturating_sub(first_ts)))
        }
    };
    let now = start.elapsed();
    if next_at > now {
        let wait = next_at - now;
        if wait > Duration::from_micros(200) {
            std::thread::sleep(wait - Duration::from_micros(100));
        } else {
            std::thread::yield_now();
        }
    }
}

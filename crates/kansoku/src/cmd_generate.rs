//! `kansoku generate`: send synthetic or replayed traffic out of an interface
//! at an exact packet rate, bit rate, or the trace's recorded timing.
//!
//! Frames leave through `sendmmsg` in batches of up to 64. The pace is kept
//! against the start time, not between packets, so rounding and scheduling
//! delays do not accumulate: after `t` seconds at `pps`, exactly
//! `floor(t * pps) + 1` packets have been offered. A full device queue is
//! retried, never skipped, so what is reported sent was sent.

use std::io::{self, Write};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use capture::tx::{PacketSender, MAX_BATCH};
use serde::Serialize;
use synth::{FrameSize, Synth};
use trace::{LinkType, Record, TraceReader};

use crate::cli::GenerateArgs;
use crate::cmd_synth::pattern_config;
use crate::error::{display_path, CliError, CliResult};
use crate::signals;
use crate::sink::Sink;

/// Bytes of the Ethernet frame check sequence, which the device adds.
const FCS_LEN: usize = 4;

/// Where frames come from.
enum Source {
    Synth(Box<Synth>),
    Replay {
        reader: Box<TraceReader>,
        name: String,
    },
}

impl Source {
    /// Appends the next frame to `arena`; returns its recorded timestamp,
    /// or None at the end.
    fn next_into(&mut self, arena: &mut Vec<u8>) -> CliResult<Option<u64>> {
        match self {
            Source::Synth(s) => Ok(s.next_frame().map(|(ts, f)| {
                arena.extend_from_slice(f);
                ts
            })),
            Source::Replay { reader, name } => loop {
                match reader
                    .next_record()
                    .map_err(|e| CliError::input(format!("{name}: {e}")))?
                {
                    None => return Ok(None),
                    Some(Record::Packet(p)) => {
                        if p.link_type != LinkType::Ethernet {
                            return Err(CliError::input(format!(
                                "{name}: link type {} cannot be sent on an Ethernet interface",
                                p.link_type
                            )));
                        }
                        arena.extend_from_slice(p.data);
                        return Ok(Some(p.ts_nanos()));
                    }
                    Some(_) => {}
                }
            },
        }
    }
}

/// How fast to send.
#[derive(Clone, Copy, Debug)]
enum Pace {
    TopSpeed,
    Pps(f64),
    /// Bytes per second of frame data.
    Bytes(f64),
    Recorded,
}

#[derive(Serialize)]
struct Report<'a> {
    interface: &'a str,
    packets: u64,
    bytes: u64,
    seconds: f64,
    pps: f64,
    mbps: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    target_pps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    target_mbps: Option<f64>,
    /// Times the device queue was full and a batch was offered again.
    queue_full_retries: u64,
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

pub fn run(args: &GenerateArgs) -> CliResult<i32> {
    let pace = match (args.pps, args.mbps, args.recorded_timing) {
        (_, _, true) => Pace::Recorded,
        (Some(p), _, _) if p > 0.0 && p.is_finite() => Pace::Pps(p),
        (_, Some(m), _) if m > 0.0 && m.is_finite() => Pace::Bytes(m * 1e6 / 8.0),
        (None, None, false) => Pace::TopSpeed,
        _ => return Err(CliError::input("--pps and --mbps must be positive numbers")),
    };
    let mut source = match &args.replay {
        Some(path) => Source::Replay {
            reader: Box::new(TraceReader::open(path).map_err(|e| CliError::file(path, e))?),
            name: display_path(path),
        },
        None => {
            if args.count.is_none() && args.duration.is_none() {
                return Err(CliError::input(
                    "generate needs -c COUNT or --duration SECONDS (or -r TRACE)",
                ));
            }
            let count = args.count.unwrap_or(u64::MAX);
            let mut cfg = pattern_config(&args.pattern, count, 0, 1)?;
            // On a link, frame sizes count the 4-byte FCS (RFC 2544's 64 to
            // 1518 bytes); the frames handed to the device are 4 bytes shorter.
            cfg.size = match cfg.size {
                FrameSize::Fixed(n) => FrameSize::Fixed(n - FCS_LEN),
                FrameSize::Uniform(a, b) => FrameSize::Uniform(a - FCS_LEN, b - FCS_LEN),
            };
            let synth = Synth::new(cfg).map_err(|e| CliError::input(e.to_string()))?;
            Source::Synth(Box::new(synth))
        }
    };
    let mut log = args
        .out
        .write
        .as_deref()
        .map(|p| Sink::new(&args.out, p))
        .transpose()?;
    let sender = PacketSender::open(&args.interface)
        .map_err(|e| CliError::input(format!("generate: {e}")))?;
    let limit = args.count.unwrap_or(u64::MAX);
    let deadline = args.duration.map(Duration::from_secs_f64);

    let start = Instant::now();
    let mut first_ts: Option<u64> = None;
    let (mut sent, mut bytes, mut retries) = (0u64, 0u64, 0u64);
    let mut pending = Pending::default();
    let mut exhausted = false;
    loop {
        if signals::stop_requested()
            || sent >= limit
            || deadline.is_some_and(|d| start.elapsed() >= d)
        {
            break;
        }
        if pending.remaining().is_empty() {
            if exhausted {
                break;
            }
            pending.arena.clear();
            pending.frames.clear();
            pending.next = 0;
            let want = (limit - sent).min(MAX_BATCH as u64);
            for _ in 0..want {
                let at = pending.arena.len();
                match source.next_into(&mut pending.arena)? {
                    Some(ts) => pending.frames.push((at, pending.arena.len() - at, ts)),
                    None => {
                        exhausted = true;
                        break;
                    }
                }
            }
            continue;
        }
        let now = start.elapsed();
        let first = *first_ts.get_or_insert(pending.remaining()[0].2);
        let due = due_now(pace, now, sent, bytes, first, pending.remaining());
        if due == 0 {
            wait_for_next(pace, start, sent, bytes, first, pending.remaining());
            continue;
        }
        let frames: Vec<&[u8]> = pending.remaining()[..due]
            .iter()
            .map(|&(at, len, _)| &pending.arena[at..at + len])
            .collect();
        let n = sender
            .send_batch(&frames)
            .map_err(|e| CliError::input(format!("generate on {}: {e}", args.interface)))?;
        if n == 0 {
            retries += 1;
            std::thread::sleep(Duration::from_micros(50));
            continue;
        }
        let send_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        for f in &frames[..n] {
            bytes += f.len() as u64;
            if let Some(log) = &mut log {
                log.write_packet(LinkType::Ethernet, send_ns, f.len() as u32, f)?;
            }
        }
        sent += n as u64;
        pending.next += n;
    }
    let seconds = start.elapsed().as_secs_f64();
    if let Some(log) = log {
        log.finish()?;
    }
    let r = Report {
        interface: &args.interface,
        packets: sent,
        bytes,
        seconds,
        pps: sent as f64 / seconds.max(1e-9),
        mbps: bytes as f64 * 8.0 / 1e6 / seconds.max(1e-9),
        target_pps: args.pps,
        target_mbps: args.mbps,
        queue_full_retries: retries,
    };
    if args.json {
        let mut o = io::stdout().lock();
        serde_json::to_writer(&mut o, &r).map_err(io::Error::from)?;
        writeln!(o)?;
    } else {
        eprintln!(
            "kansoku: sent {} packets ({} bytes) on {} in {:.3} s: {:.0} packets/s, {:.1} Mbit/s; device queue full {} times",
            r.packets, r.bytes, r.interface, r.seconds, r.pps, r.mbps, r.queue_full_retries
        );
    }
    Ok(0)
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

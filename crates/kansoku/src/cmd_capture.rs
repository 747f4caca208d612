//! `kansoku capture`: live capture from a TPACKET_V3 ring into the trace
//! store (or packet lines), with drop accounting that never hides a loss.

use std::io::{self, BufWriter, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use capture::pipeline;
use capture::privileges::drop_privileges;
use capture::{CaptureStats, LiveStats, PipelineConfig, RingConfig, TpacketRing};
use serde::Serialize;
use trace::{Packet, PacketKind, TsResolution};

use crate::cli::{CaptureArgs, TimeFormat};
use crate::error::{CliError, CliResult, EXIT_PROBLEMS};
use crate::sink::{Sink, SinkSummary};
use crate::{output, signals};

#[derive(Serialize)]
struct Report<'a> {
    interface: &'a str,
    /// Packets the kernel passed to the socket (PACKET_STATISTICS tp_packets).
    kernel_packets: u64,
    /// Dropped by the kernel: the ring was full (tp_drops).
    kernel_drops: u64,
    /// Times the ring froze (tp_freeze_q_cnt).
    kernel_freezes: u64,
    /// Taken from the ring.
    received: u64,
    /// Dropped by kansoku: the writer's queue was full.
    dropped_kansoku: u64,
    /// Taken from the ring after -c was reached, not written.
    skipped: u64,
    /// Written to the trace (or printed).
    written: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<&'a SinkSummary>,
}

pub fn run(args: &CaptureArgs) -> CliResult<i32> {
    let ring_cfg = RingConfig {
        interface: args.interface.clone(),
        snaplen: args.snaplen,
        ring_bytes: args.buffer_mib.saturating_mul(1 << 20),
        block_size: args.ring_block_kib.saturating_mul(1024),
        ..RingConfig::default()
    };
    let mut sink = args
        .out
        .write
        .as_deref()
        .map(|p| Sink::new(&args.out, p))
        .transpose()?;
    let mut ring =
        TpacketRing::open(&ring_cfg).map_err(|e| CliError::input(format!("capture: {e}")))?;
    if let Some(user) = &args.user {
        drop_privileges(user).map_err(|e| CliError::input(e.to_string()))?;
    }
    let link_type = ring.link_type();
    // As tcpdump: from here on, every packet on the interface is captured.
    eprintln!(
        "kansoku: listening on {}, link-type {link_type}, snapshot length {} bytes, ring {} MiB",
        args.interface,
        args.snaplen,
        ring.ring_bytes() >> 20
    );
    let cfg = PipelineConfig {
        count: args.count,
        duration: args.duration.map(Duration::from_secs_f64),
        queue_batches: args.queue.max(1),
        ..PipelineConfig::default()
    };
    let live = LiveStats::default();
    let written = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let time_format = TimeFormat::Epoch;
    let (stats, result) = std::thread::scope(|s| {
        if io::stderr().is_terminal() {
            s.spawn(|| progress_lines(&live, &written, &done));
        }
        // `Stdout`, not its lock: the writer thread needs a `Send` handle.
        let mut out = BufWriter::with_capacity(64 * 1024, io::stdout());
        let r = pipeline::run(&mut ring, &cfg, signals::stop_flag(), &live, |batch| {
            for p in batch.iter() {
                match &mut sink {
                    Some(sink) => sink
                        .write_packet(link_type, p.ts_ns, p.orig_len, p.data)
                        .map_err(to_io)?,
                    None => {
                        let pkt = Packet {
                            interface: 0,
                            link_type,
                            ts: p.ts_ns,
                            tsresol: TsResolution::NANO,
                            orig_len: p.orig_len,
                            data: p.data,
                            options: &[],
                            kind: PacketKind::Pcap,
                        };
                        output::write_text(&mut out, &pkt, time_format)?;
                    }
                }
            }
            out.flush()?;
            written.fetch_add(u64::from(batch.len()), Ordering::Relaxed);
            Ok(())
        });
        done.store(true, Ordering::Relaxed);
        r
    });
    // Close the file whatever happened: nothing written is lost.
    let summary = sink.map(Sink::finish).transpose()?;
    if let Err(e) = result {
        if e.kind() == io::ErrorKind::BrokenPipe {
            return Err(CliError::BrokenPipe);
        }
        return Err(CliError::input(format!(
            "capture on {}: {e}",
            args.interface
        )));
    }
    report(
        args,
        &stats,
        written.load(Ordering::Relaxed),
        summary.as_ref(),
    )?;
    Ok(if stats.kernel.drops > 0 || stats.dropped_queue > 0 {
        EXIT_PROBLEMS
    } else {
        0
    })
}

fn to_io(e: CliError) -> io::Error {
    match e {
        CliError::BrokenPipe => io::Error::from(io::ErrorKind::BrokenPipe),
        CliError::Message { message, .. } => io::Error::other(message),
    }
}

/// Once a second on a terminal: what the capture has seen so far.
fn progress_lines(live: &LiveStats, written: &AtomicU64, done: &AtomicBool) {
    let mut ticks = 0u32;
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        ticks += 1;
        if !ticks.is_multiple_of(10) {
            continue;
        }
        eprint!(
            "\r{} received, {} dropped by the kernel, {} dropped by kansoku, {} written   ",
            live.received.load(Ordering::Relaxed),
            live.kernel_drops.load(Ordering::Relaxed),
            live.dropped_queue.load(Ordering::Relaxed),
            written.load(Ordering::Relaxed)
        );
    }
    eprint!("\r\x1b[K");
}

fn report(
    args: &CaptureArgs,
    s: &CaptureStats,
    written: u64,
    summary: Option<&SinkSummary>,
) -> CliResult<()> {
    let r = Report {
        interface: &args.interface,
        kernel_packets: s.kernel.packets,
        kernel_drops: s.kernel.drops,
        kernel_freezes: s.kernel.freeze_count,
        received: s.received,
        dropped_kansoku: s.dropped_queue,
        skipped: s.skipped,
        written: summary.map_or(written, |x| x.packets),
        output: summary,
    };
    if args.json {
        // Packet lines own standard output when there is no -w.
        let text = serde_json::to_string(&r).map_err(io::Error::from)?;
        if args
            .out
            .write
            .as_deref()
            .is_some_and(|p| p.as_os_str() != "-")
        {
            let mut o = io::stdout().lock();
            writeln!(o, "{text}")?;
        } else {
            eprintln!("{text}");
        }
        return Ok(());
    }
    eprintln!(
        "kansoku: {} packets received by the kernel on {}, {} dropped by the kernel ({} ring freezes), \
         {} taken from the ring, {} dropped by kansoku (writer queue full), {} written",
        r.kernel_packets, r.interface, r.kernel_drops, r.kernel_freezes, r.received, r.dropped_kansoku, r.written
    );
    if let Some(summary) = summary {
        eprintln!("kansoku: {}", summary.describe());
    }
    Ok(())
}

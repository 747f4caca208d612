//! `kansoku bench capture-worker` (hidden): the capture side of
//! `bench capture` for kansoku's configurations. It opens a capture ring
//! on the interface, says `listening on` on standard error, and runs a
//! pipeline lane ([`pipeline::run_lanes`]) whose sink writes a pcap file,
//! until SIGINT; then it prints the counters `bench capture` reads
//! (`written`, `kernel_drops`, `dropped_kansoku`).
//!
//! The two experiment settings live here, not on `kansoku capture`:
//! `--per-packet` ends a block after every packet
//! ([`TraceWriter::flush_block`]), so each packet is compressed and written
//! alone, as libpcap's `pcap_dump` and Shimizu et al. 2006's per-packet compression;
//! `--disk-mbps` puts the file behind a [`SlowDisk`]; `--xdp` receives
//! through AF_XDP ([`capture::xdp`]) instead of the ring, into the same
//! writer.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use capture::xdp::{XdpConfig, XdpSocket};
use capture::{RingConfig, TpacketRing};
use pipeline::error::write_error;
use pipeline::{
    display_path, run_lanes, CaptureReport, Chain, CompressThreads, Error, Frame, Lane, PacketSink,
    PipelineConfig, Report, Result, Stages,
};
use trace::write::{CompressWhen, TraceWriter, WriteStats, WriterConfig, DEFAULT_SNAPLEN};
use trace::{LinkType, Record};

use crate::args::CaptureWorkerArgs;
use crate::harness::slow_disk::SlowDisk;

/// A trace file as a pipeline sink, optionally one block per packet.
pub struct DiskSink<W: Write> {
    writer: TraceWriter<W>,
    per_packet: bool,
    path: PathBuf,
}

impl<W: Write> DiskSink<W> {
    /// A writer with `cfg` to `sink`, the file at `path` (named in errors);
    /// with `per_packet`, every packet is a block of its own.
    pub fn new(sink: W, path: &Path, cfg: WriterConfig, per_packet: bool) -> Result<DiskSink<W>> {
        Ok(DiskSink {
            writer: TraceWriter::new(sink, cfg).map_err(|e| write_error(path, e))?,
            per_packet,
            path: path.to_path_buf(),
        })
    }

    /// Ends the block after a packet, in per-packet mode.
    fn packet_written(&mut self) -> Result<()> {
        if self.per_packet {
            self.writer
                .flush_block()
                .map_err(|e| write_error(&self.path, e))?;
        }
        Ok(())
    }

    /// Closes the file (the end of the compressed stream) and says what
    /// was written.
    pub fn finish(self) -> Result<WriteStats> {
        self.writer.finish().map_err(|e| write_error(&self.path, e))
    }
}

impl<W: Write> PacketSink for DiskSink<W> {
    fn record(&mut self, rec: &Record<'_>) -> Result<()> {
        self.writer
            .write_record(rec)
            .map_err(|e| write_error(&self.path, e))?;
        if matches!(rec, Record::Packet(_)) {
            self.packet_written()?;
        }
        Ok(())
    }

    fn frame(&mut self, f: &Frame<'_>) -> Result<()> {
        self.writer
            .write_packet(f.link_type, f.ts_ns, f.orig_len, f.data)
            .map_err(|e| write_error(&self.path, e))?;
        self.packet_written()
    }

    /// A batch ended, its ring block given back: gathered chunks go out.
    fn flush(&mut self) -> Result<()> {
        self.writer
            .release()
            .map_err(|e| write_error(&self.path, e))
    }
}

/// The writer's settings for codec `a.compress`: a pcap file without a
/// seek index; block size, compression threads and when to compress (only
/// while it pays) as `kansoku capture` picks them.
fn writer_config(a: &CaptureWorkerArgs) -> WriterConfig {
    let codec = a.compress;
    WriterConfig {
        codec,
        index: false,
        block_size: trace::write::default_block_size(codec),
        threads: CompressThreads::Auto.resolve(codec),
        compress_when: CompressWhen::Pays,
        write_on_release: true,
        ..WriterConfig::default()
    }
}

/// `kansoku bench capture-worker`: captures until `stop`, then prints the
/// counters to `out`. Drops make the report's exit code 1.
pub fn run(a: &CaptureWorkerArgs, stop: &AtomicBool, out: &mut dyn Write) -> Result<Report> {
    if let Some(m) = a.disk_mbps {
        crate::harness::slow_disk::check_mbps(m)?;
    }
    let cfg = writer_config(a);
    cfg.validate()
        .map_err(|e| Error::usage(format!("{}: {e}", display_path(&a.write))))?;
    let file = File::create(&a.write).map_err(|e| Error::output(display_path(&a.write), &e))?;
    match a.disk_mbps {
        Some(m) => capture_into(a, SlowDisk::from_mbps(file, m)?, cfg, stop, out),
        None => capture_into(a, file, cfg, stop, out),
    }
}

fn capture_into<W: Write + Send>(
    a: &CaptureWorkerArgs,
    file: W,
    cfg: WriterConfig,
    stop: &AtomicBool,
    out: &mut dyn Write,
) -> Result<Report> {
    let sink = DiskSink::new(file, &a.write, cfg, a.per_packet)?;
    if let Some(mode) = a.xdp {
        return capture_xdp(a, sink, mode.mode(), stop, out);
    }
    let ring_bytes = a.buffer_mib.saturating_mul(1 << 20);
    let ring_cfg = RingConfig {
        interface: a.interface.clone(),
        snaplen: DEFAULT_SNAPLEN,
        ring_bytes,
        block_size: a
            .ring_block_kib
            .map_or_else(|| RingConfig::auto_block_size(ring_bytes), |k| k << 10),
        filter: a
            .expression
            .as_deref()
            .map(|e| bpf::libpcap::compile_live(e, &a.interface, DEFAULT_SNAPLEN))
            .transpose()
            .map_err(|e| Error::usage(format!("--expression on {}: {e}", a.interface)))?,
        ..RingConfig::default()
    };
    let ring = TpacketRing::open(&ring_cfg)
        .map_err(|e| Error::input(format!("capture on {}: {e}", a.interface)))?;
    // As tcpdump: from here on, every packet on the interface is captured.
    eprintln!(
        "kansoku: listening on {}, link-type {}, snapshot length {} bytes, ring {} MiB",
        a.interface,
        ring.link_type(),
        ring_cfg.snaplen,
        ring.ring_bytes() >> 20
    );
    let cfg = PipelineConfig {
        count: a.count,
        queue_bytes: a.queue_mib.saturating_mul(1 << 20),
        hold_blocks: a.hold_blocks,
        direct: !a.ring_thread,
        ..PipelineConfig::default()
    };
    let mut lanes = vec![Lane {
        ring,
        chain: Chain::new(Stages::default(), Some(sink)),
    }];
    let (stats, mut report) = run_lanes(
        &mut lanes,
        &cfg,
        stop,
        &AtomicBool::new(false),
        None,
        &String::new,
    );
    let mut written = trace::WriteStats::default();
    let r = CaptureReport::close_lanes(&a.interface, lanes, &stats, &mut report, |sink| {
        written = sink.finish()?;
        Ok(None)
    });
    let bytes_out = written.bytes_out;
    if a.json {
        let mut v = serde_json::to_value(&r).map_err(|e| Error::input(e.to_string()))?;
        v["bytes_out"] = bytes_out.into();
        // Where the writer waited on the file system (its one lane).
        v["blocked_ns"] = written.blocked_ns.into();
        v["longest_block_ns"] = written.longest_block_ns.into();
        writeln!(out, "{v}").map_err(Error::stdout)?;
    } else {
        writeln!(
            out,
            "{} packets written to {} ({bytes_out} bytes); {} dropped by the kernel, {} by kansoku",
            r.written,
            display_path(&a.write),
            r.kernel_drops,
            r.dropped_kansoku
        )
        .map_err(Error::stdout)?;
    }
    Ok(report)
}

/// Frames taken from the AF_XDP ring at most per batch (a batch ends with
/// the writer's release, as a ring block does).
const XDP_BATCH: usize = 1024;

/// The capture through AF_XDP: frames go from the socket's memory into the
/// writer, a batch at a time; at the end the program leaves the interface,
/// the ring is drained, and the kernel's loss counters are the drops.
fn capture_xdp<W: Write>(
    a: &CaptureWorkerArgs,
    mut sink: DiskSink<W>,
    mode: capture::xdp::XdpMode,
    stop: &AtomicBool,
    out: &mut dyn Write,
) -> Result<Report> {
    let cfg = XdpConfig {
        interface: a.interface.clone(),
        mode,
        umem_bytes: a.buffer_mib.saturating_mul(1 << 20),
        ..XdpConfig::default()
    };
    let xdp_error = |e: std::io::Error| Error::input(format!("AF_XDP on {}: {e}", a.interface));
    let mut xsk = XdpSocket::open(&cfg).map_err(xdp_error)?;
    eprintln!(
        "kansoku: listening on {}, AF_XDP {} mode ({}), {} frames of {} bytes",
        a.interface,
        mode.name(),
        if xsk.zero_copy() {
            "zero copy"
        } else {
            "copied"
        },
        cfg.frames().unwrap_or(0),
        cfg.frame_size
    );
    let limit = a.count.unwrap_or(u64::MAX);
    let mut written = 0u64;
    let mut stopping = false;
    loop {
        if !stopping && (stop.load(Ordering::Relaxed) || written >= limit) {
            // From here frames go to the stack; what is on the ring is all.
            xsk.detach().map_err(xdp_error)?;
            stopping = true;
        }
        let wait = if stopping {
            Duration::ZERO
        } else {
            Duration::from_millis(100)
        };
        let room = usize::try_from(limit - written).unwrap_or(usize::MAX);
        let n = xsk
            .receive(wait, XDP_BATCH.min(room.max(1)), |data, ts_ns| {
                written += 1;
                sink.frame(&Frame {
                    link_type: LinkType::Ethernet,
                    ts_ns,
                    orig_len: data.len() as u32,
                    data,
                })
            })
            .map_err(xdp_error)??;
        if n > 0 {
            sink.flush()?;
        } else if stopping {
            break;
        }
    }
    let stats = xsk.statistics().map_err(xdp_error)?;
    let w = sink.finish()?;
    let mut report = Report::live();
    report.packets = written;
    report.drops.kernel = stats.lost();
    if a.json {
        let v = serde_json::json!({
            "interface": a.interface,
            "written": written,
            "kernel_drops": stats.lost(),
            "dropped_kansoku": 0,
            "bytes_out": w.bytes_out,
            "xdp": {
                "mode": mode.name(),
                "zero_copy": xsk.zero_copy(),
                "rx_dropped": stats.rx_dropped,
                "rx_ring_full": stats.rx_ring_full,
                "rx_fill_ring_empty": stats.rx_fill_ring_empty,
                "bad_descriptors": xsk.bad_descriptors(),
            },
        });
        writeln!(out, "{v}").map_err(Error::stdout)?;
    } else {
        writeln!(
            out,
            "{written} packets written to {} ({} bytes); {} lost by the AF_XDP socket",
            display_path(&a.write),
            w.bytes_out,
            stats.lost()
        )
        .map_err(Error::stdout)?;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace::write::OutputFormat;
    use trace::{Codec, LinkType};

    fn frame() -> Vec<u8> {
        (0..200u32).map(|i| (i % 7) as u8).collect()
    }

    /// Ten 200-byte frames through a per-packet sink; the bytes written
    /// and the writer's counters.
    fn per_packet(format: OutputFormat, codec: Codec) -> (Vec<u8>, WriteStats) {
        let mut bytes = Vec::new();
        let cfg = WriterConfig {
            format,
            codec,
            ..WriterConfig::default()
        };
        let mut s = DiskSink::new(&mut bytes, Path::new("mem"), cfg, true).unwrap();
        for i in 0..10 {
            let f = frame();
            s.frame(&Frame {
                link_type: LinkType::Ethernet,
                ts_ns: i,
                orig_len: 200,
                data: &f,
            })
            .unwrap();
            assert_eq!(s.writer.stats().chunks, i + 2);
        }
        let stats = s.finish().unwrap();
        (bytes, stats)
    }

    #[test]
    fn per_packet_writes_one_chunk_per_packet() {
        for format in [OutputFormat::Pcap, OutputFormat::Pcapng] {
            for codec in [Codec::None, Codec::Lz4, Codec::Zstd, Codec::Gzip] {
                let (_, stats) = per_packet(format, codec);
                // The file header is a chunk of its own, then one per packet.
                assert_eq!(stats.chunks, 11, "{format} {codec:?}");
                assert_eq!(stats.packets, 10);
            }
        }
    }

    #[test]
    fn per_packet_files_are_the_ones_flush_each_record_wrote() {
        // Written by trace's WriterConfig::flush_each_record before it was
        // removed: one block per packet, the same chunks, byte for byte.
        let golden: [(OutputFormat, Codec, &[u8]); 4] = [
            (
                OutputFormat::Pcap,
                Codec::None,
                include_bytes!("../../tests/data/per-packet.pcap"),
            ),
            (
                OutputFormat::Pcap,
                Codec::Lz4,
                include_bytes!("../../tests/data/per-packet.pcap.lz4"),
            ),
            (
                OutputFormat::Pcapng,
                Codec::None,
                include_bytes!("../../tests/data/per-packet.pcapng"),
            ),
            (
                OutputFormat::Pcapng,
                Codec::Lz4,
                include_bytes!("../../tests/data/per-packet.pcapng.lz4"),
            ),
        ];
        for (format, codec, want) in golden {
            let (got, _) = per_packet(format, codec);
            assert!(got == want, "{format} {codec:?}");
        }
    }

    /// The helper tests below are the capture worker and a sender when
    /// these are set: the root-only test re-runs its own binary inside its
    /// namespace for each (`ip netns exec NS <test binary> --exact NAME`).
    const WORKER_ENV: &str = "KANSOKU_BENCH_TEST_WORKER";
    const SEND_ENV: &str = "KANSOKU_BENCH_TEST_SEND";

    #[test]
    #[ignore = "the capture worker of worker_captures_in_a_namespace_until_sigint, run in its namespace"]
    fn helper_worker() {
        let Ok(args) = std::env::var(WORKER_ENV) else {
            return;
        };
        #[derive(clap::Parser)]
        struct Worker {
            #[command(flatten)]
            a: CaptureWorkerArgs,
        }
        let w = <Worker as clap::Parser>::parse_from(
            std::iter::once("capture-worker").chain(args.split(' ')),
        );
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        signal_hook::flag::register(signal_hook::consts::SIGINT, std::sync::Arc::clone(&stop))
            .unwrap();
        let mut out = Vec::new();
        let r = run(&w.a, &stop, &mut out).unwrap();
        // On a line of its own: libtest has begun `test NAME ... ` on stdout.
        println!("\n{}", String::from_utf8_lossy(&out));
        assert!(r.output_error.is_none() && r.read_error.is_none(), "{r:?}");
    }

    /// Frames the sender sends: UDP, 1000 bytes.
    const SENT_LEN: usize = 1000;

    #[test]
    #[ignore = "the sender of worker_captures_in_a_namespace_until_sigint, run in its namespace"]
    fn helper_send() {
        let Ok(spec) = std::env::var(SEND_ENV) else {
            return;
        };
        let (iface, n) = spec.split_once(' ').unwrap();
        let tx = capture::tx::PacketSender::open(iface).unwrap();
        let mut synth = synth::Synth::new(synth::SynthConfig {
            count: n.parse().unwrap(),
            size: synth::FrameSize::Fixed(SENT_LEN),
            proto: synth::ProtoMix::Udp,
            ..synth::SynthConfig::default()
        })
        .unwrap();
        while let Some((_, f)) = synth.next_frame() {
            assert_eq!(f.len(), SENT_LEN);
            assert_eq!(tx.send_batch(&[f]).unwrap(), 1);
        }
    }

    #[test]
    fn worker_captures_in_a_namespace_until_sigint() {
        use crate::harness::netns::Netns;
        use crate::harness::peers::{json_u64, must, parse_json, Peer};
        use pipeline::{Consumer, Control, Flow, TraceSource};

        if !testkit::require_root("capture worker") {
            return;
        }
        /// Counts the frames the sender sent.
        struct Sent(u64);
        impl Consumer<TraceSource> for Sent {
            fn consume(&mut self, rec: Record<'_>) -> Result<Flow> {
                if let Record::Packet(p) = rec {
                    self.0 += u64::from(p.data.len() == SENT_LEN);
                }
                Ok(Flow::Continue)
            }
        }
        let ns = Netns::create().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let exe = std::env::current_exe().unwrap();
        let helper = |name: &str| {
            let mut c = ns.command(&exe);
            c.args([
                "--exact",
                name,
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ]);
            c
        };
        for (flags, name) in [
            ("--compress lz4 --per-packet --disk-mbps 5", "pkt.pcap.lz4"),
            ("--compress zstd", "blocks.pcap.zst"),
        ] {
            let file = dir.path().join(name);
            let mut cmd = helper("capture::worker::tests::helper_worker");
            cmd.env(
                WORKER_ENV,
                format!("-i {} -w {} {flags} --json", ns.rx, file.display()),
            )
            .stdout(std::process::Stdio::piped());
            let worker = Peer::spawn(cmd)
                .unwrap()
                .wait_listening(std::time::Duration::from_secs(15), "worker")
                .unwrap();
            must(
                helper("capture::worker::tests::helper_send")
                    .env(SEND_ENV, format!("{} 300", ns.tx)),
            )
            .unwrap();
            std::thread::sleep(std::time::Duration::from_millis(300));
            worker.interrupt().unwrap();
            let end = worker.wait().unwrap();
            assert!(end.status.success(), "{flags}: {}", end.stderr);
            let v = parse_json(&end.stdout, "worker").unwrap();
            assert_eq!(json_u64(&v, "kernel_drops"), 0, "{flags}: {v}");
            assert_eq!(json_u64(&v, "dropped_kansoku"), 0, "{flags}: {v}");
            let written = json_u64(&v, "written");
            let mut src = TraceSource::open(&file).unwrap();
            let mut sent = Sent(0);
            let never = AtomicBool::new(false);
            let r = pipeline::run(&mut src, &mut sent, Control::new(&never));
            assert_eq!(r.exit_code(), pipeline::ExitCode::Ok, "{flags}: {r:?}");
            assert_eq!(r.packets, written, "{flags}");
            assert_eq!(sent.0, 300, "{flags}: {v}");
        }
    }
}

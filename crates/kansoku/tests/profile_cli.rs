//! `kansoku profile`: planted heavy hitters are found with their shares,
//! totals are exact for every interval length and through re-aggregation,
//! summaries round-trip through files, and bad summary files are refused
//! with the file, line and column.

mod common;

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use aguri::{parse_summaries, KeyKind, Prefix, SectionKind, Summary};
use common::{p, run, run_ok};
use trace::write::{TraceWriter, WriterConfig};
use wire::ethernet::{EthernetAddress, EthernetRepr};
use wire::icmp::IcmpRepr;
use wire::ipv4::Ipv4Repr;
use wire::tcp::TcpRepr;
use wire::udp::UdpRepr;
use wire::{EtherType, IpProtocol, LinkType, TcpFlags};

/// 2026-01-01T00:00:00Z, on the hour.
const T0: u64 = 1_767_225_600_000_000_000;
const HOUR: u64 = 3_600_000_000_000;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

enum L4 {
    Tcp(u16, u16),
    Udp(u16, u16),
    Echo,
}

/// An Ethernet/IPv4 frame of `orig_len` bytes on the wire, captured up to
/// the end of its transport header, built with wire's `Repr::emit`.
fn frame(src: Ipv4Addr, dst: Ipv4Addr, l4: &L4, orig_len: u32) -> Vec<u8> {
    let (proto, l4_len) = match l4 {
        L4::Tcp(..) => (IpProtocol::Tcp, 20),
        L4::Udp(..) => (IpProtocol::Udp, 8),
        L4::Echo => (IpProtocol::Icmp, 8),
    };
    let mut f = vec![0u8; 14 + 20 + l4_len];
    EthernetRepr {
        src_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
        dst_addr: EthernetAddress([2, 0, 0, 0, 0, 2]),
        ethertype: EtherType::Ipv4,
    }
    .emit(&mut f)
    .unwrap();
    Ipv4Repr {
        src_addr: src,
        dst_addr: dst,
        protocol: proto,
        payload_len: orig_len as usize - 34,
        ttl: 64,
        tos: 0,
        ident: 0,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
        options: &[],
    }
    .emit(&mut f[14..])
    .unwrap();
    match *l4 {
        L4::Tcp(sp, dp) => TcpRepr {
            src_port: sp,
            dst_port: dp,
            seq_number: 1,
            ack_number: 1,
            flags: TcpFlags::ACK,
            window_len: 512,
            urgent_at: 0,
            options: &[],
        }
        .emit(&mut f[34..])
        .unwrap(),
        L4::Udp(sp, dp) => UdpRepr {
            src_port: sp,
            dst_port: dp,
            payload_len: orig_len as usize - 42,
        }
        .emit(&mut f[34..])
        .unwrap(),
        L4::Echo => IcmpRepr::echo(true, 7, 1).emit(&mut f[34..]).unwrap(),
    }
    f
}

/// What was planted, in bytes.
#[derive(Default, Debug)]
struct Truth {
    bytes: u64,
    packets: u64,
    jaist: u64,
    host: u64,
    http: u64,
    flood: u64,
}

const HOST: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 77);

/// One hour of traffic: by bytes about 30% from 2000 hosts of
/// 150.65.0.0/16, 10% from one host, 50% to TCP port 80 (from a /10 of
/// random clients), 5% an ICMP echo flood from 203.0.113.0/24, 5% noise.
fn heavy_hitters(path: &Path, packets: u64) -> Truth {
    let mut w = TraceWriter::create(path, WriterConfig::default()).unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut t = Truth::default();
    let jaist: Vec<u32> = (0..2000)
        .map(|_| 0x9641_0000 | rng.below(65536) as u32)
        .collect();
    for i in 0..packets {
        let ts = T0 + 11 + i * (HOUR - 1000) / packets;
        // Packet weights are share / frame length: 30/600, 10/1000, 50/1200, 5/98, 5/300.
        let r = rng.below(1_000_000);
        let ip = |x: u64| Ipv4Addr::from(x as u32);
        let dst = ip(0x0a00_0000 | rng.below(1 << 24));
        let (src, l4, len) = if r < 297_000 {
            let s = jaist[rng.below(2000) as usize];
            (
                Ipv4Addr::from(s),
                L4::Udp(
                    1024 + rng.below(60000) as u16,
                    1024 + rng.below(60000) as u16,
                ),
                600,
            )
        } else if r < 332_600 {
            (HOST, L4::Udp(5000, 1024 + rng.below(60000) as u16), 1000)
        } else if r < 581_100 {
            (
                ip(0x6440_0000 | rng.below(1 << 22)),
                L4::Tcp(1024 + rng.below(60000) as u16, 80),
                1200,
            )
        } else if r < 883_500 {
            (ip(0xcb00_7100 | rng.below(256)), L4::Echo, 98)
        } else {
            (
                ip(0xac10_0000 | rng.below(1 << 20)),
                L4::Udp(
                    1024 + rng.below(60000) as u16,
                    1024 + rng.below(60000) as u16,
                ),
                300,
            )
        };
        let b = u64::from(len);
        t.bytes += b;
        t.packets += 1;
        match (&l4, r) {
            (_, r) if r < 297_000 => t.jaist += b,
            (_, r) if r < 332_600 => t.host += b,
            (L4::Tcp(..), _) => t.http += b,
            (L4::Echo, _) => t.flood += b,
            _ => {}
        }
        let f = frame(src, dst, &l4, len);
        w.write_packet(LinkType::Ethernet, ts, len, &f).unwrap();
    }
    w.finish().unwrap();
    t
}

fn pct(part: u64, total: u64) -> f64 {
    part as f64 * 100.0 / total as f64
}

fn entries_within(s: &Summary, kind: SectionKind, prefix: &str) -> u64 {
    let sec = s.section(kind);
    let pre = Prefix::parse(sec.kind.key_kind(), prefix).unwrap();
    sec.entries
        .iter()
        .filter(|e| pre.contains(&e.prefix))
        .map(|e| e.bytes)
        .sum()
}

fn entry(s: &Summary, kind: SectionKind, label: &str) -> Option<u64> {
    s.section(kind)
        .entries
        .iter()
        .find(|e| e.prefix.to_string() == label)
        .map(|e| e.bytes)
}

fn check_heavy_hitters(s: &Summary, t: &Truth, how: &str) {
    let close = |what: &str, got: u64, want: u64| {
        let (g, w) = (pct(got, t.bytes), pct(want, t.bytes));
        assert!(
            (g - w).abs() <= 0.1,
            "{how}: {what}: reported {g:.3}%, planted {w:.3}%\n{s}"
        );
    };
    assert_eq!(s.section(SectionKind::SrcAddress).bytes, t.bytes, "{how}");
    close(
        "150.65.0.0/16",
        entries_within(s, SectionKind::SrcAddress, "150.65.0.0/16"),
        t.jaist,
    );
    close(
        "192.0.2.77",
        entry(s, SectionKind::SrcAddress, "192.0.2.77").expect("the host is an entry"),
        t.host,
    );
    close(
        "4:6:80",
        entry(s, SectionKind::DstPort, "4:6:80").expect("4:6:80 is an entry"),
        t.http,
    );
    let icmp = Prefix::parse(KeyKind::Port, "4:1:0/0").unwrap();
    let flood: u64 = s
        .section(SectionKind::DstPort)
        .entries
        .iter()
        .filter(|e| icmp.contains(&e.prefix))
        .map(|e| e.bytes)
        .sum();
    assert!(
        s.section(SectionKind::DstPort)
            .entries
            .iter()
            .any(|e| e.prefix.to_string() == "4:1:2048"),
        "{how}: the flood is echo requests, type 8 code 0: 4:1:2048 as aguri keys ICMP\n{s}"
    );
    close("4:1:", flood, t.flood);
    // The flood's sources, a /24, carry its share too.
    close(
        "203.0.113.0/24",
        entries_within(s, SectionKind::SrcAddress, "203.0.113.0/24"),
        t.flood,
    );
}

fn read_file(path: &Path) -> Vec<Summary> {
    parse_summaries(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn planted_heavy_hitters_are_reported_in_one_hour_and_in_merged_five_minutes() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("hh.pcap.lz4");
    let truth = heavy_hitters(&trace, 60_000);

    let hour = dir.path().join("hour.agr");
    run_ok(&["profile", "-r", p(&trace), "-i", "3600", "-w", p(&hour)]);
    let hours = read_file(&hour);
    assert_eq!(hours.len(), 1);
    check_heavy_hitters(&hours[0], &truth, "one hour");

    let fives = dir.path().join("five/");
    run_ok(&["profile", "-r", p(&trace), "-i", "300", "-w", p(&fives)]);
    let files: Vec<PathBuf> = std::fs::read_dir(&fives)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 12, "{files:?}");
    assert!(fives.join("20260101.000000.agr").exists());
    assert!(fives.join("20260101.005500.agr").exists());
    let merged = dir.path().join("merged.agr");
    run_ok(&[
        "profile",
        "--merge",
        p(&fives),
        "-i",
        "3600",
        "-w",
        p(&merged),
    ]);
    let m = read_file(&merged);
    assert_eq!(m.len(), 1);
    check_heavy_hitters(&m[0], &truth, "twelve 5-minute summaries merged");
    assert_eq!(
        (m[0].start_ns, m[0].end_ns),
        (hours[0].start_ns, hours[0].end_ns)
    );
}

#[test]
fn totals_are_exact_for_every_interval_and_through_merges() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.pcap");
    let truth = heavy_hitters(&trace, 5_000);
    let mut args_of = vec![vec![]];
    for i in ["1", "7", "60", "299", "300", "3600", "86400"] {
        args_of.push(vec!["-i", i]);
    }
    for extra in &args_of {
        let out = dir.path().join("out.agr");
        let mut args = vec!["profile", "-r", p(&trace), "-w", p(&out), "-t", "0.5"];
        args.extend(extra.iter().copied());
        run_ok(&args);
        let summaries = read_file(&out);
        for k in SectionKind::ALL {
            let (b, n) = summaries.iter().fold((0, 0), |a, s| {
                (a.0 + s.section(k).bytes, a.1 + s.section(k).packets)
            });
            assert_eq!((b, n), (truth.bytes, truth.packets), "{extra:?} {k:?}");
        }
        // Consecutive intervals touch: each ends where the next starts.
        for w in summaries.windows(2) {
            assert_eq!(w[0].end_ns, w[1].start_ns, "{extra:?}");
        }
        // Re-aggregating them keeps the totals, whatever the new period.
        for m in ["1", "600", "3600"] {
            let merged = dir.path().join("m.agr");
            run_ok(&["profile", "--merge", p(&out), "-i", m, "-w", p(&merged)]);
            let ms = read_file(&merged);
            let (b, n) = ms.iter().fold((0, 0), |a, s| {
                (a.0 + s.total_bytes(), a.1 + s.total_packets())
            });
            assert_eq!(
                (b, n),
                (truth.bytes, truth.packets),
                "{extra:?} merged into {m}"
            );
        }
    }
}

/// The same file gives the same summaries on every run, down to entries
/// of a single packet: under a flood of new flows the flow table decides
/// the order in which the views see their keys, and aguri's trees (and an
/// exact store that collapses) keep what that order lets them keep, so the
/// table's seed comes from the file (with a random one for each run, three
/// runs gave three different outputs).
#[test]
fn the_same_file_gives_the_same_summaries_on_every_run() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("flood.pcap");
    run_ok(&[
        "synth",
        "-c",
        "200000",
        "--size",
        "64",
        "--rate",
        "20000",
        "--seed",
        "8",
        "-w",
        p(&trace),
    ]);
    for keys in ["0", "1024"] {
        let runs: Vec<Vec<u8>> = (0..3)
            .map(|_| {
                let out = run_ok(&["profile", "-r", p(&trace), "-t", "0", "--exact-keys", keys]);
                out.stdout
            })
            .collect();
        let text = String::from_utf8_lossy(&runs[0]);
        // Every node with a count is an entry: thousands of them.
        assert!(text.lines().count() > 1000, "--exact-keys {keys}: {text}");
        assert!(
            runs.iter().all(|r| *r == runs[0]),
            "--exact-keys {keys}: the runs differ"
        );
    }
}

/// A named pipe is read whole: the seed is taken only from a regular file's
/// first bytes (read from a pipe, they would be lost to the profile).
#[test]
fn a_named_pipe_is_read_whole() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.pcap");
    let truth = heavy_hitters(&trace, 5_000);
    let bytes = std::fs::read(&trace).unwrap();
    assert!(bytes.len() > 64 << 10);
    let fifo = dir.path().join("fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo failed");
    let out = dir.path().join("out.agr");
    let mut child = common::kansoku()
        .args(["profile", "-r", p(&fifo), "-w", p(&out)])
        .spawn()
        .unwrap();
    // The writer gives up if nobody reads (a broken pipe), and the profile
    // is waited for a bounded time.
    let writing = fifo.clone();
    let writer = std::thread::spawn(move || {
        let mut f = std::fs::OpenOptions::new().write(true).open(&writing)?;
        f.write_all(&bytes)
    });
    let begun = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if begun.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            // Unblock a writer still waiting for a reader.
            let _ = std::fs::File::open(&fifo);
            panic!("profile of a named pipe did not end");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    writer.join().unwrap().unwrap();
    assert!(status.success());
    let s = read_file(&out);
    let total = s.iter().fold((0, 0), |a, s| {
        (a.0 + s.total_bytes(), a.1 + s.total_packets())
    });
    assert_eq!(total, (truth.bytes, truth.packets));
}

#[test]
fn stdout_json_and_archive() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.pcap");
    let truth = heavy_hitters(&trace, 3_000);
    let out = run_ok(&["profile", "-r", p(&trace)]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("%!AGURI-1.0\n"), "{text}");
    for s in [
        "[src address]",
        "[dst address]",
        "[ip:proto:srcport]",
        "[ip:proto:dstport]",
        "4:6:80\t",
    ] {
        assert!(text.contains(s), "{s} missing:\n{text}");
    }
    let out = run_ok(&[
        "profile",
        "-r",
        p(&trace),
        "--json",
        "--packets",
        "-i",
        "600",
    ]);
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 6);
    let packets: u64 = lines
        .iter()
        .map(|v| v["sections"][3]["packets"].as_u64().unwrap())
        .sum();
    assert_eq!(packets, truth.packets);
    assert_eq!(lines[0]["metric"], "packets");

    let arch = dir.path().join("arch");
    run_ok(&["profile", "-r", p(&trace), "--archive", p(&arch)]);
    let count = |d: &str| std::fs::read_dir(arch.join(d)).unwrap().count();
    assert_eq!((count("5min"), count("hourly"), count("daily")), (12, 1, 1));
    let day = read_file(&arch.join("daily").join("20260101.000000.agr"));
    assert_eq!(day[0].total_bytes(), truth.bytes);
}

#[test]
fn bad_summary_files_are_refused_with_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.pcap");
    heavy_hitters(&trace, 500);
    let good = dir.path().join("good.agr");
    run_ok(&["profile", "-r", p(&trace), "-w", p(&good)]);
    let text = std::fs::read_to_string(&good).unwrap();

    let cut = dir.path().join("cut.agr");
    std::fs::write(&cut, &text[..text.len() * 2 / 3]).unwrap();
    let out = run(&["profile", "--merge", p(&cut)]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with(&format!("kansoku: {}:", p(&cut))), "{err}");
    assert!(err.contains("truncated"), "{err}");

    let bad = dir.path().join("bad.agr");
    std::fs::write(&bad, text.replacen("4:6:80", "4:6:80000", 1)).unwrap();
    let out = run(&["profile", "--merge", p(&bad)]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let line = text.lines().position(|l| l.contains("4:6:80")).unwrap() + 1;
    assert!(err.contains(&format!("bad.agr:{line}:")), "{err}");
    assert!(
        err.contains("bad port '80000' (expected 0 to 65535)"),
        "{err}"
    );

    let out = run(&["profile", "--merge", p(&trace)]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn plots_list_the_top_aggregates_with_their_shares() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.pcap");
    heavy_hitters(&trace, 3_000);
    let sums = dir.path().join("s/");
    run_ok(&["profile", "-r", p(&trace), "-i", "300", "-w", p(&sums)]);
    let svg = dir.path().join("dport.svg");
    run_ok(&[
        "plot",
        p(&sums),
        "--view",
        "dport",
        "--top",
        "3",
        "--style",
        "lines",
        "-o",
        p(&svg),
    ]);
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("<svg"), "{text}");
    assert!(text.contains("total (100.00%)"), "legend lists the total");
    assert!(
        text.contains("4:6:80 ("),
        "legend lists 4:6:80 with its share"
    );
    // What no top aggregate holds is `other`; a catch-all is never one.
    assert!(text.contains("other ("), "{text}");
    assert!(
        !text.contains("0/0:0:0 (") && !text.contains("4:0:0/8 ("),
        "{text}"
    );
    // The time axis is labelled at round times (HH:MM on a multiple of 5).
    let ticks: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| {
            l.len() == 5
                && l.as_bytes()[2] == b':'
                && l.bytes().filter(u8::is_ascii_digit).count() == 4
        })
        .collect();
    assert!(ticks.len() >= 3, "{ticks:?}");
    assert!(
        ticks
            .iter()
            .all(|t| t[3..].parse::<u32>().unwrap() % 5 == 0),
        "{ticks:?}"
    );
    // The default: stacked bits/s and packets/s side by side, as agurim;
    // each band's share of bytes and of packets; the rest is `other`.
    let stacked = dir.path().join("stacked.svg");
    run_ok(&[
        "plot",
        p(&sums),
        "--view",
        "dport",
        "--top",
        "3",
        "-o",
        p(&stacked),
    ]);
    let text = std::fs::read_to_string(&stacked).unwrap();
    assert!(
        text.contains("bits/s") && text.contains("packets/s"),
        "{text}"
    );
    assert!(
        text.contains("4:6:80 (") && text.contains("% B, "),
        "{text}"
    );
    assert!(text.contains("other ("), "{text}");
    assert_eq!(
        text.matches("<polygon").count() % 4,
        0,
        "bands in both panels"
    );
    assert!(text.matches("<polygon").count() >= 8, "{text}");
    let src_svg = dir.path().join("src.svg");
    run_ok(&["plot", p(&sums), "--view", "src", "-o", p(&src_svg)]);
    let text = std::fs::read_to_string(&src_svg).unwrap();
    assert!(
        !text.contains(">0.0.0.0/0 (") && !text.contains("\n0.0.0.0/0 ("),
        "the IPv4 catch-all is not an aggregate"
    );
    // One summary is no time series: a clear message, exit 2.
    let one = std::fs::read_dir(&sums)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let out = run(&["plot", p(&one), "-o", p(&dir.path().join("one.svg"))]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("a time series needs two or more"));
    let png = dir.path().join("src.png");
    run_ok(&["plot", p(&sums), "--view", "src", "-o", p(&png)]);
    assert!(std::fs::read(&png)
        .unwrap()
        .starts_with(b"\x89PNG\r\n\x1a\n"));
    let html = dir.path().join("p.html");
    run_ok(&["plot", p(&sums), "--view", "src", "-o", p(&html)]);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<svg") && page.contains("192.0.2.77") && page.contains("<details>"));
    let out = run(&["plot", p(&sums), "-o", p(&dir.path().join("x.gif"))]);
    assert_eq!(out.status.code(), Some(2));
}

/// Each format written and read back (by `--merge`, by `plot`) keeps the
/// totals, non-IP frames included; aguri3's keeps the 2-D view, which
/// hourly archives roll up; a malformed aguri2 or aguri3 file is refused
/// with FILE:LINE:COLUMN.
#[test]
fn every_format_keeps_the_totals_and_the_2d_view() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.pcap");
    let truth = heavy_hitters(&trace, 4_000);
    let mut files = Vec::new();
    for format in ["kansoku", "aguri2", "aguri3"] {
        let out = dir.path().join(format!("{format}.agr"));
        run_ok(&[
            "profile",
            "-r",
            p(&trace),
            "-i",
            "300",
            "--format",
            format,
            "-w",
            p(&out),
        ]);
        let text = std::fs::read_to_string(&out).unwrap();
        let sums = parse_summaries(&text).unwrap();
        let (b, k) = sums.iter().fold((0, 0), |a, s| {
            (a.0 + s.total_bytes(), a.1 + s.total_packets())
        });
        assert_eq!((b, k), (truth.bytes, truth.packets), "{format}");
        if format == "aguri3" {
            assert!(text.starts_with("\n%!AGURI-2.0\n"), "{text}");
            assert!(sums.iter().all(|s| !s.flows.is_empty()));
            // The heavy UDP host's flows carry its port.
            assert!(text.contains("[17:5000:"), "{text}");
        }
        // Re-aggregated from this format into one summary: the same totals.
        let out = run_ok(&[
            "profile",
            "--merge",
            p(&dir.path().join(format!("{format}.agr"))),
        ]);
        let merged = parse_summaries(&String::from_utf8_lossy(&out.stdout)).unwrap();
        assert_eq!(
            (merged[0].total_bytes(), merged[0].total_packets()),
            (truth.bytes, truth.packets),
            "{format} merged"
        );
        assert_eq!(merged[0].flows.is_empty(), format != "aguri3", "{format}");
        files.push(dir.path().join(format!("{format}.agr")));
    }
    // kansoku's own with --2d keeps the flows exactly, and the archive
    // rolls them up into the hour.
    let arch = dir.path().join("arch");
    run_ok(&["profile", "-r", p(&trace), "--2d", "--archive", p(&arch)]);
    let hourly: Vec<Summary> = std::fs::read_dir(arch.join("hourly"))
        .unwrap()
        .flat_map(|f| {
            parse_summaries(&std::fs::read_to_string(f.unwrap().path()).unwrap()).unwrap()
        })
        .collect();
    assert!(!hourly.is_empty());
    for s in &hourly {
        let fl = s
            .flows
            .iter()
            .fold((0, 0), |a, f| (a.0 + f.bytes, a.1 + f.packets));
        assert_eq!(fl, (s.sections[0].bytes, s.sections[0].packets));
    }
    // Plots read every format.
    for f in &files {
        run_ok(&["plot", p(f), "-o", p(&dir.path().join("x.svg"))]);
    }
    // Malformed aguri files: FILE:LINE:COLUMN, exit 2.
    let a3 = std::fs::read_to_string(&files[2]).unwrap();
    let line = a3.lines().position(|l| l.starts_with("[ 1]")).unwrap() + 1;
    let bad = dir.path().join("bad3.agr");
    std::fs::write(&bad, a3.replacen("[ 1] ", "[ 1] 300.1.2.3/8 ", 1)).unwrap();
    let out = run(&["profile", "--merge", p(&bad)]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("bad3.agr:{line}:")), "{err}");
    let a2 = std::fs::read_to_string(&files[1]).unwrap();
    let bad = dir.path().join("bad2.agr");
    std::fs::write(
        &bad,
        a2.replacen("[ip:proto:srcport]", "[ip:proto:sport]", 1),
    )
    .unwrap();
    let out = run(&["profile", "--merge", p(&bad)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad2.agr:"));
    // aguri3 without the 2-D view is refused up front... by implying it.
    let out = run_ok(&["profile", "-r", p(&trace), "--format", "aguri3"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("%!AGURI-2.0"));
}

/// A plain pcap of 16 MiB or more is read on two threads (runs of whole
/// chunks when it has an index, else runs found by their records' headers;
/// the packets handed over as flows): the summaries are those of the same
/// bytes read on one thread (from standard input, which is never split),
/// with chunks checked or not, and of the same file without its index.
#[test]
fn a_trace_read_on_two_threads_gives_the_summaries_one_thread_gives() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("big.pcap");
    run_ok(&[
        "synth",
        "-c",
        "40000",
        "--flows",
        "2000",
        "--size",
        "64-1518",
        "--ip",
        "mix",
        "--rate",
        "4000",
        "--seed",
        "3",
        "-w",
        p(&trace),
    ]);
    let len = std::fs::metadata(&trace).unwrap().len();
    assert!(len > 20 << 20, "{len} bytes");
    assert!(dir.path().join("big.pcap.kidx").exists());
    // What `profile -r` decides with (two CPUs here, as in CI).
    assert!(pipeline::SplitSource::open(&trace).is_some());
    let plain = dir.path().join("plain.pcap");
    std::fs::copy(&trace, &plain).unwrap();
    assert!(pipeline::SplitSource::open(&plain).is_some());
    let profile = |args: &[&str]| {
        let out = run_ok(args);
        assert!(
            out.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kansoku"))
        .args(["profile", "-r", "-", "-i", "1"])
        .stdin(std::fs::File::open(&trace).unwrap())
        .output()
        .unwrap();
    assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
    let one = String::from_utf8(out.stdout).unwrap();
    // Ten seconds of traffic.
    assert!(one.matches("%!AGURI").count() >= 9, "{one}");
    assert_eq!(profile(&["profile", "-r", p(&trace), "-i", "1"]), one);
    assert_eq!(profile(&["profile", "-r", p(&plain), "-i", "1"]), one);
    assert_eq!(
        profile(&["profile", "-r", p(&trace), "-i", "1", "--no-verify"]),
        one
    );
}

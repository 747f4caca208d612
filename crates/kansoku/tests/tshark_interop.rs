//! tshark 4.0 (Debian 12's, an independent implementation) reads every file
//! kansoku writes, with the same packets, bytes and timestamps; also files
//! whose writer was killed with SIGKILL, up to the last completed block, and
//! files whose writer was stopped with SIGINT, completely.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use common::*;

const FORMATS: [&str; 2] = ["pcap", "pcapng"];
const CODECS: [&str; 4] = ["lz4", "zstd", "gzip", "none"];

/// A plain pcap of synthetic traffic made by `kansoku synth`.
fn synth_plain(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let path = dir.join(name);
    let mut args = vec!["synth", "-w", p(&path), "--compress", "none", "--no-index"];
    args.extend_from_slice(extra);
    run_ok(&args);
    path
}

fn assert_same_packets(
    what: &str,
    got: &[SharkPacket],
    want: &[SharkPacket],
    compare_interfaces: bool,
) {
    assert_eq!(got.len(), want.len(), "{what}: packet count");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.ts_ns, w.ts_ns, "{what}: packet {i} timestamp");
        assert_eq!(g.len, w.len, "{what}: packet {i} length");
        assert_eq!(g.caplen, w.caplen, "{what}: packet {i} captured length");
        assert!(g.data == w.data, "{what}: packet {i} bytes differ");
        if compare_interfaces {
            assert_eq!(g.interface, w.interface, "{what}: packet {i} interface");
        }
    }
}

#[test]
fn tshark_reads_every_format_and_codec_with_identical_packets() {
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = vec![
        synth_plain(
            dir.path(),
            "fixed.pcap",
            &[
                "-c",
                "3000",
                "--size",
                "1518",
                "--payload",
                "fixed",
                "--proto",
                "udp",
            ],
        ),
        synth_plain(
            dir.path(),
            "mixed.pcap",
            &[
                "-c",
                "3000",
                "--size",
                "64-1518",
                "--payload",
                "random",
                "--ip",
                "mix",
                "--vlan",
                "100,7",
            ],
        ),
    ];
    for sample in [
        "lo-http-icmp.pcap",
        "any-sll2-nano.pcap",
        "veth-vlan-2if.pcapng",
    ] {
        inputs.push(data(sample));
    }
    for input in &inputs {
        let (want, ok, err) = tshark_read(input);
        assert!(
            ok,
            "tshark could not read the input {}: {err}",
            input.display()
        );
        assert!(!want.is_empty());
        for format in FORMATS {
            for codec in CODECS {
                let out = dir.path().join(format!("out.{format}.{codec}"));
                run_ok(&[
                    "read",
                    "-r",
                    p(input),
                    "-w",
                    p(&out),
                    "--format",
                    format,
                    "--compress",
                    codec,
                ]);
                let (got, ok, err) = tshark_read(&out);
                let what = format!("{} as {format}/{codec}", input.display());
                assert!(ok, "tshark failed on {what}: {err}");
                // A pcap holds one interface, so interface ids survive only in pcapng.
                assert_same_packets(&what, &got, &want, format == "pcapng");
                // kansoku's own reader agrees with tshark.
                let (records, truncated) = read_all(&out);
                assert!(!truncated, "{what}: kansoku reports a cut-short file");
                assert_same_packets(
                    &format!("{what} (kansoku)"),
                    &packets_of(&records),
                    &want,
                    format == "pcapng",
                );
            }
        }
    }
}

#[test]
fn tshark_and_the_codecs_own_tools_read_files_with_stream_checksums() {
    let dir = tempfile::tempdir().unwrap();
    let input = synth_plain(
        dir.path(),
        "in.pcap",
        &["-c", "2000", "--size", "64-1518", "--payload", "random"],
    );
    let (want, ok, err) = tshark_read(&input);
    assert!(ok, "{err}");
    for (name, tool) in [("c.pcapng.lz4", "lz4"), ("c.pcap.zst", "zstd")] {
        let out = dir.path().join(name);
        run_ok(&["read", "-r", p(&input), "-w", p(&out), "--checksums"]);
        let head = std::fs::read(&out).unwrap();
        if tool == "lz4" {
            assert_eq!(head[4] & 0x10, 0x10, "B.Checksum set");
        } else {
            // Frame header descriptor, bit 2: content checksum.
            assert_eq!(head[4] & 0x04, 0x04, "zstd content checksum flag");
        }
        let (got, ok, err) = tshark_read(&out);
        assert!(ok, "tshark on {name}: {err}");
        assert_same_packets(name, &got, &want, false);
        let t = std::process::Command::new(tool)
            .args(["-q", "-t", p(&out)])
            .output();
        match t {
            Ok(t) => assert!(
                t.status.success(),
                "{tool} -t: {}",
                String::from_utf8_lossy(&t.stderr)
            ),
            Err(_) => {
                testkit::require_tool(tool);
            }
        }
    }
}

/// Feeds `input` to `child`'s standard input in small pieces with pauses,
/// until it is all written or the child stops reading.
fn feed_slowly(
    mut child_stdin: std::process::ChildStdin,
    bytes: Vec<u8>,
    piece: usize,
    pause: Duration,
) {
    for chunk in bytes.chunks(piece) {
        if child_stdin.write_all(chunk).is_err() {
            return;
        }
        thread::sleep(pause);
    }
}

fn spawn_writer(out: &Path, format: &str, codec: &str) -> Child {
    kansoku()
        .args([
            "read",
            "-r",
            "-",
            "-w",
            p(out),
            "--format",
            format,
            "--compress",
            codec,
            "--block-size",
            "4",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kansoku")
}

fn index_len(out: &Path) -> u64 {
    std::fs::metadata(trace::index::index_path(out))
        .map(|m| m.len())
        .unwrap_or(0)
}

fn index_packets(out: &Path) -> u64 {
    let idx = trace::index::read_index(&trace::index::index_path(out)).expect("index");
    idx.entries.iter().map(|e| u64::from(e.packets)).sum()
}

fn kill(child: &Child, signal: i32) {
    // SAFETY-free: the pid is our own child, still running (not yet waited for).
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(child.id().to_string())
        .status()
        .expect("kill");
    assert!(status.success());
}

#[test]
fn sigkilled_writer_leaves_a_file_tshark_reads_up_to_its_last_block() {
    let dir = tempfile::tempdir().unwrap();
    let input = synth_plain(
        dir.path(),
        "in.pcap",
        &[
            "-c",
            "4000",
            "--size",
            "64-1518",
            "--payload",
            "random",
            "--ip",
            "mix",
        ],
    );
    let (all, _, _) = tshark_read(&input);
    let bytes = std::fs::read(&input).unwrap();
    for (format, codec) in [
        ("pcap", "lz4"),
        ("pcap", "zstd"),
        ("pcap", "gzip"),
        ("pcap", "none"),
        ("pcapng", "lz4"),
    ] {
        let what = format!("{format}/{codec}");
        let out = dir.path().join(format!("killed.{format}.{codec}"));
        let mut child = spawn_writer(&out, format, codec);
        let mut stdin = child.stdin.take().unwrap();
        // Half the input, then hold the pipe open: the writer completes the
        // blocks it can and waits for more; after a second of quiet its
        // idle flush writes the partial block and brings the index (written
        // in batches) up to the file. Both then stay as they are.
        stdin.write_all(&bytes[..bytes.len() / 2]).unwrap();
        stdin.flush().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let sizes = || {
            (
                index_len(&out),
                std::fs::metadata(&out).map_or(0, |m| m.len()),
            )
        };
        let mut last = (sizes(), Instant::now());
        while Instant::now() < deadline {
            thread::sleep(Duration::from_millis(50));
            let now = sizes();
            if now != last.0 {
                last = (now, Instant::now());
            } else if now.0 > 16 && last.1.elapsed() > Duration::from_millis(1500) {
                break;
            }
        }
        kill(&child, 9);
        let _ = child.wait();
        drop(stdin);
        let expected = index_packets(&out) as usize;
        assert!(expected > 0, "{what}: no block completed before the kill");
        assert!(
            expected < all.len() / 2 + 1,
            "{what}: more packets than were fed"
        );
        let (got, _ok, _err) = tshark_read(&out);
        assert_same_packets(
            &format!("tshark on SIGKILLed {what}"),
            &got,
            &all[..expected],
            false,
        );
        let (records, _) = read_all(&out);
        assert_same_packets(
            &format!("kansoku on SIGKILLed {what}"),
            &packets_of(&records),
            &all[..expected],
            false,
        );
    }
}

#[test]
fn sigkill_while_writing_leaves_a_readable_prefix_and_sigint_a_complete_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = synth_plain(
        dir.path(),
        "big.pcap",
        &["-c", "60000", "--size", "64-600", "--payload", "random"],
    );
    let (all, _, _) = tshark_read(&input);
    let bytes = std::fs::read(&input).unwrap();
    for (signal, codec) in [(9, "lz4"), (9, "zstd"), (2, "lz4"), (15, "gzip")] {
        let what = format!("signal {signal}, {codec}");
        let out = dir.path().join(format!("sig{signal}.pcap.{codec}"));
        let mut child = spawn_writer(&out, "pcap", codec);
        let stdin = child.stdin.take().unwrap();
        let feeder = {
            let bytes = bytes.clone();
            thread::spawn(move || feed_slowly(stdin, bytes, 16 * 1024, Duration::from_millis(2)))
        };
        // Signal while the writer is busy: after some blocks are out.
        let deadline = Instant::now() + Duration::from_secs(20);
        while index_len(&out) < 16 + 56 * 8 && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        kill(&child, signal);
        let out_status = child.wait().unwrap();
        let _ = feeder.join();
        let (got, tshark_ok, err) = tshark_read(&out);
        assert!(!got.is_empty(), "{what}: tshark read nothing: {err}");
        assert!(
            got.len() < all.len(),
            "{what}: the signal came after the end of the input"
        );
        assert_same_packets(&what, &got, &all[..got.len()], false);
        if signal == 9 {
            assert!(
                got.len() as u64 >= index_packets(&out),
                "{what}: fewer packets than the index lists"
            );
        } else {
            // A clean stop: a complete file, and every packet the writer
            // took is in it. The reading was cut short by the signal, which
            // is a problem the job reports: exit 1 (the one exit code
            // for every reading command; it was 0 for `read` alone).
            assert_eq!(out_status.code(), Some(1), "{what}: exit status");
            assert!(tshark_ok, "{what}: tshark reports a damaged file: {err}");
            let (records, truncated) = read_all(&out);
            assert!(!truncated, "{what}: kansoku reports a cut-short file");
            assert_eq!(packets_of(&records).len(), got.len());
            assert_eq!(
                index_packets(&out) as usize,
                got.len(),
                "{what}: the index covers every packet"
            );
        }
    }
}

/// Where each record of a plain little-endian pcap ends.
fn record_ends(pcap: &[u8]) -> Vec<usize> {
    let mut ends = Vec::new();
    let mut at = 24;
    while at + 16 <= pcap.len() {
        let caplen = u32::from_le_bytes(pcap[at + 8..at + 12].try_into().unwrap()) as usize;
        at += 16 + caplen;
        if at > pcap.len() {
            break;
        }
        ends.push(at);
    }
    ends
}

/// The idle flush: a writer killed with SIGKILL has
/// written every packet it was given more than the idle time before, for
/// every codec, whether the input stalled (a quiet pipe) or kept flowing
/// slowly (blocks that would take minutes to fill).
#[test]
fn a_kill_loses_at_most_the_idle_time_of_input() {
    let dir = tempfile::tempdir().unwrap();
    let input = synth_plain(
        dir.path(),
        "in.pcap",
        &["-c", "3000", "--size", "64-600", "--payload", "random"],
    );
    let bytes = std::fs::read(&input).unwrap();
    let ends = record_ends(&bytes);
    assert_eq!(ends.len(), 3000);
    let idle = Duration::from_millis(200);
    // What the kill may take beyond the idle time: the flush itself, and
    // a loaded machine's scheduling.
    let slack = Duration::from_millis(400);
    for codec in ["lz4", "zstd", "gzip", "none"] {
        for stall in [true, false] {
            let what = format!("{codec}, {}", if stall { "stalled" } else { "flowing" });
            let out = dir.path().join(format!("idle-{stall}.pcap.{codec}"));
            let mut child = kansoku()
                .args([
                    "read",
                    "-r",
                    "-",
                    "-w",
                    p(&out),
                    "--idle-flush",
                    "0.2",
                    "--block-size",
                    "64",
                ])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn kansoku");
            let mut stdin = child.stdin.take().unwrap();
            // (when, records written by then)
            let mut sent: Vec<(Instant, usize)> = Vec::new();
            if stall {
                // A third of the input, then nothing.
                stdin.write_all(&bytes[..ends[999]]).unwrap();
                stdin.flush().unwrap();
                sent.push((Instant::now(), 1000));
                thread::sleep(idle + slack);
            } else {
                // One record every 10 ms for 1.5 s: about 50 KB, less than
                // one 64 KiB block, so without the idle flush nothing at all
                // would be written.
                stdin.write_all(&bytes[..24]).unwrap();
                let start = Instant::now();
                let mut n = 0;
                while start.elapsed() < Duration::from_millis(1500) {
                    let from = if n == 0 { 24 } else { ends[n - 1] };
                    stdin.write_all(&bytes[from..ends[n]]).unwrap();
                    n += 1;
                    sent.push((Instant::now(), n));
                    thread::sleep(Duration::from_millis(10));
                }
            }
            let killed_at = Instant::now();
            kill(&child, 9);
            let _ = child.wait();
            drop(stdin);
            let must = sent
                .iter()
                .filter(|(t, _)| killed_at.duration_since(*t) > idle + slack)
                .map(|(_, n)| *n)
                .max()
                .unwrap_or(0);
            let all = sent.last().map_or(0, |(_, n)| *n);
            assert!(
                must > 0,
                "{what}: nothing was sent long enough before the kill"
            );
            let (records, _) = read_all(&out);
            let got = packets_of(&records).len();
            assert!(
                got >= must && got <= all,
                "{what}: {got} packets read back; {must} were sent more than {:?} before the kill, {all} in all",
                idle + slack
            );
            // And the file is said to be cut, whatever the codec: a gzip or
            // plain stream ends cleanly between chunks, but the index has
            // no end entry (and may be behind the file: it is written in
            // batches).
            let r = kansoku()
                .args(["read", "-r", p(&out)])
                .output()
                .expect("kansoku read");
            let err = String::from_utf8_lossy(&r.stderr);
            assert_eq!(r.status.code(), Some(1), "{what}: {err}");
            assert!(err.contains("file cut short"), "{what}: {err}");
        }
    }
}

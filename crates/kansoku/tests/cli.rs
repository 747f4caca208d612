//! The `kansoku` binary driven as a user would: output lines, JSON, stats,
//! errors and exit codes, time windows through the index, rotation.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use common::*;

fn stdout_lines(out: &std::process::Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn read_prints_one_line_per_packet() {
    let out = run_ok(&["read", "-r", p(&data("lo-http-icmp.pcap"))]);
    let lines = stdout_lines(&out);
    assert_eq!(lines.len(), 32);
    assert!(
        lines[0].contains(" tcp 127.0.0.1:") && lines[0].contains(" > 127.0.0.1:18080 [S] len 74"),
        "{}",
        lines[0]
    );
    assert!(lines[1].contains("[S.]"), "{}", lines[1]);
    assert!(
        lines.iter().any(|l| l.contains(" tcp [::1]:")),
        "no IPv6 TCP line"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains(" icmp 127.0.0.1 > 127.0.0.1 type 8 code 0")),
        "no echo request"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains(" icmp6 ::1 > ::1 type 128 code 0")),
        "no ICMPv6 echo request"
    );
    let first_time: f64 = lines[0].split(' ').next().unwrap().parse().unwrap();
    assert!(first_time > 1.7e9);

    let out = run_ok(&["read", "-r", p(&data("lo-http-icmp.pcap")), "-c", "5"]);
    assert_eq!(stdout_lines(&out).len(), 5);
}

#[test]
fn read_shows_vlans_cooked_capture_and_json() {
    let out = run_ok(&["read", "-r", p(&data("veth-vlan-2if.pcapng"))]);
    let lines = stdout_lines(&out);
    assert!(
        lines
            .iter()
            .any(|l| l.contains(" vlan 7 udp 198.18.7.1:40000 > 198.18.7.2:47000")),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains(" vlan 100,8 udp 198.18.8.1:")),
        "{lines:#?}"
    );

    let out = run_ok(&["read", "-r", p(&data("any-sll2-nano.pcap")), "--json"]);
    let lines = stdout_lines(&out);
    assert_eq!(lines.len(), 14);
    let v: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(v["link_type"], "LINUX_SLL2");
    assert_eq!(v["protocol"], "udp");
    assert_eq!(v["dst_port"], 47000);
    assert_eq!(v["src"], "127.0.0.1");
    // Nanosecond timestamps are kept: not a multiple of 1000 in this capture.
    assert!(lines.iter().any(|l| {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        !v["ts_ns"].as_u64().unwrap().is_multiple_of(1000)
    }));
}

#[test]
fn stats_reports_counts_protocols_and_compression() {
    let out = run_ok(&["stats", "--json", p(&data("lo-http-icmp.pcap"))]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["packets"], 32);
    assert_eq!(v["codec"], "none");
    assert_eq!(v["interfaces"][0]["link_type"], "EN10MB");
    assert!(v["protocols"]["tcp"].as_u64().unwrap() >= 20);
    assert_eq!(v["protocols"]["icmp"], 4);

    let dir = tempfile::tempdir().unwrap();
    let fixed = dir.path().join("fixed.pcap.lz4");
    run_ok(&[
        "synth",
        "-c",
        "5000",
        "--size",
        "1518",
        "--payload",
        "fixed",
        "-w",
        p(&fixed),
    ]);
    let out = run_ok(&["stats", "--json", p(&fixed)]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["packets"], 5000);
    assert_eq!(v["codec"], "lz4");
    assert!(v["compression_ratio"].as_f64().unwrap() < 0.2, "{v}");
    assert_eq!(v["index"]["raw_chunks"], 0);

    let random = dir.path().join("random.pcap.lz4");
    run_ok(&[
        "synth",
        "-c",
        "5000",
        "--size",
        "1518",
        "--payload",
        "random",
        "-w",
        p(&random),
    ]);
    let out = run_ok(&["stats", p(&random)]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("packets:      5000"), "{text}");
    // The raw-block count comes from the index: compare with the index itself.
    let idx = trace::index::read_index(&trace::index::index_path(&random)).unwrap();
    let raw = idx
        .entries
        .iter()
        .filter(|e| !e.is_metadata() && e.is_raw())
        .count();
    let chunks = idx.entries.iter().filter(|e| !e.is_metadata()).count();
    assert!(
        text.contains(&format!("{raw} of {chunks} packet chunks stored raw")),
        "{text}"
    );
}

#[test]
fn lz4_output_meets_the_size_bounds() {
    let dir = tempfile::tempdir().unwrap();
    for (payload, bound) in [("random", 1.005), ("fixed", 0.2)] {
        let plain = dir.path().join(format!("{payload}.pcap"));
        let lz4 = dir.path().join(format!("{payload}.pcap.lz4"));
        let args = [
            "-c",
            "20000",
            "--size",
            "1518",
            "--payload",
            payload,
            "--proto",
            "udp",
        ];
        run_ok(&[&["synth", "-w", p(&plain), "--compress", "none"][..], &args].concat());
        run_ok(&[&["synth", "-w", p(&lz4)][..], &args].concat());
        let ratio = std::fs::metadata(&lz4).unwrap().len() as f64
            / std::fs::metadata(&plain).unwrap().len() as f64;
        assert!(
            ratio <= bound,
            "{payload}: lz4 file is {ratio:.4} of the plain pcap (bound {bound})"
        );
    }
}

/// `--compress-threads N` changes who compresses, not what is written: the
/// file and its index are byte for byte the one-thread ones, for the codecs
/// whose blocks are independent and for zstd (one frame, one thread).
#[test]
fn compress_threads_write_the_same_file_as_one_thread() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.pcap");
    run_ok(&[
        "synth",
        "-c",
        "6000",
        "--size",
        "1518",
        "--payload",
        "random",
        "-w",
        p(&input),
        "--compress",
        "none",
    ]);
    for (codec, ext) in [("gzip", "gz"), ("lz4", "lz4"), ("zstd", "zst")] {
        let one = dir.path().join(format!("one.pcap.{ext}"));
        let three = dir.path().join(format!("three.pcap.{ext}"));
        for (out, n) in [(&one, "1"), (&three, "3")] {
            run_ok(&[
                "read",
                "-r",
                p(&input),
                "-w",
                p(out),
                "--compress",
                codec,
                "--compress-threads",
                n,
            ]);
        }
        let bytes = |f: &std::path::Path| std::fs::read(f).unwrap();
        assert_eq!(bytes(&one), bytes(&three), "{codec}: files differ");
        let kidx = |f: &std::path::Path| bytes(&trace::index::index_path(f));
        assert_eq!(kidx(&one), kidx(&three), "{codec}: indexes differ");
        let keys = |f: &std::path::Path| bytes(&trace::keys::keys_path(f));
        assert_eq!(keys(&one), keys(&three), "{codec}: key indexes differ");
        let (recs, cut) = read_all(&three);
        assert!(!cut, "{codec}: cut short");
        let packets = recs
            .iter()
            .filter(|r| matches!(r, Owned::Packet { .. }))
            .count();
        assert_eq!(packets, 6000, "{codec}");
    }
    let out = run(&[
        "read",
        "-r",
        p(&input),
        "-w",
        p(&dir.path().join("x.lz4")),
        "--compress-threads",
        "many",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--compress-threads"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn errors_name_the_file_and_exit_2_and_cut_files_warn_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&["read", "-r", "/nonexistent/x.pcap"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with("kansoku: /nonexistent/x.pcap: "),
        "{}",
        stderr(&out)
    );

    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "this is not a capture\nat all\n").unwrap();
    let out = run(&["read", "-r", p(&text)]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(e.contains("notes.txt: ") && e.contains("offset 0"), "{e}");
    assert!(!e.contains("panicked"));

    let full = std::fs::read(data("lo-http-icmp.pcap")).unwrap();
    let cut = dir.path().join("cut.pcap");
    std::fs::write(&cut, &full[..full.len() - 50]).unwrap();
    let out = run(&["read", "-r", p(&cut)]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout_lines(&out).len(), 31);
    let e = stderr(&out);
    assert!(
        e.contains("cut.pcap: warning: offset ") && e.contains("cut short"),
        "{e}"
    );

    let out = run(&[
        "read",
        "-r",
        p(&data("lo-http-icmp.pcap")),
        "--since",
        "yesterday",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("bad time 'yesterday'"));

    let out = run(&[
        "synth",
        "-w",
        p(&dir.path().join("x.pcap")),
        "--block-size",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

/// Index entries of a trace written by kansoku (64-byte entries after a
/// 16-byte header; the last is the end entry).
fn index_entries(trace: &std::path::Path) -> usize {
    let mut kidx = trace.as_os_str().to_owned();
    kidx.push(".kidx");
    (std::fs::read(kidx).unwrap().len() - 16) / 64
}

#[test]
fn zstd_gets_its_own_128_kib_block_and_lz4_stays_at_most_64() {
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n);
    // 2,000 frames of 1518 bytes: 3.07 MB of pcap.
    let synth = |name: &str, extra: &[&str]| {
        let path = d(name);
        let mut args = vec!["synth", "-c", "2000", "--size", "1518", "-w", p(&path)];
        args.extend_from_slice(extra);
        run(&args)
    };
    let out = synth("z.pcap.zst", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let zstd_chunks = index_entries(&d("z.pcap.zst")) - 1;
    let out = synth("l.pcap.lz4", &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lz4_chunks = index_entries(&d("l.pcap.lz4")) - 1;
    // 3.07 MB in chunks of at most 128 KiB (zstd) and 32 KiB (lz4).
    assert!((24..=26).contains(&zstd_chunks), "{zstd_chunks}");
    assert!((94..=100).contains(&lz4_chunks), "{lz4_chunks}");
    // The packets read back the same from both.
    let a = run_ok(&[
        "read",
        "-r",
        p(&d("z.pcap.zst")),
        "-w",
        "-",
        "--compress",
        "none",
    ]);
    let b = run_ok(&[
        "read",
        "-r",
        p(&d("l.pcap.lz4")),
        "-w",
        "-",
        "--compress",
        "none",
    ]);
    assert_eq!(a.stdout.len(), 24 + 2000 * (16 + 1518));
    assert_eq!(a.stdout, b.stdout);
    // 128 KiB is zstd's alone; asked of LZ4 it is a usage error.
    let out = synth("l128.pcap.lz4", &["--block-size", "128"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("out of range for lz4"),
        "{}",
        stderr(&out)
    );
    let out = synth("z32.pcap.zst", &["--block-size", "32"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(index_entries(&d("z32.pcap.zst")) > 90);
}

#[test]
fn every_cut_of_a_compressed_file_reads_without_panic() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("s.pcapng.zst");
    run_ok(&[
        "read",
        "-r",
        p(&data("veth-vlan-2if.pcapng")),
        "-w",
        p(&src),
        "--format",
        "pcapng",
        "--compress",
        "zstd",
    ]);
    let full = std::fs::read(&src).unwrap();
    let cut = dir.path().join("cut");
    for len in (0..full.len()).step_by(7) {
        std::fs::write(&cut, &full[..len]).unwrap();
        let out = run(&["read", "-r", p(&cut)]);
        let code = out.status.code();
        assert!(
            matches!(code, Some(0..=2)),
            "cut at {len}: exit {code:?}: {}",
            stderr(&out)
        );
        assert!(
            !stderr(&out).contains("panicked"),
            "cut at {len}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn time_window_decompresses_only_the_blocks_it_needs() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.pcap.lz4");
    // 20,000 packets at 1,000 per second: 20 s of trace time from 2026-01-01T00:00:00Z.
    run_ok(&[
        "synth",
        "-c",
        "20000",
        "--rate",
        "1000",
        "--size",
        "64-1518",
        "--payload",
        "random",
        "--block-size",
        "8",
        "-w",
        p(&t),
    ]);
    let out = run_ok(&[
        "read",
        "-r",
        p(&t),
        "--since",
        "2026-01-01T00:00:05Z",
        "--until",
        "2026-01-01T00:00:06Z",
        "--json",
    ]);
    let lines = stdout_lines(&out);
    assert_eq!(lines.len(), 1000);
    for l in &lines {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        let ts = v["ts_ns"].as_u64().unwrap();
        assert!((1_767_225_605_000_000_000..1_767_225_606_000_000_000).contains(&ts));
    }
    let e = stderr(&out);
    let nums: Vec<u64> = e
        .split("decompressed ")
        .nth(1)
        .expect("window note")
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert!(
        nums.len() >= 2 && nums[0] * 5 < nums[1],
        "decoded too many blocks: {e}"
    );

    // The same window by epoch seconds, through the full-read path of a plain file, agrees.
    let plain = dir.path().join("t.pcap");
    run_ok(&[
        "read",
        "-r",
        p(&t),
        "-w",
        p(&plain),
        "--compress",
        "none",
        "--no-index",
    ]);
    let out2 = run_ok(&[
        "read",
        "-r",
        p(&plain),
        "--since",
        "1767225605",
        "--until",
        "1767225606",
        "--json",
    ]);
    assert_eq!(stdout_lines(&out2), lines);
}

/// `kansoku synth` of 20,000 random 1518-byte frames (30 MB) with `extra`.
fn synth_30_mb(extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "synth",
        "-c",
        "20000",
        "--size",
        "1518",
        "--payload",
        "random",
    ];
    args.extend_from_slice(extra);
    run_ok(&args)
}

#[test]
fn rotation_by_size_and_time_gives_complete_traces() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("rot.pcap");
    synth_30_mb(&["--compress", "none", "-C", "10", "-w", p(&base)]);
    let mut total = 0;
    let mut files = 0;
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if trace::index::is_sidecar(&path.to_string_lossy()) {
            continue;
        }
        let (records, truncated) = read_all(&path);
        assert!(!truncated);
        let n = packets_of(&records).len();
        assert!(n > 0);
        // As tcpdump -C, the size is checked before each packet against what is
        // already in the file, so a file may pass the limit by one block.
        let len = std::fs::metadata(&path).unwrap().len();
        assert!(
            len <= 10_000_000 + 32 * 1024 + 1518 + 16,
            "{} too large: {len}",
            path.display()
        );
        total += n;
        files += 1;
    }
    assert_eq!(total, 20000);
    assert_eq!(files, 4, "30 MB in 10 MB files");

    let dir = tempfile::tempdir().unwrap();
    let pattern = dir.path().join("g-%H%M%S.pcap.lz4");
    run_ok(&[
        "synth",
        "-c",
        "10000",
        "--rate",
        "1000",
        "-G",
        "3",
        "-w",
        p(&pattern),
    ]);
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !trace::index::is_sidecar(n))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "g-000000.pcap.lz4",
            "g-000003.pcap.lz4",
            "g-000006.pcap.lz4",
            "g-000009.pcap.lz4"
        ]
    );
}

#[test]
fn w_and_max_total_keep_the_newest_files_and_say_what_they_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let synth = |extra: &[&str], name: &str| {
        let out = dir.path().join(name);
        let mut args = vec!["-C", "2", "-w", p(&out)];
        args.extend_from_slice(extra);
        String::from_utf8(synth_30_mb(&args).stderr).unwrap()
    };
    // About 30 MB of random frames in files of 2 MB: 15 files.
    let err = synth(&["-W", "3"], "w.pcap.lz4");
    let kept: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !trace::index::is_sidecar(n))
        .collect();
    assert_eq!(kept.len(), 3, "{kept:?}");
    assert!(kept
        .iter()
        .all(|n| n.starts_with("w-000") && n.ends_with(".pcap.lz4")));
    let deleted = err
        .lines()
        .filter(|l| l.starts_with("kansoku: deleted "))
        .count();
    assert!(deleted >= 10, "{err}");
    assert!(
        err.contains(&format!("; {deleted} older files deleted")),
        "{err}"
    );
    // What is left is the end of the run, whole.
    let read = run_ok(&["stats", p(dir.path())]);
    assert!(read.status.success());
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    synth(&["--max-total", "7MB"], "t.pcapng");
    let on_disk: u64 = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(on_disk <= 7_000_000 && on_disk > 4_000_000, "{on_disk}");
    // A limit without a rotation, and a size that is not one, are refused.
    for bad in [
        &["-W", "2"][..],
        &["-C", "1", "--max-total", "7 parsecs"][..],
    ] {
        let mut args = vec!["synth", "-c", "10", "-w", "/dev/null"];
        args.extend_from_slice(bad);
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {out:?}");
    }
}

#[test]
fn broken_pipe_exits_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("many.pcap");
    run_ok(&["synth", "-c", "200000", "--compress", "none", "-w", p(&t)]);
    let mut child = kansoku()
        .args(["read", "-r", p(&t)])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.contains(" len 64"));
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn pcapng_round_trip_keeps_sections_interfaces_options_and_comments() {
    let dir = tempfile::tempdir().unwrap();
    let input = data("veth-vlan-2if.pcapng");
    let (want, _) = read_all(&input);
    assert!(want
        .iter()
        .any(|r| matches!(r, Owned::Section(s) if s.options.iter().any(|o| o.code == 1))));
    for codec in ["lz4", "zstd", "gzip", "none"] {
        let out = dir.path().join(format!("rt.pcapng.{codec}"));
        run_ok(&[
            "read",
            "-r",
            p(&input),
            "-w",
            p(&out),
            "--format",
            "pcapng",
            "--compress",
            codec,
        ]);
        let (got, truncated) = read_all(&out);
        assert!(!truncated);
        assert_eq!(got, want, "pcapng/{codec}");
    }
    for (input, name) in [
        (data("lo-http-icmp.pcap"), "us"),
        (data("any-sll2-nano.pcap"), "ns"),
    ] {
        let (want, _) = read_all(&input);
        let out = dir.path().join(format!("rt-{name}.pcap.lz4"));
        run_ok(&["read", "-r", p(&input), "-w", p(&out)]);
        let (got, _) = read_all(&out);
        assert_eq!(got, want, "pcap {name}");
    }
}

#[test]
fn the_output_name_chooses_format_and_codec_and_flags_may_not_contradict_it() {
    let dir = tempfile::tempdir().unwrap();
    let input = data("lo-http-icmp.pcap");
    let head = |name: &str, extra: &[&str]| -> Vec<u8> {
        let out = dir.path().join(name);
        run_ok(&[&["read", "-r", p(&input), "-w", p(&out)][..], extra].concat());
        std::fs::read(&out).unwrap()[..4].to_vec()
    };
    const PCAP: [u8; 4] = [0xd4, 0xc3, 0xb2, 0xa1];
    const PCAPNG: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];
    const LZ4: [u8; 4] = [0x04, 0x22, 0x4d, 0x18];
    const ZSTD: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
    assert_eq!(head("a.pcap", &[]), PCAP);
    assert_eq!(head("a.pcapng", &[]), PCAPNG);
    assert_eq!(head("a.pcap.lz4", &[]), LZ4);
    assert_eq!(head("a.pcapng.zst", &[]), ZSTD);
    assert_eq!(head("a.pcap.gz", &[])[..2], [0x1f, 0x8b]);
    // What the name leaves open, the flags or the defaults (pcap, lz4) say.
    assert_eq!(head("a.out", &[]), LZ4);
    assert_eq!(head("b.out", &["--compress", "none"]), PCAP);
    assert_eq!(
        head("c.out", &["--compress", "none", "--format", "pcapng"]),
        PCAPNG
    );
    assert_eq!(head("a.gz", &["--format", "pcapng"])[..2], [0x1f, 0x8b]);
    // Flags that agree with the name are fine.
    assert_eq!(
        head("d.pcap", &["--compress", "none", "--format", "pcap"]),
        PCAP
    );
    // The plain pcap is what tcpdump reads.
    let plain = dir.path().join("a.pcap");
    if let Ok(t) = std::process::Command::new("tcpdump")
        .args(["-nr", p(&plain)])
        .output()
    {
        assert!(t.status.success(), "{}", String::from_utf8_lossy(&t.stderr));
        assert_eq!(String::from_utf8_lossy(&t.stdout).lines().count(), 32);
    } else {
        testkit::require_tool("tcpdump");
    }
    for (name, flags, says) in [
        (
            "x.pcap.gz",
            &["--compress", "lz4"][..],
            "the name says gzip and --compress says lz4",
        ),
        (
            "x.pcap",
            &["--compress", "zstd"][..],
            "the name says no compression",
        ),
        (
            "x.pcapng.lz4",
            &["--format", "pcap"][..],
            "the name says pcapng and --format says pcap",
        ),
    ] {
        let out = dir.path().join(name);
        let r = run(&[&["read", "-r", p(&input), "-w", p(&out)][..], flags].concat());
        assert_eq!(r.status.code(), Some(2), "{name}: {}", stderr(&r));
        assert!(stderr(&r).contains(says), "{name}: {}", stderr(&r));
        assert!(!out.exists(), "{name} was written");
    }
}

#[test]
fn gzip_output_of_incompressible_traffic_is_no_larger_than_its_input_and_framing() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("in.pcap");
    run_ok(&[
        "synth",
        "-c",
        "3000",
        "--size",
        "1518",
        "--payload",
        "random",
        "-w",
        p(&plain),
    ]);
    let gz = dir.path().join("out.pcap.gz");
    run_ok(&["read", "-r", p(&plain), "-w", p(&gz)]);
    let (n_in, n_out) = (
        std::fs::metadata(&plain).unwrap().len(),
        std::fs::metadata(&gz).unwrap().len(),
    );
    // A member a chunk (18 bytes) and 5 bytes a stored block of 64 KiB.
    let chunks = n_in.div_ceil(4096);
    assert!(n_out <= n_in + 23 * chunks, "{n_out} bytes from {n_in}");
    // Stock gzip reads it back to the same bytes.
    match std::process::Command::new("gzip")
        .args(["-dc", p(&gz)])
        .output()
    {
        Ok(o) => {
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            assert_eq!(o.stdout, std::fs::read(&plain).unwrap());
        }
        Err(e) => panic!("gzip: {e}"),
    }
}

#[test]
fn a_corrupt_chunk_is_skipped_and_named_and_index_rebuilds_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.pcap.zst");
    run_ok(&["synth", "-c", "20000", "--payload", "random", "-w", p(&t)]);
    let ix = dir.path().join("t.pcap.zst.kidx");
    let written = std::fs::read(&ix).unwrap();

    // The index lost, then rebuilt from the trace: the same bytes.
    std::fs::remove_file(&ix).unwrap();
    let out = run_ok(&["index", p(&t)]);
    assert!(stderr(&out).contains("20000 packets"), "{}", stderr(&out));
    assert_eq!(std::fs::read(&ix).unwrap(), written);

    // One byte flipped in the middle of the file (random payload: zstd
    // stores it raw, so the frame still decodes): the chunk is skipped and
    // named by its file offset, exit 1; the other chunks' packets are read.
    let mut bytes = std::fs::read(&t).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x40;
    std::fs::write(&t, &bytes).unwrap();
    let out = run(&["read", "-r", p(&t)]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(e.contains("corrupt data at file offset"), "{e}");
    // One chunk (at most 128 KiB, zstd's) is lost, and said to be.
    let n = stdout_lines(&out).len();
    let skipped: usize = e
        .split(" packets skipped")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no count of packets skipped: {e}"));
    assert_eq!(n + skipped, 20_000, "{e}");
    assert!((18_000..20_000).contains(&n), "{n} packets read: {e}");
    // --no-verify reads it as the codec alone sees it: all 20,000.
    let out = run_ok(&["read", "-r", p(&t), "--no-verify"]);
    assert_eq!(stdout_lines(&out).len(), 20_000);

    // An index for another file is ignored with a warning; the answer is
    // the whole file's.
    bytes[at] ^= 0x40;
    std::fs::write(&t, &bytes).unwrap();
    let mut wrong = written.clone();
    wrong[16] ^= 0xff;
    std::fs::write(&ix, &wrong).unwrap();
    let out = run_ok(&["read", "-r", p(&t)]);
    assert_eq!(stdout_lines(&out).len(), 20_000);
    assert!(stderr(&out).contains("warning") && stderr(&out).contains("index ignored"));

    // Not a trace: a usage error that names the file.
    let junk = dir.path().join("junk");
    std::fs::write(&junk, b"not a trace at all").unwrap();
    let out = run(&["index", p(&junk)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("junk"), "{}", stderr(&out));
}

#[test]
fn errors_say_where_shorten_long_tokens_and_refuse_empty_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n);
    let code_and_err = |args: &[&str]| {
        let out = run(args);
        (out.status.code(), stderr(&out))
    };
    // A rule file with a byte that is not UTF-8 on its second line.
    std::fs::write(d("bad.rules"), b"ip filter 1 pass * * tcp * 80\nip \xff\n").unwrap();
    let (code, e) = code_and_err(&["filter", "lint", "--rules", p(&d("bad.rules"))]);
    assert_eq!(code, Some(2));
    assert!(
        e.contains("bad.rules:2:4: not UTF-8 text (byte 0xff)"),
        "{e}"
    );
    // A 100,000-character token is not echoed whole.
    let long = "A".repeat(100_000);
    std::fs::write(
        d("long.rules"),
        format!("ip filter 1 pass {long} * tcp * 80\n"),
    )
    .unwrap();
    let (code, e) = code_and_err(&["filter", "lint", "--rules", p(&d("long.rules"))]);
    assert_eq!(code, Some(2));
    assert!(
        e.len() < 1000 && e.contains("[100002 characters]"),
        "{} bytes: {}",
        e.len(),
        &e[..e.len().min(300)]
    );
    // Empty inputs where something was expected.
    std::fs::write(d("empty.rules"), "# nothing yet\n\n").unwrap();
    let (code, e) = code_and_err(&["filter", "lint", "--rules", p(&d("empty.rules"))]);
    assert_eq!(code, Some(2));
    assert!(e.contains("no rules in the file"), "{e}");
    std::fs::create_dir(d("none")).unwrap();
    let (code, e) = code_and_err(&["profile", "--merge", p(&d("none"))]);
    assert_eq!(code, Some(2));
    assert!(e.contains("empty directory"), "{e}");
    std::fs::write(d("empty.sa"), "# setkey.conf, SAs to come\n").unwrap();
    let (code, e) = code_and_err(&[
        "ipsec",
        "decap",
        "-r",
        "../../tests/data/lo-http-icmp.pcap",
        "--sa",
        p(&d("empty.sa")),
        "-w",
        p(&d("x.pcap")),
    ]);
    assert_eq!(code, Some(2));
    assert!(e.contains("no security associations in the file"), "{e}");

    // A compressed trace cut short: the file offset and the decompressed one.
    let t = d("t.pcap.zst");
    run_ok(&["synth", "-c", "2000", "-w", p(&t), "--no-index"]);
    let bytes = std::fs::read(&t).unwrap();
    std::fs::write(&t, &bytes[..6767]).unwrap();
    let (code, e) = code_and_err(&["read", "-r", p(&t)]);
    assert_eq!(code, Some(1));
    assert!(
        e.contains("file offset 6767 (decompressed offset") && !e.contains("0 bytes needed"),
        "{e}"
    );
    // Corrupt data in a stream without an index: where in the file.
    let g = d("g.pcap.gz");
    run_ok(&["synth", "-c", "2000", "-w", p(&g), "--no-index"]);
    let mut bytes = std::fs::read(&g).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0xff;
    std::fs::write(&g, &bytes).unwrap();
    let (code, e) = code_and_err(&["read", "-r", p(&g)]);
    assert_eq!(code, Some(2));
    assert!(
        e.contains("gzip stream: corrupt data near file offset"),
        "{e}"
    );
}

/// An option shows on the commands it concerns and nowhere else:
/// `--no-verify` on the commands that read traces, not on `bench web` or
/// `store init`, which read none, and not before the command.
#[test]
fn no_verify_is_an_option_of_the_commands_that_read_traces_only() {
    let help = |args: &[&str]| {
        let mut a = args.to_vec();
        a.push("--help");
        String::from_utf8(run_ok(&a).stdout).unwrap()
    };
    for cmd in [
        &["read"][..],
        &["stats"],
        &["filter"],
        &["profile"],
        &["generate"],
        &["ipsec", "encap"],
        &["ipsec", "decap"],
    ] {
        assert!(help(cmd).contains("--no-verify"), "{cmd:?}");
    }
    for cmd in [
        &["bench", "web"][..],
        &["store", "init"],
        &["web"],
        &["synth"],
        &["ipsec", "gateway"],
        &["plot"],
    ] {
        assert!(!help(cmd).contains("--no-verify"), "{cmd:?}");
    }
    let out = run(&["--no-verify", "read", "-r", p(&data("lo-http-icmp.pcap"))]);
    assert_eq!(out.status.code(), Some(2));
}

/// The completion scripts and the manual page come from the CLI's own
/// definition: each names the commands, bash and zsh accept the scripts,
/// and man(1) formats the page.
#[test]
fn completions_and_the_man_page_are_generated_from_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    for (shell, check) in [
        ("bash", &["bash", "-n"][..]),
        ("zsh", &["zsh", "-n"]),
        ("fish", &[][..]),
    ] {
        let script = run_ok(&["completions", shell]).stdout;
        let text = String::from_utf8(script.clone()).unwrap();
        for cmd in ["capture", "profile", "webbench", "completions"] {
            assert!(text.contains(cmd), "{shell}: {cmd} missing");
        }
        if let Some((program, flags)) = check.split_first() {
            if testkit::require_tool(program) {
                let file = dir.path().join(format!("kansoku.{shell}"));
                std::fs::write(&file, &script).unwrap();
                let ok = std::process::Command::new(program)
                    .args(flags)
                    .arg(&file)
                    .status()
                    .unwrap();
                assert!(ok.success(), "{program} rejects the {shell} script");
            }
        }
    }
    let page = String::from_utf8(run_ok(&["man"]).stdout).unwrap();
    assert!(
        page.starts_with(".ie") && page.contains(".TH kansoku 1"),
        "{page}"
    );
    for cmd in ["capture", "filter", "profile", "ipsec", "webbench"] {
        assert!(page.contains(cmd), "man page without {cmd}");
    }
    let out = run(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
}

//! A directory is a trace: the files a rotation made, any codec and format
//! mixed, read one after another in time order as one trace, with a filter
//! expression and a time window, by `read`, `filter`, `profile` and `stats`.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::*;

/// A rotated capture of 30,000 frames in `dir`: files of about 4 MB each,
/// then every third one recompressed with zstd as pcapng and every third
/// one stored plain, so the codecs and formats are mixed; and the same
/// frames in one file, `whole.pcap`, beside the directory.
fn rotated(root: &Path) -> std::path::PathBuf {
    let whole = root.join("whole.pcap");
    run_ok(&[
        "synth",
        "-c",
        "30000",
        "--size",
        "64-1518",
        "--ip",
        "mix",
        "--proto",
        "mix",
        "--flows",
        "128",
        "--rate",
        "10000",
        "--compress",
        "none",
        "--no-index",
        "-w",
        p(&whole),
    ]);
    let dir = root.join("rotated");
    std::fs::create_dir(&dir).unwrap();
    run_ok(&[
        "read",
        "-r",
        p(&whole),
        "-w",
        p(&dir.join("cap.pcap.lz4")),
        "-C",
        "4",
    ]);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !trace::index::is_sidecar(&p.to_string_lossy()))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "{files:?}");
    for (i, f) in files.iter().enumerate() {
        let to = match i % 3 {
            1 => dir.join(format!("part{i}.pcapng.zst")),
            2 => dir.join(format!("part{i}.pcap")),
            _ => continue,
        };
        run_ok(&["read", "-r", p(f), "-w", p(&to)]);
        std::fs::remove_file(f).unwrap();
        for s in trace::index::sidecars(f) {
            let _ = std::fs::remove_file(s);
        }
    }
    // Not a trace: named and left out, not a failure.
    std::fs::write(dir.join("README"), "rotated by kansoku read -C 4\n").unwrap();
    whole
}

/// The packets of a trace or directory as `read` prints them.
fn lines(args: &[&str]) -> String {
    String::from_utf8(run_ok(args).stdout).unwrap()
}

#[test]
fn a_directory_reads_as_the_trace_it_was_cut_from() {
    let root = tempfile::tempdir().unwrap();
    let whole = rotated(root.path());
    let dir = root.path().join("rotated");
    let out = run(&["read", "-r", p(&dir)]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        lines(&["read", "-r", p(&whole)])
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("README") && err.contains("not a trace"),
        "{err}"
    );
    // -d lists the program of its first trace.
    let listing = lines(&["read", "-r", p(&dir), "-d", "udp port 53"]);
    assert!(listing.contains("ret"), "{listing}");
    assert_eq!(
        listing,
        lines(&["read", "-r", p(&whole), "-d", "udp port 53"])
    );

    // An expression and a time window, the same as on the whole trace.
    let expr = "ip6 or udp portrange 1024-30000";
    let window = ["--since", "1767225600.9", "--until", "1767225602.2"];
    let mut a = vec!["read", "-r", p(&dir)];
    a.extend(window);
    a.push(expr);
    let mut b = vec!["read", "-r", p(&whole)];
    b.extend(window);
    b.push(expr);
    let got = lines(&a);
    assert!(got.lines().count() > 1000, "{}", got.lines().count());
    assert_eq!(got, lines(&b));
}

#[test]
fn filter_profile_and_stats_take_a_directory() {
    let root = tempfile::tempdir().unwrap();
    let whole = rotated(root.path());
    let dir = root.path().join("rotated");
    let rules = root.path().join("r.rules");
    std::fs::write(
        &rules,
        "ip filter 10 pass * * udp * *\nip filter 20 reject * * * * *\n",
    )
    .unwrap();
    let report = |path: &Path| {
        let out = run(&[
            "filter",
            "-r",
            p(path),
            "--rules",
            p(&rules),
            "--json",
            "tcp or udp",
        ]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (v["passed"].clone(), v["rejected"].clone())
    };
    assert_eq!(report(&dir), report(&whole));

    let summaries = |path: &Path| {
        let out = run_ok(&["profile", "-r", p(path), "-i", "1", "--json"]);
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(summaries(&dir), summaries(&whole));

    // stats: each file apart, in time order, their packets adding up.
    let out = run_ok(&["stats", p(&dir), "--json"]);
    let v: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v.len() >= 4);
    let total: u64 = v.iter().map(|s| s["packets"].as_u64().unwrap()).sum();
    assert_eq!(total, 30_000);
    let firsts: Vec<u64> = v.iter().map(|s| s["first_ns"].as_u64().unwrap()).collect();
    assert!(firsts.windows(2).all(|w| w[0] <= w[1]), "{firsts:?}");
}

#[test]
fn the_same_packets_as_tcpdump_over_the_files_of_a_rotation() {
    if !testkit::require_tool("tcpdump") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let whole = rotated(root.path());
    let dir = root.path().join("rotated");
    let expr = "tcp[tcpflags] & tcp-syn != 0 or icmp6";
    let ours = root.path().join("ours.pcap");
    run_ok(&[
        "read",
        "-r",
        p(&dir),
        "-w",
        p(&ours),
        "--compress",
        "none",
        expr,
    ]);
    let theirs = root.path().join("theirs.pcap");
    let st = Command::new("tcpdump")
        .args(["-r", p(&whole), "-w", p(&theirs), expr])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let (a, b) = (tcpdump_dump(&ours), tcpdump_dump(&theirs));
    assert!(a.lines().count() > 100);
    assert!(
        a == b,
        "the packets differ ({} and {} lines)",
        a.lines().count(),
        b.lines().count()
    );
}

#[test]
fn a_time_window_leaves_the_files_before_it_unopened() {
    let root = tempfile::tempdir().unwrap();
    rotated(root.path());
    let dir = root.path().join("rotated");
    // The first file in time order, and the end of its packets.
    let out = run_ok(&["stats", p(&dir), "--json"]);
    let v: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let first = v[0]["file"].as_str().unwrap().to_string();
    let after_ns = v[1]["first_ns"].as_u64().unwrap();
    // Damage its packets (its index stays): a read that opens it says so.
    let mut bytes = std::fs::read(&first).unwrap();
    let n = bytes.len();
    for b in &mut bytes[n / 3..n / 2] {
        *b ^= 0x5a;
    }
    std::fs::write(&first, bytes).unwrap();
    let all = run(&["read", "-r", p(&dir), "-w", "-", "--compress", "none"]);
    assert_ne!(all.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&all.stderr).contains(&first));
    // From the second file's first packet on, the first is never opened.
    let since = format!(
        "{}.{:09}",
        after_ns / 1_000_000_000,
        after_ns % 1_000_000_000
    );
    let later = run(&[
        "read",
        "-r",
        p(&dir),
        "--since",
        &since,
        "-w",
        "-",
        "--compress",
        "none",
    ]);
    let err = String::from_utf8_lossy(&later.stderr);
    assert_eq!(later.status.code(), Some(0), "{err}");
    assert!(!err.contains(&first), "{err}");
}

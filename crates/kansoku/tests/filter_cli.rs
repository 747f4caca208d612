//! `kansoku filter` and `kansoku bench filter` driven as a user would.

mod common;

use std::io::Write;

use common::{data, p, run, run_ok};
use trace::read::TraceReader;
use trace::Record;

const RULES: &str = "\
# the test trace's web server listens on 18080
ip filter 10 pass * * tcp * 18080
ip filter 20 pass * * tcp 18080 *
ip filter 30 pass * * tcp * 18000-18100   # overlaps rule 10, not shadowed
ip filter 40 pass * * tcp * 18080   # shadowed by rule 10
";

/// (packets, TCP packets to or from port 80) in a trace, counted with `wire` directly.
fn count(path: &std::path::Path) -> (u64, u64) {
    let mut r = TraceReader::open(path).unwrap();
    let (mut all, mut web) = (0, 0);
    while let Some(rec) = r.next_record().unwrap() {
        if let Record::Packet(pk) = rec {
            all += 1;
            if let Some(t) = wire::slice(pk.link_type, pk.data).five_tuple() {
                if t.protocol == wire::IpProtocol::Tcp
                    && (t.src_port == 18080 || t.dst_port == 18080)
                {
                    web += 1;
                }
            }
        }
    }
    (all, web)
}

#[test]
fn filter_splits_a_trace_and_counts_per_rule() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("r.rules");
    std::fs::write(&rules, RULES).unwrap();
    let input = data("lo-http-icmp.pcap");
    let (all, web) = count(&input);
    assert!(
        web > 0 && web < all,
        "the test trace has web and other packets"
    );
    let (passed, rejected) = (dir.path().join("pass.pcap"), dir.path().join("rej.pcap"));
    for engine in ["linear", "fast"] {
        let out = run_ok(&[
            "filter",
            "-r",
            p(&input),
            "--rules",
            p(&rules),
            "-w",
            p(&passed),
            "--rejected",
            p(&rejected),
            "--compress",
            "none",
            "--engine",
            engine,
            "--json",
        ]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["passed"]["packets"], web);
        assert_eq!(v["rejected"]["packets"], all - web);
        assert_eq!(v["rules"][3]["packets"], 0, "rule 40 is shadowed");
        let per_rule: u64 = (0..4)
            .map(|i| v["rules"][i]["packets"].as_u64().unwrap())
            .sum();
        assert_eq!(per_rule, web);
        assert_eq!(count(&passed), (web, web));
        assert_eq!(count(&rejected), (all - web, 0));
    }
    // The text report has one row per rule and the totals.
    let out = run_ok(&["filter", "-r", p(&input), "--rules", p(&rules)]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("ip filter 10 pass * * tcp * 18080"), "{text}");
    assert!(text.contains(&format!("passed {web} packets")), "{text}");
}

#[test]
fn explain_lint_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("r.rules");
    std::fs::write(&rules, RULES).unwrap();
    let out = run_ok(&[
        "filter",
        "explain",
        "--rules",
        p(&rules),
        "tcp",
        "10.0.0.1:1234",
        ">",
        "10.0.0.2:18080",
        "flags",
        "S",
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("PASS: line 2: ip filter 10"), "{text}");
    assert!(
        text.contains("also matches, shadowed here: line 4: ip filter 30"),
        "{text}"
    );
    let out = run_ok(&[
        "filter",
        "explain",
        "--rules",
        p(&rules),
        "udp 10.0.0.1:1234 > 10.0.0.2:18080",
    ]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("REJECT: no rule matches"));

    let out = run(&["filter", "lint", "--rules", p(&rules)]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(":5: rule 40 can never match: rule 10 (line 2)"),
        "{text}"
    );

    let bad = dir.path().join("bad.rules");
    std::fs::write(
        &bad,
        "ip filter 1 pass * * tcp * www\nip filter 2 allow * * * * *\n",
    )
    .unwrap();
    let out = run(&["filter", "lint", "--rules", p(&bad)]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        err.trim(),
        format!(
            "kansoku: {}:2:13: expected `pass` or `reject`, found `allow`",
            p(&bad)
        )
    );
}

#[test]
fn match_reads_classbench_traces_plain_or_zstd() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("cb.rules");
    std::fs::write(
        &rules,
        "@10.0.0.0/8\t0.0.0.0/0\t0 : 65535\t80 : 80\t0x06/0xFF\t0x0000/0x0000\t\n\
         @0.0.0.0/0\t192.168.0.0/16\t0 : 65535\t0 : 65535\t0x00/0x00\t0x0000/0x0000\t\n",
    )
    .unwrap();
    // 10.0.0.1 -> 1.1.1.1:80 tcp; 10.0.0.1 -> 192.168.1.1:53 udp; 1.1.1.1 -> 1.1.1.1 icmp.
    let headers = "167772161\t16843009\t1234\t80\t6\t0\n167772161\t3232235777\t53\t53\t17\t1\n16843009\t16843009\t0\t0\t1\t2\n";
    let plain = dir.path().join("t.trace");
    std::fs::write(&plain, headers).unwrap();
    let zst = dir.path().join("t.trace.zst");
    let mut z = zstd::Encoder::new(std::fs::File::create(&zst).unwrap(), 3).unwrap();
    z.write_all(headers.as_bytes()).unwrap();
    z.finish().unwrap();
    for trace in [&plain, &zst] {
        for engine in ["linear", "fast"] {
            let out = run_ok(&[
                "filter",
                "match",
                "--rules",
                p(&rules),
                "--trace",
                p(trace),
                "--engine",
                engine,
            ]);
            assert_eq!(String::from_utf8(out.stdout).unwrap(), "0\n1\nnone\n");
        }
    }
    // bench filter on the same pair, with the paper's model over two sizes.
    let out = run_ok(&[
        "bench",
        "filter",
        "--rules",
        p(&rules),
        "--trace",
        p(&plain),
        "--paper-sizes",
        "1",
        "--min-seconds",
        "0",
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    // A two-rule set: the fast engine answers it with its RFC tables.
    assert!(text.contains("| fast (RFC) |"), "{text}");
}

/// The repository's copy of ClassBench's acl1 1K set and its trace.
fn acl1_1k() -> (std::path::PathBuf, std::path::PathBuf) {
    let d =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../filter/tests/data/classbench");
    (d.join("acl1_1k.rules"), d.join("acl1_1k.trace.zst"))
}

#[test]
fn v6_maps_a_classbench_set_whose_answers_filter_match_reproduces() {
    let dir = tempfile::tempdir().unwrap();
    let (rules, trace) = acl1_1k();
    let out = run_ok(&[
        "filter",
        "v6",
        "--rules",
        p(&rules),
        "--trace",
        p(&trace),
        "-o",
        p(dir.path()),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("every one equal to the IPv4 trace's"), "{err}");
    let (rules6, trace6) = (
        dir.path().join("acl1_1k_v6.rules"),
        dir.path().join("acl1_1k_v6.trace.zst"),
    );
    let text = std::fs::read_to_string(&rules6).unwrap();
    let set = filter::RuleSet::parse(&text).unwrap();
    let v4 = filter::RuleSet::parse(&std::fs::read_to_string(&rules).unwrap()).unwrap();
    assert_eq!(set.len(), v4.len());
    assert!(set
        .rules()
        .iter()
        .all(|r| !matches!(r.src, filter::AddrMatch::V4 { .. })
            && !matches!(r.dst, filter::AddrMatch::V4 { .. })));
    // The trace's answer column is what both engines give for each header.
    let mut answers = String::new();
    std::io::Read::read_to_string(
        &mut zstd::Decoder::new(std::fs::File::open(&trace6).unwrap()).unwrap(),
        &mut answers,
    )
    .unwrap();
    let want: Vec<String> = answers
        .lines()
        .map(|l| {
            let m: usize = l.split('\t').nth(5).unwrap().parse().unwrap();
            if m < set.len() {
                m.to_string()
            } else {
                "none".to_string()
            }
        })
        .collect();
    assert_eq!(want.len(), 100_000);
    assert!(
        want.iter().any(|w| w == "none")
            || want.iter().collect::<std::collections::HashSet<_>>().len() > 100
    );
    for engine in ["fast", "linear"] {
        let out = run_ok(&[
            "filter",
            "match",
            "--rules",
            p(&rules6),
            "--trace",
            p(&trace6),
            "--engine",
            engine,
        ]);
        let got: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        assert!(
            got == want,
            "{engine}: filter match disagrees with the mapped trace's answers"
        );
    }
    // A trace whose answers are not the rules' is refused, the header named.
    let bad = dir.path().join("bad.trace");
    std::fs::write(&bad, "167772161\t16843009\t1234\t80\t6\t0\n").unwrap();
    let out = run(&[
        "filter",
        "v6",
        "--rules",
        p(&rules),
        "--trace",
        p(&bad),
        "-o",
        p(dir.path()),
    ]);
    assert_eq!(out.status.code(), Some(2), "an input error");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("header 1 (") && err.contains("the IPv4 trace says rule 0"),
        "{err}"
    );
}

/// An output that cannot be written is named in the message, whichever
/// file it is: `filter -w` into a "directory" that is a regular file, and
/// `filter v6 -o` there (whose files were once blamed on standard output).
#[test]
fn an_unwritable_output_names_its_path_and_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let not_a_dir = dir.path().join("plain-file");
    std::fs::write(&not_a_dir, b"").unwrap();
    let rules = dir.path().join("fw.rules");
    std::fs::write(&rules, RULES).unwrap();
    let passed = not_a_dir.join("passed.pcap");
    let (set, trace) = acl1_1k();
    let v6_dir = not_a_dir.join("v6");
    let input = data("lo-http-icmp.pcap");
    let runs: [(&[&str], &std::path::Path); 2] = [
        (
            &[
                "filter",
                "-r",
                p(&input),
                "--rules",
                p(&rules),
                "-w",
                p(&passed),
            ],
            &passed,
        ),
        (
            &[
                "filter",
                "v6",
                "--rules",
                p(&set),
                "--trace",
                p(&trace),
                "-o",
                p(&v6_dir),
            ],
            &v6_dir,
        ),
    ];
    for (args, named) in runs {
        let out = run(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {err}");
        assert!(err.contains(p(named)), "{args:?}: {err}");
        assert!(!err.contains("standard output"), "{args:?}: {err}");
    }
}

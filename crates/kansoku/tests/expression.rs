//! tcpdump's filter expressions over traces: for every link type kansoku
//! reads (Ethernet with 802.1Q and QinQ tags, Linux cooked v1 and v2, raw
//! IP, BSD loopback in either byte order), compressed or not, from a file or
//! standard input, `kansoku read -r F EXPR` keeps exactly the packets
//! `tcpdump -r F EXPR` keeps, and `-d` lists the program tcpdump lists.
//! tcpdump is the reference: the test fails under CI without it.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::*;

/// Expressions over every kind of header the traces hold. Some do not
/// compile for some link types (`vlan` on Linux cooked v2, `ether` on raw
/// IP): there both tools must refuse them.
const EXPRESSIONS: &[&str] = &[
    "ip",
    "ip6",
    "tcp",
    "udp",
    "icmp or icmp6",
    "not ip",
    "host 10.0.0.1",
    "net 10.0.0.0/8",
    "src net 10.0.0.0/9 and dst net 192.168.1.0/25",
    "tcp port 80 or udp port 53",
    "portrange 1024-20000",
    "dst portrange 0-1023",
    "tcp[tcpflags] & tcp-syn != 0",
    "tcp[tcpflags] & (tcp-ack|tcp-fin) == tcp-ack",
    "ip[8] < 64",
    "ip[2:2] > 500",
    "ip6 and udp",
    "ip6 net fd00::/8",
    "greater 600",
    "less 100",
    "len > 1000 and len < 1400",
    "icmp[icmptype] == icmp-echo",
    "vlan",
    "vlan 5",
    "vlan 100 and vlan 200",
    "vlan and udp",
    "not vlan and tcp",
    "ether multicast",
    "ether proto 0x0800",
    "ip proto 17 and not port 53",
    "udp and (src port 53 or dst port 53)",
    "ip and tcp and dst port 80 and host 127.0.0.1",
    "tcp[((tcp[12:1] & 0xf0) >> 2):4] = 0x47455420",
    "ip[6:2] & 0x3fff != 0",
    "ip[6] & 0x20 != 0 and udp",
    "ip6[6] == 44",
    "arp",
    "ether broadcast",
    "arp and ether dst ff:ff:ff:ff:ff:ff",
    "icmp[icmptype] == icmp-echoreply",
    "icmp6[icmp6type] == icmp6-echo",
    "icmp6 and ip6[40] == 135",
];

/// An Ethernet frame of `ethertype` from 02:..:01 to `dst` carrying `body`.
fn ether(dst: [u8; 6], ethertype: u16, body: &[u8]) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&[2, 0, 0, 0, 0, 1]);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(body);
    f
}

/// An IPv4 header (no options, checksum 0: no tool here checks it).
fn ipv4(proto: u8, frag: u16, payload: &[u8], dst: [u8; 4]) -> Vec<u8> {
    let mut h = vec![0x45, 0];
    h.extend_from_slice(&(20 + payload.len() as u16).to_be_bytes());
    h.extend_from_slice(&[0x12, 0x34]);
    h.extend_from_slice(&frag.to_be_bytes());
    h.extend_from_slice(&[64, proto, 0, 0, 10, 0, 0, 1]);
    h.extend_from_slice(&dst);
    h.extend_from_slice(payload);
    h
}

/// An IPv6 header with `next` and the payload after it.
fn ipv6(next: u8, payload: &[u8], dst: [u8; 16]) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    h.extend_from_slice(&[next, 64]);
    h.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    h.extend_from_slice(&dst);
    h.extend_from_slice(payload);
    h
}

/// Frames synth does not make: ARP requests and replies, broadcast and
/// multicast, IPv4 fragments (first and later), IPv6 with a fragment
/// header, ICMP echo replies, ICMPv6 echo requests and neighbor
/// solicitations, TCP with options and an HTTP request behind them.
fn misc_frames() -> Vec<Vec<u8>> {
    const BCAST: [u8; 6] = [0xff; 6];
    const HOST: [u8; 6] = [2, 0, 0, 0, 0, 2];
    let v6dst = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
    let mut frames = Vec::new();
    for i in 0..6u8 {
        // ARP request (broadcast) and reply.
        let mut arp = vec![0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 10, 0, 0, 1];
        arp.extend_from_slice(&[0; 6]);
        arp.extend_from_slice(&[10, 0, 0, 2 + i]);
        frames.push(ether(BCAST, 0x0806, &arp));
        arp[7] = 2;
        frames.push(ether(HOST, 0x0806, &arp));
        // A UDP datagram in two fragments, and one to a multicast group.
        let udp = [0x30, 0x39, 0x00, 0x35, 0, 40, 0, 0];
        let mut first = udp.to_vec();
        first.extend_from_slice(&[i; 24]);
        frames.push(ether(
            HOST,
            0x0800,
            &ipv4(17, 0x2000, &first, [192, 168, 1, 9]),
        ));
        frames.push(ether(
            HOST,
            0x0800,
            &ipv4(17, 4, &[i; 16], [192, 168, 1, 9]),
        ));
        frames.push(ether(
            [1, 0, 0x5e, 0, 0, 251],
            0x0800,
            &ipv4(17, 0, &udp, [224, 0, 0, 251]),
        ));
        // IPv6: a fragment header before UDP; ICMPv6 echo request and a
        // neighbor solicitation.
        let mut frag = vec![17, 0, 0, 1, 0, 0, 0, i];
        frag.extend_from_slice(&udp);
        frames.push(ether(HOST, 0x86dd, &ipv6(44, &frag, v6dst)));
        frames.push(ether(
            HOST,
            0x86dd,
            &ipv6(58, &[128, 0, 0, 0, 0, 1, 0, i], v6dst),
        ));
        let mut ns = vec![135, 0, 0, 0, 0, 0, 0, 0];
        ns.extend_from_slice(&v6dst);
        frames.push(ether(
            [0x33, 0x33, 0xff, 0, 0, 2],
            0x86dd,
            &ipv6(
                58,
                &ns,
                [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 2],
            ),
        ));
        // ICMP echo reply; TCP with 12 bytes of options and an HTTP request.
        frames.push(ether(
            HOST,
            0x0800,
            &ipv4(1, 0, &[0, 0, 0, 0, 0, 1, 0, i], [10, 0, 0, 2]),
        ));
        let mut tcp = vec![
            0x9c, 0x40, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x80, 0x18, 0xff, 0xff, 0, 0, 0, 0,
        ];
        tcp.extend_from_slice(&[1, 1, 8, 10, 0, 0, 0, i, 0, 0, 0, 0]);
        tcp.extend_from_slice(if i % 2 == 0 {
            b"GET / HTTP/1.1\r\n"
        } else {
            b"POST / HTTP/1.1\r\n"
        });
        frames.push(ether(HOST, 0x0800, &ipv4(6, 0x4000, &tcp, [10, 0, 0, 2])));
    }
    frames
}

/// A pcap file's global header for `link_type`, in either byte order.
fn pcap_header(link_type: u32, big_endian: bool) -> Vec<u8> {
    let fields = [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 262_144, link_type];
    let mut h = Vec::with_capacity(24);
    for (i, f) in fields.iter().enumerate() {
        match (i, big_endian) {
            // Version: two u16s, major then minor.
            (1, true) => {
                h.extend_from_slice(&2u16.to_be_bytes());
                h.extend_from_slice(&4u16.to_be_bytes());
            }
            (1, false) => {
                h.extend_from_slice(&2u16.to_le_bytes());
                h.extend_from_slice(&4u16.to_le_bytes());
            }
            (_, true) => h.extend_from_slice(&f.to_be_bytes()),
            (_, false) => h.extend_from_slice(&f.to_le_bytes()),
        }
    }
    h
}

fn pcap_record(out: &mut Vec<u8>, i: u32, data: &[u8], big_endian: bool) {
    let len = data.len() as u32;
    for f in [1_700_000_000 + i / 1000, (i % 1000) * 1000, len, len] {
        if big_endian {
            out.extend_from_slice(&f.to_be_bytes());
        } else {
            out.extend_from_slice(&f.to_le_bytes());
        }
    }
    out.extend_from_slice(data);
}

/// The IP packets (EtherType IPv4 or IPv6, untagged) of an Ethernet trace.
fn ip_packets(path: &Path) -> Vec<(u16, Vec<u8>)> {
    let (records, _) = read_all(path);
    packets_of(&records)
        .into_iter()
        .filter_map(|p| {
            let t = u16::from_be_bytes([*p.data.get(12)?, *p.data.get(13)?]);
            (t == 0x0800 || t == 0x86dd).then(|| (t, p.data[14..].to_vec()))
        })
        .collect()
}

/// Traces of every link type, written into `dir`: synthetic Ethernet
/// traffic (IPv4 and IPv6, TCP, UDP and ICMP; untagged, 802.1Q and QinQ),
/// the same IP packets as raw IP, Linux cooked v1 and BSD loopback (both
/// byte orders), and the real captures of tests/data.
fn traces(dir: &Path) -> Vec<PathBuf> {
    let synth = |name: &str, extra: &[&str]| {
        let path = dir.join(name);
        let mut args = vec![
            "synth",
            "-c",
            "1500",
            "--ip",
            "mix",
            "--proto",
            "mix",
            "--size",
            "64-1518",
            "--flows",
            "64",
            "--compress",
            "none",
            "--no-index",
            "-w",
        ];
        args.push(p(&path));
        args.extend_from_slice(extra);
        run_ok(&args);
        path
    };
    let plain = synth("eth.pcap", &["--seed", "3"]);
    let dot1q = synth("dot1q.pcap", &["--seed", "4", "--vlan", "5"]);
    let qinq = synth("qinq.pcap", &["--seed", "5", "--vlan", "100,200"]);
    let misc = dir.join("misc.pcap");
    let mut f = pcap_header(1, false);
    for (i, frame) in misc_frames().iter().enumerate() {
        pcap_record(&mut f, i as u32, frame, false);
    }
    std::fs::write(&misc, f).unwrap();
    let mut ip = ip_packets(&plain);
    ip.extend(ip_packets(&misc));
    let mut out = vec![plain, dot1q, qinq, misc];
    // Raw IP (LINKTYPE_RAW 101), Linux cooked v1 (113), BSD loopback (0).
    for (name, link_type, big_endian) in [
        ("raw.pcap", 101, false),
        ("sll.pcap", 113, false),
        ("null-le.pcap", 0, false),
        ("null-be.pcap", 0, true),
    ] {
        let mut f = pcap_header(link_type, big_endian);
        for (i, (ethertype, packet)) in ip.iter().enumerate() {
            let mut frame = Vec::with_capacity(packet.len() + 16);
            match link_type {
                113 => {
                    // Packet type (to us), ARPHRD_ETHER, address length and
                    // address, then the protocol.
                    frame.extend_from_slice(&[0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0]);
                    frame.extend_from_slice(&ethertype.to_be_bytes());
                }
                0 => {
                    // The address family in the writer's byte order: AF_INET
                    // 2, AF_INET6 as Linux numbers it (10) and as the BSDs
                    // do (24, 28, 30): libpcap takes each.
                    let family: u32 = match (ethertype, i % 3) {
                        (0x0800, _) => 2,
                        (_, 0) => 24,
                        (_, 1) => 28,
                        _ => 30,
                    };
                    if big_endian {
                        frame.extend_from_slice(&family.to_be_bytes());
                    } else {
                        frame.extend_from_slice(&family.to_le_bytes());
                    }
                }
                _ => {}
            }
            frame.extend_from_slice(packet);
            pcap_record(&mut f, i as u32, &frame, big_endian);
        }
        let path = dir.join(name);
        std::fs::write(&path, f).unwrap();
        out.push(path);
    }
    out.push(data("lo-http-icmp.pcap"));
    out.push(data("any-sll2-nano.pcap"));
    out.push(data("veth-vlan-2if.pcapng"));
    out
}

/// Fails with the first line where two dumps differ (not the whole dumps,
/// which run to megabytes).
fn assert_same(got: &str, want: &str, what: &str) {
    if got == want {
        return;
    }
    let (g, w): (Vec<&str>, Vec<&str>) = (got.lines().collect(), want.lines().collect());
    let i = g
        .iter()
        .zip(&w)
        .position(|(a, b)| a != b)
        .unwrap_or(g.len().min(w.len()));
    panic!(
        "{what}: kansoku's {} lines, tcpdump's {}; line {i} differs:\n kansoku: {:?}\n tcpdump: {:?}",
        g.len(),
        w.len(),
        g.get(i),
        w.get(i)
    );
}

/// What tcpdump keeps of `trace` for `expr`, as its dump; `None` when
/// tcpdump refuses the expression for this trace.
fn tcpdump_keeps(trace: &Path, expr: &str, out: &Path) -> Option<String> {
    let status = Command::new("tcpdump")
        .args(["-r", p(trace), "-w", p(out), expr])
        .stderr(Stdio::null())
        .status()
        .expect("tcpdump");
    status.success().then(|| tcpdump_dump(out))
}

fn require_tcpdump() -> bool {
    testkit::require_tool("tcpdump")
}

#[test]
fn read_keeps_what_tcpdump_keeps_on_every_link_type() {
    if !require_tcpdump() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut compared = 0;
    let mut refused = 0;
    for trace in traces(dir.path()) {
        for expr in EXPRESSIONS {
            let theirs = dir.path().join("tcpdump.pcap");
            let ours = dir.path().join("kansoku.pcap");
            let want = tcpdump_keeps(&trace, expr, &theirs);
            let got = run(&[
                "read",
                "-r",
                p(&trace),
                "-w",
                p(&ours),
                "--format",
                "pcap",
                "--compress",
                "none",
                "--no-index",
                expr,
            ]);
            let what = format!("{} `{expr}`", trace.display());
            match want {
                Some(want) => {
                    assert!(
                        got.status.success(),
                        "{what}: {}",
                        String::from_utf8_lossy(&got.stderr)
                    );
                    assert_same(&tcpdump_dump(&ours), &want, &what);
                    compared += 1;
                }
                None => {
                    // A compile error is a usage error, in libpcap's words.
                    assert_eq!(got.status.code(), Some(2), "{what}");
                    let err = String::from_utf8_lossy(&got.stderr);
                    assert!(err.contains("expression"), "{what}: {err}");
                    refused += 1;
                }
            }
        }
    }
    // The corpus exercises both outcomes, and mostly packets.
    assert!(compared > 250, "{compared} compared");
    assert!(refused > 0, "no expression refused");
}

#[test]
fn compressed_files_and_standard_input_keep_the_same_packets() {
    if !require_tcpdump() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (t, trace) in traces(dir.path()).iter().enumerate() {
        // kansoku writes in this machine's byte order: a copy of a big-endian
        // BSD loopback file keeps each packet's address family as it was,
        // which then reads differently (to tcpdump too). So the reference is
        // tcpdump on an uncompressed copy, which is what the compressed ones
        // hold.
        let name = trace.file_name().unwrap().to_str().unwrap();
        let copy = dir.path().join(format!("{t}-{name}"));
        run_ok(&[
            "read",
            "-r",
            p(trace),
            "-w",
            p(&copy),
            "--compress",
            "none",
            "--no-index",
        ]);
        for expr in [
            "ip6 or udp",
            "not tcp and greater 200",
            "vlan or arp or ip[6:2] & 0x3fff != 0",
        ] {
            let Some(want) = tcpdump_keeps(&copy, expr, &dir.path().join("t.pcap")) else {
                continue;
            };
            for codec in ["lz4", "zst", "gz"] {
                // The copy keeps the file's format: pcapng stays pcapng.
                let packed = dir.path().join(format!("{t}-{name}.{codec}"));
                run_ok(&["read", "-r", p(trace), "-w", p(&packed)]);
                let out = dir.path().join(format!("k-{t}-{codec}.pcap"));
                run_ok(&[
                    "read",
                    "-r",
                    p(&packed),
                    "-w",
                    p(&out),
                    "--format",
                    "pcap",
                    "--compress",
                    "none",
                    expr,
                ]);
                assert_same(
                    &tcpdump_dump(&out),
                    &want,
                    &format!("{} {codec} `{expr}`", trace.display()),
                );
            }
        }
    }
    // Standard input, the expression from a file with a comment (-F).
    let qinq = dir.path().join("qinq.pcap");
    let expr = "vlan 100 and vlan 200 and (tcp or icmp6)";
    let want = tcpdump_keeps(&qinq, expr, &dir.path().join("t.pcap")).expect("tcpdump compiles");
    assert!(want.lines().count() > 100);
    let file = dir.path().join("expr.txt");
    std::fs::write(&file, format!("# QinQ only\n{expr} # and the rest\n")).unwrap();
    let out = dir.path().join("stdin.pcap");
    let mut child = kansoku()
        .args([
            "read",
            "-r",
            "-",
            "-F",
            p(&file),
            "-w",
            p(&out),
            "--compress",
            "none",
        ])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&std::fs::read(&qinq).unwrap())
        .unwrap();
    assert!(child.wait().unwrap().success());
    assert_same(&tcpdump_dump(&out), &want, "standard input");
}

#[test]
fn dash_d_lists_the_program_tcpdump_lists() {
    if !require_tcpdump() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let all = traces(dir.path());
    for trace in &all {
        for expr in [
            "tcp port 80 or udp port 53",
            "ip6 and not icmp6",
            "greater 100",
        ] {
            for d in ["-d", "-dd", "-ddd"] {
                let theirs = Command::new("tcpdump")
                    .args([d, "-r", p(trace), expr])
                    .stderr(Stdio::null())
                    .output()
                    .unwrap();
                let ours = run(&["read", "-r", p(trace), d, expr]);
                let what = format!("{} {d} `{expr}`", trace.display());
                if theirs.status.success() {
                    assert!(ours.status.success(), "{what}");
                    assert_eq!(
                        String::from_utf8_lossy(&ours.stdout),
                        String::from_utf8_lossy(&theirs.stdout),
                        "{what}"
                    );
                } else {
                    assert_eq!(ours.status.code(), Some(2), "{what}");
                }
            }
        }
    }
}

/// Packets tcpdump counts in `trace` for `expr`.
fn tcpdump_count(trace: &Path, expr: &str) -> u64 {
    let out = Command::new("tcpdump")
        .args(["-r", p(trace), "-nn", expr])
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success());
    out.stdout.iter().filter(|&&b| b == b'\n').count() as u64
}

#[test]
fn stats_profile_and_filter_see_only_the_packets_the_expression_keeps() {
    if !require_tcpdump() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let all = traces(dir.path());
    let trace = &all[0];
    let expr = "ip6 or (udp and portrange 1024-40000)";
    let want = tcpdump_count(trace, expr);
    assert!(want > 100 && want < 1400, "{want}");

    let out = run_ok(&["stats", p(trace), "--json", "--", expr]);
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["packets"], want, "{s}");

    let summary = dir.path().join("p.agr");
    run_ok(&["profile", "-r", p(trace), "-w", p(&summary), "--json", expr]);
    let text = std::fs::read_to_string(&summary).unwrap();
    let v: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let packets =
        v["sections"][0]["packets"].as_u64().unwrap() + v["non_ip_packets"].as_u64().unwrap();
    assert_eq!(packets, want, "{v}");

    // The expression first, then the rules: here every packet it keeps is
    // passed by the rules.
    let rules = dir.path().join("all.rules");
    std::fs::write(&rules, "ip filter 10 pass * * * * *\n").unwrap();
    let out = run(&[
        "filter",
        "-r",
        p(trace),
        "--rules",
        p(&rules),
        "--json",
        expr,
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let seen =
        v["passed"]["packets"].as_u64().unwrap() + v["rejected"]["packets"].as_u64().unwrap();
    assert_eq!(seen, want, "{v}");
}

#[test]
fn a_bad_expression_is_a_usage_error_in_libpcaps_words() {
    let trace = data("lo-http-icmp.pcap");
    let out = run(&["read", "-r", p(&trace), "tcp", "port", "http2x"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("http2x"), "{err}");
    let out = run(&["read", "-r", p(&data("any-sll2-nano.pcap")), "vlan"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("VLAN") || err.contains("vlan"), "{err}");
    // An expression and -F at once: which one was meant?
    let out = run(&["read", "-r", p(&trace), "-F", p(&trace), "tcp"]);
    assert_eq!(out.status.code(), Some(2));
}

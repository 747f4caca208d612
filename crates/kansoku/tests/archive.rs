//! The archive: a directory of rotated lz4 traces queried in tcpdump's
//! language finds exactly what tcpdump finds scanning plain copies of the
//! same files, whether the key index narrows the read (hosts, ports,
//! protocols, v4 and v6) or cannot (negations, nets, sizes), and whatever
//! happened to the index (damaged, missing, stale).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use aguri::KeyKind;
use common::*;

/// An archive of 40,000 frames of 400 flows at a time, random v4 and v6
/// addresses, TCP, UDP and ICMP, rotated into files of about 2 MB; with
/// the test data's ARP, fragments and DNS (veth-arp-frag-dns.pcap) and
/// VLAN-tagged frames on two interfaces (veth-vlan-2if.pcapng, as zstd
/// pcapng) beside them.
fn archive(root: &Path) -> PathBuf {
    let dir = root.join("archive");
    std::fs::create_dir(&dir).unwrap();
    let out = dir.join("a.pcap.lz4");
    let synth = "synth -c 40000 --size 64-1518 --ip mix --proto mix --flows 400 \
                 --src-net 0.0.0.0/0 --dst-net 0.0.0.0/0 --rate 20000 -C 2 -w";
    let mut args: Vec<&str> = synth.split_whitespace().collect();
    args.push(p(&out));
    run_ok(&args);
    for (from, to) in [
        ("veth-arp-frag-dns.pcap", "arp.pcap.lz4"),
        ("veth-vlan-2if.pcapng", "vlan.pcapng.zst"),
    ] {
        run_ok(&["read", "-r", p(&data(from)), "-w", p(&dir.join(to))]);
    }
    dir
}

/// The traces of `dir` (no sidecars).
fn traces(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !trace::index::is_sidecar(&p.to_string_lossy()))
        .collect();
    v.sort();
    v
}

/// A dump's packets, each its time and bytes (a line that does not start
/// with a tab starts one; the decoded text is left out, since tcpdump's
/// relative TCP sequence numbers depend on what else it read), sorted:
/// the same packets in any order of files.
fn packets(dump: &str) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for line in dump.lines() {
        if line.starts_with('\t') {
            if let Some(last) = v.last_mut() {
                last.push('\n');
                last.push_str(line);
            }
        } else {
            v.push(line.split_whitespace().next().unwrap_or("").to_string());
        }
    }
    v.sort();
    v
}

/// Plain pcapng copies of `files`, without index, in `root/plain`.
fn plain_copies(root: &Path, files: &[PathBuf]) -> Vec<PathBuf> {
    let plain_dir = root.join("plain");
    std::fs::create_dir(&plain_dir).unwrap();
    let mut plain = Vec::new();
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy();
        let to = plain_dir.join(format!("{name}.plain.pcapng"));
        run_ok(&["read", "-r", p(f), "-w", p(&to), "--no-index"]);
        plain.push(to);
    }
    plain
}

/// What tcpdump finds for `expr` in the plain copies in `plain`.
fn tcpdump_finds(plain: &[PathBuf], expr: &str, work: &Path) -> Vec<String> {
    let mut all = String::new();
    for (i, f) in plain.iter().enumerate() {
        let out = work.join(format!("td{i}.pcap"));
        let st = Command::new("tcpdump")
            .args(["-r", p(f), "-w", p(&out), expr])
            .stderr(Stdio::null())
            .status()
            .expect("tcpdump");
        assert!(st.success(), "tcpdump -r {} {expr}", f.display());
        all.push_str(&tcpdump_dump(&out));
    }
    packets(&all)
}

/// What `kansoku read -r DIR EXPR` finds, and what it said.
fn kansoku_finds(dir: &Path, expr: &str, work: &Path) -> (Vec<String>, String) {
    let out = work.join("ours.pcapng");
    let _ = std::fs::remove_file(&out);
    let o = run_ok(&["read", "-r", p(dir), "-w", p(&out), expr]);
    (
        packets(&tcpdump_dump(&out)),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The source address and port of packet `n` of `file`, as `read` prints
/// it (`proto ADDR:PORT > ...`, v6 in brackets).
fn endpoint(file: &Path, n: usize, v6: bool) -> (String, String) {
    let lines = String::from_utf8(run_ok(&["read", "-r", p(file)]).stdout).unwrap();
    let line = lines
        .lines()
        .filter(|l| l.contains(" tcp ") || l.contains(" udp "))
        .filter(|l| {
            l.split_whitespace()
                .nth(2)
                .is_some_and(|a| a.starts_with('[') == v6)
        })
        .nth(n)
        .expect("a packet");
    let src = line.split_whitespace().nth(2).unwrap();
    let (addr, port) = src.rsplit_once(':').unwrap();
    (addr.trim_matches(['[', ']']).to_string(), port.to_string())
}

#[test]
fn queries_find_what_tcpdump_finds_in_plain_copies() {
    if !testkit::require_tool("tcpdump") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let dir = archive(root.path());
    let files = traces(&dir);
    assert!(files.len() >= 15, "{files:?}");
    let plain = plain_copies(root.path(), &files);
    let middle = &files[files.len() / 2];
    let (v4, port) = endpoint(middle, 100, false);
    let (v4b, _) = endpoint(middle, 300, false);
    let (v6, port6) = endpoint(&files[3], 50, true);
    let net24 = format!("{}.0/24", v4.rsplit_once('.').unwrap().0);
    let exprs = [
        // What the index narrows.
        format!("host {v4}"),
        format!("host {v6}"),
        format!("ip6 src host {v6} or dst host {v6}"),
        format!("src host {v4} or dst host {v4b}"),
        format!("host {v4} or {v4b}"),
        format!("port {port}"),
        format!("tcp port {port} or udp port {port6}"),
        format!("host {v4} and (tcp or udp) and greater 500"),
        format!("net {v6}/128"),
        "icmp".to_string(),
        "host 198.18.9.2".to_string(),
        "host 192.168.99.77".to_string(),
        "host 2001:db8::dead:beef".to_string(),
        // What it cannot: every chunk is read.
        format!("not host {v4}"),
        format!("net {net24}"),
        "less 200".to_string(),
        "ip6 and udp".to_string(),
        "arp".to_string(),
        "vlan and udp".to_string(),
        format!("host {v4} or less 100"),
        "ip[8] = 64 and icmp".to_string(),
    ];
    for expr in &exprs {
        let want = tcpdump_finds(&plain, expr, root.path());
        let (got, said) = kansoku_finds(&dir, expr, root.path());
        let first = got.iter().zip(&want).position(|(a, b)| a != b);
        assert!(
            got == want,
            "{expr}: kansoku found {} packets, tcpdump {}; first difference: {:?}\n{said}",
            got.len(),
            want.len(),
            first.map(|i| (&got[i], &want[i]))
        );
        assert!(!said.contains("key index not used"), "{expr}: {said}");
    }
    // The queries for hosts found packets, so the test compared something.
    assert!(!tcpdump_finds(&plain, &format!("host {v4}"), root.path()).is_empty());
    assert!(!tcpdump_finds(&plain, &format!("host {v6}"), root.path()).is_empty());
    assert!(!tcpdump_finds(&plain, "host 198.18.9.2", root.path()).is_empty());

    // Files another tool wrote (no index at all): `kansoku index` adds
    // both indexes, and queries over them are as exact.
    let other = root.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let some = &plain[2..5];
    for f in some {
        let to = other.join(f.file_name().unwrap());
        std::fs::copy(f, &to).unwrap();
        run_ok(&["index", p(&to)]);
        assert!(trace::keys::keys_path(&to).exists(), "{}", to.display());
    }
    let (v4c, portc) = endpoint(&some[1], 20, false);
    for expr in [
        format!("host {v4c}"),
        format!("port {portc}"),
        "host 10.9.8.7".into(),
    ] {
        let want = tcpdump_finds(some, &expr, root.path());
        let (got, said) = kansoku_finds(&other, &expr, root.path());
        assert!(
            got == want,
            "indexed later, {expr}: {} vs {}",
            got.len(),
            want.len()
        );
        assert!(!said.contains("key index not used"), "{expr}: {said}");
    }

    // Damage: a key sidecar flipped in the middle, one removed, one of
    // another file put in place of a third. Nothing is lost; the run says
    // which index it could not use.
    let sidecar = |f: &Path| trace::keys::keys_path(f);
    let mut bytes = std::fs::read(sidecar(middle)).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x40;
    std::fs::write(sidecar(middle), &bytes).unwrap();
    std::fs::remove_file(sidecar(&files[1])).unwrap();
    // And one flipped in the file's own filter, near its end.
    let last = &files[files.len() / 2 + 1];
    let mut bytes = std::fs::read(sidecar(last)).unwrap();
    let at = bytes.len() - 100;
    bytes[at] ^= 0x01;
    std::fs::write(sidecar(last), &bytes).unwrap();
    std::fs::copy(sidecar(&files[2]), sidecar(&files[4])).unwrap();
    for expr in [
        format!("host {v4}"),
        format!("port {port}"),
        format!("host {v6}"),
    ] {
        let want = tcpdump_finds(&plain, &expr, root.path());
        let (got, said) = kansoku_finds(&dir, &expr, root.path());
        assert!(
            got == want,
            "damaged, {expr}: {} vs {}",
            got.len(),
            want.len()
        );
        assert!(said.contains("key index not used"), "{expr}: {said}");
    }
}

#[test]
fn a_file_being_written_is_queried_up_to_its_last_whole_chunk() {
    use std::io::Write;
    if !testkit::require_tool("tcpdump") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let plain = root.path().join("in.pcap");
    run_ok(&[
        "synth",
        "-c",
        "20000",
        "--size",
        "64-1518",
        "--ip",
        "mix",
        "--flows",
        "200",
        "--compress",
        "none",
        "--no-index",
        "-w",
        p(&plain),
    ]);
    let bytes = std::fs::read(&plain).unwrap();
    let growing = root.path().join("growing.pcap.lz4");
    let mut writer = kansoku()
        .args(["read", "-r", "-", "-w", p(&growing), "--idle-flush", "0.2"])
        .stdin(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = writer.stdin.take().unwrap();
    // Half the packets, then a pause: the writer flushes what it has
    // (chunks, their index entries and key records) and waits for more.
    stdin.write_all(&bytes[..bytes.len() / 2]).unwrap();
    stdin.flush().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while trace::keys::keys_path(&growing)
        .metadata()
        .map_or(0, |m| m.len())
        < 1000
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the writer wrote no key records"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    std::thread::sleep(std::time::Duration::from_millis(600));
    // A file whose writer goes on is read up to its last complete packet,
    // and the run says it was not closed (exit 1).
    let read = |args: &[&str]| {
        let o = run(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            o.status.code() == Some(1) && err.contains("never closed it"),
            "{args:?}: {err}"
        );
        o
    };
    let lines = String::from_utf8(read(&["read", "-r", p(&growing)]).stdout).unwrap();
    let src = |l: &str| {
        l.split_whitespace()
            .nth(2)
            .map(|s| s.rsplit_once(':').unwrap().0.to_string())
    };
    let line = lines
        .lines()
        .filter(|l| l.contains(" tcp ") && !l.contains(" tcp ["))
        .nth(30)
        .unwrap_or_else(|| {
            panic!(
                "{} lines: {:?}",
                lines.lines().count(),
                lines.lines().next()
            )
        });
    let host = src(line).unwrap();
    let port = line
        .split_whitespace()
        .nth(2)
        .unwrap()
        .rsplit_once(':')
        .unwrap()
        .1
        .to_string();
    for expr in [format!("host {host}"), format!("port {port}")] {
        // What a full read of the file as it stands finds, filtered by
        // tcpdump, is what the query through the key index finds.
        let all = root.path().join("all.pcap");
        let _ = std::fs::remove_file(&all);
        read(&["read", "-r", p(&growing), "-w", p(&all), "--no-index"]);
        let want = tcpdump_finds(&[all], &expr, root.path());
        let ours = root.path().join("ours.pcapng");
        let _ = std::fs::remove_file(&ours);
        // The query reads the chunks that may match: the end, where the
        // file is cut, only if one is there.
        let o = run(&["read", "-r", p(&growing), "-w", p(&ours), &expr]);
        assert!(matches!(o.status.code(), Some(0 | 1)), "{expr}: {o:?}");
        let got = packets(&tcpdump_dump(&ours));
        assert!(
            !want.is_empty() && got == want,
            "{expr}: {} vs {}",
            got.len(),
            want.len()
        );
    }
    // The rest, and the writer closes the file whole.
    stdin.write_all(&bytes[bytes.len() / 2..]).unwrap();
    drop(stdin);
    assert!(writer.wait().unwrap().success());
    let (got, said) = kansoku_finds(&growing, "udp", root.path());
    assert!(!got.is_empty() && !said.contains("never closed"), "{said}");
}

/// The web view's drill-down: `kansoku web SUMMARIES --traces ARCHIVE`
/// answers "the packets of this aggregate in this range" with a pcap file
/// holding what tcpdump finds in plain copies with the same expression in
/// that range, and as many packets as the summaries counted under the
/// label (the aggregate and the aggregates shown inside it).
#[test]
fn the_web_view_gives_an_aggregates_packets_in_its_range() {
    if !testkit::require_tool("tcpdump") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let dir = archive(root.path());
    let plain = plain_copies(root.path(), &traces(&dir));
    let sums = root.path().join("summaries");
    std::fs::create_dir(&sums).unwrap();
    run_ok(&[
        "profile",
        "-r",
        p(&dir),
        "-i",
        "1",
        "-w",
        &format!("{}/", p(&sums)),
    ]);
    let srv = web_server(&[p(&sums), "--traces", p(&dir)]);
    let get = |target: &str| http(srv.addr, "GET", target.as_bytes());
    let (status, _, body) = get("/api/v1/catalog");
    assert_eq!(status, 200);
    let cat: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(cat["traces"], true, "{cat}");

    // The synthetic traffic's first second (2026-01-01 00:00:00 UTC), and
    // both of its seconds.
    let t0 = 1_767_225_600u64;
    let mut checked = 0;
    for (view, to) in [("src", t0 + 1), ("dst", t0 + 2), ("dport", t0 + 1)] {
        let q = format!("view={view}&from={t0}&to={to}&threshold=5");
        let (status, _, body) = get(&format!("/api/v1/view?{q}"));
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let aggs: Vec<(String, u64)> = v["aggregates"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["catch_all"] == false)
            .map(|a| {
                (
                    a["label"].as_str().unwrap().to_string(),
                    a["total"]["packets"].as_u64().unwrap(),
                )
            })
            .collect();
        assert!(aggs.len() >= 2, "{view}: {aggs:?}");
        let kind = if view == "dport" {
            KeyKind::Port
        } else {
            KeyKind::Address
        };
        for (label, _) in aggs.iter().take(3) {
            let enc = label.replace(':', "%3A").replace('/', "%2F");
            let (status, head, pcap) = get(&format!("/api/v1/packets?{q}&drill={enc}"));
            assert_eq!(status, 200, "{label}: {}", String::from_utf8_lossy(&pcap));
            let header = |name: &str| {
                head.lines()
                    .find_map(|l| l.strip_prefix(&format!("{name}: ")))
                    .unwrap_or("")
                    .to_string()
            };
            let expr = header("x-kansoku-expression");
            assert!(!expr.is_empty(), "{label}: {head}");
            assert!(header("x-kansoku-cut").is_empty(), "{label}: {head}");
            let file = root.path().join("aggregate.pcap");
            std::fs::write(&file, &pcap).unwrap();
            let got = packets(&tcpdump_dump(&file));
            let in_range = |pk: &String| {
                let sec: u64 = pk.split('.').next().unwrap().parse().unwrap();
                (t0..to).contains(&sec)
            };
            let want: Vec<String> = tcpdump_finds(&plain, &expr, root.path())
                .into_iter()
                .filter(in_range)
                .collect();
            assert!(
                got == want,
                "{label} ({expr}): {} packets, tcpdump {}",
                got.len(),
                want.len()
            );
            assert_eq!(header("x-kansoku-packets"), got.len().to_string());
            // What the summaries counted under the label.
            let outer = aguri::Prefix::parse(kind, label).unwrap();
            let counted: u64 = aggs
                .iter()
                .filter(|(l, _)| outer.contains(&aguri::Prefix::parse(kind, l).unwrap()))
                .map(|(_, n)| n)
                .sum();
            assert_eq!(got.len() as u64, counted, "{label} ({expr})");
            assert!(!got.is_empty(), "{label}");
            checked += 1;
        }
    }
    assert!(checked >= 6);
    // Without a label or a range, or a label no packet has: 400.
    for bad in [
        "/api/v1/packets?view=src&from=1&to=2".to_string(),
        format!("/api/v1/packets?view=src&drill=10.0.0.1&from={t0}"),
        format!(
            "/api/v1/packets?view=dport&drill=4%3A47%3A80&from={t0}&to={}",
            t0 + 1
        ),
        format!(
            "/api/v1/packets?view=src&drill=10.0.0.1%3Bx&from={t0}&to={}",
            t0 + 1
        ),
    ] {
        assert_eq!(get(&bad).0, 400, "{bad}");
    }
    // A server without traces says so.
    let plain_srv = web_server(&[p(&sums)]);
    let (status, _, _) = http(
        plain_srv.addr,
        "GET",
        format!(
            "/api/v1/packets?view=src&drill=10.0.0.1&from={t0}&to={}",
            t0 + 1
        )
        .as_bytes(),
    );
    assert_eq!(status, 404);
}

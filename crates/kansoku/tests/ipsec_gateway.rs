//! `kansoku ipsec gateway` end to end: two network namespaces joined by a
//! veth pair, a gateway in each (host-to-host transport mode: each
//! namespace reaches the other's veth address through a route into its
//! TUN), and unmodified programs across: `ping`, `curl` of a file that
//! `python3 -m http.server` serves from the other namespace, and an
//! `iperf3` TCP run, over ESP, ESP in UDP and AH+ESP, IPv4 and IPv6. A
//! capture of the veth holds only ESP/AH (or ESP in UDP) between the two
//! addresses (and ARP, neighbour discovery and MLD). Also: the clear configuration, and packets too big
//! for the path. Root only: skipped with a note elsewhere, required where
//! `CI` is set.
//!
//! Namespaces are removed and every program started is killed by drop
//! guards, however a test ends; every wait is bounded.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use capture::netns::{Namespace, VethEnd, VethPair};
use common::*;
use serde_json::Value;

const A4: &str = "10.81.0.1";
const B4: &str = "10.81.0.2";
const A6: &str = "fd00:81::1";
const B6: &str = "fd00:81::2";
const VETH_A: &str = "kgwv-a";
const VETH_B: &str = "kgwv-b";
const TUN: &str = "kgw0";

const K20A: &str = "0x0102030405060708090a0b0c0d0e0f1011121314";
const K20B: &str = "0x1112131415161718191a1b1c1d1e1f2021222324";
const K24A: &str = "0x0102030405060708090a0b0c0d0e0f101112131415161718";
const K24B: &str = "0x2122232425262728292a2b2c2d2e2f303132333435363738";
const K32A: &str = "0x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20";
const K32B: &str = "0x3132333435363738393a3b3c3d3e3f404142434445464748494a4b4c4d4e4f50";
const K36A: &str = "0x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021222324";
const K36B: &str = "0x3132333435363738393a3b3c3d3e3f404142434445464748494a4b4c4d4e4f5051525354";

/// SAs both ways for both families: `esp` is the ESP part of an `add`
/// line, `ah` the AH part (none: ESP alone).
fn sa_file(esp: [&str; 2], ah: Option<[&str; 2]>) -> String {
    let mut s = String::new();
    let mut spi = 0x1000;
    for (a, b) in [(A4, B4), (A6, B6)] {
        for (i, (src, dst)) in [(a, b), (b, a)].into_iter().enumerate() {
            spi += 1;
            s += &format!("add {src} {dst} esp {spi:#x} {};\n", esp[i]);
            if let Some(ah) = ah {
                s += &format!("add {src} {dst} ah {:#x} {};\n", spi + 0x1000, ah[i]);
            }
        }
    }
    s
}

fn esp_gcm() -> String {
    sa_file(
        [
            &format!("-E aes-gcm-16 {K20A}"),
            &format!("-E aes-gcm-16 {K20B}"),
        ],
        None,
    )
}

/// ESP in UDP (RFC 3948, port 4500 both ways), ChaCha20-Poly1305.
fn esp_in_udp_sas() -> String {
    sa_file(
        [
            &format!("-udp-encap 4500 4500 -E chacha20-poly1305 {K36A}"),
            &format!("-udp-encap 4500 4500 -E chacha20-poly1305 {K36B}"),
        ],
        None,
    )
}

fn ah_esp() -> String {
    sa_file(
        [
            &format!("-E 3des-cbc {K24A} -A hmac-sha1 {K20A}"),
            &format!("-E 3des-cbc {K24B} -A hmac-sha1 {K20B}"),
        ],
        Some([
            &format!("-A hmac-sha256 {K32A}"),
            &format!("-A hmac-sha256 {K32B}"),
        ]),
    )
}

/// Calls `f` every 100 ms until it is true or `limit` passes.
fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if f() {
            return true;
        }
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A program running in the background, killed when dropped.
struct Bg {
    child: Child,
    what: String,
}

impl Bg {
    /// Sends SIGINT and waits up to 10 s for the program to end; its
    /// standard output and error.
    fn interrupt(mut self) -> (bool, String, String) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-INT", &pid]).status();
        let mut status = None;
        wait_for(Duration::from_secs(10), || {
            status = self.child.try_wait().ok().flatten();
            status.is_some()
        });
        let Some(status) = status else {
            panic!("{} did not end 10 s after SIGINT", self.what);
        };
        let mut out = String::new();
        let mut err = String::new();
        if let Some(mut o) = self.child.stdout.take() {
            let _ = o.read_to_string(&mut out);
        }
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        (status.success(), out, err)
    }

    /// Waits up to `limit` for the program to end by itself; whether it
    /// succeeded, and its output.
    fn finish(mut self, limit: Duration) -> (bool, String) {
        let mut status = None;
        if !wait_for(limit, || {
            status = self.child.try_wait().ok().flatten();
            status.is_some()
        }) {
            panic!("{} did not end in {limit:?}", self.what);
        }
        let mut out = String::new();
        if let Some(mut o) = self.child.stdout.take() {
            let _ = o.read_to_string(&mut out);
        }
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut out);
        }
        (status.is_some_and(|s| s.success()), out)
    }
}

impl Drop for Bg {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// A network namespace, deleted when dropped; a failed command panics
/// with what it printed.
struct Ns(Namespace);

impl Ns {
    /// Loose reverse-path filtering whatever the host's default: ESP from
    /// the peer comes in on the veth while the route back to the peer's
    /// address goes into the TUN.
    fn loose_rp_filter(&self) {
        self.exec(&["sysctl", "-qw", "net.ipv4.conf.all.rp_filter=2"]);
    }

    fn name(&self) -> &str {
        self.0.name()
    }

    fn ip(&self, args: &[&str]) -> String {
        self.0.ip(args).unwrap()
    }

    fn command(&self, argv: &[&str]) -> Command {
        self.0.command(argv)
    }

    fn exec(&self, argv: &[&str]) -> String {
        self.0.exec(argv).unwrap()
    }

    fn spawn(&self, argv: &[&str]) -> Bg {
        let child = self
            .command(argv)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {argv:?}: {e}"));
        Bg {
            child,
            what: format!("{argv:?} in {}", self.name()),
        }
    }
}

/// Two namespaces joined by a veth pair (MTU 1500): `a` has A4/A6 on
/// VETH_A, `b` B4/B6 on VETH_B.
struct Pair {
    a: Ns,
    b: Ns,
}

impl Pair {
    fn create() -> Pair {
        let end = |dev, v4, v6| VethEnd {
            prefix: "kgw",
            dev,
            v4,
            v6,
        };
        let VethPair { a, b } = VethPair::create(end(VETH_A, A4, A6), end(VETH_B, B4, B6)).unwrap();
        let pair = Pair { a: Ns(a), b: Ns(b) };
        for ns in [&pair.a, &pair.b] {
            ns.loose_rp_filter();
        }
        pair
    }

    /// A gateway in each namespace with `sa` and `extra` flags, and the
    /// routes that send the peer's addresses into its TUN.
    fn gateways(&self, sa: &Path, extra: &[&str]) -> [Bg; 2] {
        [
            (&self.a, VETH_A, A4, A6, B4, B6),
            (&self.b, VETH_B, B4, B6, A4, A6),
        ]
        .map(|(ns, dev, src4, src6, dst4, dst6)| {
            let mut argv = vec![
                env!("CARGO_BIN_EXE_kansoku"),
                "ipsec",
                "gateway",
                "--sa",
                sa.to_str().unwrap(),
                "--tun",
                TUN,
                "--dev",
                dev,
                "--json",
            ];
            argv.extend_from_slice(extra);
            let mut gw = ns.spawn(&argv);
            let up = wait_for(Duration::from_secs(10), || {
                if let Ok(Some(s)) = gw.child.try_wait() {
                    let mut err = String::new();
                    if let Some(mut e) = gw.child.stderr.take() {
                        let _ = e.read_to_string(&mut err);
                    }
                    panic!("gateway in {} ended ({s}): {err}", ns.name());
                }
                let out = ns
                    .command(&["ip", "link", "show", TUN])
                    .output()
                    .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                    .unwrap_or_default();
                out.contains(",UP")
            });
            assert!(up, "{TUN} not up in {} within 10 s", ns.name());
            ns.ip(&[
                "route",
                "add",
                &format!("{dst4}/32"),
                "dev",
                TUN,
                "src",
                src4,
            ]);
            ns.ip(&[
                "-6",
                "route",
                "add",
                &format!("{dst6}/128"),
                "dev",
                TUN,
                "src",
                src6,
            ]);
            gw.what = format!("gateway in {}", ns.name());
            gw
        })
    }
}

/// Stops a gateway; its JSON report, after checking it exited 0.
fn report(gw: Bg) -> Value {
    let what = gw.what.clone();
    let (ok, out, err) = gw.interrupt();
    assert!(ok, "{what} failed: {err}");
    for k in [K20A, K20B, K24A, K24B, K32A, K32B] {
        let k = &k[2..];
        assert!(!out.contains(k) && !err.contains(k), "{what} printed a key");
    }
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{what}: {e}: {out:?}"))
}

fn n(v: &Value, path: &str) -> u64 {
    path.split('.')
        .fold(v, |v, k| &v[k])
        .as_u64()
        .unwrap_or_else(|| panic!("{path} in {v}"))
}

/// `ping -c 3` from `ns` to `dst` succeeds, every reply back.
fn ping(ns: &Ns, dst: &str) {
    let out = ns.exec(&["ping", "-c", "3", "-i", "0.2", "-W", "2", dst]);
    assert!(out.contains("3 received"), "{out}");
}

/// `curl` from `client` fetches `blob` from an http.server in `server`
/// bound to `dst`.
fn curl(client: &Ns, server: &Ns, dst: &str, www: &Path, blob: &[u8]) {
    let www = www.to_str().unwrap();
    let _srv = server.spawn(&[
        "python3",
        "-m",
        "http.server",
        "--bind",
        dst,
        "--directory",
        www,
        "8080",
    ]);
    let host = if dst.contains(':') {
        format!("[{dst}]")
    } else {
        dst.to_string()
    };
    let url = format!("http://{host}:8080/blob");
    let mut body = Vec::new();
    let ok = wait_for(Duration::from_secs(10), || {
        match client
            .command(&["curl", "-gsS", "--max-time", "10", &url])
            .output()
        {
            Ok(o) if o.status.success() => {
                body = o.stdout;
                true
            }
            _ => false,
        }
    });
    assert!(ok, "curl {url} failed for 10 s");
    assert!(
        body == blob,
        "curl {url}: {} bytes, not the file",
        body.len()
    );
}

/// A 2-second `iperf3` TCP run from `client` to a server in `server` bound
/// to `dst`; the bytes the receiver counted.
fn iperf(client: &Ns, server: &Ns, dst: &str) -> u64 {
    let srv = server.spawn(&["iperf3", "-s", "-1", "-B", dst, "-p", "5211"]);
    let mut last = String::new();
    let mut received = None;
    // Until the server listens, the client is refused (and iperf3 3.12
    // exits 0 even so: its JSON says whether the run happened).
    let ok = wait_for(Duration::from_secs(10), || {
        let run = client
            .command(&["iperf3", "-c", dst, "-p", "5211", "-t", "2", "-J"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (_, out) = Bg {
            child: run,
            what: format!("iperf3 -c {dst}"),
        }
        .finish(Duration::from_secs(30));
        last = out;
        received = serde_json::from_str::<Value>(&last)
            .ok()
            .filter(|v| v.get("error").is_none())
            .and_then(|v| v["end"]["sum_received"]["bytes"].as_u64());
        received.is_some()
    });
    assert!(ok, "iperf3 to {dst} failed: {last}");
    let (done, out) = srv.finish(Duration::from_secs(10));
    assert!(done, "iperf3 server on {dst} failed: {out}");
    received.unwrap_or(0)
}

/// Starts tcpdump on `dev` in `ns`, writing `file`, once it listens.
fn tcpdump(ns: &Ns, dev: &str, file: &Path) -> Bg {
    // Headers are enough (-s 128); -Z root keeps it able to write where
    // the test can.
    let mut bg = ns.spawn(&[
        "tcpdump",
        "-i",
        dev,
        "-nn",
        "-U",
        "-s",
        "128",
        "-Z",
        "root",
        "-w",
        file.to_str().unwrap(),
    ]);
    let err = bg.child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if line.contains("listening on") {
                let _ = tx.send(());
            }
        }
    });
    assert!(
        rx.recv_timeout(Duration::from_secs(10)).is_ok(),
        "tcpdump on {dev} did not start"
    );
    bg
}

/// What a capture of the veth held, by kind.
#[derive(Debug, Default)]
struct Wire {
    /// ESP/AH between the two addresses, per family and direction:
    /// [v4 a->b, v4 b->a, v6 a->b, v6 b->a].
    ipsec: [u64; 4],
    /// Neighbour discovery, MLD and ARP.
    link: u64,
    /// Anything else, described.
    other: Vec<String>,
}

/// Whether a UDP datagram (from its header on) is ESP in UDP: port 4500
/// both ways and not IKE's non-ESP marker (four zero bytes).
fn esp_in_udp(udp: Option<&[u8]>) -> bool {
    udp.is_some_and(|u| {
        u.len() >= 16 && u[0..2] == [0x11, 0x94] && u[2..4] == [0x11, 0x94] && u[8..12] != [0; 4]
    })
}

/// Sorts the packets of the capture at `file` (Ethernet): ESP, AH and ESP
/// in UDP between the two addresses, link traffic, and anything else.
fn wire(file: &Path) -> Wire {
    let (records, cut) = read_all(file);
    assert!(!cut, "capture cut short");
    let mut w = Wire::default();
    for r in records {
        let Owned::Packet { data: f, .. } = r else {
            continue;
        };
        let Some(ethertype) = f.get(12..14).map(|t| u16::from_be_bytes([t[0], t[1]])) else {
            w.other.push(format!("short frame {f:?}"));
            continue;
        };
        let ip = &f[14..];
        let show = |what: &str| format!("{what}: {:02x?}", &ip[..ip.len().min(48)]);
        match ethertype {
            0x0806 => w.link += 1,
            0x0800 if ip.len() >= 20 => {
                let (src, dst) = (&ip[12..16], &ip[16..20]);
                let (a, b) = ([10, 81, 0, 1], [10, 81, 0, 2]);
                let hl = usize::from(ip[0] & 0x0f) * 4;
                let proto = match ip[9] {
                    17 if esp_in_udp(ip.get(hl..)) => 50,
                    p => p,
                };
                match (proto, src == a && dst == b, src == b && dst == a) {
                    (50 | 51, true, _) => w.ipsec[0] += 1,
                    (50 | 51, _, true) => w.ipsec[1] += 1,
                    _ => w.other.push(show("IPv4")),
                }
            }
            0x86dd if ip.len() >= 40 => {
                // The first header after the extension headers.
                let (mut next, mut at) = (ip[6], 40);
                while matches!(next, 0 | 43 | 60) && at + 8 <= ip.len() {
                    next = ip[at];
                    at += (usize::from(ip[at + 1]) + 1) * 8;
                }
                let (src, dst) = (&ip[8..24], &ip[24..40]);
                let addr = |last: u8| {
                    let mut a = [0u8; 16];
                    a[..4].copy_from_slice(&[0xfd, 0, 0, 0x81]);
                    a[15] = last;
                    a
                };
                let (a, b) = (addr(1), addr(2));
                if next == 17 && esp_in_udp(ip.get(at..)) {
                    next = 50;
                }
                match (next, ip.get(at)) {
                    // MLD (130-132, 143), router and neighbour discovery
                    // (133-137).
                    (58, Some(t)) if (130..=137).contains(t) || *t == 143 => w.link += 1,
                    (50 | 51, _) if src == a && dst == b => w.ipsec[2] += 1,
                    (50 | 51, _) if src == b && dst == a => w.ipsec[3] += 1,
                    _ => w.other.push(show("IPv6")),
                }
            }
            t => w.other.push(format!("ethertype {t:#06x}")),
        }
    }
    w
}

/// ping, curl and iperf3 both ways over the SAs of `sa`, IPv4 and IPv6,
/// with the veth captured; the gateways (run with `extra` arguments)
/// reports are checked: with the TUN offloads on, TCP segments were read
/// whole and cut, and joined on the way in, and curl's bytes came through
/// unchanged all the same.
fn programs_talk_over(sa: &str, label: &str, extra: &[&str]) {
    if !testkit::require_root("ipsec gateway") {
        return;
    }
    let start = Instant::now();
    let pair = Pair::create();
    let dir = tempfile::tempdir().unwrap();
    let sa_path = dir.path().join("sa.conf");
    std::fs::write(&sa_path, sa).unwrap();
    let www = dir.path().join("www");
    std::fs::create_dir(&www).unwrap();
    // 300 KB that do not compress, so TCP sends full segments.
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    let blob: Vec<u8> = (0..300_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(www.join("blob"), &blob).unwrap();
    let cap = dir.path().join("veth.pcap");
    let dump = tcpdump(&pair.a, VETH_A, &cap);
    let [ga, gb] = pair.gateways(&sa_path, extra);

    let mut moved = Vec::new();
    for (dst_b, dst_a) in [(B4, A4), (B6, A6)] {
        ping(&pair.a, dst_b);
        ping(&pair.b, dst_a);
        curl(&pair.a, &pair.b, dst_b, &www, &blob);
        curl(&pair.b, &pair.a, dst_a, &www, &blob);
        moved.push(iperf(&pair.a, &pair.b, dst_b));
    }
    let (ra, rb) = (report(ga), report(gb));
    let (ok, _, err) = dump.interrupt();
    assert!(ok, "tcpdump: {err}");

    for (r, side) in [(&ra, "a"), (&rb, "b")] {
        assert_eq!(
            n(r, "outbound.clear"),
            0,
            "{label} {side}: sent in the clear: {r}"
        );
        for d in ["outbound", "inbound"] {
            assert!(n(r, &format!("{d}.ipsec")) > 0, "{label} {side}: {r}");
            let refused: u64 = r[d]["rejects"]
                .as_object()
                .unwrap()
                .values()
                .filter_map(Value::as_u64)
                .sum();
            assert_eq!(refused, 0, "{label} {side} {d} refused: {r}");
        }
        for sa in r["sas"].as_array().unwrap() {
            assert!(n(sa, "packets") > 0, "{label} {side}: SA unused: {sa}");
            assert_eq!(n(sa, "integrity_failed"), 0, "{label} {side}: {sa}");
        }
        assert_eq!(n(r, "looped"), 0, "{label} {side}");
        let o = &r["offload"];
        assert_eq!(o["on"], Value::Bool(!extra.contains(&"--no-offload")));
        assert_eq!(o["refused"], serde_json::json!({}), "{label} {side}: {o}");
        assert_eq!(n(o, "bad_checksum"), 0, "{label} {side}: {o}");
    }
    let offload = |k: &str| n(&ra["offload"], k) + n(&rb["offload"], k);
    if extra.contains(&"--no-offload") {
        assert_eq!(offload("tso_reads") + offload("gro_joined"), 0);
    } else {
        // Both sides send (curl both ways), and iperf3's segments are large.
        assert!(
            offload("tso_reads") > 0 && offload("tso_segments") > 2 * offload("tso_reads"),
            "{label}: {} {}",
            ra["offload"],
            rb["offload"]
        );
        assert!(offload("gro_joined") > 0 && offload("gro_writes") > 0);
    }
    let w = wire(&cap);
    assert!(
        w.other.is_empty(),
        "{label}: not ESP/AH on the wire ({} packets), first: {:?}",
        w.other.len(),
        &w.other[..w.other.len().min(5)]
    );
    assert!(
        w.ipsec.iter().all(|&c| c > 50),
        "{label}: ESP/AH per direction {:?}",
        w.ipsec
    );
    eprintln!(
        "{label}: iperf3 moved {moved:?} bytes (v4, v6); on the wire {:?} ESP/AH packets \
         (v4 a->b, b->a, v6 a->b, b->a), {} ARP/ND/MLD, nothing else; {:.1} s",
        w.ipsec,
        w.link,
        start.elapsed().as_secs_f64()
    );
}

#[test]
fn ping_curl_and_iperf3_talk_over_esp() {
    programs_talk_over(&esp_gcm(), "ESP aes-gcm-16", &[]);
}

#[test]
fn ping_curl_and_iperf3_talk_over_esp_in_udp() {
    programs_talk_over(&esp_in_udp_sas(), "ESP in UDP chacha20-poly1305", &[]);
}

#[test]
fn ping_curl_and_iperf3_talk_over_ah_and_esp() {
    // Without the offloads: every packet at the MTU, as before them.
    programs_talk_over(
        &ah_esp(),
        "AH hmac-sha256 + ESP 3des-cbc/hmac-sha1",
        &["--no-offload"],
    );
}

#[test]
fn a_file_without_sas_passes_everything_in_the_clear() {
    if !testkit::require_root("ipsec gateway") {
        return;
    }
    let pair = Pair::create();
    let dir = tempfile::tempdir().unwrap();
    let sa_path = dir.path().join("none.conf");
    std::fs::write(&sa_path, "# no SAs: the clear baseline\n").unwrap();
    let cap = dir.path().join("veth.pcap");
    let dump = tcpdump(&pair.a, VETH_A, &cap);
    let [ga, gb] = pair.gateways(&sa_path, &[]);
    for dst in [B4, B6] {
        ping(&pair.a, dst);
    }
    let (ra, rb) = (report(ga), report(gb));
    let (ok, _, err) = dump.interrupt();
    assert!(ok, "tcpdump: {err}");
    // The capture's sorting sees the pings in the clear (12 packets; the
    // last may still be in tcpdump's ring when it stops), none ESP/AH.
    let w = wire(&cap);
    assert_eq!(w.ipsec, [0; 4]);
    assert!((8..=12).contains(&w.other.len()), "{:?}", w.other);
    assert_eq!(n(&ra, "tun_mtu"), 1500);
    // Requests go out through a's gateway, replies through b's; what
    // arrives in the clear is the kernel's own.
    for r in [&ra, &rb] {
        assert!(n(r, "outbound.clear") >= 6, "{r}");
        assert_eq!(
            n(r, "outbound.ipsec") + n(r, "inbound.packets_in"),
            0,
            "{r}"
        );
    }
}

#[test]
fn too_big_packets_get_icmp_or_are_fragmented_outside() {
    if !testkit::require_root("ipsec gateway") {
        return;
    }
    let pair = Pair::create();
    let dir = tempfile::tempdir().unwrap();
    let sa_path = dir.path().join("sa.conf");
    std::fs::write(&sa_path, esp_gcm()).unwrap();
    // A TUN MTU the path cannot carry once ESP is added.
    let [ga, gb] = pair.gateways(&sa_path, &["--tun-mtu", "1500"]);
    let a = &pair.a;

    // IPv4 with DF: ICMP "fragmentation needed" back, and the kernel
    // learns the MTU that fits (1500 less aes-gcm-16's 37 bytes).
    let out = a
        .command(&[
            "ping", "-c", "2", "-i", "0.2", "-W", "1", "-M", "do", "-s", "1472", B4,
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("mtu = 1463") || text.contains("mtu=1463"),
        "{text}"
    );
    assert!(a.ip(&["route", "get", B4]).contains("mtu 1463"));
    // IPv4 without DF, larger than the TUN MTU: the kernel fragments
    // before the TUN, the gateway reassembles, protects, and fragments the
    // outer packet; the peer's kernel reassembles.
    ping_big(a, B4, &["-M", "dont", "-s", "3000"], 2);
    // IPv6 over 1280 bytes: "packet too big" back, then the sender
    // fragments and the same happens.
    let out = a
        .command(&["ping", "-c", "1", "-W", "1", "-s", "1452", B6])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("mtu=1463"), "{text}");
    assert!(a.ip(&["-6", "route", "get", B6]).contains("mtu 1463"));
    // b's first reply is too big in turn: "packet too big" to b's kernel.
    ping_big(a, B6, &["-s", "1452"], 1);
    ping_big(a, B6, &["-s", "5000"], 2);

    let (ra, rb) = (report(ga), report(gb));
    for r in [&ra, &rb] {
        let refused: u64 = r["outbound"]["rejects"]
            .as_object()
            .unwrap()
            .values()
            .filter_map(Value::as_u64)
            .sum();
        assert_eq!(refused, 0, "{r}");
    }
    assert!(n(&ra, "icmp_too_big") >= 2, "{ra}");
    assert!(n(&ra, "outbound.reassembled") >= 3, "{ra}");
    assert!(
        n(&ra, "fragmented") >= 3 && n(&ra, "fragments") >= 6,
        "{ra}"
    );
    assert!(n(&ra, "send_faults.too_big") >= 5, "{ra}");
}

/// `ping -c 2 ARGS dst` from `ns` gets the last `replies` replies.
fn ping_big(ns: &Ns, dst: &str, args: &[&str], replies: u8) {
    let mut argv = vec!["ping", "-c", "2", "-i", "0.3", "-W", "2"];
    argv.extend_from_slice(args);
    argv.push(dst);
    let out = ns.command(&argv).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("{replies} received")) && text.contains("icmp_seq=2"),
        "ping {args:?} {dst}: {text}"
    );
}

//! `kansoku web`: the JSON API's totals and drill-downs against the
//! summaries it serves, files written while it runs, hostile requests, and
//! a real browser (headless Chromium, tests/web/browser.py) zooming and
//! drilling down on the page.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use aguri::{FlowKey, Metric, ProfilerConfig, Summary};
use common::{http, web_server, WebServer};
use rand::{Rng, SeedableRng};
use serde_json::Value;

const FIVE_MIN: u64 = 300_000_000_000;
/// 2026-11-20 00:00:00 UTC.
const T0: u64 = 1_795_132_800_000_000_000;

/// Six hours of 5-minute summaries of skewed traffic (a few heavy sources
/// and services, a long tail, IPv6, ICMP, non-IP frames), without the
/// summaries of 02:00-02:30 (a probe that was down).
fn summaries() -> Vec<Summary> {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(18);
    let mut p = ProfilerConfig {
        interval_ns: FIVE_MIN,
        pairs: aguri::DEFAULT_PAIRS,
        ..Default::default()
    }
    .build()
    .unwrap();
    let mut out = Vec::new();
    let n = 6 * 3600 * 4; // 4 packets a second
    for i in 0..n {
        let ts = T0 + i * 250_000_000 + rng.gen_range(0..1000);
        let r: f64 = rng.gen();
        let (src, dst, protocol, sport, dport): (std::net::IpAddr, std::net::IpAddr, u8, u16, u16) =
            if r < 0.3 {
                let h = rng.gen_range(1..8u8);
                (
                    [192, 0, 2, h].into(),
                    [203, 0, 113, 10].into(),
                    6,
                    443,
                    rng.gen_range(1024..65535),
                )
            } else if r < 0.45 {
                (
                    [198, 51, 100, 7].into(),
                    [203, 0, 113, 20].into(),
                    17,
                    53,
                    rng.gen(),
                )
            } else if r < 0.6 {
                let a =
                    0x2001_0db8_0001_0000_0000_0000_0000_0000u128 | u128::from(rng.gen::<u16>());
                (
                    std::net::Ipv6Addr::from(a).into(),
                    std::net::Ipv6Addr::from(0x2001_0db8_00ff_0000_0000_0000_0000_0001u128).into(),
                    6,
                    rng.gen(),
                    80,
                )
            } else if r < 0.65 {
                ([10, 9, 8, 7].into(), [203, 0, 113, 30].into(), 1, 0, 0x0800)
            } else if r < 0.68 {
                out.extend(p.add_bits(ts, None, rng.gen_range(60..200)));
                continue;
            } else {
                (
                    std::net::Ipv4Addr::from(rng.gen::<u32>()).into(),
                    [203, 0, 113, rng.gen_range(1..255)].into(),
                    6,
                    rng.gen(),
                    rng.gen_range(1..1024),
                )
            };
        let k = FlowKey {
            src,
            dst,
            protocol,
            src_port: sport,
            dst_port: dport,
        };
        out.extend(p.add(ts, &k, rng.gen_range(60..1500)));
    }
    out.extend(p.finish());
    let gap = (T0 + 2 * 3600 * 1_000_000_000)..(T0 + 2 * 3600 * 1_000_000_000 + 6 * FIVE_MIN);
    out.retain(|s| !gap.contains(&s.start_ns));
    out
}

fn write_dir(dir: &Path, sums: &[Summary]) {
    for s in sums {
        let name = aguri::summary::file_stamp(s.start_ns) + ".agr";
        std::fs::write(dir.join(name), s.to_string()).unwrap();
    }
}

fn start(dir: &Path) -> WebServer {
    web_server(&[common::p(dir)])
}

/// (status, body) of a raw request line.
fn request(addr: SocketAddr, method: &str, target: &[u8]) -> (u16, Vec<u8>) {
    let (status, _, body) = http(addr, method, target);
    (status, body)
}

fn get_json(addr: SocketAddr, target: &str) -> Value {
    let (status, body) = request(addr, "GET", target.as_bytes());
    assert_eq!(status, 200, "{target}: {}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).unwrap()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap()
}

fn address_contains(outer: &str, inner: &str) -> bool {
    let kind = aguri::KeyKind::Address;
    let (Ok(a), Ok(b)) = (
        aguri::Prefix::parse(kind, outer),
        aguri::Prefix::parse(kind, inner),
    ) else {
        return false;
    };
    a.contains(&b)
}

#[test]
fn the_view_adds_up_exactly_drills_down_exactly_and_sees_new_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut sums = summaries();
    let late = sums.pop().unwrap();
    write_dir(dir.path(), &sums);
    std::fs::write(
        dir.path().join("broken.agr"),
        "%!AGURI-1.0\n%%StartTime: Fri Nov 20 00:00:00 2026 (2026/11/20 00:00:00)\n%%EndTime: soon\n",
    )
    .unwrap();
    let srv = start(dir.path());
    assert!(
        srv.log.contains("broken.agr:3:"),
        "the bad file is named with its line: {}",
        srv.log
    );
    let cat = get_json(srv.addr, "/api/v1/catalog");
    assert_eq!(u(&cat["levels"][0]["summaries"]), sums.len() as u64);
    assert_eq!(cat["problems"].as_array().unwrap().len(), 1);

    let (bytes, packets) = sums.iter().fold((0, 0), |a, s| {
        (a.0 + s.total_bytes(), a.1 + s.total_packets())
    });
    let (from, to) = (T0 / 1_000_000_000, T0 / 1_000_000_000 + 6 * 3600);
    for view in ["src", "dst", "sport", "dport"] {
        for step in [300, 900, 3600] {
            let q = format!("/api/v1/view?view={view}&from={from}&to={to}&step={step}");
            let d = get_json(srv.addr, &q);
            assert_eq!(
                (u(&d["total"]["bytes"]), u(&d["total"]["packets"])),
                (bytes, packets)
            );
            let non_ip = (u(&d["non_ip"]["bytes"]), u(&d["non_ip"]["packets"]));
            assert!(non_ip.1 > 0);
            // The aggregates add up to everything IP, bucket by bucket.
            let aggs = d["aggregates"].as_array().unwrap();
            let n = d["buckets"].as_array().unwrap().len();
            assert_eq!(n as u64, 6 * 3600 / step);
            let mut per_bucket = vec![(0u64, 0u64); n];
            for a in aggs {
                let (mut tb, mut tp) = (0, 0);
                for b in 0..n {
                    let (x, y) = (&a["bytes"][b], &a["packets"][b]);
                    assert_eq!(x.is_null(), !d["covered"][b].as_bool().unwrap());
                    tb += x.as_u64().unwrap_or(0);
                    tp += y.as_u64().unwrap_or(0);
                    per_bucket[b].0 += x.as_u64().unwrap_or(0);
                    per_bucket[b].1 += y.as_u64().unwrap_or(0);
                }
                assert_eq!(
                    (tb, tp),
                    (u(&a["total"]["bytes"]), u(&a["total"]["packets"]))
                );
            }
            for (b, got) in per_bucket.iter().enumerate() {
                let start = T0 + b as u64 * step * 1_000_000_000;
                let end = start + step * 1_000_000_000;
                let want = sums
                    .iter()
                    .filter(|s| (start..end).contains(&s.start_ns))
                    .fold((0, 0), |a, s| {
                        (a.0 + s.sections[0].bytes, a.1 + s.sections[0].packets)
                    });
                assert_eq!(*got, want, "{q}: bucket {b}");
            }
            // The 30-minute gap is a gap at 5 minutes
            if step == 300 {
                let covered: Vec<bool> = d["covered"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| c.as_bool().unwrap())
                    .collect();
                // (And the last five minutes, whose summary comes later.)
                let missing: Vec<usize> = (0..n).filter(|&b| !covered[b]).collect();
                assert_eq!(missing, [24, 25, 26, 27, 28, 29, n - 1]);
            }
            // Drill-down into every aggregate (address views): its children
            // add up to it, its own count and those inside it.
            if view == "src" || view == "dst" {
                for a in aggs.iter().filter(|a| !a["catch_all"].as_bool().unwrap()) {
                    let label = a["label"].as_str().unwrap();
                    let inside = aggs
                        .iter()
                        .filter(|b| address_contains(label, b["label"].as_str().unwrap()))
                        .fold((0, 0), |s, b| {
                            (
                                s.0 + u(&b["total"]["bytes"]),
                                s.1 + u(&b["total"]["packets"]),
                            )
                        });
                    let enc = label.replace('/', "%2F").replace(':', "%3A");
                    let dd = get_json(srv.addr, &format!("{q}&drill={enc}"));
                    assert_eq!(dd["drill"].as_str(), Some(label));
                    let within = (u(&dd["within"]["bytes"]), u(&dd["within"]["packets"]));
                    assert_eq!(within, inside, "{q}: drill into {label}");
                    let sum = dd["aggregates"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .fold((0, 0), |s, b| {
                            assert!(address_contains(label, b["label"].as_str().unwrap()));
                            (
                                s.0 + u(&b["total"]["bytes"]),
                                s.1 + u(&b["total"]["packets"]),
                            )
                        });
                    assert_eq!(sum, within);
                }
            }
        }
    }
    // Source × destination: the flows add up to the IP traffic, and a
    // drill-down into a flow gives what the flows within it held.
    let ip = (
        bytes - sums.iter().map(|s| s.non_ip_bytes).sum::<u64>(),
        packets - sums.iter().map(|s| s.non_ip_packets).sum::<u64>(),
    );
    let q = format!("/api/v1/view?view=srcdst&from={from}&to={to}&step=900");
    let d = get_json(srv.addr, &q);
    assert_eq!((u(&d["within"]["bytes"]), u(&d["within"]["packets"])), ip);
    assert!(d["note"].is_null(), "{}", d["note"]);
    let flows = d["aggregates"].as_array().unwrap();
    assert!(flows.len() >= 4, "{flows:?}");
    let pair = |a: &Value| -> (String, String) {
        let l = a["label"].as_str().unwrap();
        let (s, t) = l.split_once(' ').unwrap();
        (s.to_string(), t.to_string())
    };
    let mut drilled = 0;
    for f in flows.iter().filter(|f| !f["catch_all"].as_bool().unwrap()) {
        let (s, t) = pair(f);
        let inside = flows
            .iter()
            .filter(|g| {
                let (gs, gt) = pair(g);
                address_contains(&s, &gs) && address_contains(&t, &gt)
            })
            .fold((0, 0), |a, g| {
                (
                    a.0 + u(&g["total"]["bytes"]),
                    a.1 + u(&g["total"]["packets"]),
                )
            });
        let enc = format!("{s} {t}")
            .replace('/', "%2F")
            .replace(':', "%3A")
            .replace(' ', "+");
        let dd = get_json(srv.addr, &format!("{q}&drill={enc}"));
        let within = (u(&dd["within"]["bytes"]), u(&dd["within"]["packets"]));
        assert_eq!(within, inside, "drill into {s} {t}");
        for g in dd["aggregates"].as_array().unwrap() {
            let (gs, gt) = pair(g);
            assert!(
                address_contains(&s, &gs) && address_contains(&t, &gt),
                "{gs} {gt} in {s} {t}"
            );
        }
        drilled += 1;
    }
    assert!(drilled >= 3);

    // The heavy sources are there, at 1%, and ICMP echo as its port.
    let labels = |view: &str| -> Vec<String> {
        let d = get_json(
            srv.addr,
            &format!("/api/v1/view?view={view}&from={from}&to={to}"),
        );
        d["aggregates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["label"].as_str().unwrap().to_string())
            .collect()
    };
    let src = labels("src");
    assert!(src.iter().any(|l| l == "198.51.100.7"), "{src:?}");
    assert!(src.iter().any(|l| l.starts_with("192.0.2.")), "{src:?}");
    let ports = labels("dport");
    assert!(ports.iter().any(|l| l == "4:1:2048"), "{ports:?}");

    // A summary written while it runs is served without a restart.
    write_dir(dir.path(), std::slice::from_ref(&late));
    std::thread::sleep(Duration::from_millis(700));
    let cat = get_json(srv.addr, "/api/v1/catalog");
    assert_eq!(u(&cat["levels"][0]["summaries"]), sums.len() as u64 + 1);
    assert_eq!(u(&cat["last_ns"]), late.end_ns);
    let d = get_json(
        srv.addr,
        &format!("/api/v1/view?from={from}&to={}", to + 300),
    );
    assert_eq!(
        u(&d["total"]["packets"]),
        packets + late.total_packets(),
        "the new summary is counted"
    );
    // Defaults: the last day of data, which is all of it here.
    let d = get_json(srv.addr, "/api/v1/view");
    assert_eq!(u(&d["total"]["packets"]), packets + late.total_packets());
}

#[test]
fn hostile_requests_get_400_never_a_path_or_a_500() {
    let dir = tempfile::tempdir().unwrap();
    let s = Summary::empty(T0, T0 + FIVE_MIN, Metric::Either, 1.0);
    write_dir(dir.path(), &[s]);
    std::fs::write(dir.path().join("secret.txt"), "do not serve me").unwrap();
    let srv = start(dir.path());
    let bad: &[&[u8]] = &[
        b"/api/v1/view?view=src%27%3B%20DROP%20TABLE%20summaries%3B--",
        b"/api/v1/view?view=src&from=1%20OR%201%3D1",
        b"/api/v1/view?from=0&to=4102444800&step=1",
        b"/api/v1/view?from=99999999999999999999",
        b"/api/v1/view?from=-1",
        b"/api/v1/view?from=10&to=5",
        b"/api/v1/view?step=7",
        b"/api/v1/view?threshold=NaN",
        b"/api/v1/view?threshold=inf",
        b"/api/v1/view?threshold=1e309",
        b"/api/v1/view?threshold=0",
        b"/api/v1/view?drill=..%2F..%2Fetc%2Fpasswd",
        b"/api/v1/view?drill=10.0.0.0%2F33",
        b"/api/v1/view?view=sport&drill=10.0.0.0%2F8",
        b"/api/v1/view?drill=%ff%fe",
        b"/api/v1/view?drill=%",
        b"/api/v1/view?view=%3Cscript%3Ealert(1)%3C%2Fscript%3E",
        b"/api/v1/view?view=src&view=dst",
        b"/api/v1/view?file=secret.txt",
        b"/api/v1/catalog?x=1",
        b"/?view=nonsense",
    ];
    for target in bad {
        let (status, body) = request(srv.addr, "GET", target);
        let shown = String::from_utf8_lossy(target);
        assert_eq!(status, 400, "{shown}: {}", String::from_utf8_lossy(&body));
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert!(v["error"].is_string(), "{shown}");
        assert!(
            !String::from_utf8_lossy(&body).contains("<script>"),
            "{shown}"
        );
    }
    // A huge query string.
    let mut long = b"/api/v1/view?view=".to_vec();
    long.extend(std::iter::repeat_n(b'a', 5000));
    assert_eq!(request(srv.addr, "GET", &long).0, 400);
    // Paths are routes, never files.
    for target in [
        &b"/secret.txt"[..],
        b"/../secret.txt",
        b"/%2e%2e/secret.txt",
        b"/assets/../../etc/passwd",
        b"/api/v1/../../secret.txt",
    ] {
        let (status, body) = request(srv.addr, "GET", target);
        assert!(
            status == 404 || status == 400,
            "{}: {status}",
            String::from_utf8_lossy(target)
        );
        assert!(!String::from_utf8_lossy(&body).contains("do not serve"));
    }
    // Bytes that are not a URI at all: the HTTP layer refuses them.
    let (status, _) = request(srv.addr, "GET", b"/api/v1/view?drill=\xff\xfe");
    assert_eq!(status, 400);
    assert_eq!(request(srv.addr, "POST", b"/api/v1/view").0, 405);
    assert_eq!(request(srv.addr, "DELETE", b"/").0, 405);
    let (status, body) = request(srv.addr, "HEAD", b"/");
    assert_eq!((status, body.len()), (200, 0));
    // The page and its assets, with a policy that runs only them.
    let (status, body) = request(srv.addr, "GET", b"/");
    assert_eq!(status, 200);
    assert!(String::from_utf8_lossy(&body).contains("/app.js"));
    assert_eq!(request(srv.addr, "GET", b"/app.js").0, 200);
    assert_eq!(request(srv.addr, "GET", b"/app.css").0, 200);
    // An empty interval: one aggregate, nothing in it.
    let d = get_json(srv.addr, "/api/v1/view");
    assert_eq!(u(&d["total"]["packets"]), 0);
}

#[test]
fn listens_on_loopback_unless_told() {
    let out = common::run_ok(&["web", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("[default: 127.0.0.1:8080]"), "{help}");
    // Not a directory: a clear error, exit 2.
    let out = common::run(&["web", "/nonexistent/summaries", "--listen", "127.0.0.1:0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a directory"));
}

#[test]
fn a_browser_zooms_and_drills_down_on_the_page() {
    if !testkit::require_tool("chromium") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write_dir(dir.path(), &summaries());
    // With traces on the host, the page offers each aggregate's packets.
    let traces = common::data("veth-arp-frag-dns.pcap");
    let srv = web_server(&[common::p(dir.path()), "--traces", common::p(&traces)]);
    let shot = dir.path().join("page.png");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/web/browser.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(format!("http://{}/", srv.addr))
        .arg(&shot)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for step in [
        "first load",
        "pcap links",
        "after the zoom",
        "add up to it",
        "after going back",
        "screenshot",
    ] {
        assert!(text.contains(step), "{step} missing from:\n{text}");
    }
    assert!(std::fs::metadata(&shot).unwrap().len() > 10_000);
    // To look at it: KANSOKU_WEB_SCREENSHOT=/tmp/page.png cargo test --test web
    if let Some(keep) = std::env::var_os("KANSOKU_WEB_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
}

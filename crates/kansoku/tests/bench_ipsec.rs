//! `kansoku bench ipsec --part link` and `--part dv` end to end, as root:
//! short runs of the paper's tests through kansoku's gateways, the bare
//! veth and boringtun, in namespaces that must be gone afterwards. The
//! figures are checked for what must hold on any machine (3DES is slower
//! than forwarding in the clear; a constant-rate stream arrives at its
//! rate), not for speeds.

mod common;

use std::process::{Command, Stdio};

use common::*;
use serde_json::Value;

/// One bench at a time: each loads both cores, and the constant-rate test
/// measures a rate.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs the bench; its JSON report, after checking it exited 0 and left
/// no namespace of its own behind.
fn bench(args: &[&str]) -> Value {
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let child = kansoku()
        .args(["bench", "ipsec"])
        .args(args)
        .env("PATH", path_with_cargo_bin())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench ipsec {args:?}: {err}");
    let left = namespaces();
    for prefix in ["kbia", "kbib"] {
        assert!(
            !left.contains(&format!("{prefix}-{pid}-")),
            "namespaces left: {left}"
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The PATH with cargo's bin directory, where install-deps puts
/// boringtun-cli.
fn path_with_cargo_bin() -> String {
    let home = std::env::var("CARGO_HOME")
        .unwrap_or_else(|_| format!("{}/.cargo", std::env::var("HOME").unwrap_or_default()));
    format!("{}:{home}/bin", std::env::var("PATH").unwrap_or_default())
}

fn boringtun_installed() -> bool {
    Command::new("sh")
        .args(["-c", "command -v boringtun-cli && command -v wg"])
        .env("PATH", path_with_cargo_bin())
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn result<'a>(r: &'a Value, config: &str, ip: u64, test: &str) -> &'a Value {
    r["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["config"] == config && x["ip"] == ip && x["test"] == test)
        .unwrap_or_else(|| panic!("no {config} IPv{ip} {test} in {r}"))
}

#[test]
fn link_tests_run_through_the_gateways_and_beside_them() {
    if !testkit::require_root("bench ipsec --part link") {
        return;
    }
    let mut configs = "veth,none,esp".to_string();
    if testkit::require("boringtun-cli and wg", boringtun_installed()) {
        configs += ",boringtun";
    }
    let dir = tempfile::tempdir().unwrap();
    let r = bench(&[
        "--part",
        "link",
        "--seconds",
        "1",
        "--configs",
        &configs,
        "--tests",
        "tcp-stream,udp-rr",
        "--plot-dir",
        p(dir.path()),
        "--json",
    ]);
    let n = configs.split(',').count();
    assert_eq!(r["results"].as_array().unwrap().len(), n * 2 * 4, "{r}");
    for x in r["results"].as_array().unwrap() {
        let o = &x["outcome"];
        assert!(o["mbit_s"].as_f64().unwrap() > 0.0, "{x}");
        assert!(!o["per_second"].as_array().unwrap().is_empty(), "{x}");
        assert!(o["delay_ms"].as_f64().unwrap() > 0.0, "{x}");
        if x["test"].as_str().unwrap().starts_with("UDP_RR") {
            assert!(o["transactions_per_s"].as_f64().unwrap() > 100.0, "{x}");
            assert!(o["loss"].as_f64().unwrap() < 0.05, "{x}");
        }
        // The gateways' CPU is measured where there are gateways.
        let cpu = x["carrier_cpu"].as_array().unwrap();
        if x["config"] == "veth" {
            assert!(cpu.is_empty(), "{x}");
        } else {
            assert_eq!(cpu.len(), 2, "{x}");
            assert!(cpu.iter().all(|c| c.as_f64().unwrap() > 0.0), "{x}");
        }
    }
    // 3DES in software is far slower than forwarding in the clear.
    for ip in [4, 6] {
        let tcp = |c| {
            result(&r, c, ip, "TCP_STREAM 4096 B, buffers 57344")["outcome"]["mbit_s"]
                .as_f64()
                .unwrap()
        };
        assert!(tcp("none") > 2.0 * tcp("esp"), "{r}");
    }
    // The gateways did what their configuration says: ESP both ways, or
    // every packet in the clear.
    let gws = r["gateways"].as_array().unwrap();
    let of = |c: &'static str| gws.iter().filter(move |g| g["config"] == c);
    assert_eq!(of("esp").count(), 2);
    for g in of("esp") {
        assert!(g["outbound"]["ipsec"].as_u64().unwrap() > 1000, "{g}");
        assert!(g["inbound"]["ipsec"].as_u64().unwrap() > 1000, "{g}");
        assert_eq!(g["outbound"]["clear"], 0, "{g}");
    }
    for g in of("none") {
        assert!(g["outbound"]["clear"].as_u64().unwrap() > 1000, "{g}");
        assert_eq!(g["outbound"]["ipsec"], 0, "{g}");
    }
    // A chart per test and IP version.
    let charts = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(charts, 4 * 2);
    let svg = std::fs::read_to_string(
        dir.path()
            .join("ipsec-tcp-stream-4096-b-buffers-57344-v6.svg"),
    )
    .unwrap();
    assert!(svg.contains("<svg") && svg.contains("esp"), "{svg}");
}

#[test]
fn a_constant_rate_stream_arrives_at_its_rate_through_esp() {
    if !testkit::require_root("bench ipsec --part dv") {
        return;
    }
    let r = bench(&[
        "--part",
        "dv",
        "--seconds",
        "2",
        "--dv-mbit",
        "4",
        "--configs",
        "none,esp-blowfish-cbc,esp-3des-cbc-per-packet-keys",
        "--json",
    ]);
    let results = r["results"].as_array().unwrap();
    assert_eq!(results.len(), 3, "{r}");
    // 4 Mbit/s of IPv6 packets with 500-byte payloads (548 bytes): 912 a
    // second, far below what any of these carry.
    for x in results {
        assert_eq!(x["ip"], 6, "{x}");
        let o = &x["outcome"];
        let pps = o["count"].as_f64().unwrap() / o["seconds"].as_f64().unwrap();
        assert!((pps - 912.4).abs() < 912.4 * 0.1, "{pps}: {x}");
        assert!(o["loss"].as_f64().unwrap() < 0.01, "{x}");
        for s in o["per_second"].as_array().unwrap() {
            let c = s["count"].as_f64().unwrap();
            assert!((c - 912.4).abs() < 912.4 * 0.15, "{x}");
        }
    }
    // One way: the sender's gateway protects, the receiver's removes.
    let gws = r["gateways"].as_array().unwrap();
    for c in ["esp-blowfish-cbc", "esp-3des-cbc-per-packet-keys"] {
        let g: Vec<&Value> = gws.iter().filter(|g| g["config"] == c).collect();
        assert_eq!(g.len(), 2, "{r}");
        assert!(
            g[0]["outbound"]["ipsec"].as_u64().unwrap() > 1500,
            "{c}: {r}"
        );
        assert!(
            g[1]["inbound"]["ipsec"].as_u64().unwrap() > 1500,
            "{c}: {r}"
        );
    }
}

#[test]
fn bad_link_arguments_are_usage_errors_before_anything_is_made() {
    for args in [
        &["--part", "link", "--configs", "esp,telnet"][..],
        &["--part", "link", "--link-rate", "100"],
        &["--part", "link", "--link-rate", "100mbit;reboot"],
        &["--part", "link", "--tests", "tcp-maerts"],
        &["--part", "link", "--families", "5"],
        &["--part", "dv", "--seconds", "0"],
        &["--part", "dv", "--configs", "esp-null"],
    ] {
        let out = kansoku()
            .args(["bench", "ipsec"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.is_empty(), "{args:?}");
    }
}

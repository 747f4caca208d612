//! `kansoku bench ipsec --part link` and `--part dv`: the paper's
//! experiment (Ariga et al. n.d., §2.2 and §2.3) rebuilt in two network
//! namespaces on one machine.
//!
//! ```text
//!  namespace A (CPU 0)                               namespace B (CPU 1)
//!  client ─► TUN ─► gateway A ─► veth A ══ veth B ─► gateway B ─► TUN ─► server
//!                   (kansoku ipsec gateway, ESP/AH, transport mode)
//! ```
//!
//! Each namespace plays one of the paper's hosts: its gateway (`kansoku
//! ipsec gateway`, a child process pinned with taskset) and its end of the
//! test (a thread of this process, [`crate::ipsec_net::netperf`]) share one core, as
//! the kernel's IPsec and netperf shared the host's one CPU. The gateway
//! runs at nice -10, the test ends at 0: the kernel's IPsec work runs
//! before the process that caused it, so a sender that outruns it waits
//! for it, as on the paper's hosts. At equal priority the scheduler would
//! split the core evenly between a UDP sender and its gateway, and the
//! sender's datagrams would overflow the TUN's queue: the figure would be
//! the scheduler's, not the gateway's. The tests are netperf's, in the
//! paper's sizes; [`Config`] is what carries them:
//!
//! - `veth`: the bare veth pair, no gateway (the kernel alone);
//! - `none`: the gateways with no SAs, forwarding in the clear: the
//!   paper's NONE. One difference: a gateway in the clear makes one pass
//!   through userspace per packet (the sender's; the receiver's kernel
//!   takes the packet itself), where ESP and AH make two;
//! - `ah` (HMAC-SHA1), `esp` (3DES-CBC without an authenticator, as the
//!   paper ran it), `ah-esp` (that ESP inside AH): the paper's settings;
//! - `esp-aes-gcm-16`, `esp-chacha20-poly1305`, `esp-aes-cbc+hmac-sha256`:
//!   today's;
//! - `boringtun`: a userspace WireGuard tunnel over TUN (boringtun-cli,
//!   one thread, pinned and prioritized like the gateway), the tunnel a user would
//!   otherwise pick.
//!
//! `--link-rate` puts a token bucket (tc tbf) on both veth ends, the
//! paper's 100 Mbit/s Ethernet where the link, not the CPU, caps NONE;
//! `--cpu-hog` runs a busy loop on the sending side's core at the
//! gateway's priority (the paper's "a program computing pi", §2.1, which
//! competed with the kernel's IPsec work for its host's CPU). Gateway CPU time is read from
//! `/proc` around each test.
//!
//! `--part dv` is §2.3: a constant-rate UDP stream (13 Mbit/s of IP
//! packets with 500-byte payloads, about 3,000 packets a second, as the
//! paper's DV) over IPv6, in the clear and with ESP 3DES and ESP Blowfish,
//! each with per-SA keys and with KAME's per-packet keying; per second,
//! the packets and bytes received.
//!
//! Everything made is removed when the bench ends, however it ends: the
//! namespaces (with the veth pair, the TUN devices and the qdiscs in
//! them) by their drop guards, the gateways and boringtun by
//! [`Peer`](crate::harness::peers::Peer)'s.
//!
//! `configs` says what is compared, `testbed` builds the namespaces and
//! runs the carriers, `report` writes the tables and charts of `--part
//! link`, and `dv` is `--part dv`; this module runs the `--part link`
//! matrix and checks its results against the paper's ordering.

pub mod netperf;

mod configs;
mod dv;
mod report;
mod testbed;

use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use pipeline::{Error, Report, Result};
use serde::Serialize;
use serde_json::{json, Value};

use crate::args::BenchIpsecArgs;
use netperf::{Endpoints, Outcome, Side, Test};

pub use configs::{
    dv_configs, figure, link_configs, link_tests, paper_figure, parse_rate, Carrier, Config,
};
pub use dv::run_dv;

use report::{plot_link, write_link_tables};
use testbed::{Hog, Pair, Running, PORT};

/// One test's result.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub config: String,
    pub ip: u8,
    pub test: String,
    #[serde(skip)]
    pub kind: Option<Test>,
    #[serde(skip)]
    pub paper_label: Option<&'static str>,
    pub outcome: Outcome,
    /// CPU used by each side's gateway (or boringtun) during the test, as
    /// a share of one core.
    pub carrier_cpu: Vec<f64>,
}

/// Runs the configurations' tests; progress on standard error.
#[allow(clippy::too_many_arguments)]
fn run_matrix(
    pair: &Pair,
    configs: &[Config],
    tests: &[(&'static str, Test)],
    families: &[u8],
    seconds: f64,
    hog: bool,
    stop: &AtomicBool,
    gateways: &mut Vec<Value>,
) -> Result<Vec<Row>> {
    let exe = std::env::current_exe()
        .map_err(|e| Error::input(format!("bench ipsec: where is kansoku? {e}")))?;
    let mut rows = Vec::new();
    for c in configs {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let running = Running::start(pair, c, &exe)?;
        let hog = hog.then(|| Hog::start(pair.cpus[0]));
        for &ip in families {
            for (_, t) in tests {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let dst = if ip == 6 { running.dst6 } else { running.dst4 };
                let ep = Endpoints {
                    client: Side {
                        netns: Some(pair.a.path()),
                        cpu: Some(pair.cpus[0]),
                    },
                    server: Side {
                        netns: Some(pair.b.path()),
                        cpu: Some(pair.cpus[1]),
                    },
                    server_addr: SocketAddr::new(dst, PORT),
                };
                let before = running.cpu();
                let t0 = Instant::now();
                let o = netperf::run(t, &ep, seconds, stop).map_err(|e| {
                    Error::input(format!(
                        "bench ipsec: {} over {} IPv{ip}: {e}",
                        t.name(),
                        c.name
                    ))
                })?;
                let wall = t0.elapsed().as_secs_f64();
                let after = running.cpu();
                let carrier_cpu = before
                    .iter()
                    .zip(&after)
                    .map(|(b, a)| (a - b) / wall)
                    .collect();
                eprintln!(
                    "bench ipsec: {:<24} IPv{ip} {:<32} {:>10.2} {}",
                    c.name,
                    t.name(),
                    figure(&o),
                    if t.is_stream() { "Mbit/s" } else { "trans/s" }
                );
                rows.push(Row {
                    config: c.name.clone(),
                    ip,
                    test: t.name(),
                    kind: Some(*t),
                    paper_label: c.paper,
                    outcome: o,
                    carrier_cpu,
                });
            }
        }
        drop(hog);
        for mut g in running.stop()? {
            g["config"] = json!(c.name);
            gateways.push(g);
        }
    }
    Ok(rows)
}

/// `--link-rate`, checked.
fn link_rate(args: &BenchIpsecArgs) -> Result<Option<String>> {
    args.link_rate
        .as_deref()
        .map(parse_rate)
        .transpose()
        .map_err(Error::usage)
}

/// Makes the namespaces (with the link rate), runs the tests of every
/// configuration in them, removes them: the rows, the gateways' reports,
/// and the problems those show.
fn measure(
    configs: &[Config],
    tests: &[(&'static str, Test)],
    families: &[u8],
    rate: Option<&str>,
    args: &BenchIpsecArgs,
    stop: &AtomicBool,
) -> Result<(Vec<Row>, Vec<Value>, Vec<String>)> {
    let pair = Pair::create(rate)?;
    let mut gateways = Vec::new();
    let rows = run_matrix(
        &pair,
        configs,
        tests,
        families,
        args.seconds,
        args.cpu_hog,
        stop,
        &mut gateways,
    )?;
    drop(pair);
    let problems = gateway_problems(&gateways);
    Ok((rows, gateways, problems))
}

/// `--part link`.
pub fn run_link(args: &BenchIpsecArgs, stop: &AtomicBool, out: &mut dyn Write) -> Result<Report> {
    let all = link_configs();
    let configs = choose(&all, args.configs.as_deref())?;
    let tests = link_tests(&args.tests)?;
    let families = families(&args.families)?;
    let rate = link_rate(args)?;
    let estimate = configs.len() * families.len() * tests.len();
    eprintln!(
        "bench ipsec: {estimate} tests of {} s: about {:.0} minutes",
        args.seconds,
        (estimate as f64 * (args.seconds + 0.5) + configs.len() as f64 * 3.0) / 60.0
    );
    let (rows, gateways, problems) =
        measure(&configs, &tests, &families, rate.as_deref(), args, stop)?;
    let checks = link_checks(&rows);
    if args.json {
        writeln!(
            out,
            "{}",
            json!({
                "part": "link",
                "seconds": args.seconds,
                "link_rate": rate,
                "cpu_hog": args.cpu_hog,
                "results": rows,
                "checks": checks,
                "gateways": gateways,
            })
        )
        .map_err(Error::stdout)?;
    } else {
        write_link_tables(out, &rows, &families, rate.as_deref(), args.cpu_hog)?;
        writeln!(out, "\n## The paper's findings, here\n").map_err(Error::stdout)?;
        for c in &checks {
            writeln!(
                out,
                "- {}: {}",
                c["claim"].as_str().unwrap_or(""),
                c["verdict"].as_str().unwrap_or("")
            )
            .map_err(Error::stdout)?;
        }
    }
    if let Some(dir) = &args.plot_dir {
        plot_link(dir, &rows)?;
    }
    let interrupted = stop
        .load(Ordering::Relaxed)
        .then(|| "bench ipsec".to_string());
    Ok(Report {
        interrupted,
        problems,
        ..Report::default()
    })
}

/// What the gateways' reports show went wrong. Kernel drops at the TUN and
/// at the receivers are part of a measurement (a saturated gateway drops).
/// A packet refused as corrupt (ICV, padding, malformed) can be one too,
/// now and then: under loss, the receiving kernel may join the fragments
/// of two datagrams whose 16-bit IPv4 identifications repeated within its
/// 30-second reassembly timeout (RFC 4963), and the ICV catches the result;
/// such refusals are noted on standard error. More than one packet in
/// 10,000 of an SA refused so is a problem: a bug, not chance.
fn gateway_problems(gateways: &[Value]) -> Vec<String> {
    let mut v = Vec::new();
    for g in gateways {
        for sa in g["sas"].as_array().into_iter().flatten() {
            let bad = sa["integrity_failed"].as_u64().unwrap_or(0)
                + sa["padding_failed"].as_u64().unwrap_or(0)
                + sa["malformed"].as_u64().unwrap_or(0);
            if bad == 0 {
                continue;
            }
            let packets = sa["packets"].as_u64().unwrap_or(0);
            let what = format!(
                "bench ipsec: {}: SA {} refused {bad} of {packets} packets as corrupt",
                g["config"], sa["spi"]
            );
            if bad.saturating_mul(10_000) > packets {
                v.push(what);
            } else {
                eprintln!(
                    "{what} (fragments of different datagrams joined by the receiving \
                     kernel after IPv4 identifications repeated; the ICV caught them)"
                );
            }
        }
    }
    v
}

fn choose(all: &[Config], names: Option<&[String]>) -> Result<Vec<Config>> {
    let Some(names) = names else {
        return Ok(all.to_vec());
    };
    let mut v = Vec::new();
    for n in names {
        let c = all.iter().find(|c| &c.name == n).ok_or_else(|| {
            Error::usage(format!(
                "--configs: unknown configuration {n:?} ({})",
                all.iter()
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        v.push(c.clone());
    }
    Ok(v)
}

fn families(f: &[u8]) -> Result<Vec<u8>> {
    if f.is_empty() || f.iter().any(|&x| x != 4 && x != 6) {
        return Err(Error::usage("--families: 4, 6 or 4,6"));
    }
    let mut v = f.to_vec();
    v.dedup();
    Ok(v)
}

fn find<'a>(rows: &'a [Row], config: &str, ip: u8, test: &Test) -> Option<&'a Row> {
    rows.iter()
        .find(|r| r.config == config && r.ip == ip && r.kind.as_ref() == Some(test))
}

/// The paper's findings checked against this run's figures.
fn link_checks(rows: &[Row]) -> Vec<Value> {
    let mut checks = Vec::new();
    let mut tests: Vec<Test> = Vec::new();
    for r in rows {
        if let Some(t) = r.kind {
            if !tests.contains(&t) {
                tests.push(t);
            }
        }
    }
    let fig = |c: &str, ip, t: &Test| find(rows, c, ip, t).map(|r| figure(&r.outcome));
    for t in tests.iter().filter(|t| t.is_stream()) {
        for ip in [4u8, 6] {
            let v: Vec<Option<f64>> = ["none", "ah", "esp", "ah-esp"]
                .iter()
                .map(|c| fig(c, ip, t))
                .collect();
            if let [Some(n), Some(a), Some(e), Some(ae)] = v[..] {
                let holds = n > a && a > e && e >= ae * 0.97;
                checks.push(json!({
                    "claim": format!("{} IPv{ip}: NONE > AH > ESP >= AH/ESP ({n:.1} > {a:.1} > {e:.1} >= {ae:.1}, AH/ESP within 3%)", t.name()),
                    "holds": holds,
                    "verdict": if holds { "holds" } else { "does not hold" },
                }));
            }
        }
        for c in ["none", "ah", "esp", "ah-esp", "esp-aes-gcm-16"] {
            if let (Some(a), Some(b)) = (fig(c, 4, t), fig(c, 6, t)) {
                let r = b / a;
                let holds = (0.85..=1.15).contains(&r);
                checks.push(json!({
                    "claim": format!("{} {c}: IPv6 / IPv4 = {r:.2} (within 15%)", t.name()),
                    "holds": holds,
                    "verdict": if holds { "holds" } else { "does not hold" },
                }));
            }
        }
    }
    for t in tests.iter().filter(|t| matches!(t, Test::TcpStream { .. })) {
        for ip in [4u8, 6] {
            if let (Some(g), Some(b)) = (fig("esp-aes-gcm-16", ip, t), fig("boringtun", ip, t)) {
                let holds = g >= b;
                checks.push(json!({
                    "claim": format!("{} IPv{ip}: ESP aes-gcm-16 {g:.1} >= boringtun {b:.1} Mbit/s", t.name()),
                    "holds": holds,
                    "verdict": if holds { "holds" } else { "does not hold" },
                }));
            }
        }
    }
    for t in tests.iter().filter(|t| !t.is_stream()) {
        for ip in [4u8, 6] {
            if let (Some(a), Some(e)) = (fig("ah", ip, t), fig("esp", ip, t)) {
                checks.push(json!({
                    "claim": format!("{} IPv{ip}: the paper found ESP faster than AH in TCP_RR and UDP_RR 1/1; here ESP {e:.0}, AH {a:.0} trans/s", t.name()),
                    "holds": Value::Null,
                    "verdict": if e > a { "ESP faster (as the paper)" } else { "AH faster (not as the paper)" },
                }));
            }
        }
    }
    checks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_see_the_paper_ordering() {
        let t = Test::UdpStream {
            msg: 4096,
            buf: 32768,
        };
        let row = |c: &str, ip, mbit| Row {
            config: c.into(),
            ip,
            test: t.name(),
            kind: Some(t),
            paper_label: None,
            outcome: Outcome {
                mbit_s: mbit,
                ..Outcome::default()
            },
            carrier_cpu: vec![],
        };
        let rows = vec![
            row("none", 4, 900.0),
            row("ah", 4, 500.0),
            row("esp", 4, 90.0),
            row("ah-esp", 4, 89.0),
            row("none", 6, 800.0),
        ];
        let c = link_checks(&rows);
        assert_eq!(c[0]["holds"], true, "{c:?}");
        assert!(c.iter().any(|x| x["claim"]
            .as_str()
            .unwrap()
            .contains("none: IPv6 / IPv4 = 0.89")
            && x["holds"] == true));
        let rows = vec![
            row("none", 4, 900.0),
            row("ah", 4, 50.0),
            row("esp", 4, 90.0),
            row("ah-esp", 4, 89.0),
        ];
        assert_eq!(link_checks(&rows)[0]["holds"], false);
    }
}

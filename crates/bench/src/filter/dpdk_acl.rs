//! DPDK's ACL library as the filter bench's peer, through the
//! `dpdk-test-acl` program of Debian's `dpdk-dev` package (22.11): the same
//! ClassBench rule file and the same headers, its classification rate and
//! the runtime memory its build reports.
//!
//! Its known pitfalls are handled here: `--tracenum` must exceed the
//! trace's line count (fewer crashes it), `--rulenum` defaults to 65,536
//! (too small for 100K sets), timing needs `--verbose=0`, and without huge
//! pages its default memory is too small for some builds (fw4_10k's 138 MB
//! allocation fails, acl4_10k exits 1 after building without a word), so
//! it gets `-m 4096`. It reads the ClassBench files as they are (decimal
//! addresses; the flags and FIRSTMATCH columns are ignored). An IPv6 set
//! (`kansoku filter v6`) runs in its `--ipv6` mode, which reads the same
//! rule syntax with IPv6 prefixes and traces with addresses as text.

use std::io::Write;
use std::path::Path;
use std::process::Command;

use filter::{AddrMatch, PacketKey, RuleSet};

use crate::harness::peers::which;

/// The program.
pub const PROGRAM: &str = "dpdk-test-acl";

/// What one run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct DpdkRun {
    pub ns_per_packet: f64,
    /// The runtime structures' size from its build log ("total: N bytes").
    pub memory: Option<u64>,
    /// The classify method it ran (`--alg`).
    pub alg: &'static str,
}

/// Batch size per classify call, as the measurements used.
const TRACESTEP: usize = 256;
/// Passes over the trace; the rate is over all of them.
const ITERATIONS: usize = 3;

/// The address family of a rule set as DPDK's modes see it: `Ok(false)`
/// for IPv4 (wildcards only count as either), `Ok(true)` for IPv6, an error
/// for a set with both (DPDK builds one family per context).
pub fn is_v6(rules: &RuleSet) -> Result<bool, String> {
    let (mut v4, mut v6) = (false, false);
    for r in rules.rules() {
        for a in [r.src, r.dst] {
            match a {
                AddrMatch::V4 { .. } => v4 = true,
                AddrMatch::V6 { .. } => v6 = true,
                AddrMatch::Any => {}
            }
        }
    }
    if v4 && v6 {
        return Err(format!(
            "{PROGRAM} takes IPv4 or IPv6 rules, not both in one set"
        ));
    }
    Ok(v6)
}

/// Writes the headers of `keys` of one family (IPv6 when `v6`) as a
/// ClassBench header trace: IPv4 addresses as decimal integers, IPv6 ones
/// as text, as DPDK reads each. Returns how many were written.
pub fn write_trace(keys: &[PacketKey], v6: bool, path: &Path) -> std::io::Result<usize> {
    use core::net::IpAddr;
    let mut w = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut n = 0;
    for k in keys {
        match (k.src, k.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) if !v6 => writeln!(
                w,
                "{}\t{}\t{}\t{}\t{}\t0",
                u32::from(s),
                u32::from(d),
                k.src_port,
                k.dst_port,
                k.protocol
            )?,
            (IpAddr::V6(s), IpAddr::V6(d)) if v6 => writeln!(
                w,
                "{s}\t{d}\t{}\t{}\t{}\t0",
                k.src_port, k.dst_port, k.protocol
            )?,
            _ => continue,
        }
        n += 1;
    }
    w.flush()?;
    Ok(n)
}

/// Runs the peer on a ClassBench rule file and a header trace of `headers`
/// lines, on `cpu`, with the AVX2 method where the CPU has it; `v6` runs
/// its IPv6 mode (addresses as four 32-bit fields).
pub fn run(
    rules: &Path,
    trace: &Path,
    rule_count: usize,
    headers: usize,
    v6: bool,
    cpu: usize,
) -> Result<DpdkRun, String> {
    let program = which(PROGRAM).ok_or_else(|| {
        format!("{PROGRAM} is not installed (Debian's dpdk-dev; bench/filter.sh installs it)")
    })?;
    let alg = if std::arch::is_x86_feature_detected!("avx2") {
        "avx2"
    } else {
        "scalar"
    };
    let out = Command::new(program)
        .args([
            "--no-huge",
            "-m",
            "4096",
            "--no-pci",
            "--log-level=lib.acl:8",
            "-l",
        ])
        .arg(cpu.to_string())
        .arg("--")
        .arg(format!("--rulesf={}", rules.display()))
        .arg(format!("--tracef={}", trace.display()))
        .arg(format!("--tracenum={}", headers + 1))
        .arg(format!("--rulenum={}", (rule_count + 1).max(65_536)))
        .arg(format!("--tracestep={TRACESTEP}"))
        .arg(format!("--iter={ITERATIONS}"))
        .arg("--verbose=0")
        .arg(format!("--alg={alg}"))
        .args(v6.then_some("--ipv6"))
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("running {PROGRAM}: {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        let why = text
            .lines()
            .filter(|l| l.contains("Cause") || l.contains("failed") || l.contains("rror"))
            .collect::<Vec<_>>()
            .join("; ");
        return Err(format!("{PROGRAM} exited with {}: {why}", out.status));
    }
    parse(&text, alg)
}

/// The rate and memory from its output.
pub fn parse(text: &str, alg: &'static str) -> Result<DpdkRun, String> {
    // "search_ip5tuples  @lcore 0: 3 iterations, 3000000 pkts, 1 categories,
    //  218864542 cycles (0.08 sec), 72.95 cycles/pkt, 35638481.81 pkt/sec"
    let line = text
        .lines()
        .find(|l| l.starts_with("search_ip5tuples ") && l.ends_with("pkt/sec"))
        .ok_or_else(|| format!("{PROGRAM} printed no search rate"))?;
    let pps: f64 = line
        .rsplit(", ")
        .next()
        .and_then(|s| s.strip_suffix(" pkt/sec"))
        .and_then(|s| s.trim().parse().ok())
        .filter(|p: &f64| p.is_finite() && *p > 0.0)
        .ok_or_else(|| format!("{PROGRAM}: no rate in `{line}`"))?;
    let memory = text.lines().find_map(|l| {
        l.strip_prefix("total: ")?
            .strip_suffix(" bytes")?
            .parse()
            .ok()
    });
    Ok(DpdkRun {
        ns_per_packet: 1e9 / pps,
        memory,
        alg,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn its_rate_and_memory_are_read_from_its_output() {
        let text = "ACL: Gen phase for ACL \"TESTACL\":\nruntime memory footprint on socket -1:\n\
            total: 21877376 bytes\nmax limit: 18446744073709551615 bytes\n\
            search_ip5tuples  @lcore 0: 3 iterations, 3000000 pkts, 1 categories, 218864542 cycles (0.08 sec), 72.95 cycles/pkt, 35638481.81 pkt/sec\n";
        let r = parse(text, "avx2").unwrap();
        assert!((r.ns_per_packet - 28.06).abs() < 0.01, "{r:?}");
        assert_eq!(r.memory, Some(21_877_376));
        assert!(parse("rte_acl_build(3) finished with 0\n", "avx2").is_err());
        let e = parse("search_ip5tuples  @lcore 0: 0 pkts, nan pkt/sec", "avx2").unwrap_err();
        assert!(e.contains("no rate"), "{e}");
    }

    #[test]
    fn only_headers_of_the_sets_family_go_to_its_trace() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t");
        let v6 = PacketKey::v6("::1".parse().unwrap(), "::2".parse().unwrap(), 17, 3, 4);
        let keys = [PacketKey::v4(167_772_161, 16_843_009, 6, 1234, 80), v6];
        assert_eq!(write_trace(&keys, false, &p).unwrap(), 1);
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "167772161\t16843009\t1234\t80\t6\t0\n"
        );
        assert_eq!(write_trace(&keys, true, &p).unwrap(), 1);
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "::1\t::2\t3\t4\t17\t0\n"
        );
    }

    #[test]
    fn a_sets_family_decides_the_mode() {
        let set = |t: &str| RuleSet::parse(t).unwrap();
        assert_eq!(
            is_v6(&set("ip filter 1 pass 10.0.0.0/8 * tcp * 80\n")),
            Ok(false)
        );
        assert_eq!(
            is_v6(&set(
                "ip filter 1 pass * 2001:db8::/32 tcp * 80\nip filter 2 pass * * * * *\n"
            )),
            Ok(true)
        );
        assert!(is_v6(&set(
            "ip filter 1 pass 10.0.0.0/8 * tcp * 80\nip filter 2 pass * ::1 * * *\n"
        ))
        .is_err());
    }
}

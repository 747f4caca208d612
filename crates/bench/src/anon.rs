//! `kansoku bench anon`: the anonymiser beside libtrace's traceanon on the
//! same trace (IPv4, thousands of flows with random addresses, plain pcap
//! in and out, whole processes, interleaved rounds), and Crypto-PAn's
//! address rate: one address's 32 AES blocks as one batch against the
//! reference implementation's one block at a time, without the cache and
//! with it on the trace's own address stream.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anon::CryptoPan;
use pipeline::{Error, Report, Result};
use trace::read::TraceReader;
use trace::Record;

use crate::args::BenchAnonArgs;
use crate::harness::stats::median;

/// The key every run uses: the figures do not depend on it.
const KEY_HEX: &str = "0123456789abcdef0123456789abcdeffedcba9876543210fedcba9876543210";

pub fn run(a: &BenchAnonArgs, stop: &AtomicBool, out: &mut dyn Write) -> Result<Report> {
    let w = |e: std::io::Error| Error::output("standard output", &e);
    let dir = tempfile::Builder::new()
        .prefix("kansoku-bench-anon-")
        .tempdir_in(a.dir.as_deref().unwrap_or(&std::env::temp_dir()))
        .map_err(|e| Error::output("the bench directory", &e))?;
    let d = dir.path();
    let exe = std::env::current_exe().map_err(|e| Error::input(format!("own executable: {e}")))?;
    let key = d.join("key");
    std::fs::write(&key, KEY_HEX).map_err(|e| Error::output("the key", &e))?;
    let raw_key = d.join("key.bin");
    let key_bytes = anon::parse_key(KEY_HEX).map_err(Error::usage)?;
    std::fs::write(&raw_key, key_bytes).map_err(|e| Error::output("the key", &e))?;
    let trace = d.join("flows.pcap");
    let made = Command::new(&exe)
        .args([
            "synth",
            "-c",
            &a.packets.to_string(),
            "--flows",
            &a.flows.to_string(),
        ])
        .args([
            "--src-net",
            "0.0.0.0/0",
            "--dst-net",
            "0.0.0.0/0",
            "--proto",
            "mix",
            "--ip",
            "4",
        ])
        .args([
            "--size",
            "64-1518",
            "--payload",
            "random",
            "--compress",
            "none",
            "--no-index",
            "-w",
        ])
        .arg(&trace)
        .stderr(Stdio::null())
        .status()
        .map_err(|e| Error::input(format!("kansoku synth: {e}")))?;
    if !made.success() {
        return Err(Error::input("kansoku synth failed"));
    }

    // Crypto-PAn alone: distinct addresses (an odd multiplier permutes
    // the 32-bit numbers), batch against block by block.
    let pan = CryptoPan::new(&key_bytes);
    let addresses: Vec<u32> = (0..a.addresses)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let rate = |f: &dyn Fn(u32) -> u32| {
        let t = Instant::now();
        let mut x = 0u32;
        for &addr in &addresses {
            x ^= f(addr);
        }
        std::hint::black_box(x);
        addresses.len() as f64 / t.elapsed().as_secs_f64()
    };
    let (mut batch, mut single) = (Vec::new(), Vec::new());
    for _ in 0..a.rounds {
        batch.push(rate(&|x| pan.ipv4_uncached(x)));
        single.push(rate(&|x| pan.ipv4_block_by_block(x)));
    }
    // The trace's own address stream, through the cache.
    let stream = ipv4_stream(&trace)?;
    let mut cached = Vec::new();
    let mut hit_ratio = 0.0;
    for _ in 0..a.rounds {
        let mut fresh = CryptoPan::new(&key_bytes);
        let t = Instant::now();
        let mut x = 0u32;
        for &addr in &stream {
            x ^= fresh.ipv4(addr);
        }
        std::hint::black_box(x);
        cached.push(stream.len() as f64 / t.elapsed().as_secs_f64());
        hit_ratio = fresh.hits as f64 / (fresh.hits + fresh.misses).max(1) as f64;
    }
    writeln!(
        out,
        "Crypto-PAn, IPv4, one core, median of {} rounds:\n  \
         distinct addresses, batch of 32 blocks: {:.2} M addresses/s\n  \
         distinct addresses, block by block (the reference's way, baseline): {:.2} M addresses/s ({:.2}x)\n  \
         the trace's {} addresses through the cache ({:.1}% hits): {:.2} M addresses/s",
        a.rounds,
        median(&batch) / 1e6,
        median(&single) / 1e6,
        median(&batch) / median(&single),
        stream.len(),
        100.0 * hit_ratio,
        median(&cached) / 1e6
    )
    .map_err(w)?;

    // Whole processes, interleaved.
    let has_traceanon = store::local::find_program("traceanon").is_some();
    let mut times: [Vec<f64>; 3] = Default::default();
    for round in 0..a.rounds {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        for which in [0usize, 1, 2].iter().cycle().skip(round % 3).take(3) {
            let output = d.join("out.pcap");
            let mut cmd = match which {
                0 if has_traceanon => {
                    let mut c = Command::new("traceanon");
                    c.args(["-s", "-d", "-f"]).arg(&raw_key);
                    c.arg(format!("pcapfile:{}", trace.display()));
                    c.arg(format!("pcapfile:{}", output.display()));
                    c
                }
                0 => continue,
                _ => {
                    let mut c = Command::new(&exe);
                    c.args(["anon", "--compress", "none", "--key"])
                        .arg(&key)
                        .arg("-r")
                        .arg(&trace);
                    c.arg("-w").arg(&output);
                    if *which == 2 {
                        c.args(["--payload", "keep"]);
                    }
                    c
                }
            };
            let t = Instant::now();
            let st = cmd
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map_err(|e| Error::input(format!("{cmd:?}: {e}")))?;
            if !st.success() {
                return Err(Error::input(format!("{cmd:?} failed")));
            }
            times[*which].push(t.elapsed().as_secs_f64());
            let _ = std::fs::remove_file(&output);
            for s in trace::index::sidecars(&output) {
                let _ = std::fs::remove_file(s);
            }
        }
    }
    let (ta, k, keep) = (median(&times[0]), median(&times[1]), median(&times[2]));
    writeln!(
        out,
        "Whole process, {} IPv4 packets of {} flows with random addresses, plain pcap in and out, median of {} rounds:",
        a.packets, a.flows, times[1].len()
    )
    .map_err(w)?;
    if has_traceanon {
        writeln!(out, "  traceanon -s -d (libtrace, baseline): {ta:.3} s").map_err(w)?;
    } else {
        writeln!(
            out,
            "  traceanon: not installed (scripts/install-deps.sh installs it)"
        )
        .map_err(w)?;
    }
    let ratio = |t: f64| {
        if has_traceanon {
            format!(" ({:.2}x traceanon)", ta / t)
        } else {
            String::new()
        }
    };
    writeln!(
        out,
        "  kansoku anon (payload stripped, the default): {k:.3} s{}",
        ratio(k)
    )
    .map_err(w)?;
    writeln!(
        out,
        "  kansoku anon --payload keep (every byte written): {keep:.3} s{}",
        ratio(keep)
    )
    .map_err(w)?;
    Ok(Report::default())
}

/// Every IPv4 source and destination of a trace's packets, in order.
fn ipv4_stream(path: &Path) -> Result<Vec<u32>> {
    let mut r =
        TraceReader::open(path).map_err(|e| Error::input(format!("{}: {e}", path.display())))?;
    let mut v = Vec::new();
    while let Some(rec) = r
        .next_record()
        .map_err(|e| Error::input(format!("{}: {e}", path.display())))?
    {
        if let Record::Packet(p) = rec {
            let s = wire::slice(p.link_type, p.data);
            if let Some(n) = s.network() {
                if let (std::net::IpAddr::V4(a), std::net::IpAddr::V4(b)) = (n.src, n.dst) {
                    v.push(u32::from(a));
                    v.push(u32::from(b));
                }
            }
        }
    }
    Ok(v)
}

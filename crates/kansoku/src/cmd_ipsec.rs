//! `kansoku ipsec encap|decap|gateway`: the command-line side of the
//! `ipsec` crate, over traces (the loop is `pipeline::IpsecRun`) and live
//! (`gateway`: the TUN, the sockets and the engines are there).
//! Keys never appear in what is printed.

use std::io::{self, BufWriter, Write};
use std::path::Path;

use gateway::{Direction as Way, Gateway, GatewayConfig, GatewayReport};
use ipsec::{Config, Engine, Keying, Options, Protocol, SaState};
use pipeline::{display_path, load_sa, Control, Direction, Error, IpsecRun, Report, TraceSink};
use serde_json::json;

use crate::args::{GatewayArgs, IpsecArgs, IpsecCommand, IpsecTraceArgs};
use crate::signals;

pub fn run(args: &IpsecArgs) -> pipeline::Result<Report> {
    match &args.command {
        IpsecCommand::Encap(a) => over_trace(a, Direction::Encap),
        IpsecCommand::Decap(a) => over_trace(a, Direction::Decap),
        IpsecCommand::Gateway(a) => gateway(a),
    }
}

fn engine(path: &Path, cfg: &Config, legacy: bool) -> pipeline::Result<Engine> {
    let keying = if legacy {
        Keying::PerPacket
    } else {
        Keying::PerSa
    };
    Engine::new(cfg, Options { keying })
        .map_err(|e| Error::input(format!("{}: {}", display_path(path), e.0)))
}

fn over_trace(args: &IpsecTraceArgs, dir: Direction) -> pipeline::Result<Report> {
    let cfg = load_sa(&args.sa)?;
    if cfg.sas.is_empty() {
        // Every packet would go through as it was: not what a trace given
        // an SA file to encapsulate or decapsulate with means. (A gateway
        // without SAs is a plain TUN hop, the benchmarks' baseline.)
        return Err(Error::input(format!(
            "{}: no security associations in the file",
            display_path(&args.sa)
        )));
    }
    let engine = engine(&args.sa, &cfg, args.legacy_per_packet_keys)?;
    let mut run: IpsecRun<TraceSink> = IpsecRun::new(engine, dir, args.out.write_sink()?);
    run.rejected = args
        .rejected
        .as_deref()
        .map(|p| args.out.sink(p))
        .transpose()?;
    if let Some(p) = &args.write_esp_sa {
        write_esp_sa(p, &cfg)?;
    }
    let mut source = pipeline::TraceSource::open(&args.read)?;
    let mut report = pipeline::run(&mut source, &mut run, Control::new(signals::stop_flag()));
    for sink in [run.out.take(), run.rejected.take()].into_iter().flatten() {
        if let Err(e) = sink.finish() {
            report.failed(e);
        }
    }
    // With the packets on standard output, the report goes to stderr.
    let to_stderr = args
        .out
        .write
        .as_deref()
        .is_some_and(|p| p.as_os_str() == "-");
    let r = if to_stderr {
        print_report(&mut io::stderr().lock(), &run, dir, args.json)
    } else {
        print_report(&mut io::stdout().lock(), &run, dir, args.json)
    };
    if let Err(e) = r {
        report.failed(Error::output("standard output", &e));
    }
    Ok(report)
}

fn sa_label(s: &SaState) -> String {
    let sa = s.sa();
    let mut algs = Vec::new();
    if let Some((e, _)) = &sa.enc {
        algs.push(e.name());
    }
    if let Some((a, _)) = &sa.auth {
        algs.push(a.name());
    }
    format!(
        "{} {:#010x} {} > {} {} {}",
        sa.protocol,
        sa.spi,
        sa.src,
        sa.dst,
        match sa.mode {
            ipsec::Mode::Transport => "transport",
            ipsec::Mode::Tunnel => "tunnel",
        },
        algs.join("+")
    )
}

fn sa_json(s: &SaState) -> serde_json::Value {
    let sa = s.sa();
    let c = s.counters();
    let (sent, seen) = s.sequence();
    json!({
        "protocol": match sa.protocol { Protocol::Esp => "esp", Protocol::Ah => "ah" },
        "spi": format!("{:#010x}", sa.spi),
        "src": sa.src.to_string(),
        "dst": sa.dst.to_string(),
        "mode": match sa.mode { ipsec::Mode::Transport => "transport", ipsec::Mode::Tunnel => "tunnel" },
        "enc": sa.enc.as_ref().map(|(e, _)| e.name()),
        "auth": sa.auth.as_ref().map(|(a, _)| a.name()),
        "line": sa.line,
        "packets": c.packets,
        "bytes": c.bytes,
        "replay_window": c.replay_window,
        "replay": c.replay,
        "integrity_failed": c.integrity_failed,
        "padding_failed": c.padding_failed,
        "malformed": c.malformed,
        "expired": c.expired,
        "seq_overflow": c.seq_overflow,
        "seq_sent": sent,
        "seq_highest_accepted": seen,
        "soft_lifetime_passed": s.soft_expired(),
    })
}

fn print_report(
    out: &mut dyn Write,
    run: &IpsecRun<TraceSink>,
    dir: Direction,
    as_json: bool,
) -> io::Result<()> {
    let c = run.counts;
    let t = run.engine.totals();
    let reasons: Vec<(ipsec::Reject, u64)> = run.engine.rejects().filter(|(_, n)| *n > 0).collect();
    let name = match dir {
        Direction::Encap => "encap",
        Direction::Decap => "decap",
    };
    if as_json {
        let mut r = serde_json::Map::new();
        for (k, n) in &reasons {
            r.insert(k.name().into(), (*n).into());
        }
        if c.snapped > 0 {
            r.insert("snapped".into(), c.snapped.into());
        }
        if c.link_refused > 0 {
            r.insert("link".into(), c.link_refused.into());
        }
        let v = json!({
            "direction": name,
            "packets": c.packets,
            "transformed": c.transformed,
            "passed": c.passed,
            "not_ip": c.not_ip,
            "held": c.held,
            "reassembled": t.reassembled,
            "fragments_timed_out": t.fragments_timed_out,
            "fragments_waiting": run.engine.fragments_waiting(),
            "udp_not_esp": t.udp_not_esp,
            "rejected": c.rejected + c.snapped + c.link_refused,
            "reasons": r,
            "sas": run.engine.sas().iter().map(sa_json).collect::<Vec<_>>(),
        });
        writeln!(out, "{v}")?;
        return out.flush();
    }
    let verb = match dir {
        Direction::Encap => "protected",
        Direction::Decap => "decapsulated",
    };
    let passed = match dir {
        Direction::Encap => "not covered by a policy or SA, written as they were",
        Direction::Decap => "not IPsec, written as they were",
    };
    writeln!(
        out,
        "{} packets: {} {verb}, {} {passed}",
        c.packets, c.transformed, c.passed
    )?;
    if c.not_ip > 0 {
        writeln!(out, "{} not IP, written as they were", c.not_ip)?;
    }
    if c.held > 0 || t.reassembled > 0 {
        writeln!(
            out,
            "{} fragments held, {} datagrams reassembled, {} timed out, {} still waiting",
            c.held,
            t.reassembled,
            t.fragments_timed_out,
            run.engine.fragments_waiting()
        )?;
    }
    let refused = c.rejected + c.snapped + c.link_refused;
    if refused > 0 {
        let mut parts: Vec<String> = reasons.iter().map(|(r, n)| format!("{r} {n}")).collect();
        if c.snapped > 0 {
            parts.push(format!("snapped {}", c.snapped));
        }
        if c.link_refused > 0 {
            parts.push(format!("link {}", c.link_refused));
        }
        writeln!(out, "{refused} refused: {}", parts.join(", "))?;
    }
    for s in run.engine.sas() {
        let k = s.counters();
        writeln!(
            out,
            "  {}: {} packets, {} bytes; replay {}, too old {}, integrity {}, padding {}, expired {}",
            sa_label(s),
            k.packets,
            k.bytes,
            k.replay,
            k.replay_window,
            k.integrity_failed,
            k.padding_failed,
            k.expired
        )?;
    }
    out.flush()
}

/// Writes Wireshark's `esp_sa` table for the file's SAs (copy it into a
/// Wireshark profile, or point `-o uat:esp_sa:...` at its rows); an SA
/// Wireshark 4.0 cannot decrypt is named in a comment and on stderr.
fn write_esp_sa(path: &Path, cfg: &Config) -> pipeline::Result<()> {
    for sa in &cfg.sas {
        if let Some(why) = ipsec::esp_sa_unwritable(sa) {
            eprintln!(
                "kansoku: {}: SA {} {:#x} (line {}) not in the table: {why}",
                display_path(path),
                sa.protocol,
                sa.spi,
                sa.line
            );
        }
    }
    std::fs::write(path, ipsec::write_esp_sa(&cfg.sas))
        .map_err(|e| Error::output(display_path(path), &e))
}

fn gateway(args: &GatewayArgs) -> pipeline::Result<Report> {
    let sa = load_sa(&args.sa)?;
    let mut gw = Gateway::open(GatewayConfig {
        tun_name: args.tun.clone(),
        tun_mtu: args.tun_mtu,
        outer_device: args.dev.clone(),
        sa,
        keying: if args.legacy_per_packet_keys {
            ipsec::Keying::PerPacket
        } else {
            ipsec::Keying::PerSa
        },
        offload: !args.no_offload,
    })
    .map_err(|e| match e {
        gateway::Error::Usage(m) => pipeline::Error::usage(m),
        gateway::Error::Setup(m) => pipeline::Error::input(m),
    })?;
    let [o4, o6] = gw.overhead();
    eprintln!(
        "kansoku: ipsec gateway on {}, MTU {} (ESP/AH adds at most {o4} bytes over IPv4, {o6} over IPv6)",
        gw.tun_name(),
        gw.tun_mtu()
    );
    for n in gw.notes() {
        eprintln!("kansoku: {n}");
    }
    let r = gw.run(signals::stop_flag());
    let mut report = Report::live();
    report.interrupted = Some(r.tun.clone());
    report.packets = r.outbound.packets_in + r.inbound.packets_in;
    report.bytes = r.outbound.bytes_in + r.inbound.bytes_in;
    if let Some(e) = &r.error {
        report.problems.push(format!("ipsec gateway stopped: {e}"));
    }
    if let Err(e) = print_gateway_report(&r, args.json) {
        report.failed(e);
    }
    Ok(report)
}

fn print_gateway_report(r: &GatewayReport, json: bool) -> pipeline::Result<()> {
    let mut out = BufWriter::new(io::stdout().lock());
    if json {
        serde_json::to_writer(&mut out, r).map_err(|e| Error::stdout(e.into()))?;
        writeln!(out).map_err(Error::stdout)?;
        out.flush().map_err(Error::stdout)?;
        return Ok(());
    }
    let line = |out: &mut BufWriter<_>, what: &str, d: &Way, ipsec: &str, clear: &str| {
        let refused: u64 = d.rejects.values().sum();
        writeln!(
            out,
            "{what}: {} packets ({} bytes) in, {} packets ({} bytes) out; {} {ipsec}, {} {clear}, {} held, {refused} refused",
            d.packets_in, d.bytes_in, d.packets_out, d.bytes_out, d.ipsec, d.clear, d.held
        )?;
        for (reason, n) in d.rejects.iter().filter(|(_, n)| **n > 0) {
            writeln!(out, "  refused {reason}: {n}")?;
        }
        io::Result::Ok(())
    };
    writeln!(out, "ipsec gateway {} (MTU {})", r.tun, r.tun_mtu).map_err(Error::stdout)?;
    line(
        &mut out,
        "outbound (TUN to wire)",
        &r.outbound,
        "protected",
        "in the clear",
    )
    .map_err(Error::stdout)?;
    line(
        &mut out,
        "inbound (wire to TUN)",
        &r.inbound,
        "decapsulated",
        "not ESP",
    )
    .map_err(Error::stdout)?;
    for s in &r.sas {
        let algs: Vec<&str> = s.enc.iter().chain(&s.auth).copied().collect();
        writeln!(
            out,
            "SA {} {:#x} {} -> {} {} {}: {} packets, {} bytes; replayed {}, too old {}, integrity {}, padding {}, malformed {}, expired {}",
            s.protocol,
            s.spi,
            s.src,
            s.dst,
            s.mode,
            algs.join("+"),
            s.packets,
            s.bytes,
            s.replay,
            s.replay_window,
            s.integrity_failed,
            s.padding_failed,
            s.malformed,
            s.expired
        ).map_err(Error::stdout)?;
    }
    let f = &r.send_faults;
    writeln!(
        out,
        "send faults: too big {}, no route {}, queue full {}, bad packet {}, other {}",
        f.too_big, f.no_route, f.queue_full, f.bad_packet, f.other
    )
    .map_err(Error::stdout)?;
    writeln!(
        out,
        "ICMP too big sent {}, outer packets fragmented {} ({} fragments), link-local {}, looped {}, TUN reads cut {}, TUN write errors {}, receive errors {}, dropped by the kernel at the receivers {}, at the TUN {}",
        r.icmp_too_big,
        r.fragmented,
        r.fragments,
        r.link_local,
        r.looped,
        r.tun_cut,
        r.tun_write_errors,
        r.receive_errors,
        r.receive_drops,
        r.tun_drops.map_or("unknown".to_string(), |n| n.to_string())
    ).map_err(Error::stdout)?;
    let o = &r.offload;
    if o.on {
        let refused: u64 = o.refused.values().sum();
        writeln!(
            out,
            "offloads: {} TCP segments read whole, cut into {} packets; {} inbound segments joined into {} writes; {} with a bad checksum; {refused} TUN reads refused",
            o.tso_reads, o.tso_segments, o.gro_joined, o.gro_writes, o.bad_checksum
        ).map_err(Error::stdout)?;
        for (reason, n) in &o.refused {
            writeln!(out, "  refused {reason}: {n}").map_err(Error::stdout)?;
        }
    } else {
        writeln!(out, "offloads: off").map_err(Error::stdout)?;
    }
    out.flush().map_err(Error::stdout)?;
    Ok(())
}

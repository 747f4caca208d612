//! `kansoku ipsec encap|decap`: the command-line side of the `ipsec` crate
//! over traces (the loop is `pipeline::IpsecRun`).

use std::io::{self, Write};
use std::path::Path;

use ipsec::{Config, Engine, Keying, Options, Protocol, SaState};
use pipeline::{display_path, Control, Direction, Error, IpsecRun, Report, TraceSink};
use serde_json::json;

use crate::args::{IpsecArgs, IpsecCommand, IpsecTraceArgs};
use crate::signals;

pub fn run(args: &IpsecArgs) -> pipeline::Result<Report> {
    match &args.command {
        IpsecCommand::Encap(a) => over_trace(a, Direction::Encap),
        IpsecCommand::Decap(a) => over_trace(a, Direction::Decap),
    }
}

/// Reads an SA file: setkey lines, Wireshark's `esp_sa` table or `ip xfrm
/// state` output; errors as `FILE:LINE:COLUMN: what`.
pub fn load_sa_file(path: &Path) -> pipeline::Result<Config> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::file(path, e))?;
    ipsec::parse_setkey(&text).map_err(|e| Error::input(format!("{}:{e}", display_path(path))))
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
    let cfg = load_sa_file(&args.sa)?;
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

//! `kansoku ipsec encap|decap|gateway`: the command-line side of the
//! `ipsec` crate, over traces (the loop is `pipeline::IpsecRun`) and live
//! (`gateway`: the TUN, the sockets and the engines are there).
//! Keys never appear in what is printed.

use std::io::{self, Write};
use std::path::Path;

use ipsec::{Config, Engine, Keying, Options};
use pipeline::{
    display_path, load_sa, write_esp_sa, Control, Direction, Error, IpsecRun, Report, TraceSink,
};

use crate::args::{IpsecArgs, IpsecCommand, IpsecTraceArgs};
use pipeline::signals;

pub fn run(args: &IpsecArgs) -> pipeline::Result<Report> {
    match &args.command {
        IpsecCommand::Encap(a) => over_trace(a, Direction::Encap),
        IpsecCommand::Decap(a) => over_trace(a, Direction::Decap),
        IpsecCommand::Gateway(a) => {
            gateway::cli::run_gateway(a, load_sa(&a.sa)?, signals::stop_flag())
        }
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
    let text = if args.json {
        format!("{}\n", run.report().json())
    } else {
        run.report().to_string()
    };
    let written = if to_stderr {
        io::stderr().lock().write_all(text.as_bytes())
    } else {
        io::stdout().lock().write_all(text.as_bytes())
    };
    if let Err(e) = written {
        report.failed(Error::output("standard output", &e));
    }
    Ok(report)
}

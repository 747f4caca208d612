//! `kansoku`: the command-line front end, and only that: arguments
//! (`args`), a pipeline built from them (`cmd_*`, one file a command), and
//! printing. The work is done in the library crates: `pipeline` runs every
//! command's loop and decides the exit code from its report; `wire`,
//! `trace`, `capture`, `filter`, `aguri` and `synth` do the packets, files,
//! rings, rules and summaries; `bench` is the benchmark harness.

#![forbid(unsafe_code)]

mod args;
mod cmd_capture;
mod cmd_delay;
mod cmd_docs;
mod cmd_filter;
mod cmd_generate;
mod cmd_index;
mod cmd_ipsec;
mod cmd_plot;
mod cmd_profile;
mod cmd_read;
mod cmd_stats;
mod cmd_store;
mod cmd_synth;
mod cmd_web;
mod output;

use std::process::ExitCode;

use clap::Parser;
use pipeline::{ErrorKind, Report};

use crate::args::{Cli, Command};

/// Words of a message longer than this are shortened (a bad input's token
/// can be any length; file names are not this long).
const MAX_WORD: usize = 200;

fn main() -> ExitCode {
    let cli = Cli::parse();
    pipeline::signals::install();
    pipeline::source::trace::set_verify(!cli.command.no_verify());
    let result: pipeline::Result<Report> = match cli.command {
        Command::Read(args) => cmd_read::run(&args),
        Command::Anon(args) => pipeline::cli::anon::run(&args),
        Command::Stats(args) => cmd_stats::run(&args),
        Command::Index(args) => cmd_index::run(&args),
        Command::Capture(args) => cmd_capture::run(&args),
        Command::Generate(args) => cmd_generate::run(&args),
        Command::Synth(args) => cmd_synth::run(&args),
        Command::Filter(args) => cmd_filter::run(&args),
        Command::Profile(args) => cmd_profile::run(&args),
        Command::Plot(args) => cmd_plot::run(&args),
        Command::Web(args) => cmd_web::run(&args),
        Command::Store(args) => cmd_store::run(&args),
        Command::Delay(args) => cmd_delay::run(&args),
        Command::Webbench(args) => {
            webbench::cli::run_webbench(&args, pipeline::signals::stop_shared())
        }
        Command::Ipsec(args) => cmd_ipsec::run(&args),
        Command::Bench(args) => bench::run(&args, pipeline::signals::stop_flag()),
        Command::Completions(args) => cmd_docs::completions(&args),
        Command::Man => cmd_docs::man(),
    };
    // The one place the exit code is decided: from the run's report, or
    // from the error that stopped the command before it could run.
    let code = match result {
        Ok(report) => {
            for m in report.messages() {
                eprintln!("kansoku: {}", pipeline::clip_long_words(&m, MAX_WORD));
            }
            report.exit_code()
        }
        Err(e) => {
            if e.kind != ErrorKind::BrokenPipe {
                eprintln!(
                    "kansoku: {}",
                    pipeline::clip_long_words(&e.to_string(), MAX_WORD)
                );
            }
            e.exit_code()
        }
    };
    ExitCode::from(code.code())
}

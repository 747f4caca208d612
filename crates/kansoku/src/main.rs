//! `kansoku`: the command-line front end. Argument parsing, wiring of the
//! library crates, and printing; the work itself is done in `wire` and `trace`.

#![forbid(unsafe_code)]

mod benchkit;
mod cli;
mod cmd_bench;
mod cmd_bench_capture;
mod cmd_capture;
mod cmd_filter;
mod cmd_generate;
mod cmd_plot;
mod cmd_profile;
mod cmd_read;
mod cmd_stats;
mod cmd_synth;
mod error;
mod input;
mod output;
mod progress;
mod signals;
mod sink;
mod time;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{BenchCommand, Cli, Command};
use crate::error::CliError;

fn main() -> ExitCode {
    let cli = Cli::parse();
    signals::install();
    let result = match cli.command {
        Command::Read(args) => cmd_read::run(&args),
        Command::Stats(args) => cmd_stats::run(&args),
        Command::Capture(args) => cmd_capture::run(&args),
        Command::Generate(args) => cmd_generate::run(&args),
        Command::Synth(args) => cmd_synth::run(&args),
        Command::Filter(args) => cmd_filter::run(&args),
        Command::Bench(args) => match &args.command {
            BenchCommand::Filter(_) => cmd_filter::bench(&args),
            BenchCommand::Disk(a) => cmd_bench::disk(a),
            BenchCommand::Compress(a) => cmd_bench::compress(a),
            BenchCommand::Capture(a) => cmd_bench_capture::run(a),
        },
        Command::Profile(args) => cmd_profile::run(&args),
        Command::Plot(args) => cmd_plot::run(&args),
    };
    match result {
        Ok(code) => ExitCode::from(code as u8),
        Err(CliError::BrokenPipe) => ExitCode::SUCCESS,
        Err(CliError::Message { message, code }) => {
            eprintln!("kansoku: {message}");
            ExitCode::from(code as u8)
        }
    }
}

//! `bench`: kansoku's benchmark harness. `kansoku bench ...` is the user's
//! command; the CLI embeds [`BenchArgs`] as that subcommand and hands them
//! to [`run`], which prints the results on standard output and returns the
//! run's [`Report`], from which the CLI takes the exit code as for any
//! command.
//!
//! One module an experiment, each comparing against a baseline measured in
//! the same run, over a small shared [`harness`]:
//!
//! | bench | module | baseline |
//! |---|---|---|
//! | `bench filter` | [`filter`] (with DPDK's ACL, [`filter::dpdk_acl`]) | the linear engine (Yamashita and Tsuru 2008's Fig. 2) |
//! | `bench disk` | [`disk`] | memcpy of the same bytes |
//! | `bench compress` | [`compress`] | memcpy of the same bytes |
//! | `bench capture` | [`capture`] (its capture side: [`capture::worker`]) | libpcap's pattern: one write per packet, uncompressed |
//! | `bench ipsec --part packet` | [`ipsec`] | the same primitives alone, and `openssl speed` |
//! | `bench ipsec --part link\|dv` | [`ipsec_net`] (the traffic: [`ipsec_net::netperf`]) | the bare veth, and boringtun |
//! | `bench web` | [`web`] | wrk against the same server |
//! | `bench web-paper` | [`webpaper`] | MAWI WG 2001, ch. 3's configurations |
//! | `bench store`, `bench view` | [`fleet`], [`view`] | the same queries on files |
//!
//! What goes wrong is reported as in every kansoku command
//! ([`pipeline::Error`]): bad flags are usage errors, unreadable inputs
//! input errors (exit 2), a failed write an output failure (exit 3).
//! Problems the bench finds (fast and linear filter engines disagreeing, a
//! sweep cut short by Ctrl-C) go into [`Report::problems`]: exit 1.

#![forbid(unsafe_code)]

pub mod anon;
pub mod args;
pub mod capture;
pub mod compress;
pub mod disk;
pub mod filter;
pub mod fleet;
pub mod harness;
pub mod ipsec;
pub mod ipsec_net;
pub mod view;
pub mod web;
pub mod webpaper;

use std::io::{self, Write};
use std::sync::atomic::AtomicBool;

use pipeline::{Error, Report, Result};

pub use args::{BenchArgs, BenchCommand};
pub use harness::slow_disk::SlowDisk;

/// Runs `kansoku bench ...`, printing to standard output. `stop` is the
/// CLI's SIGINT/SIGTERM flag: benches stop early on it (a problem in the
/// report), and the capture worker's normal end is that signal.
pub fn run(args: &BenchArgs, stop: &AtomicBool) -> Result<Report> {
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let report = run_to(args, stop, &mut out)?;
    out.flush().map_err(Error::stdout)?;
    Ok(report)
}

/// [`run`], printing to `out`.
pub fn run_to(args: &BenchArgs, stop: &AtomicBool, out: &mut dyn Write) -> Result<Report> {
    match &args.command {
        BenchCommand::Anon(a) => anon::run(a, stop, out),
        BenchCommand::Filter(a) => filter::run(a, stop, out),
        BenchCommand::Disk(a) => disk::run(a, stop, out),
        BenchCommand::Compress(a) => compress::run(a, stop, out),
        BenchCommand::Capture(a) => capture::run(a, stop, out),
        BenchCommand::Ipsec(a) => ipsec::run(a, stop, out),
        BenchCommand::Web(a) => web::run(a, stop, out),
        BenchCommand::WebPaper(a) => webpaper::run(a, stop, out),
        BenchCommand::View(a) => view::run(a, stop, out),
        BenchCommand::Store(a) => fleet::run(a, stop, out),
        BenchCommand::CaptureWorker(a) => capture::worker::run(a, stop, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, FromArgMatches, Parser};

    /// The CLI's shape: `kansoku bench ...`.
    #[derive(Debug, Parser)]
    #[command(name = "kansoku")]
    enum Cli {
        Bench(BenchArgs),
    }

    /// `kansoku bench ARGS`, the arguments split at spaces.
    fn parse(args: &str) -> std::result::Result<BenchArgs, clap::Error> {
        let m = Cli::command()
            .try_get_matches_from(["kansoku", "bench"].into_iter().chain(args.split(' ')))?;
        let Cli::Bench(a) = Cli::from_arg_matches(&m)?;
        Ok(a)
    }

    #[test]
    fn the_arguments_parse_as_the_cli_gives_them() {
        Cli::command().debug_assert();
        let a = parse("capture --loads 2000,4000 -c 3000 --configs raw-pkt,lz4 -o r.svg --json")
            .unwrap();
        let BenchCommand::Capture(c) = a.command else {
            panic!("{a:?}")
        };
        assert_eq!(c.loads, [2000.0, 4000.0]);
        assert_eq!(c.configs, ["raw-pkt", "lz4"]);
        let a = parse("capture-worker -i kbc-rx -w f.pcap --compress none --per-packet --disk-mbps 2 -B 2 --queue-mib 1 --json").unwrap();
        let BenchCommand::CaptureWorker(w) = a.command else {
            panic!("{a:?}")
        };
        assert!(w.per_packet && w.json);
        assert_eq!(w.compress, trace::Codec::None);
        assert_eq!((w.buffer_mib, w.queue_mib, w.disk_mbps), (2, 1, Some(2.0)));
        assert!(parse("disk --size 0").is_err());
        assert!(parse("compress --mb 0").is_err());
        let a = parse("filter --rules r --trace t -c 5").unwrap();
        let BenchCommand::Filter(f) = a.command else {
            panic!("{a:?}")
        };
        assert_eq!((f.packets, f.paper_sizes.len()), (Some(5), 5));
    }

    #[test]
    fn the_worker_is_hidden_from_the_help() {
        let mut cmd = Cli::command();
        let help = cmd
            .find_subcommand_mut("bench")
            .unwrap()
            .render_help()
            .to_string();
        assert!(
            help.contains("capture") && help.contains("compress"),
            "{help}"
        );
        assert!(!help.contains("capture-worker"), "{help}");
    }
}

//! `kansoku delay`'s tools beside the delay line (whose arguments are
//! `webbench::cli`'s).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use webbench::cli::DelayRunArgs;
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct DelayArgs {
    #[command(subcommand)]
    pub tool: Option<DelayTool>,
    #[command(flatten)]
    pub run: DelayRunArgs,
}

#[derive(Debug, Subcommand)]
pub enum DelayTool {
    /// Build an RTT profile (a CDF file for --profile cdf:FILE) from a capture taken at a server: the time from
    /// the server's SYN-ACK to the client's ACK, per connection, as the paper's ENMA measured it.
    Profile(DelayProfileArgs),
}

#[derive(Debug, Args)]
pub struct DelayProfileArgs {
    /// The capture (pcap or pcapng, plain or compressed; "-" for standard input), taken at the server.
    #[arg(long, value_name = "FILE")]
    pub from_pcap: PathBuf,
    /// Write the CDF here (default: standard output).
    #[arg(short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// The server (ADDR or ADDR:PORT): only its handshakes; by default every side that answers a SYN.
    #[arg(long, value_name = "ADDR[:PORT]")]
    pub server: Option<String>,
}

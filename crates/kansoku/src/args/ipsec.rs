//! `kansoku ipsec`: ESP and AH over traces, and live between programs.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::OutputArgs;

#[derive(Debug, Args)]
pub struct IpsecArgs {
    #[command(subcommand)]
    pub command: IpsecCommand,
}

#[derive(Debug, Subcommand)]
pub enum IpsecCommand {
    /// Protect a trace's packets with ESP/AH: by the SA file's `spdadd ... -P out` policies, or, in a file
    /// without policies, by the SAs whose `add` addresses are the packet's own.
    Encap(IpsecTraceArgs),
    /// Check and remove ESP/AH from a trace's packets (SA by SPI and destination; fragments reassembled
    /// first; replay window, ICV, padding and `-P in` policies checked); count what is refused and why.
    Decap(IpsecTraceArgs),
    /// Move packets between a TUN device and raw sockets through ESP/AH, so that unmodified programs in two
    /// hosts or namespaces talk over kansoku's IPsec. Runs until SIGINT/SIGTERM, then prints its counters.
    Gateway(gateway::cli::GatewayArgs),
}

#[derive(Debug, Args)]
pub struct IpsecTraceArgs {
    #[command(flatten)]
    pub verify: super::VerifyArgs,
    /// Trace to read (pcap or pcapng, plain or compressed; "-" for standard input).
    #[arg(short = 'r', value_name = "FILE")]
    pub read: PathBuf,
    /// The SAs and policies: setkey(8) `add`/`spdadd` lines (kansoku's extensions: -esn, -udp-encap SPORT
    /// DPORT), or SAs alone as Wireshark's esp_sa table or `ip xfrm state` output.
    #[arg(long, value_name = "FILE")]
    pub sa: PathBuf,
    /// Also write the SAs as Wireshark's esp_sa table, so that Wireshark or tshark decrypts the trace.
    #[arg(long, value_name = "FILE")]
    pub write_esp_sa: Option<PathBuf>,
    /// Also write the refused packets here, as they came (same format options as -w).
    #[arg(long, value_name = "FILE")]
    pub rejected: Option<PathBuf>,
    /// Redo the key schedule and the HMAC pads for every packet, as KAME-era stacks did (slower; the
    /// packets are the same).
    #[arg(long)]
    pub legacy_per_packet_keys: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Write the packets here.
    #[command(flatten)]
    pub out: OutputArgs,
}

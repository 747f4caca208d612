//! `ipsec`: kansoku's userspace ESP/AH between live programs.

use std::path::PathBuf;

use clap::{Args, Subcommand};

/// `kansoku ipsec`: one of the subcommands.
#[derive(Debug, Args)]
pub struct IpsecArgs {
    #[command(subcommand)]
    pub command: IpsecCommand,
}

#[derive(Debug, Subcommand)]
pub enum IpsecCommand {
    /// Move packets between a TUN device and raw sockets through ESP/AH, so that unmodified programs in two
    /// hosts or namespaces talk over kansoku's IPsec. Runs until SIGINT/SIGTERM, then prints its counters.
    Gateway(GatewayArgs),
}

#[derive(Debug, Args)]
pub struct GatewayArgs {
    /// SAs and policies in setkey(8)'s syntax (`add ...;`, `spdadd ...;`); a file with none passes every
    /// packet through in the clear.
    #[arg(long, value_name = "FILE")]
    pub sa: PathBuf,
    /// TUN device to create (or a persistent one to attach to); `%d` is numbered by the kernel.
    #[arg(long, value_name = "NAME", default_value = "kipsec%d")]
    pub tun: String,
    /// TUN MTU [default: the path MTU towards the SAs' addresses less the most ESP/AH can add].
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u32).range(68..=65535))]
    pub tun_mtu: Option<u32>,
    /// Outer device: protected packets leave only through it (SO_BINDTODEVICE) and ESP/AH are taken only
    /// from it. Needed when the route to the peer goes through the TUN (host-to-host transport mode).
    #[arg(long, value_name = "IFACE")]
    pub dev: Option<String>,
    /// Key the ciphers and HMACs for every packet, as KAME-era stacks did (slower; for comparisons).
    #[arg(long)]
    pub legacy_per_packet_keys: bool,
    /// Print the closing report as JSON.
    #[arg(long)]
    pub json: bool,
}

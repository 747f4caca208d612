//! The command line of the gateway (feature `cli`): `kansoku ipsec
//! gateway`'s arguments, and the run they ask for.

use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use clap::Args;
use outcome::{Error, Report, Result};

use crate::{Gateway, GatewayConfig, GatewayReport};

/// `kansoku ipsec gateway`: ESP/AH between a TUN device and the wire.
#[derive(Debug, Args)]
pub struct GatewayArgs {
    /// SAs and policies: setkey(8) `add`/`spdadd` lines (or SAs alone as Wireshark's esp_sa table or `ip
    /// xfrm state` output); a file with none passes every packet through in the clear.
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
    /// Open the TUN without the checksum and TCP segmentation offloads: every packet is read and written
    /// at the MTU, none joined (slower for TCP; for comparisons).
    #[arg(long)]
    pub no_offload: bool,
    /// Print the closing report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs the gateway with the SAs and policies `sa` (read from `args.sa`)
/// until `stop`; prints its report.
pub fn run_gateway(args: &GatewayArgs, sa: ipsec::Config, stop: &AtomicBool) -> Result<Report> {
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
    let r = gw.run(stop);
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

fn print_gateway_report(r: &GatewayReport, json: bool) -> Result<()> {
    if json {
        let mut out = io::stdout().lock();
        serde_json::to_writer(&mut out, r).map_err(|e| Error::stdout(e.into()))?;
        return writeln!(out).map_err(Error::stdout);
    }
    let mut out = io::stdout().lock();
    write!(out, "{r}")
        .and_then(|()| out.flush())
        .map_err(Error::stdout)
}

//! `kansoku ipsec gateway`: the command-line side of
//! `pipeline::gateway` (the loop, the TUN, the sockets and the engines are
//! there). Prints the TUN's name and MTU at the start, the counters at the
//! end; keys never appear.

use std::io::{self, BufWriter, Write};

use pipeline::gateway::{load_sa, Direction, Gateway, GatewayConfig, GatewayReport};
use pipeline::Report;

use crate::args::{GatewayArgs, IpsecArgs, IpsecCommand};
use crate::signals;

pub fn run(args: &IpsecArgs) -> pipeline::Result<Report> {
    match &args.command {
        IpsecCommand::Gateway(a) => gateway(a),
    }
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
    if let Err(e) = print_report(&r, args.json) {
        report.failed(e);
    }
    Ok(report)
}

fn print_report(r: &GatewayReport, json: bool) -> pipeline::Result<()> {
    let mut out = BufWriter::new(io::stdout().lock());
    if json {
        serde_json::to_writer(&mut out, r).map_err(io::Error::from)?;
        writeln!(out)?;
        out.flush()?;
        return Ok(());
    }
    let line = |out: &mut BufWriter<_>, what: &str, d: &Direction, ipsec: &str, clear: &str| {
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
    writeln!(out, "ipsec gateway {} (MTU {})", r.tun, r.tun_mtu)?;
    line(
        &mut out,
        "outbound (TUN to wire)",
        &r.outbound,
        "protected",
        "in the clear",
    )?;
    line(
        &mut out,
        "inbound (wire to TUN)",
        &r.inbound,
        "decapsulated",
        "not ESP",
    )?;
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
        )?;
    }
    let f = &r.send_faults;
    writeln!(
        out,
        "send faults: too big {}, no route {}, queue full {}, bad packet {}, other {}",
        f.too_big, f.no_route, f.queue_full, f.bad_packet, f.other
    )?;
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
    )?;
    out.flush()?;
    Ok(())
}

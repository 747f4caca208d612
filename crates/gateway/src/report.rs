//! How a [`GatewayReport`] reads as text: what `kansoku ipsec gateway`
//! prints when it stops (its JSON is the report's `Serialize`).

use std::fmt;

use crate::{Direction, GatewayReport};

/// One direction's line and its refusals by reason.
fn direction(
    f: &mut fmt::Formatter<'_>,
    what: &str,
    d: &Direction,
    ipsec: &str,
    clear: &str,
) -> fmt::Result {
    let refused: u64 = d.rejects.values().sum();
    writeln!(
        f,
        "{what}: {} packets ({} bytes) in, {} packets ({} bytes) out; {} {ipsec}, {} {clear}, {} held, {refused} refused",
        d.packets_in, d.bytes_in, d.packets_out, d.bytes_out, d.ipsec, d.clear, d.held
    )?;
    for (reason, n) in d.rejects.iter().filter(|(_, n)| **n > 0) {
        writeln!(f, "  refused {reason}: {n}")?;
    }
    Ok(())
}

impl fmt::Display for GatewayReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self;
        writeln!(f, "ipsec gateway {} (MTU {})", r.tun, r.tun_mtu)?;
        direction(
            f,
            "outbound (TUN to wire)",
            &r.outbound,
            "protected",
            "in the clear",
        )?;
        direction(
            f,
            "inbound (wire to TUN)",
            &r.inbound,
            "decapsulated",
            "not ESP",
        )?;
        for s in &r.sas {
            let algs: Vec<&str> = s.enc.iter().chain(&s.auth).copied().collect();
            writeln!(
                f,
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
        let s = &r.send_faults;
        writeln!(
            f,
            "send faults: too big {}, no route {}, queue full {}, bad packet {}, other {}",
            s.too_big, s.no_route, s.queue_full, s.bad_packet, s.other
        )?;
        writeln!(
            f,
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
        let o = &r.offload;
        if !o.on {
            return writeln!(f, "offloads: off");
        }
        let refused: u64 = o.refused.values().sum();
        writeln!(
            f,
            "offloads: {} TCP segments read whole, cut into {} packets; {} inbound segments joined into {} writes; {} with a bad checksum; {refused} TUN reads refused",
            o.tso_reads, o.tso_segments, o.gro_joined, o.gro_writes, o.bad_checksum
        )?;
        for (reason, n) in &o.refused {
            writeln!(f, "  refused {reason}: {n}")?;
        }
        Ok(())
    }
}

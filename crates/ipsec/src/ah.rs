//! AH (RFC 4302): an ICV over the whole packet, IP header included.
//!
//! ```text
//! next header(1) | length in 4-byte words - 2 (1) | reserved(2) | SPI(4)
//!                | sequence number, low 32 bits(4) | ICV, padded
//! ```
//!
//! The ICV covers the IP header with its mutable fields zeroed (§3.3.3.1:
//! IPv4 TOS, flags and fragment offset, TTL, checksum, and the options RFC
//! 4302 Appendix A does not list as immutable; IPv6 traffic class, flow
//! label, hop limit, and the data of extension-header options marked as
//! changing en route), the AH header with the ICV field zeroed, the payload,
//! and with ESN the sequence number's high 32 bits appended (§3.3.3.3).
//! The ICV is padded to 4 bytes (IPv4) or 8 bytes (IPv6), as §2.6 asks.

use crate::crypto::MAX_ICV;
use wire::ah::{self as wire_ah, AhPacket};
use wire::ipv4::{self, Ipv4Packet};
use wire::ipv6::{self, Ipv6Packet};
use wire::ipv6ext::Ipv6ExtHeader;
use wire::IpProtocol;

use crate::reject::Reject;
use crate::sa::SaState;

/// AH's length with `icv_len` bytes of ICV, padded for the IP version.
pub(crate) fn len(icv_len: usize, v6: bool) -> usize {
    let n = wire_ah::HEADER_LEN + icv_len;
    let a = if v6 { 8 } else { 4 };
    n.div_ceil(a) * a
}

/// Copies `header` (the IP header and the IPv6 extension headers before
/// AH) into `out` with the mutable fields zeroed.
pub(crate) fn zero_mutable(header: &[u8], v6: bool, out: &mut Vec<u8>) -> Result<(), Reject> {
    out.clear();
    out.extend_from_slice(header);
    if !v6 {
        let mut ip = Ipv4Packet::new_checked(&mut out[..]).map_err(|_| Reject::Malformed)?;
        ip.set_tos(0);
        ip.set_frag(false, false, 0);
        ip.set_ttl(0);
        ip.set_checksum(0);
        let mut i = ipv4::HEADER_LEN;
        while i < out.len() {
            match out[i] {
                0 => break, // end of options; what follows is padding
                1 => i += 1,
                t => {
                    let l = usize::from(*out.get(i + 1).ok_or(Reject::Malformed)?);
                    if l < 2 || i + l > out.len() {
                        return Err(Reject::Malformed);
                    }
                    match t {
                        // Security, extended security, commercial security,
                        // router alert, SDB: immutable (Appendix A.1).
                        130 | 133 | 134 | 148 | 149 => {}
                        // Loose and strict source routes: mutable but
                        // predictable; not computed here.
                        131 | 137 => return Err(Reject::Unsupported),
                        _ => out[i..i + l].fill(0),
                    }
                    i += l;
                }
            }
        }
        return Ok(());
    }
    let mut ip = Ipv6Packet::new_checked(&mut out[..]).map_err(|_| Reject::Malformed)?;
    ip.set_ver_tc_flow(0, 0);
    ip.set_hop_limit(0);
    let mut next = ip.next_header();
    let mut off = ipv6::HEADER_LEN;
    while off < out.len() {
        let ext = Ipv6ExtHeader::new_checked(&out[off..]).map_err(|_| Reject::Malformed)?;
        let len = ext.header_len();
        let after = ext.next_header();
        match next {
            IpProtocol::HopByHop | IpProtocol::Ipv6Opts => {
                let mut i = off + 2;
                while i < off + len {
                    if out[i] == 0 {
                        i += 1; // Pad1
                        continue;
                    }
                    let t = out[i];
                    let l = usize::from(*out.get(i + 1).ok_or(Reject::Malformed)?);
                    if i + 2 + l > off + len {
                        return Err(Reject::Malformed);
                    }
                    if t & 0x20 != 0 {
                        out[i + 2..i + 2 + l].fill(0);
                    }
                    i += 2 + l;
                }
            }
            IpProtocol::Ipv6Route => return Err(Reject::Unsupported),
            _ => return Err(Reject::Malformed),
        }
        next = after;
        off += len;
    }
    Ok(())
}

/// Appends to `out` the AH header for `sa` (ICV zeroed, to be filled by
/// [`fill_icv`]), taking the SA's next sequence number, and returns it.
pub(crate) fn push_header(
    sa: &mut SaState,
    next_header: u8,
    v6: bool,
    out: &mut Vec<u8>,
) -> Result<u64, Reject> {
    let seq = sa.next_seq().ok_or(Reject::SeqOverflow)?;
    let icv_len = sa.integrity.as_ref().ok_or(Reject::NoSa)?.icv_len();
    let n = len(icv_len, v6);
    out.push(next_header);
    out.push((n / 4 - 2) as u8);
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&sa.sa.spi.to_be_bytes());
    out.extend_from_slice(&(seq as u32).to_be_bytes());
    out.resize(out.len() + n - wire_ah::HEADER_LEN, 0);
    Ok(seq)
}

/// Computes the ICV of `packet` (AH at `ah_at`, its ICV field zero) with
/// `zeroed` the header as [`zero_mutable`] left it, and writes it in.
pub(crate) fn fill_icv(sa: &mut SaState, packet: &mut [u8], ah_at: usize, zeroed: &[u8], seq: u64) {
    let Some(integ) = sa.integrity.as_ref() else {
        return;
    };
    let hi = ((seq >> 32) as u32).to_be_bytes();
    let esn: &[u8] = if sa.sa.esn { &hi } else { &[] };
    let mut icv = [0u8; MAX_ICV];
    integ.compute(&[zeroed, &packet[ah_at..], esn], &mut icv);
    let n = integ.icv_len();
    let icv_at = ah_at + wire_ah::HEADER_LEN;
    packet[icv_at..icv_at + n].copy_from_slice(&icv[..n]);
    let ah_len = (usize::from(packet[ah_at + wire_ah::field::LENGTH]) + 2) * 4;
    sa.counters.packets += 1;
    sa.counters.bytes += packet.len().saturating_sub(ah_at + ah_len) as u64;
}

/// What an AH header says.
pub(crate) struct Header {
    /// The byte as it is, as [`crate::ip::Layout::protocol`].
    pub next_header: u8,
    pub len: usize,
    pub spi: u32,
    pub seq_low: u32,
}

/// Reads the AH header at the start of `ah`. A header length below the
/// fixed part is left for [`verify`] to refuse, which counts it against the
/// SA; the view's [`AhPacket::check_len`] would refuse it before any SA is
/// known.
pub(crate) fn header(ah: &[u8]) -> Result<Header, Reject> {
    if ah.len() < wire_ah::HEADER_LEN {
        return Err(Reject::Truncated);
    }
    let h = AhPacket::new_unchecked(ah);
    let len = h.header_len();
    if len > ah.len() {
        return Err(Reject::Truncated);
    }
    Ok(Header {
        next_header: ah[wire_ah::field::NXT_HDR],
        len,
        spi: h.spi(),
        seq_low: h.seq_number(),
    })
}

/// Checks the AH of `packet` (at `ah_at`, header `h`), with `zeroed` the IP
/// header as [`zero_mutable`] left it and `scratch` for the AH copy; the
/// replay window has accepted the packet when this returns `Ok`.
pub(crate) fn verify(
    sa: &mut SaState,
    packet: &[u8],
    ah_at: usize,
    h: &Header,
    zeroed: &[u8],
    scratch: &mut Vec<u8>,
) -> Result<(), Reject> {
    let Some(integ) = sa.integrity.as_ref() else {
        return Err(Reject::NoSa);
    };
    let icv_len = integ.icv_len();
    if h.len < wire_ah::HEADER_LEN + icv_len {
        sa.counters.malformed += 1;
        return Err(Reject::Truncated);
    }
    let seq = sa.window.infer(h.seq_low);
    if let Err(e) = sa.window.check(seq) {
        crate::esp::count_replay(sa, e.into());
        return Err(e.into());
    }
    scratch.clear();
    scratch.extend_from_slice(&packet[ah_at..ah_at + h.len]);
    scratch[wire_ah::HEADER_LEN..].fill(0);
    let hi = ((seq >> 32) as u32).to_be_bytes();
    let esn: &[u8] = if sa.sa.esn { &hi } else { &[] };
    let icv_at = ah_at + wire_ah::HEADER_LEN;
    let icv = &packet[icv_at..icv_at + icv_len];
    let Some(integ) = sa.integrity.as_ref() else {
        return Err(Reject::NoSa);
    };
    if !integ.verify(&[zeroed, scratch, &packet[ah_at + h.len..], esn], icv) {
        sa.counters.integrity_failed += 1;
        return Err(Reject::Integrity);
    }
    if let Err(e) = sa.window.accept(seq) {
        crate::esp::count_replay(sa, e.into());
        return Err(e.into());
    }
    sa.counters.packets += 1;
    sa.counters.bytes += (packet.len() - ah_at - h.len) as u64;
    Ok(())
}

//! The engine on a packet buffer with headroom: ESP is put on and taken off
//! where the packet lies, so the payload is never copied, only encrypted.
//! What a gateway uses (it reads a packet from its TUN device into the
//! buffer) and what `bench ipsec` measures beside the primitives alone.
//!
//! The fast path is one ESP SA (transport or tunnel mode, ESP in UDP or
//! not), the common case. Outbound: the IP header moves back into the
//! headroom by the bytes ESP puts before the payload (or an outer header is
//! written there), the trailer and ICV go after it. Inbound: the payload is
//! decrypted where it is and the IP header moves forward over the ESP
//! header. Everything else (AH, bundles, fragments, a policy with several
//! transforms) takes [`Engine::outbound`] and [`Engine::inbound`], with a
//! copy; the packets are the same either way.

use super::{
    finish_esp_out, finish_in, outer_header, selectors, udp_header, Engine, Inbound, Outbound,
    MAX_BUNDLE,
};
use crate::config::{Mode, Protocol};
use crate::esp;
use crate::ip::{self, proto, Layout};
use crate::reject::Reject;
use wire::{ipv4, ipv6, ipv6ext, udp};

/// Bytes kept free in front of a packet: an outer IPv6 header, a UDP
/// header, ESP's header and the longest IV, with room to spare.
pub const HEADROOM: usize = 128;

/// Bytes a new [`PacketBuf`] holds after its headroom without growing: an
/// Ethernet-MTU packet, and what ESP appends to it (padding to a 16-byte
/// block, pad length and next header, a 16-byte ICV: 33 at most), with
/// room to spare. A longer packet makes the buffer grow, once.
///
/// Not 2 KiB as it was: `bench ipsec` holds 2,048 of these beside the
/// crypto-only baseline's buffers, which are the packets' bytes back to
/// back; with 2 KiB, ~700 untouched bytes lay between one packet and the
/// next, and caches favoured the baseline (decapsulating 1400 bytes took
/// ~4 ns more a packet, and several times that when the machine was busy;
/// the hardware prefetchers, which follow a packet's bytes, plausibly stop
/// short of the next one).
const BODY_ROOM: usize = 1500 + 64;

/// One IP packet with [`HEADROOM`] in front of it.
#[derive(Clone, Debug)]
pub struct PacketBuf {
    buf: Vec<u8>,
    start: usize,
}

impl Default for PacketBuf {
    fn default() -> PacketBuf {
        PacketBuf::new()
    }
}

impl PacketBuf {
    pub fn new() -> PacketBuf {
        let mut buf = Vec::with_capacity(HEADROOM + BODY_ROOM);
        buf.resize(HEADROOM, 0);
        PacketBuf {
            buf,
            start: HEADROOM,
        }
    }

    /// Makes `pkt` the packet (a copy).
    pub fn set(&mut self, pkt: &[u8]) {
        self.buf.truncate(HEADROOM);
        self.buf.resize(HEADROOM, 0);
        self.start = HEADROOM;
        self.buf.extend_from_slice(pkt);
    }

    /// `n` bytes to read a packet into (from a TUN device, a socket); then
    /// [`PacketBuf::set_len`] says how many were read.
    pub fn space(&mut self, n: usize) -> &mut [u8] {
        self.start = HEADROOM;
        self.buf.resize(HEADROOM + n, 0);
        &mut self.buf[HEADROOM..]
    }

    /// The packet is the first `n` bytes of what [`PacketBuf::space`] gave.
    pub fn set_len(&mut self, n: usize) {
        self.buf.truncate(HEADROOM + n);
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    pub fn len(&self) -> usize {
        self.buf.len() - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Engine {
    /// [`Engine::outbound`] on `pb`, in place where it can be.
    pub fn outbound_buf(&mut self, pb: &mut PacketBuf) -> Result<Outbound, Reject> {
        let r = self.outbound_buf_inner(pb);
        match r {
            Ok(Outbound::Protected) => self.totals.protected += 1,
            Ok(Outbound::Bypass) => self.totals.bypassed += 1,
            Err(e) => self.rejects[e.index()] += 1,
        }
        r
    }

    /// [`Engine::inbound`] on `pb`, in place where it can be.
    pub fn inbound_buf(&mut self, pb: &mut PacketBuf) -> Result<Inbound, Reject> {
        let r = self.inbound_buf_inner(pb);
        match r {
            Ok(Inbound::Decapsulated) => self.totals.decapsulated += 1,
            Ok(Inbound::Clear) => self.totals.clear += 1,
            Ok(Inbound::Held) => self.totals.held += 1,
            Err(e) => self.rejects[e.index()] += 1,
        }
        r
    }

    fn outbound_buf_inner(&mut self, pb: &mut PacketBuf) -> Result<Outbound, Reject> {
        let l = Layout::parse(pb.as_slice())?;
        let mut chosen = [0usize; MAX_BUNDLE];
        let n = self.select_out_again(pb.as_slice(), &l, &mut chosen)?;
        if n == 0 {
            return Ok(Outbound::Bypass);
        }
        let idx = chosen[0];
        let fast = n == 1
            && self.sas[idx].protocol() == Protocol::Esp
            && (self.sas[idx].mode() == Mode::Tunnel || !l.fragment);
        if !fast {
            let mut tmp = std::mem::take(&mut self.scratch_out);
            tmp.clear();
            let r = self.outbound_inner(pb.as_slice(), &mut tmp);
            if r == Ok(Outbound::Protected) {
                pb.set(&tmp);
            }
            self.scratch_out = tmp;
            return r;
        }
        if !self.sas[idx].alive(self.now) {
            return Err(Reject::Expired);
        }
        pb.buf.truncate(pb.start + l.total_len);
        let sa = &self.sas[idx];
        let udp = sa.sa.encap_udp;
        let udp_len = if udp.is_some() { udp::HEADER_LEN } else { 0 };
        let head = esp::head_len(sa);
        let tunnel = sa.mode() == Mode::Tunnel;
        // Where the outer header starts, and how long it is.
        let (at, hl, v6, protocol_at) = if tunnel {
            self.ip_id = self.ip_id.wrapping_add(1);
            let (h, hl) = outer_header(pb.as_slice(), l.v6, sa.sa.src, sa.sa.dst, self.ip_id)?;
            let at = pb
                .start
                .checked_sub(hl + udp_len + head)
                .ok_or(Reject::TooBig)?;
            pb.buf[at..at + hl].copy_from_slice(&h[..hl]);
            let v6 = hl == ipv6::HEADER_LEN;
            let protocol_at = match v6 {
                true => ipv6::field::NXT_HDR,
                false => ipv4::field::PROTOCOL,
            };
            (at, hl, v6, protocol_at)
        } else {
            let hl = l.header_len;
            let at = pb.start.checked_sub(udp_len + head).ok_or(Reject::TooBig)?;
            move_header(&mut pb.buf, pb.start, hl, at);
            (at, hl, l.v6, l.protocol_at)
        };
        let inner_protocol = match (tunnel, l.v6) {
            (true, false) => proto::IPV4,
            (true, true) => proto::IPV6,
            (false, _) => l.protocol,
        };
        pb.start = at;
        pb.buf[at + protocol_at] = match udp {
            Some(_) => proto::UDP,
            None => proto::ESP,
        };
        let udp_at = at + hl;
        if let Some(ports) = udp {
            pb.buf[udp_at..udp_at + udp::HEADER_LEN].copy_from_slice(&udp_header(ports));
        }
        let sa = &mut self.sas[idx];
        esp::seal_at(sa, &mut pb.buf, udp_at + udp_len, inner_protocol)?;
        let udp = udp.map(|_| match tunnel {
            true => (hl, sa.sa.src, sa.sa.dst),
            false => (hl, l.src(&pb.buf[at..]), l.dst(&pb.buf[at..])),
        });
        let start = pb.start;
        finish_esp_out(&mut pb.buf[start..], udp, v6)?;
        Ok(Outbound::Protected)
    }

    fn inbound_buf_inner(&mut self, pb: &mut PacketBuf) -> Result<Inbound, Reject> {
        let l = Layout::parse(pb.as_slice())?;
        // The fast path: one whole ESP packet (or ESP in UDP) for an SA.
        let esp_at = if l.fragment || (!l.v6 && !ip::ipv4_checksum_ok(pb.as_slice())) {
            None
        } else {
            match l.protocol {
                proto::ESP => Some(l.header_len),
                proto::UDP if !self.natt_ports.is_empty() => {
                    match self.natt(pb.as_slice(), &l)? {
                        Some(at) => Some(at),
                        // IKE, a keepalive, or another port: not ESP.
                        None => return self.check_clear(pb.as_slice(), &l),
                    }
                }
                _ => None,
            }
        };
        let found = match esp_at.map(|at| (at, esp::spi(&pb.as_slice()[at..]))) {
            Some((at, Some(spi))) => self
                .lookup_again(proto::ESP, spi, l.dst(pb.as_slice()))
                .map(|i| (at, i)),
            _ => None,
        };
        let Some((at, idx)) = found else {
            // Not the fast path: the copying one, with its own refusals.
            let mut tmp = std::mem::take(&mut self.scratch_out);
            tmp.clear();
            let r = self.inbound_inner(pb.as_slice(), &mut tmp, None);
            if r == Ok(Inbound::Decapsulated) {
                pb.set(&tmp);
            }
            self.scratch_out = tmp;
            return r;
        };
        if !self.sas[idx].alive(self.now) {
            return Err(Reject::Expired);
        }
        let start = pb.start;
        pb.buf.truncate(start + l.total_len);
        let sa = &mut self.sas[idx];
        let head = esp::head_len(sa);
        let tunnel = sa.mode() == Mode::Tunnel;
        let (nh, n) = esp::open_in_place(sa, &mut pb.buf[start + at..])?;
        if nh == proto::NO_NEXT {
            return Err(Reject::Dummy);
        }
        let payload = start + at + head;
        pb.buf.truncate(payload + n);
        if tunnel {
            pb.start = payload;
        } else {
            // The IP header moves forward over ESP's.
            let new = payload - l.header_len;
            move_header(&mut pb.buf, start, l.header_len, new);
            pb.start = new;
        }
        let begin = pb.start;
        finish_in(&mut pb.buf[begin..], &l, nh, tunnel)?;
        // In transport mode the header is the one just read, with the
        // next header as its protocol: read again only when that is an
        // IPv6 extension header (a destination option after ESP), which
        // the layout must walk past.
        let nl = if tunnel || (l.v6 && ipv6ext::is_walked(nh)) {
            Layout::parse(pb.as_slice())?
        } else {
            Layout {
                protocol: nh,
                total_len: pb.len(),
                ..l
            }
        };
        if matches!(nl.protocol, proto::ESP | proto::AH)
            || (nl.protocol == proto::UDP && !self.natt_ports.is_empty())
        {
            // More IPsec inside: the copying path takes it on from here.
            let mut tmp = std::mem::take(&mut self.scratch_out);
            tmp.clear();
            let r = self.inbound_inner(pb.as_slice(), &mut tmp, Some(idx));
            if r == Ok(Inbound::Decapsulated) {
                pb.set(&tmp);
            }
            self.scratch_out = tmp;
            return r;
        }
        if self.has_in_policies {
            self.check_in(&selectors(pb.as_slice(), &nl), &[idx])?;
        }
        Ok(Inbound::Decapsulated)
    }
}

/// Moves the `len`-byte IP header at `from` in `buf` to `to`: the usual
/// lengths (an IPv4 header without options, an IPv6 header without
/// extensions) as one fixed-size copy the compiler makes a few register
/// moves, where `copy_within` is an out-of-line call to `memmove`.
#[inline(always)]
fn move_header(buf: &mut [u8], from: usize, len: usize, to: usize) {
    fn fixed<const N: usize>(buf: &mut [u8], from: usize, to: usize) {
        let mut h = [0u8; N];
        h.copy_from_slice(&buf[from..from + N]);
        buf[to..to + N].copy_from_slice(&h);
    }
    match len {
        20 => fixed::<20>(buf, from, to),
        40 => fixed::<40>(buf, from, to),
        _ => buf.copy_within(from..from + len, to),
    }
}

//! `synth`: synthetic traffic for benchmarks and tests.
//!
//! A [`SynthConfig`] says how many frames, of which sizes, payloads,
//! protocols, IP versions and VLAN tags; [`Synth::new`] validates it and
//! [`Synth::next_frame`] hands out one Ethernet frame at a time with its
//! timestamp, written into one reused buffer (no allocation per frame). Every
//! header is built with `wire`'s `Repr::emit`, so lengths and checksums are
//! right and `wire::slice` reads the frames back.
//!
//! The payload patterns are those of Shimizu et al. 2006 (§5.1): a fixed byte (highly
//! compressible), random bytes per packet (incompressible), and a worm-like
//! UDP packet modelled on SQL Slammer: 418 bytes to port 1434, the same
//! payload in every packet, with a run of 96 identical bytes.
//!
//! Randomness comes from `rand`'s `SmallRng` seeded with `seed`: the same
//! configuration gives the same frames (with the same `rand` version).

#![forbid(unsafe_code)]

#[cfg(feature = "cli")]
pub mod cli;

use core::fmt;
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use wire::ethernet::{EthernetAddress, EthernetRepr};
use wire::icmp::{IcmpPacket, IcmpRepr};
use wire::icmpv6::{Icmpv6Packet, Icmpv6Repr};
use wire::ipv4::Ipv4Repr;
use wire::ipv6::Ipv6Repr;
use wire::tcp::{TcpPacket, TcpRepr};
use wire::udp::{UdpPacket, UdpRepr};
use wire::vlan::{VlanRepr, MAX_TAGS};
use wire::{EtherType, IpProtocol, TcpFlags};

/// Smallest Ethernet frame without FCS: IEEE 802.3's 64-byte minimum
/// counts the 4-byte FCS, which captures do not hold.
pub const MIN_FRAME: usize = 60;
/// Largest untagged Ethernet frame without FCS, as the paper's 1518-byte frames.
pub const MAX_FRAME: usize = 1518;
/// The worm frame's length: Ethernet 14 + IPv4 20 + UDP 8 + 376 bytes.
pub const WORM_FRAME: usize = 418;
/// The worm's UDP payload length.
pub const WORM_PAYLOAD: usize = 376;
/// The worm's run of identical bytes.
pub const WORM_RUN: usize = 96;
/// The worm's destination port (Microsoft SQL Server resolution service).
pub const WORM_PORT: u16 = 1434;

/// What payload bytes hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PayloadPattern {
    /// Every payload byte the same.
    Fixed(u8),
    /// Fresh random bytes in every packet.
    Random,
    /// Shimizu et al. 2006's worm-like packet; ignores size and protocol settings.
    Worm,
}

/// Total frame length, Ethernet header included, FCS excluded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameSize {
    /// Every frame this long (clamped to 60..=1518, then up to what the headers need).
    Fixed(usize),
    /// Uniform over the inclusive range (each end clamped as for `Fixed`).
    Uniform(usize, usize),
}

impl FrameSize {
    /// `64` or `64-1518` (frame sizes of the command line, within 64–1518).
    pub fn parse(s: &str) -> Result<FrameSize, String> {
        let bad = || format!("bad --size '{s}' (expected BYTES or MIN-MAX, within 64-1518)");
        let num = |t: &str| t.trim().parse::<usize>().map_err(|_| bad());
        let size = match s.split_once('-') {
            Some((a, b)) => FrameSize::Uniform(num(a)?, num(b)?),
            None => FrameSize::Fixed(num(s)?),
        };
        let ok = match size {
            FrameSize::Fixed(n) => (64..=1518).contains(&n),
            FrameSize::Uniform(a, b) => {
                (64..=1518).contains(&a) && (64..=1518).contains(&b) && a <= b
            }
        };
        if ok {
            Ok(size)
        } else {
            Err(bad())
        }
    }
}

/// `10.0.0.0/8`, `2001:db8::/32`: an address prefix given with `flag`.
pub fn parse_prefix(s: &str, flag: &str) -> Result<(IpAddr, u8), String> {
    let bad = || format!("bad {flag} '{s}' (expected ADDRESS/LENGTH like 10.0.0.0/8)");
    let (a, l) = s.split_once('/').ok_or_else(bad)?;
    let addr: IpAddr = a.parse().map_err(|_| bad())?;
    let len: u8 = l.parse().map_err(|_| bad())?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    if len > max {
        return Err(bad());
    }
    Ok((addr, len))
}

/// Which transport protocol frames carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum ProtoMix {
    Tcp,
    Udp,
    /// ICMP echo requests (ICMPv6 over IPv6).
    Icmp,
    /// One third each, drawn from the seeded generator.
    Mix,
}

/// Which IP version frames carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum IpVersion {
    #[cfg_attr(feature = "cli", value(name = "4"))]
    V4,
    #[cfg_attr(feature = "cli", value(name = "6"))]
    V6,
    /// Half each, drawn from the seeded generator.
    Mix,
}

/// Default IPv4 source prefix, 10.0.0.0/8.
pub const DEFAULT_SRC_NET4: (IpAddr, u8) = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 0)), 8);
/// Default IPv4 destination prefix, 192.168.1.0/24.
pub const DEFAULT_DST_NET4: (IpAddr, u8) = (IpAddr::V4(Ipv4Addr::new(192, 168, 1, 0)), 24);
/// Default IPv6 source prefix, fd00::/16 (unique local addresses, RFC 4193).
pub const DEFAULT_SRC_NET6: (IpAddr, u8) =
    (IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 0)), 16);
/// Default IPv6 destination prefix, 2001:db8:1::/48 (documentation range, RFC 3849).
pub const DEFAULT_DST_NET6: (IpAddr, u8) = (
    IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 0)),
    48,
);

/// What to generate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SynthConfig {
    /// Number of frames.
    pub count: u64,
    pub size: FrameSize,
    pub payload: PayloadPattern,
    pub proto: ProtoMix,
    pub ip: IpVersion,
    /// Stacked VLAN ids, outermost first; empty means untagged. One tag uses
    /// TPID 0x8100; with two or more, the outer ones use 0x88a8 (802.1ad).
    pub vlans: Vec<u16>,
    /// Sources are drawn at random inside this prefix. It serves the frames
    /// of its own family; frames of the other family (with `IpVersion::Mix`,
    /// or the IPv4-only worm) use that family's default, [`DEFAULT_SRC_NET4`]
    /// or [`DEFAULT_SRC_NET6`].
    pub src_net: (IpAddr, u8),
    /// Destinations, likewise; defaults [`DEFAULT_DST_NET4`], [`DEFAULT_DST_NET6`].
    pub dst_net: (IpAddr, u8),
    /// Timestamp of the first frame, ns since the epoch.
    pub start_ns: u64,
    /// Step between timestamps.
    pub interval_ns: u64,
    pub seed: u64,
    /// Frames come from this many flows active at once (each a 5-tuple
    /// that carries a Pareto(1.2)-distributed number of frames, at least
    /// 2, as flow sizes on real links are, then ends and a new one
    /// starts), so that a trace has the temporal locality a link has;
    /// 0: every frame's addresses and ports are drawn afresh.
    pub flows: usize,
}

impl Default for SynthConfig {
    /// 1000 untagged IPv4 64-byte frames, random payload, TCP/UDP/ICMP mixed,
    /// 10.0.0.0/8 to 192.168.1.0/24 (IPv6: fd00::/16 to 2001:db8:1::/48),
    /// 1 µs apart from 0, seed 1.
    fn default() -> Self {
        SynthConfig {
            count: 1000,
            size: FrameSize::Fixed(64),
            payload: PayloadPattern::Random,
            proto: ProtoMix::Mix,
            ip: IpVersion::V4,
            vlans: Vec::new(),
            src_net: DEFAULT_SRC_NET4,
            dst_net: DEFAULT_DST_NET4,
            start_ns: 0,
            interval_ns: 1_000,
            seed: 1,
            flows: 0,
        }
    }
}

/// Why a configuration was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SynthError {
    /// `Uniform(min, max)` with min > max.
    SizeRange { min: usize, max: usize },
    /// A prefix length longer than the address.
    PrefixLen { net: IpAddr, len: u8 },
    /// More VLAN tags than `wire` slices.
    TooManyVlans { count: usize, max: usize },
    /// A VLAN id above 4094 (4095 is reserved, IEEE 802.1Q Table 9-2).
    VlanId { vid: u16 },
}

impl fmt::Display for SynthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SynthError::SizeRange { min, max } => write!(
                f,
                "frame size range {min}-{max} is empty (expected min <= max)"
            ),
            SynthError::PrefixLen { net, len } => {
                write!(f, "prefix {net}/{len} is longer than the address")
            }
            SynthError::TooManyVlans { count, max } => {
                write!(f, "{count} VLAN tags given, at most {max} supported")
            }
            SynthError::VlanId { vid } => write!(f, "VLAN id {vid} out of range (expected 0-4094)"),
        }
    }
}

impl std::error::Error for SynthError {}

/// An address prefix reduced to what drawing addresses needs.
#[derive(Clone, Copy, Debug)]
struct Prefix {
    net: u128,
    /// Bits that are random (the host part).
    host_mask: u128,
}

impl Prefix {
    fn new(net: IpAddr, len: u8, want_v6: bool) -> Option<Result<Prefix, SynthError>> {
        let (bits, value) = match net {
            IpAddr::V4(a) if !want_v6 => (32u32, u128::from(u32::from(a))),
            IpAddr::V6(a) if want_v6 => (128u32, u128::from(a)),
            _ => return None,
        };
        if u32::from(len) > bits {
            return Some(Err(SynthError::PrefixLen { net, len }));
        }
        let host_bits = bits - u32::from(len);
        let host_mask = if host_bits == 128 {
            u128::MAX
        } else {
            (1u128 << host_bits) - 1
        };
        Some(Ok(Prefix {
            net: value & !host_mask,
            host_mask,
        }))
    }

    fn draw(&self, rng: &mut SmallRng) -> u128 {
        self.net | (rng.gen::<u128>() & self.host_mask)
    }
}

/// The Ethernet addresses every synthetic frame carries: locally
/// administered unicast (IEEE 802 §8.2.2, second bit of the first octet).
const SRC_MAC: EthernetAddress = EthernetAddress([0x02, 0x00, 0x00, 0x00, 0x00, 0x01]);
const DST_MAC: EthernetAddress = EthernetAddress([0x02, 0x00, 0x00, 0x00, 0x00, 0x02]);

/// Destination ports drawn for TCP and UDP: common services, so that
/// profiles and filter rules see realistic aggregates.
const DST_PORTS: [u16; 8] = [80, 443, 53, 22, 25, 123, 8080, 3306];

/// The generator built from a validated [`SynthConfig`].
pub struct Synth {
    cfg: SynthConfig,
    rng: SmallRng,
    buf: Vec<u8>,
    emitted: u64,
    ident: u16,
    src4: Prefix,
    dst4: Prefix,
    src6: Prefix,
    dst6: Prefix,
    worm: [u8; WORM_PAYLOAD],
    /// With `flows`: each active flow's seed and the frames it has left.
    active: Vec<(u64, u64)>,
    flows_started: u64,
}

/// The rng a flow's fields are drawn from: its own, or the main one.
fn fr<'a>(flow: &'a mut Option<SmallRng>, main: &'a mut SmallRng) -> &'a mut SmallRng {
    match flow {
        Some(f) => f,
        None => main,
    }
}

/// A Pareto(1.2) flow length with scale 2, capped at 100,000 frames.
fn flow_length(rng: &mut SmallRng) -> u64 {
    let u: f64 = 1.0 - rng.gen::<f64>();
    (2.0 / u.powf(1.0 / 1.2)).ceil().min(100_000.0) as u64
}

/// The prefix for one family: the configured one if it is of that family,
/// else the family's default.
fn pick(net: (IpAddr, u8), default: (IpAddr, u8), v6: bool) -> Result<Prefix, SynthError> {
    let (a, len) = if net.0.is_ipv6() == v6 { net } else { default };
    match Prefix::new(a, len, v6) {
        Some(p) => p,
        // Not reached: `a` is of the family asked for; kept total without a panic.
        None => Err(SynthError::PrefixLen { net: a, len }),
    }
}

impl Synth {
    /// Validates `cfg` and builds the generator.
    pub fn new(cfg: SynthConfig) -> Result<Synth, SynthError> {
        if let FrameSize::Uniform(min, max) = cfg.size {
            if min > max {
                return Err(SynthError::SizeRange { min, max });
            }
        }
        if cfg.vlans.len() > MAX_TAGS {
            return Err(SynthError::TooManyVlans {
                count: cfg.vlans.len(),
                max: MAX_TAGS,
            });
        }
        if let Some(&vid) = cfg.vlans.iter().find(|&&v| v > 4094) {
            return Err(SynthError::VlanId { vid });
        }
        let src4 = pick(cfg.src_net, DEFAULT_SRC_NET4, false)?;
        let dst4 = pick(cfg.dst_net, DEFAULT_DST_NET4, false)?;
        let src6 = pick(cfg.src_net, DEFAULT_SRC_NET6, true)?;
        let dst6 = pick(cfg.dst_net, DEFAULT_DST_NET6, true)?;
        let mut rng = SmallRng::seed_from_u64(cfg.seed);
        // The worm's payload is drawn once: every packet carries the same
        // bytes, as every SQL Slammer packet did. The run sits where Slammer's
        // 0x01 padding sat, right after the first byte (the 0x04 request type).
        let mut worm = [0u8; WORM_PAYLOAD];
        rng.fill_bytes(&mut worm);
        worm[0] = 0x04;
        worm[1..1 + WORM_RUN].fill(0x01);
        Ok(Synth {
            cfg,
            rng,
            buf: vec![0; MAX_FRAME + 4 * MAX_TAGS],
            emitted: 0,
            ident: 0,
            src4,
            dst4,
            src6,
            dst6,
            worm,
            active: Vec::new(),
            flows_started: 0,
        })
    }

    /// With `flows`, the rng of the flow the next frame belongs to.
    fn next_flow(&mut self) -> Option<SmallRng> {
        if self.cfg.flows == 0 {
            return None;
        }
        if self.active.is_empty() {
            for _ in 0..self.cfg.flows {
                let len = flow_length(&mut self.rng);
                self.active.push((self.rng.gen(), len));
            }
            self.flows_started = self.cfg.flows as u64;
        }
        let j = self.rng.gen_range(0..self.active.len());
        let seed = self.active[j].0;
        self.active[j].1 -= 1;
        if self.active[j].1 == 0 {
            let len = flow_length(&mut self.rng);
            self.active[j] = (self.rng.gen(), len);
            self.flows_started += 1;
        }
        Some(SmallRng::seed_from_u64(seed))
    }

    /// Flows begun so far (with `flows`).
    pub fn flows_started(&self) -> u64 {
        self.flows_started
    }

    /// The configuration the generator was built from.
    pub fn config(&self) -> &SynthConfig {
        &self.cfg
    }

    /// Frames still to come.
    pub fn remaining(&self) -> u64 {
        self.cfg.count - self.emitted
    }

    /// The next frame and its timestamp in ns, or `None` after `count`
    /// frames. The slice borrows an internal buffer that the next call reuses.
    pub fn next_frame(&mut self) -> Option<(u64, &[u8])> {
        if self.emitted >= self.cfg.count {
            return None;
        }
        let ts = self
            .cfg
            .start_ns
            .wrapping_add(self.emitted.wrapping_mul(self.cfg.interval_ns));
        self.emitted += 1;
        self.ident = self.ident.wrapping_add(1);
        let len = self.build();
        Some((ts, &self.buf[..len]))
    }

    /// Writes one frame into `buf` and returns its length.
    fn build(&mut self) -> usize {
        // A flow's fields (family, protocol, addresses, ports) come from its
        // own rng; sizes and payloads from the main one.
        let mut flow = self.next_flow();
        let worm = self.cfg.payload == PayloadPattern::Worm;
        let v6 = !worm
            && match self.cfg.ip {
                IpVersion::V4 => false,
                IpVersion::V6 => true,
                IpVersion::Mix => fr(&mut flow, &mut self.rng).gen::<bool>(),
            };
        let proto = if worm {
            IpProtocol::Udp
        } else {
            match self.cfg.proto {
                ProtoMix::Tcp => IpProtocol::Tcp,
                ProtoMix::Udp => IpProtocol::Udp,
                ProtoMix::Icmp if v6 => IpProtocol::Icmpv6,
                ProtoMix::Icmp => IpProtocol::Icmp,
                ProtoMix::Mix => match fr(&mut flow, &mut self.rng).gen_range(0..3u8) {
                    0 => IpProtocol::Tcp,
                    1 => IpProtocol::Udp,
                    _ if v6 => IpProtocol::Icmpv6,
                    _ => IpProtocol::Icmp,
                },
            }
        };
        let link_len = 14 + 4 * self.cfg.vlans.len();
        let ip_len = if v6 { 40 } else { 20 };
        let l4_hdr = if proto == IpProtocol::Tcp { 20 } else { 8 };
        let headers = link_len + ip_len + l4_hdr;
        let frame_len = if worm {
            WORM_FRAME + 4 * self.cfg.vlans.len()
        } else {
            let clamp = |n: usize| n.clamp(MIN_FRAME, MAX_FRAME);
            let want = match self.cfg.size {
                FrameSize::Fixed(n) => clamp(n),
                FrameSize::Uniform(a, b) => self.rng.gen_range(clamp(a)..=clamp(b)),
            };
            want.max(headers)
        };
        let payload_len = frame_len - headers;

        // Link layer. Emitting into a buffer sized for the largest frame
        // cannot fail; the results are checked in debug builds only.
        let ip_type = if v6 { EtherType::Ipv6 } else { EtherType::Ipv4 };
        let n = self.cfg.vlans.len();
        let tpid = |i: usize| {
            if i + 1 < n {
                EtherType::QinQ
            } else {
                EtherType::Vlan
            }
        };
        let first = if n == 0 { ip_type } else { tpid(0) };
        let buf = &mut self.buf[..frame_len];
        let r = EthernetRepr {
            src_addr: SRC_MAC,
            dst_addr: DST_MAC,
            ethertype: first,
        }
        .emit(buf);
        debug_assert!(r.is_ok());
        for (i, &vid) in self.cfg.vlans.iter().enumerate() {
            // Each tag body carries the TPID of the next tag, or the IP EtherType.
            let next = if i + 1 < n { tpid(i + 1) } else { ip_type };
            let r = VlanRepr {
                pcp: 0,
                dei: false,
                vid,
                ethertype: next,
            }
            .emit(&mut buf[14 + 4 * i..]);
            debug_assert!(r.is_ok());
        }

        // Addresses.
        let (src, dst) = if v6 {
            let s = self.src6.draw(fr(&mut flow, &mut self.rng));
            let d = self.dst6.draw(fr(&mut flow, &mut self.rng));
            (IpAddr::V6(Ipv6Addr::from(s)), IpAddr::V6(Ipv6Addr::from(d)))
        } else {
            // An IPv4 prefix's network and host bits are below 2^32: the cast keeps them.
            let s = self.src4.draw(fr(&mut flow, &mut self.rng)) as u32;
            let d = self.dst4.draw(fr(&mut flow, &mut self.rng)) as u32;
            (IpAddr::V4(Ipv4Addr::from(s)), IpAddr::V4(Ipv4Addr::from(d)))
        };

        // Payload first, so that the transport checksum covers it.
        let l4_at = link_len + ip_len;
        let body = &mut buf[l4_at + l4_hdr..];
        match self.cfg.payload {
            PayloadPattern::Fixed(b) => body.fill(b),
            PayloadPattern::Random => self.rng.fill_bytes(body),
            PayloadPattern::Worm => body.copy_from_slice(&self.worm),
        }

        // Network layer.
        let l4_len = l4_hdr + payload_len;
        let r = match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => Ipv4Repr {
                src_addr: s,
                dst_addr: d,
                protocol: proto,
                payload_len: l4_len,
                ttl: 64,
                tos: 0,
                ident: self.ident,
                dont_frag: proto == IpProtocol::Tcp,
                more_frags: false,
                frag_offset: 0,
                options: &[],
            }
            .emit(&mut buf[link_len..]),
            (IpAddr::V6(s), IpAddr::V6(d)) => Ipv6Repr {
                src_addr: s,
                dst_addr: d,
                next_header: proto,
                payload_len: l4_len as u16,
                hop_limit: 64,
                traffic_class: 0,
                flow_label: u32::from(self.ident) & 0xfffff,
            }
            .emit(&mut buf[link_len..]),
            _ => Ok(()),
        };
        debug_assert!(r.is_ok());

        // Transport layer, then its checksum over the finished segment.
        let seg = &mut buf[l4_at..];
        let src_port = fr(&mut flow, &mut self.rng).gen_range(1024..=u16::MAX);
        let dst_port = if worm {
            WORM_PORT
        } else {
            DST_PORTS[fr(&mut flow, &mut self.rng).gen_range(0..DST_PORTS.len())]
        };
        let r = match proto {
            IpProtocol::Tcp => {
                let flags = if payload_len > 0 {
                    TcpFlags::PSH | TcpFlags::ACK
                } else {
                    TcpFlags::ACK
                };
                let r = TcpRepr {
                    src_port,
                    dst_port,
                    seq_number: self.rng.gen(),
                    ack_number: self.rng.gen(),
                    flags,
                    window_len: 65535,
                    urgent_at: 0,
                    options: &[],
                }
                .emit(seg);
                TcpPacket::new_unchecked(&mut *seg).fill_checksum(&src, &dst);
                r
            }
            IpProtocol::Udp => {
                let r = UdpRepr {
                    src_port,
                    dst_port,
                    payload_len,
                }
                .emit(seg);
                UdpPacket::new_unchecked(&mut *seg).fill_checksum(&src, &dst);
                r
            }
            IpProtocol::Icmpv6 => {
                let r = Icmpv6Repr::echo(true, self.cfg.seed as u16, self.ident).emit(seg);
                Icmpv6Packet::new_unchecked(&mut *seg).fill_checksum(&src, &dst);
                r
            }
            _ => {
                let r = IcmpRepr::echo(true, self.cfg.seed as u16, self.ident).emit(seg);
                IcmpPacket::new_unchecked(&mut *seg).fill_checksum();
                r
            }
        };
        debug_assert!(r.is_ok());
        frame_len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::ipv4::Ipv4Packet;
    use wire::ipv6::Ipv6Packet;
    use wire::{slice, LinkType};

    fn in_prefix(a: IpAddr, net: (IpAddr, u8)) -> bool {
        match (a, net.0) {
            (IpAddr::V4(a), IpAddr::V4(n)) => {
                let m = u32::MAX.checked_shl(32 - u32::from(net.1)).unwrap_or(0);
                u32::from(a) & m == u32::from(n) & m
            }
            (IpAddr::V6(a), IpAddr::V6(n)) => {
                let m = u128::MAX.checked_shl(128 - u32::from(net.1)).unwrap_or(0);
                u128::from(a) & m == u128::from(n) & m
            }
            _ => false,
        }
    }

    #[test]
    fn flows_repeat_their_five_tuples_and_the_default_is_unchanged() {
        use std::collections::HashMap;
        let tuple = |f: &[u8]| {
            let s = slice(LinkType::Ethernet, f);
            let b = wire::flow_bits(LinkType::Ethernet, f).unwrap();
            assert!(s.network().is_some());
            (b.src, b.dst, b.protocol, b.src_port, b.dst_port)
        };
        let mut g = Synth::new(SynthConfig {
            count: 20_000,
            proto: ProtoMix::Tcp,
            flows: 100,
            ..Default::default()
        })
        .unwrap();
        let mut seen: HashMap<_, u64> = HashMap::new();
        while let Some((_, f)) = g.next_frame() {
            assert!(checksums_ok(f));
            *seen.entry(tuple(f)).or_default() += 1;
        }
        // About 20,000 / mean length (Pareto 1.2 with scale 2: 12, capped) flows.
        assert!(seen.len() < 5_000 && seen.len() > 100, "{}", seen.len());
        // Each flow is a new 5-tuple (the last ones started may not have sent yet).
        let started = g.flows_started();
        assert!(started >= seen.len() as u64 && started - seen.len() as u64 <= 100);
        // Without flows every frame is new, and the stream is what it was.
        let mut g = Synth::new(SynthConfig {
            count: 2_000,
            proto: ProtoMix::Tcp,
            ..Default::default()
        })
        .unwrap();
        let mut n = std::collections::HashSet::new();
        while let Some((_, f)) = g.next_frame() {
            n.insert(tuple(f));
        }
        assert!(n.len() > 1_990);
    }

    /// Checks every checksum of a synthetic frame (no VLAN-free assumption).
    fn checksums_ok(f: &[u8]) -> bool {
        let s = slice(LinkType::Ethernet, f);
        let n = s.network().unwrap();
        let l3 = s.network_offset().unwrap();
        let l4 = &f[s.transport_offset().unwrap()..];
        if n.version == 4 && !Ipv4Packet::new_checked(&f[l3..]).unwrap().verify_checksum() {
            return false;
        }
        if n.version == 6 {
            Ipv6Packet::new_checked(&f[l3..]).unwrap();
        }
        match n.protocol {
            IpProtocol::Tcp => TcpPacket::new_checked(l4)
                .unwrap()
                .verify_checksum(&n.src, &n.dst),
            IpProtocol::Udp => {
                let u = UdpPacket::new_checked(l4).unwrap();
                u.checksum() != 0 && u.verify_checksum(&n.src, &n.dst)
            }
            IpProtocol::Icmp => IcmpPacket::new_checked(l4).unwrap().verify_checksum(),
            IpProtocol::Icmpv6 => Icmpv6Packet::new_checked(l4)
                .unwrap()
                .verify_checksum(&n.src, &n.dst),
            _ => false,
        }
    }

    #[test]
    fn defaults_slice_back() {
        let cfg = SynthConfig::default();
        let mut g = Synth::new(cfg.clone()).unwrap();
        let mut seen = [0usize; 3];
        let mut n = 0;
        while let Some((ts, f)) = g.next_frame() {
            assert_eq!(ts, n * 1000);
            assert_eq!(f.len(), 64);
            let s = slice(LinkType::Ethernet, f);
            assert_eq!(s.error(), None);
            let t = s.five_tuple().unwrap();
            assert!(
                in_prefix(t.src, cfg.src_net) && in_prefix(t.dst, cfg.dst_net),
                "{t}"
            );
            seen[match t.protocol {
                IpProtocol::Tcp => 0,
                IpProtocol::Udp => 1,
                _ => 2,
            }] += 1;
            assert!(checksums_ok(f));
            n += 1;
        }
        assert_eq!(n, 1000);
        // A third each, give or take what a fair draw allows.
        assert!(seen.iter().all(|&c| (250..420).contains(&c)), "{seen:?}");
    }

    #[test]
    fn ipv6_vlans_and_sizes() {
        let cfg = SynthConfig {
            count: 300,
            size: FrameSize::Uniform(10, 3000),
            ip: IpVersion::Mix,
            vlans: vec![100, 200],
            ..SynthConfig::default()
        };
        let mut g = Synth::new(cfg.clone()).unwrap();
        let mut v6 = 0;
        while let Some((_, f)) = g.next_frame() {
            let s = slice(LinkType::Ethernet, f);
            assert_eq!(s.error(), None);
            assert_eq!(s.vlans(), &[100, 200]);
            assert_eq!(&f[12..14], &[0x88, 0xa8]);
            assert_eq!(&f[16..18], &[0x81, 0x00]);
            assert!((64..=1518).contains(&f.len()), "{}", f.len());
            let t = s.five_tuple().unwrap();
            if t.src.is_ipv6() {
                v6 += 1;
                assert!(in_prefix(t.src, DEFAULT_SRC_NET6) && in_prefix(t.dst, DEFAULT_DST_NET6));
            }
            assert!(checksums_ok(f));
        }
        assert!((100..200).contains(&v6), "{v6}");
    }

    #[test]
    fn ipv6_minimum_frame_clamps_up() {
        let cfg = SynthConfig {
            ip: IpVersion::V6,
            proto: ProtoMix::Tcp,
            vlans: vec![7],
            ..SynthConfig::default()
        };
        let mut g = Synth::new(cfg).unwrap();
        let (_, f) = g.next_frame().unwrap();
        assert_eq!(f.len(), 14 + 4 + 40 + 20);
        assert_eq!(slice(LinkType::Ethernet, f).vlans(), &[7]);
        assert_eq!(&f[12..14], &[0x81, 0x00]);
    }

    #[test]
    fn same_seed_same_frames() {
        let frames = |seed| {
            let mut g = Synth::new(SynthConfig {
                count: 50,
                seed,
                ..SynthConfig::default()
            })
            .unwrap();
            let mut v = Vec::new();
            while let Some((_, f)) = g.next_frame() {
                v.push(f.to_vec());
            }
            v
        };
        assert_eq!(frames(7), frames(7));
        assert_ne!(frames(7), frames(8));
    }

    #[test]
    fn payload_patterns() {
        let cfg = SynthConfig {
            count: 2,
            size: FrameSize::Fixed(1518),
            proto: ProtoMix::Udp,
            payload: PayloadPattern::Fixed(0xab),
            ..SynthConfig::default()
        };
        let mut g = Synth::new(cfg.clone()).unwrap();
        let (_, f) = g.next_frame().unwrap();
        assert_eq!(f.len(), 1518);
        assert!(f[42..].iter().all(|&b| b == 0xab));
        let mut g = Synth::new(SynthConfig {
            payload: PayloadPattern::Random,
            ..cfg
        })
        .unwrap();
        let a = g.next_frame().unwrap().1[42..].to_vec();
        let b = g.next_frame().unwrap().1[42..].to_vec();
        assert_ne!(a, b);
        // Random bytes: every byte value shows up in 1476 draws.
        let mut hist = [0u32; 256];
        a.iter().for_each(|&x| hist[usize::from(x)] += 1);
        assert!(hist.iter().filter(|&&c| c > 0).count() > 240);
    }

    #[test]
    fn worm_is_slammer_shaped() {
        let cfg = SynthConfig {
            count: 3,
            payload: PayloadPattern::Worm,
            proto: ProtoMix::Tcp,
            size: FrameSize::Fixed(1000),
            ..SynthConfig::default()
        };
        let mut g = Synth::new(cfg).unwrap();
        let mut payloads = Vec::new();
        while let Some((_, f)) = g.next_frame() {
            assert_eq!(f.len(), WORM_FRAME);
            let s = slice(LinkType::Ethernet, f);
            let t = s.five_tuple().unwrap();
            assert_eq!((t.protocol, t.dst_port), (IpProtocol::Udp, WORM_PORT));
            let p = &f[s.payload_offset().unwrap()..];
            assert_eq!(p.len(), WORM_PAYLOAD);
            assert!(p.windows(WORM_RUN).any(|w| w.iter().all(|&b| b == w[0])));
            assert!(checksums_ok(f));
            payloads.push(p.to_vec());
        }
        assert!(payloads.windows(2).all(|w| w[0] == w[1]));
    }

    #[test]
    fn bad_configs_are_refused() {
        let bad = |c: SynthConfig| Synth::new(c).err().unwrap().to_string();
        let d = SynthConfig::default;
        assert_eq!(
            bad(SynthConfig {
                size: FrameSize::Uniform(100, 90),
                ..d()
            }),
            "frame size range 100-90 is empty (expected min <= max)"
        );
        assert_eq!(
            bad(SynthConfig {
                vlans: vec![4095],
                ..d()
            }),
            "VLAN id 4095 out of range (expected 0-4094)"
        );
        assert_eq!(
            bad(SynthConfig {
                vlans: vec![1; 9],
                ..d()
            }),
            "9 VLAN tags given, at most 8 supported"
        );
        assert_eq!(
            bad(SynthConfig {
                src_net: (IpAddr::V4(Ipv4Addr::LOCALHOST), 33),
                ..d()
            }),
            "prefix 127.0.0.1/33 is longer than the address"
        );
        let v6 = (IpAddr::V6(Ipv6Addr::LOCALHOST), 128);
        // An IPv6 source prefix serves IPv6 frames; IPv4 frames fall back to 10.0.0.0/8.
        let mut g = Synth::new(SynthConfig {
            src_net: v6,
            ip: IpVersion::Mix,
            count: 40,
            ..d()
        })
        .unwrap();
        let mut both = [false; 2];
        while let Some((_, f)) = g.next_frame() {
            let t = slice(LinkType::Ethernet, f).five_tuple().unwrap();
            assert!(t.src == v6.0 || in_prefix(t.src, DEFAULT_SRC_NET4), "{t}");
            both[usize::from(t.src.is_ipv6())] = true;
        }
        assert_eq!(both, [true, true]);
    }
}

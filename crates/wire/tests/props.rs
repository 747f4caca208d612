//! Property tests: every `Repr` survives emit then parse; `slice` never
//! panics on arbitrary bytes for any link type; frames built with the
//! `Repr`s slice back to the five-tuple they were built from; and
//! `wire::flow_bits` (the fast path) says what `slice(..).flow_bits()` says,
//! which says what `network()` and `five_tuple()` say, on built frames (VLAN
//! and QinQ tags, IPv4 options and fragments, IPv6 extension headers) cut
//! at every length.

use proptest::prelude::*;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use wire::ah::{AhPacket, AhRepr};
use wire::esp::{EspPacket, EspRepr};
use wire::ethernet::{EthernetAddress, EthernetFrame, EthernetRepr};
use wire::icmp::{IcmpPacket, IcmpRepr};
use wire::icmpv6::{Icmpv6Packet, Icmpv6Repr};
use wire::ipv4::{Ipv4Packet, Ipv4Repr};
use wire::ipv6::{Ipv6Packet, Ipv6Repr};
use wire::ipv6ext::{Ipv6ExtHeader, Ipv6ExtRepr, Ipv6FragmentHeader, Ipv6FragmentRepr};
use wire::null::{NullHeader, NullRepr};
use wire::sll::{Sll2Header, Sll2Repr, SllHeader, SllRepr};
use wire::tcp::{TcpPacket, TcpRepr};
use wire::udp::{UdpPacket, UdpRepr};
use wire::vlan::{VlanRepr, VlanTag};
use wire::{slice, EtherType, FlowBits, IpProtocol, LinkType, Slice, TcpFlags};

fn ethertype() -> impl Strategy<Value = EtherType> {
    any::<u16>().prop_map(EtherType::from)
}
fn proto() -> impl Strategy<Value = IpProtocol> {
    any::<u8>().prop_map(IpProtocol::from)
}
/// Bytes whose length is a multiple of `unit`, up to `max`.
fn padded(unit: usize, max: usize) -> impl Strategy<Value = Vec<u8>> {
    (0..=max / unit).prop_flat_map(move |n| proptest::collection::vec(any::<u8>(), n * unit))
}

/// An Ethernet frame with EtherType `et`, then `ver` (an IP version and
/// header length byte), then `bytes`.
fn prefixed_frame(et: u16, ver: u8, bytes: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 12];
    f.extend_from_slice(&et.to_be_bytes());
    f.push(ver);
    f.extend_from_slice(bytes);
    f
}

/// An address as `FlowBits` holds it.
fn addr_bits(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

/// A flow's ports as the typed accessors give them: ICMP's type and code
/// (`icmp()`) as aguri keys them, else `five_tuple()`'s.
fn typed_ports(s: &Slice) -> (u16, u16) {
    match s.icmp() {
        Some((t, c)) => (wire::icmp_port(t, c), wire::icmp_port(t, c)),
        None => s.five_tuple().map_or((0, 0), |t| (t.src_port, t.dst_port)),
    }
}

/// The flow as `network()`, `five_tuple()` and `icmp()` give it, in
/// `FlowBits` form.
fn typed_flow(s: &Slice) -> Option<FlowBits> {
    s.network().map(|n| {
        let (sp, dp) = typed_ports(s);
        FlowBits {
            version: n.version,
            protocol: n.protocol.into(),
            src: addr_bits(n.src),
            dst: addr_bits(n.dst),
            src_port: sp,
            dst_port: dp,
        }
    })
}

/// An IPv6 extension header of a built frame.
#[derive(Clone, Copy, Debug)]
enum Ext {
    /// Hop-by-hop, routing or destination options, with 6 + 8k bytes of data.
    Generic(IpProtocol, usize),
    /// A fragment header: offset in bytes, M flag.
    Fragment(u16, bool),
}

fn ext() -> impl Strategy<Value = Ext> {
    prop_oneof![
        (
            prop::sample::select(vec![
                IpProtocol::HopByHop,
                IpProtocol::Ipv6Route,
                IpProtocol::Ipv6Opts
            ]),
            0usize..3
        )
            .prop_map(|(p, k)| Ext::Generic(p, k)),
        (prop_oneof![Just(0u16), 1u16..8192], any::<bool>())
            .prop_map(|(o, m)| Ext::Fragment(o * 8, m)),
    ]
}

/// What a built frame carries above the link layer.
#[derive(Clone, Debug)]
struct Built {
    /// VLAN tags: TPID and VLAN id, outermost first.
    tags: Vec<(EtherType, u16)>,
    src: IpAddr,
    dst: IpAddr,
    /// IPv4 options (a multiple of 4 bytes), IPv4 MF and fragment offset.
    options: Vec<u8>,
    v4_frag: (bool, u16),
    /// IPv6 extension headers, in order.
    exts: Vec<Ext>,
    protocol: IpProtocol,
    ports: (u16, u16),
    payload: Vec<u8>,
}

fn built() -> impl Strategy<Value = Built> {
    let tpid = prop::sample::select(vec![
        EtherType::Vlan,
        EtherType::QinQ,
        EtherType::QinQLegacy,
    ]);
    (
        prop_oneof![2 => Just(vec![]), 1 => proptest::collection::vec((tpid, 0u16..4096), 1..4)],
        any::<bool>(),
        (any::<[u8; 4]>(), any::<[u8; 4]>(), any::<[u8; 16]>(), any::<[u8; 16]>()),
        prop_oneof![2 => Just(vec![]), 1 => padded(4, 40)],
        prop_oneof![3 => Just((false, 0u16)), 1 => (any::<bool>(), 0u16..8192).prop_map(|(m, o)| (m, o * 8))],
        prop_oneof![2 => Just(vec![]), 1 => proptest::collection::vec(ext(), 1..4)],
        prop::sample::select(vec![IpProtocol::Tcp, IpProtocol::Udp, IpProtocol::Tcp, IpProtocol::Udp,
                                  IpProtocol::Icmp, IpProtocol::Esp, IpProtocol::Unknown(132)]),
        (any::<u16>(), any::<u16>()),
        proptest::collection::vec(any::<u8>(), 0..24),
    )
        .prop_map(|(tags, v6, (s4, d4, s6, d6), options, v4_frag, exts, protocol, ports, payload)| {
            let (src, dst) = if v6 { (IpAddr::from(s6), IpAddr::from(d6)) } else { (IpAddr::from(s4), IpAddr::from(d4)) };
            let protocol = if v6 && protocol == IpProtocol::Icmp { IpProtocol::Icmpv6 } else { protocol };
            Built { tags, src, dst, options, v4_frag, exts, protocol, ports, payload }
        })
}

impl Built {
    /// The frame, emitted layer by layer with the `Repr`s.
    fn frame(&self) -> Vec<u8> {
        let (sp, dp) = self.ports;
        let mut l4 = vec![0u8; 20];
        let hl = match self.protocol {
            IpProtocol::Tcp => {
                TcpRepr {
                    src_port: sp,
                    dst_port: dp,
                    seq_number: 1,
                    ack_number: 2,
                    flags: TcpFlags::ACK,
                    window_len: 100,
                    urgent_at: 0,
                    options: &[],
                }
                .emit(&mut l4)
                .unwrap();
                20
            }
            IpProtocol::Udp => {
                UdpRepr {
                    src_port: sp,
                    dst_port: dp,
                    payload_len: self.payload.len(),
                }
                .emit(&mut l4)
                .unwrap();
                8
            }
            IpProtocol::Icmp => {
                IcmpRepr::echo(true, sp, dp).emit(&mut l4).unwrap();
                8
            }
            IpProtocol::Icmpv6 => {
                Icmpv6Repr::echo(true, sp, dp).emit(&mut l4).unwrap();
                8
            }
            IpProtocol::Esp => {
                EspRepr {
                    spi: u32::from(sp),
                    seq_number: u32::from(dp),
                }
                .emit(&mut l4)
                .unwrap();
                8
            }
            _ => {
                l4[..4].copy_from_slice(&[(sp >> 8) as u8, sp as u8, (dp >> 8) as u8, dp as u8]);
                4
            }
        };
        l4.truncate(hl);
        l4.extend_from_slice(&self.payload);
        let ip_type = if self.src.is_ipv6() {
            EtherType::Ipv6
        } else {
            EtherType::Ipv4
        };
        let first = self.tags.first().map_or(ip_type, |t| t.0);
        let mut f = vec![0u8; 14];
        EthernetRepr {
            dst_addr: EthernetAddress([2; 6]),
            src_addr: EthernetAddress([4; 6]),
            ethertype: first,
        }
        .emit(&mut f)
        .unwrap();
        for (i, (_, vid)) in self.tags.iter().enumerate() {
            let next = self.tags.get(i + 1).map_or(ip_type, |t| t.0);
            let mut t = [0u8; 4];
            VlanRepr {
                pcp: 0,
                dei: false,
                vid: *vid,
                ethertype: next,
            }
            .emit(&mut t)
            .unwrap();
            f.extend_from_slice(&t);
        }
        match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let r = Ipv4Repr {
                    src_addr: s,
                    dst_addr: d,
                    protocol: self.protocol,
                    payload_len: l4.len(),
                    ttl: 64,
                    tos: 0,
                    ident: 1,
                    dont_frag: false,
                    more_frags: self.v4_frag.0,
                    frag_offset: self.v4_frag.1,
                    options: &self.options,
                };
                let mut h = vec![0u8; r.buffer_len()];
                r.emit(&mut h).unwrap();
                f.extend_from_slice(&h);
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                // The extension headers, last first, each naming what follows it.
                let mut rest = l4.clone();
                let mut next = self.protocol;
                for e in self.exts.iter().rev() {
                    let (kind, mut h) = match *e {
                        Ext::Generic(kind, k) => {
                            let data = vec![1u8; 6 + 8 * k];
                            let r = Ipv6ExtRepr {
                                next_header: next,
                                data: &data,
                            };
                            let mut h = vec![0u8; r.buffer_len()];
                            r.emit(&mut h).unwrap();
                            (kind, h)
                        }
                        Ext::Fragment(offset, more) => {
                            let mut h = vec![0u8; 8];
                            Ipv6FragmentRepr {
                                next_header: next,
                                frag_offset: offset,
                                more_frags: more,
                                ident: 7,
                            }
                            .emit(&mut h)
                            .unwrap();
                            (IpProtocol::Ipv6Frag, h)
                        }
                    };
                    h.extend_from_slice(&rest);
                    rest = h;
                    next = kind;
                }
                let mut h = [0u8; 40];
                Ipv6Repr {
                    src_addr: s,
                    dst_addr: d,
                    next_header: next,
                    payload_len: rest.len() as u16,
                    hop_limit: 64,
                    traffic_class: 0,
                    flow_label: 0,
                }
                .emit(&mut h)
                .unwrap();
                f.extend_from_slice(&h);
                f.extend_from_slice(&rest);
                return f;
            }
            _ => unreachable!(),
        }
        f.extend_from_slice(&l4);
        f
    }

    /// Whether the frame is the first fragment (or no fragment), whose
    /// upper-layer header `slice` reads.
    fn first_fragment(&self) -> bool {
        if self.src.is_ipv6() {
            // `slice` keeps the offset of the last fragment header it met.
            self.exts
                .iter()
                .rev()
                .find_map(|e| match e {
                    Ext::Fragment(o, _) => Some(*o == 0),
                    _ => None,
                })
                .unwrap_or(true)
        } else {
            self.v4_frag.1 == 0
        }
    }
}

proptest! {
    #[test]
    fn ethernet_round_trip(d in any::<[u8; 6]>(), s in any::<[u8; 6]>(), t in ethertype()) {
        let r = EthernetRepr { dst_addr: EthernetAddress(d), src_addr: EthernetAddress(s), ethertype: t };
        let mut b = vec![0; r.buffer_len()];
        r.emit(&mut b).unwrap();
        prop_assert_eq!(EthernetRepr::parse(&EthernetFrame::new_checked(&b[..]).unwrap()).unwrap(), r);
    }

    #[test]
    fn vlan_round_trip(pcp in 0u8..8, dei: bool, vid in 0u16..4096, t in ethertype()) {
        let r = VlanRepr { pcp, dei, vid, ethertype: t };
        let mut b = [0u8; 4];
        r.emit(&mut b).unwrap();
        prop_assert_eq!(VlanRepr::parse(&VlanTag::new_checked(&b[..]).unwrap()).unwrap(), r);
    }

    #[test]
    fn sll_round_trip(pt: u16, hw: u16, al: u16, a: [u8; 8], t in ethertype(), ifx: u32, pt2: u8, al2: u8) {
        let r = SllRepr { packet_type: pt, arphrd: hw, addr_len: al, addr: a, protocol: t };
        let mut b = [0u8; 16];
        r.emit(&mut b).unwrap();
        prop_assert_eq!(SllRepr::parse(&SllHeader::new_checked(&b[..]).unwrap()).unwrap(), r);
        let r = Sll2Repr { protocol: t, ifindex: ifx, arphrd: hw, packet_type: pt2, addr_len: al2, addr: a };
        let mut b = [0u8; 20];
        r.emit(&mut b).unwrap();
        prop_assert_eq!(Sll2Repr::parse(&Sll2Header::new_checked(&b[..]).unwrap()).unwrap(), r);
    }

    #[test]
    fn null_round_trip(family in 0u32..=0xffff) {
        let r = NullRepr { family };
        let mut b = [0u8; 4];
        r.emit(&mut b).unwrap();
        prop_assert_eq!(NullRepr::parse(&NullHeader::new_checked(&b[..]).unwrap()).unwrap(), r);
    }

    #[test]
    fn ipv4_round_trip(s: [u8; 4], d: [u8; 4], p in proto(), len in 0usize..1400, ttl: u8, tos: u8, id: u16,
                       df: bool, mf: bool, off in 0u16..8192, opts in padded(4, 40)) {
        let r = Ipv4Repr { src_addr: Ipv4Addr::from(s), dst_addr: Ipv4Addr::from(d), protocol: p, payload_len: len,
            ttl, tos, ident: id, dont_frag: df, more_frags: mf, frag_offset: off * 8, options: &opts };
        let mut b = vec![0; r.buffer_len() + len];
        r.emit(&mut b).unwrap();
        let pk = Ipv4Packet::new_checked(&b[..]).unwrap();
        prop_assert!(pk.verify_checksum());
        prop_assert_eq!(Ipv4Repr::parse(&pk).unwrap(), r);
    }

    #[test]
    fn ipv6_round_trip(s: [u8; 16], d: [u8; 16], p in proto(), len: u16, hl: u8, tc: u8, fl in 0u32..(1 << 20)) {
        let r = Ipv6Repr { src_addr: Ipv6Addr::from(s), dst_addr: Ipv6Addr::from(d), next_header: p, payload_len: len,
            hop_limit: hl, traffic_class: tc, flow_label: fl };
        let mut b = [0u8; 40];
        r.emit(&mut b).unwrap();
        prop_assert_eq!(Ipv6Repr::parse(&Ipv6Packet::new_checked(&b[..]).unwrap()).unwrap(), r);
    }

    #[test]
    fn ipv6ext_round_trip(p in proto(), k in 0usize..6, fill: u8, off in 0u16..8192, m: bool, id: u32) {
        let data = vec![fill; 6 + 8 * k];
        let r = Ipv6ExtRepr { next_header: p, data: &data };
        let mut b = vec![0; r.buffer_len()];
        r.emit(&mut b).unwrap();
        prop_assert_eq!(Ipv6ExtRepr::parse(&Ipv6ExtHeader::new_checked(&b[..]).unwrap()).unwrap(), r);
        let r = Ipv6FragmentRepr { next_header: p, frag_offset: off * 8, more_frags: m, ident: id };
        let mut b = [0u8; 8];
        r.emit(&mut b).unwrap();
        prop_assert_eq!(Ipv6FragmentRepr::parse(&Ipv6FragmentHeader::new_checked(&b[..]).unwrap()).unwrap(), r);
    }

    #[test]
    fn tcp_round_trip(sp: u16, dp: u16, seq: u32, ack: u32, fl in 0u16..0x200, win: u16, urg: u16, opts in padded(4, 40)) {
        let r = TcpRepr { src_port: sp, dst_port: dp, seq_number: seq, ack_number: ack, flags: TcpFlags(fl),
            window_len: win, urgent_at: urg, options: &opts };
        let mut b = vec![0; r.buffer_len()];
        r.emit(&mut b).unwrap();
        prop_assert_eq!(TcpRepr::parse(&TcpPacket::new_checked(&b[..]).unwrap()).unwrap(), r);
    }

    #[test]
    fn udp_icmp_round_trip(sp: u16, dp: u16, len in 0usize..65528, t: u8, c: u8, rest: u32) {
        let r = UdpRepr { src_port: sp, dst_port: dp, payload_len: len };
        let mut b = [0u8; 8];
        r.emit(&mut b).unwrap();
        prop_assert_eq!(UdpRepr::parse(&UdpPacket::new_checked(&b[..]).unwrap()).unwrap(), r);
        let r = IcmpRepr { msg_type: t, code: c, rest_of_header: rest };
        r.emit(&mut b).unwrap();
        prop_assert_eq!(IcmpRepr::parse(&IcmpPacket::new_checked(&b[..]).unwrap()).unwrap(), r);
        let r = Icmpv6Repr { msg_type: t, code: c, rest_of_header: rest };
        r.emit(&mut b).unwrap();
        prop_assert_eq!(Icmpv6Repr::parse(&Icmpv6Packet::new_checked(&b[..]).unwrap()).unwrap(), r);
    }

    #[test]
    fn ipsec_round_trip(p in proto(), spi: u32, seq: u32, icv in padded(4, 64)) {
        let r = EspRepr { spi, seq_number: seq };
        let mut b = [0u8; 8];
        r.emit(&mut b).unwrap();
        prop_assert_eq!(EspRepr::parse(&EspPacket::new_checked(&b[..]).unwrap()).unwrap(), r);
        let r = AhRepr { next_header: p, spi, seq_number: seq, icv: &icv };
        let mut b = vec![0; r.buffer_len()];
        r.emit(&mut b).unwrap();
        prop_assert_eq!(AhRepr::parse(&AhPacket::new_checked(&b[..]).unwrap()).unwrap(), r);
    }

    /// Arbitrary bytes under every link type: no panic, and every accessor and
    /// Display can be called.
    #[test]
    fn slice_never_panics(code in prop::sample::select(vec![0u16, 1, 101, 113, 228, 229, 276, 999]),
                          bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let s = slice(LinkType::from_code(code), &bytes);
        let _ = (s.vlans(), s.network(), s.five_tuple(), s.tcp_flags(), s.icmp(), s.payload_offset(), s.ipsec_spi());
        let _ = s.to_string();
        if let Some(e) = s.error() { let _ = e.to_string(); }
        if let Some(p) = s.payload_offset() { prop_assert!(p <= bytes.len()); }
        prop_assert_eq!(s.frame_len(), bytes.len());
    }

    /// Mostly-valid frames (a real header prefix with random bytes after the
    /// EtherType) reach the deeper layers, where arbitrary bytes rarely go.
    #[test]
    fn slice_never_panics_past_the_link(et in prop::sample::select(vec![0x0800u16, 0x86dd, 0x8100, 0x88a8, 0x9100]),
                                        ver in prop::sample::select(vec![0x45u8, 0x46, 0x4f, 0x60]),
                                        bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
        let f = prefixed_frame(et, ver, &bytes);
        let s = slice(LinkType::Ethernet, &f);
        let _ = (s.five_tuple(), s.tcp_flags(), s.icmp(), s.to_string());
    }

    /// `flow_bits` says what `network` and `five_tuple` say, on frames that
    /// reach the deeper layers (valid prefixes, random bytes after them).
    #[test]
    fn flow_bits_agree_with_network_and_five_tuple(et in prop::sample::select(vec![0x0800u16, 0x86dd, 0x8100]),
                                                   ver in prop::sample::select(vec![0x45u8, 0x46, 0x60]),
                                                   proto in prop::sample::select(vec![6u8, 17, 1, 0, 44, 58, 132]),
                                                   frag in prop::sample::select(vec![0u16, 0x2000, 0x0001, 0x4000]),
                                                   bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
        let mut f = prefixed_frame(et, ver, &bytes);
        // Put the protocol and fragment fields where IPv4 or IPv6 has them.
        if ver >> 4 == 4 && f.len() >= 34 {
            f[20..22].copy_from_slice(&frag.to_be_bytes());
            f[23] = proto;
        } else if f.len() >= 21 {
            f[20] = proto;
        }
        let s = slice(LinkType::Ethernet, &f);
        let want = s.network().map(|n| {
            let (sp, dp) = typed_ports(&s);
            wire::FlowBits {
                version: n.version,
                protocol: n.protocol.into(),
                src: addr_bits(n.src),
                dst: addr_bits(n.dst),
                src_port: sp,
                dst_port: dp,
            }
        });
        prop_assert_eq!(s.flow_bits(), want);
    }

    /// Frames built by emit slice back to what they were built from.
    #[test]
    fn built_frames_recover_the_five_tuple(v6: bool, which in 0u8..3, sp: u16, dp: u16, s4: [u8; 4], d4: [u8; 4],
                                           s6: [u8; 16], d6: [u8; 16], vlans in proptest::collection::vec(0u16..4096, 0..3),
                                           payload in proptest::collection::vec(any::<u8>(), 0..64)) {
        let (src, dst) = if v6 { (IpAddr::from(s6), IpAddr::from(d6)) } else { (IpAddr::from(s4), IpAddr::from(d4)) };
        let proto = match (which, v6) { (0, _) => IpProtocol::Tcp, (1, _) => IpProtocol::Udp, (_, false) => IpProtocol::Icmp, (_, true) => IpProtocol::Icmpv6 };
        let l4_len = match proto { IpProtocol::Tcp => 20, IpProtocol::Udp => 8, _ => 8 } + payload.len();
        let mut f = vec![0u8; 14 + 4 * vlans.len() + 40 + l4_len];
        let first = if vlans.is_empty() { if v6 { EtherType::Ipv6 } else { EtherType::Ipv4 } } else { EtherType::Vlan };
        EthernetRepr { dst_addr: EthernetAddress([2; 6]), src_addr: EthernetAddress([4; 6]), ethertype: first }.emit(&mut f).unwrap();
        let mut at = 14;
        for (i, v) in vlans.iter().enumerate() {
            let next = if i + 1 < vlans.len() { EtherType::Vlan } else if v6 { EtherType::Ipv6 } else { EtherType::Ipv4 };
            VlanRepr { pcp: 0, dei: false, vid: *v, ethertype: next }.emit(&mut f[at..]).unwrap();
            at += 4;
        }
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let r = Ipv4Repr { src_addr: s, dst_addr: d, protocol: proto, payload_len: l4_len, ttl: 64, tos: 0, ident: 1,
                    dont_frag: true, more_frags: false, frag_offset: 0, options: &[] };
                r.emit(&mut f[at..]).unwrap();
                at += 20;
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                Ipv6Repr { src_addr: s, dst_addr: d, next_header: proto, payload_len: l4_len as u16, hop_limit: 64,
                    traffic_class: 0, flow_label: 0 }.emit(&mut f[at..]).unwrap();
                at += 40;
            }
            _ => unreachable!(),
        }
        f.truncate(at + l4_len);
        let l4 = &mut f[at..];
        match proto {
            IpProtocol::Tcp => TcpRepr { src_port: sp, dst_port: dp, seq_number: 1, ack_number: 2, flags: TcpFlags::ACK,
                window_len: 100, urgent_at: 0, options: &[] }.emit(l4).unwrap(),
            IpProtocol::Udp => UdpRepr { src_port: sp, dst_port: dp, payload_len: payload.len() }.emit(l4).unwrap(),
            IpProtocol::Icmp => IcmpRepr::echo(true, sp, dp).emit(l4).unwrap(),
            _ => Icmpv6Repr::echo(true, sp, dp).emit(l4).unwrap(),
        }
        let hl = l4_len - payload.len();
        l4[hl..].copy_from_slice(&payload);
        let s = slice(LinkType::Ethernet, &f);
        prop_assert_eq!(s.error(), None);
        prop_assert_eq!(s.vlans(), &vlans[..]);
        let t = s.five_tuple().unwrap();
        prop_assert_eq!((t.src, t.dst, t.protocol), (src, dst, proto));
        if proto.has_ports() {
            prop_assert_eq!((t.src_port, t.dst_port), (sp, dp));
        } else {
            prop_assert_eq!((t.src_port, t.dst_port), (0, 0));
            prop_assert_eq!(s.icmp().map(|x| x.0), Some(if v6 { 128 } else { 8 }));
        }
        prop_assert_eq!(s.tcp_flags().is_some(), proto == IpProtocol::Tcp);
        prop_assert_eq!(&f[s.payload_offset().unwrap()..], &payload[..]);
        let b = s.flow_bits().unwrap();
        prop_assert_eq!((b.version, b.protocol), (if v6 { 6 } else { 4 }, u8::from(proto)));
        if proto.has_ports() {
            prop_assert_eq!((b.src_port, b.dst_port), (t.src_port, t.dst_port));
        } else {
            // An echo request: ICMP type 8 or ICMPv6 type 128, code 0.
            let p = if v6 { 128 << 8 } else { 8 << 8 };
            prop_assert_eq!((b.src_port, b.dst_port), (p, p));
        }
        prop_assert_eq!((b.src, b.dst), (addr_bits(src), addr_bits(dst)));
    }
}

proptest! {
    // Cheap cases, and the fast path's edges (length 3 against 4, offset
    // 0x1000) need many of them to be hit.
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// `wire::flow_bits` (a fast path for Ethernet + IPv4 without options or
    /// IPv6 without extension headers) gives what `slice(..).flow_bits()`
    /// gives, on frames that take the fast path, that it sends to `slice`
    /// (short lengths, fragments, options, extension headers), and on
    /// arbitrary bytes under every link type.
    #[test]
    fn flow_bits_fast_path_agrees_with_slice(family in 0u8..4,
                                             v4 in prop::sample::select(vec![0x45u8, 0x45, 0x46, 0x44]),
                                             v6 in prop::sample::select(vec![0x60u8, 0x6f, 0x50]),
                                             other in prop::sample::select(vec![0x8100u16, 0x0806, 0x0800, 0x86dd]),
                                             proto in prop::sample::select(vec![6u8, 17, 6, 17, 1, 0, 43, 44, 50, 51, 58, 60, 132]),
                                             frag in prop::sample::select(vec![0u16, 0, 0x2000, 0x0001, 0x4000, 0x1000, 0x1fff]),
                                             len in prop::sample::select(vec![0u16, 1, 3, 4, 5, 19, 20, 23, 24, 25, 40, 1500, 0xffff]),
                                             cut in prop::sample::select(vec![usize::MAX, 33, 34, 37, 38, 39, 53, 57, 58, 59]),
                                             bytes in proptest::collection::vec(any::<u8>(), 40..80),
                                             code in prop::sample::select(vec![0u16, 1, 101, 113, 228, 229, 276]),
                                             raw in proptest::collection::vec(any::<u8>(), 0..100)) {
        let mut f = match family {
            0 | 1 => prefixed_frame(0x0800, v4, &bytes),
            2 => prefixed_frame(0x86dd, v6, &bytes),
            _ => prefixed_frame(other, bytes[0], &bytes),
        };
        // The length, fragment and protocol fields where IPv4 or IPv6 has them.
        if family < 2 {
            f[16..18].copy_from_slice(&len.to_be_bytes());
            f[20..22].copy_from_slice(&frag.to_be_bytes());
            f[23] = proto;
        } else if family == 2 {
            f[18..20].copy_from_slice(&len.to_be_bytes());
            f[20] = proto;
        }
        let f = &f[..cut.min(f.len())];
        prop_assert_eq!(wire::flow_bits(LinkType::Ethernet, f), slice(LinkType::Ethernet, f).flow_bits());
        let link = LinkType::from_code(code);
        prop_assert_eq!(wire::flow_bits(link, &raw), slice(link, &raw).flow_bits());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Frames built with the `Repr`s — VLAN tags with all three TPIDs, IPv4
    /// with options and fragments, IPv6 with extension headers — slice back
    /// to the flow they were built from; and cut at every length, the fast
    /// path, `slice(..).flow_bits()` and `network()`/`five_tuple()` agree.
    #[test]
    fn flow_bits_agree_on_built_frames_cut_at_every_length(b in built()) {
        let f = b.frame();
        let s = slice(LinkType::Ethernet, &f);
        prop_assert_eq!(s.error(), None);
        let vids: Vec<u16> = b.tags.iter().map(|t| t.1).collect();
        prop_assert_eq!(s.vlans(), &vids[..]);
        let ports = match b.protocol {
            _ if !b.first_fragment() => (0, 0),
            p if p.has_ports() => b.ports,
            // Echo requests, keyed `type << 8 | code`.
            IpProtocol::Icmp => (8 << 8, 8 << 8),
            IpProtocol::Icmpv6 => (128 << 8, 128 << 8),
            _ => (0, 0),
        };
        let want = FlowBits {
            version: if b.src.is_ipv6() { 6 } else { 4 },
            protocol: b.protocol.into(),
            src: addr_bits(b.src),
            dst: addr_bits(b.dst),
            src_port: ports.0,
            dst_port: ports.1,
        };
        prop_assert_eq!(s.flow_bits(), Some(want));
        for n in 0..=f.len() {
            let cut = &f[..n];
            let s = slice(LinkType::Ethernet, cut);
            prop_assert_eq!(s.flow_bits(), typed_flow(&s), "cut at {}", n);
            prop_assert_eq!(wire::flow_bits(LinkType::Ethernet, cut), s.flow_bits(), "cut at {}", n);
        }
    }
}

// The checksum's fast paths are held to the plain forms: the sum by 32-bit
// words to the sum by 16-bit words, the fixed-step fold to folding until
// nothing carries, and the IPv4 header update summed from registers to the
// fields stored and the header summed back.
proptest! {
    #[test]
    fn sum_by_words_folds_as_sum(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        use wire::checksum::{fold, sum, sum_words};
        prop_assert_eq!(fold(sum_words(&data)), fold(sum(&data)));
    }

    #[test]
    fn fold_in_four_steps_is_the_loop(acc in any::<u64>(), shift in 0u32..64) {
        let acc = acc >> shift;
        let mut a = acc;
        while a > 0xffff {
            a = (a & 0xffff) + (a >> 16);
        }
        prop_assert_eq!(wire::checksum::fold(acc), a as u16);
    }

    #[test]
    fn ipv4_length_protocol_and_checksum_in_one_step(
        header in proptest::array::uniform32(any::<u8>()),
        options in proptest::array::uniform28(any::<u8>()),
        words in 5usize..=15,
        total in any::<u16>(),
        protocol in any::<u8>(),
    ) {
        let mut h = [0u8; 60];
        h[..32].copy_from_slice(&header);
        h[32..].copy_from_slice(&options);
        let mut want = Ipv4Packet::new_unchecked(h);
        want.set_header_len(words * 4);
        let mut got = want;
        want.set_total_len(total);
        want.set_protocol(IpProtocol::from(protocol));
        want.fill_checksum();
        got.set_len_protocol_and_checksum(total, IpProtocol::from(protocol));
        prop_assert!(got.verify_checksum());
        prop_assert_eq!(got.into_inner(), want.into_inner());
    }
}

//! Fuzzes `wire::slice`: the first byte picks a link type, the rest is the
//! frame. Every accessor and every Display is exercised, since the CLI prints
//! them; the flow as integers (`flow_bits`, through `slice` and through its
//! fast path) must be the flow that `network()` and `five_tuple()` give.
#![no_main]

use std::fmt::Write;
use std::net::IpAddr;
use wire::{slice, FlowBits, LinkType};

const LINKS: [LinkType; 8] = [
    LinkType::Null,
    LinkType::Ethernet,
    LinkType::Raw,
    LinkType::LinuxSll,
    LinkType::Ipv4,
    LinkType::Ipv6,
    LinkType::LinuxSll2,
    LinkType::Unknown(147),
];

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&pick, frame)) = data.split_first() else {
        return;
    };
    let s = slice(LINKS[usize::from(pick) % LINKS.len()], frame);
    let mut out = String::new();
    let _ = write!(out, "{s}");
    let _ = s.vlans();
    if let Some(n) = s.network() {
        let _ = write!(out, "{n} {}", n.protocol);
    }
    if let Some(t) = s.five_tuple() {
        let _ = write!(out, "{t}");
    }
    // The integer form of the flow agrees with the typed one, field by field.
    let bits = |a: IpAddr| match a {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    };
    let typed = s.network().map(|n| {
        let (src_port, dst_port) = s.five_tuple().map_or((0, 0), |t| (t.src_port, t.dst_port));
        FlowBits {
            version: n.version,
            protocol: n.protocol.into(),
            src: bits(n.src),
            dst: bits(n.dst),
            src_port,
            dst_port,
        }
    });
    assert_eq!(s.flow_bits(), typed);
    // The fast path for the usual frame gives the same answer as `slice`.
    assert_eq!(
        wire::flow_bits(LINKS[usize::from(pick) % LINKS.len()], frame),
        s.flow_bits()
    );
    if let Some(f) = s.tcp_flags() {
        let _ = write!(out, "{f}");
    }
    let _ = (
        s.icmp(),
        s.ipsec_spi(),
        s.network_offset(),
        s.transport_offset(),
    );
    if let Some(p) = s.payload_offset() {
        assert!(p <= frame.len());
    }
    if let Some(e) = s.error() {
        let _ = write!(out, "{e} {}", e.layer);
        assert!(e.offset <= frame.len());
    }
    assert_eq!(s.frame_len(), frame.len());
});

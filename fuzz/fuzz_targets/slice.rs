//! Fuzzes `wire::slice`: the first byte picks a link type, the rest is the
//! frame. Every accessor and every Display is exercised, since the CLI prints them.
#![no_main]

use std::fmt::Write;
use wire::{slice, LinkType};

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
    // The integer form of the flow agrees with the typed one.
    assert_eq!(s.flow_bits().is_some(), s.network().is_some());
    // The fast path for the usual frame gives the same answer as `slice`.
    assert_eq!(
        wire::flow_bits(LINKS[usize::from(pick) % LINKS.len()], frame),
        s.flow_bits()
    );
    if let (Some(b), Some(t)) = (s.flow_bits(), s.five_tuple()) {
        assert_eq!((b.src_port, b.dst_port), (t.src_port, t.dst_port));
    }
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

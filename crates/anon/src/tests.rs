//! The rewrite on packets built byte by byte: every address replaced by its
//! Crypto-PAn image, no original address byte left, checksums that were
//! right still right, the payload policy applied.

use crate::packet::Anonymizer;
use crate::{CryptoPan, MacPolicy, PayloadPolicy};
use wire::checksum::{checksum, fold, sum};
use wire::LinkType;

const KEY: [u8; 32] = [7; 32];

fn anonymizer(payload: PayloadPolicy) -> Anonymizer {
    Anonymizer::new(CryptoPan::new(&KEY), MacPolicy::Hash, payload)
}

fn pan() -> CryptoPan {
    CryptoPan::new(&KEY)
}

const MAC_A: [u8; 6] = [0x00, 0x1b, 0x21, 0x0a, 0x0b, 0x0c];
const MAC_B: [u8; 6] = [0x3c, 0xfd, 0xfe, 0x01, 0x02, 0x03];
const V4_A: [u8; 4] = [192, 0, 2, 10];
const V4_B: [u8; 4] = [198, 51, 100, 77];
const V6_A: [u8; 16] = [
    0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a,
];
const V6_B: [u8; 16] = [
    0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0xab, 0xcd, 0, 0x0b,
];

fn ethernet(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    [&MAC_A[..], &MAC_B, &ethertype.to_be_bytes(), payload].concat()
}

/// An IPv4 header (no options) with its checksum, then `l4`.
fn ipv4(protocol: u8, src: [u8; 4], dst: [u8; 4], l4: &[u8]) -> Vec<u8> {
    let total = (20 + l4.len()) as u16;
    let mut h = vec![0x45, 0, 0, 0, 0x12, 0x34, 0, 0, 64, protocol, 0, 0];
    h[2..4].copy_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    let c = checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    [h, l4.to_vec()].concat()
}

fn ipv6(next: u8, src: [u8; 16], dst: [u8; 16], l4: &[u8]) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0, 0, 0, next, 64];
    h[4..6].copy_from_slice(&(l4.len() as u16).to_be_bytes());
    [h, src.to_vec(), dst.to_vec(), l4.to_vec()].concat()
}

/// The pseudo-header sum of RFC 768 / RFC 8200 §8.1.
fn pseudo(src: &[u8], dst: &[u8], protocol: u8, len: usize) -> u64 {
    sum(src) + sum(dst) + u64::from(protocol) + len as u64
}

/// `l4` with its checksum (at `at`) set over the pseudo-header, or over
/// itself alone when `src` is empty (ICMP).
fn with_checksum(mut l4: Vec<u8>, at: usize, src: &[u8], dst: &[u8], protocol: u8) -> Vec<u8> {
    l4[at..at + 2].fill(0);
    let s = if src.is_empty() {
        0
    } else {
        pseudo(src, dst, protocol, l4.len())
    };
    let c = !fold(s + sum(&l4));
    l4[at..at + 2].copy_from_slice(&c.to_be_bytes());
    l4
}

fn udp(payload: &[u8], src: &[u8], dst: &[u8]) -> Vec<u8> {
    let len = (8 + payload.len()) as u16;
    let mut u = vec![0x30, 0x39, 0, 53, 0, 0, 0, 0];
    u[4..6].copy_from_slice(&len.to_be_bytes());
    with_checksum([u, payload.to_vec()].concat(), 6, src, dst, 17)
}

/// Whether a transport checksum over the pseudo-header checks.
fn checks(l4: &[u8], src: &[u8], dst: &[u8], protocol: u8) -> bool {
    let s = if src.is_empty() {
        0
    } else {
        pseudo(src, dst, protocol, l4.len())
    };
    fold(s + sum(l4)) == 0xffff
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn image4(a: [u8; 4]) -> [u8; 4] {
    pan().ipv4(u32::from_be_bytes(a)).to_be_bytes()
}

fn image6(a: [u8; 16]) -> [u8; 16] {
    pan().ipv6(u128::from_be_bytes(a)).to_be_bytes()
}

#[test]
fn ipv4_udp_keeps_right_checksums_and_loses_every_address() {
    let dns =
        b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01";
    let frame = ethernet(0x0800, &ipv4(17, V4_A, V4_B, &udp(dns, &V4_A, &V4_B)));
    let mut keep = frame.clone();
    let r = anonymizer(PayloadPolicy::Keep).frame(LinkType::Ethernet, &mut keep);
    assert_eq!(r.kept, frame.len());
    assert!(!r.stopped_early);
    let ip = &keep[14..];
    assert_eq!(ip[12..16], image4(V4_A));
    assert_eq!(ip[16..20], image4(V4_B));
    assert_eq!(checksum(&ip[..20]), 0, "the IPv4 header checksum");
    assert!(
        checks(&ip[20..], &ip[12..16], &ip[16..20], 17),
        "the UDP checksum"
    );
    for a in [&V4_A[..], &V4_B, &MAC_A, &MAC_B] {
        assert!(!contains(&keep, a), "{a:?} left in {keep:?}");
    }
    assert!(contains(&keep, b"example"), "keep keeps the payload");
    // The default cuts the record after the UDP header; zero keeps its
    // length with the bytes gone.
    let mut strip = frame.clone();
    let r = anonymizer(PayloadPolicy::Strip).frame(LinkType::Ethernet, &mut strip);
    assert_eq!(r.kept, 14 + 20 + 8);
    assert_eq!(strip[..r.kept], keep[..r.kept]);
    let mut zero = frame.clone();
    let r = anonymizer(PayloadPolicy::Zero).frame(LinkType::Ethernet, &mut zero);
    assert_eq!(r.kept, frame.len());
    assert!(zero[14 + 28..].iter().all(|&b| b == 0));
}

#[test]
fn mac_images_keep_the_group_bit_and_broadcast() {
    let mut a = anonymizer(PayloadPolicy::Strip);
    let multicast = [0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb];
    // A frame from station A to a multicast group.
    let mut g = [&multicast[..], &MAC_A, &0x0800u16.to_be_bytes()].concat();
    a.frame(LinkType::Ethernet, &mut g);
    assert_eq!(g[0] & 1, 1, "a group address stays one");
    assert_eq!(g[6] & 1, 0, "a station stays one");
    assert_eq!(g[6] & 2, 2, "locally administered");
    assert_ne!(g[6..12], MAC_A);
    // The same station, the same image; broadcast as it was.
    let mut h = [[0xff; 6].to_vec(), MAC_A.to_vec(), vec![0x08, 0x00]].concat();
    a.frame(LinkType::Ethernet, &mut h);
    assert_eq!(h[..6], [0xff; 6]);
    assert_eq!(h[6..12], g[6..12]);
}

#[test]
fn an_icmp_error_quotes_anonymised_headers_with_right_checksums() {
    // A port unreachable from B to A about A's UDP datagram to B.
    let quoted = ipv4(17, V4_A, V4_B, &udp(b"hello", &V4_A, &V4_B));
    let icmp = with_checksum(
        [vec![3, 3, 0, 0, 0, 0, 0, 0], quoted].concat(),
        2,
        &[],
        &[],
        1,
    );
    let frame = ethernet(0x0800, &ipv4(1, V4_B, V4_A, &icmp));
    let mut out = frame.clone();
    let r = anonymizer(PayloadPolicy::Keep).frame(LinkType::Ethernet, &mut out);
    assert!(!r.stopped_early);
    let ip = &out[14..];
    let icmp = &ip[20..];
    assert!(checks(icmp, &[], &[], 1), "the ICMP checksum");
    let inner = &icmp[8..];
    assert_eq!(inner[12..16], image4(V4_A));
    assert_eq!(inner[16..20], image4(V4_B));
    assert_eq!(checksum(&inner[..20]), 0, "the quoted header's checksum");
    assert!(checks(&inner[20..], &inner[12..16], &inner[16..20], 17));
    for a in [&V4_A[..], &V4_B] {
        assert!(!contains(&out, a));
    }
    // Stripped, the quoted header and the quoted UDP header stay, its
    // data goes.
    let mut strip = frame.clone();
    let r = anonymizer(PayloadPolicy::Strip).frame(LinkType::Ethernet, &mut strip);
    assert_eq!(r.kept, 14 + 20 + 8 + 20 + 8);
}

#[test]
fn arp_and_neighbour_discovery_lose_their_addresses() {
    let arp = [&[0, 1, 8, 0, 6, 4, 0, 1][..], &MAC_A, &V4_A, &[0; 6], &V4_B].concat();
    let mut f = ethernet(0x0806, &[arp, vec![0xaa; 18]].concat());
    let r = anonymizer(PayloadPolicy::Strip).frame(LinkType::Ethernet, &mut f);
    assert_eq!(r.kept, 14 + 28, "the padding goes");
    let f = &f[..r.kept];
    assert_eq!(f[14 + 14..14 + 18], image4(V4_A));
    assert_eq!(f[14 + 24..14 + 28], image4(V4_B));
    assert!(!contains(f, &MAC_A) && !contains(f, &V4_A) && !contains(f, &V4_B));

    // A neighbour solicitation for B from A, with A's link-layer address.
    let ns = [&[135, 0, 0, 0, 0, 0, 0, 0][..], &V6_B, &[1, 1], &MAC_A].concat();
    let ns = with_checksum(ns, 2, &V6_A, &V6_B, 58);
    let mut f = ethernet(0x86dd, &ipv6(58, V6_A, V6_B, &ns));
    let r = anonymizer(PayloadPolicy::Strip).frame(LinkType::Ethernet, &mut f);
    assert_eq!(r.kept, f.len(), "neighbour discovery is all header");
    let ip = &f[14..];
    assert_eq!(ip[8..24], image6(V6_A));
    assert_eq!(ip[40 + 8..40 + 24], image6(V6_B), "the target");
    assert!(
        checks(&ip[40..], &ip[8..24], &ip[24..40], 58),
        "the ICMPv6 checksum"
    );
    for a in [&V6_A[..], &V6_B, &MAC_A] {
        assert!(!contains(&f, a));
    }
}

#[test]
fn ipv6_errors_tunnels_and_fragments() {
    // A packet too big from B to A quoting A's UDP datagram.
    let quoted = ipv6(17, V6_A, V6_B, &udp(b"data", &V6_A, &V6_B));
    let ptb = with_checksum(
        [vec![2, 0, 0, 0, 0, 0, 5, 0], quoted].concat(),
        2,
        &V6_B,
        &V6_A,
        58,
    );
    let mut f = ipv6(58, V6_B, V6_A, &ptb);
    let r = anonymizer(PayloadPolicy::Keep).frame(LinkType::Raw, &mut f);
    assert!(!r.stopped_early);
    assert!(checks(&f[40..], &f[8..24], &f[24..40], 58));
    let inner = &f[48..];
    assert!(checks(&inner[40..], &inner[8..24], &inner[24..40], 17));
    assert!(!contains(&f, &V6_A) && !contains(&f, &V6_B));

    // IPv4 in IPv4: the inner header is rewritten too.
    let inner = ipv4(17, V4_B, V4_A, &udp(b"x", &V4_B, &V4_A));
    let mut f = ipv4(4, [10, 1, 2, 3], [10, 9, 8, 7], &inner);
    let r = anonymizer(PayloadPolicy::Strip).frame(LinkType::Ipv4, &mut f);
    assert_eq!(r.kept, 20 + 20 + 8);
    assert!(!contains(&f, &V4_A) && !contains(&f, &V4_B) && !contains(&f, &[10, 1, 2, 3]));
    assert_eq!(checksum(&f[20..40]), 0);

    // A later fragment: no transport header, all payload.
    let mut frag = ipv4(17, V4_A, V4_B, &[0x55; 40]);
    frag[6..8].copy_from_slice(&0x0005u16.to_be_bytes());
    frag[10..12].fill(0);
    let c = checksum(&frag[..20]);
    frag[10..12].copy_from_slice(&c.to_be_bytes());
    let r = anonymizer(PayloadPolicy::Strip).frame(LinkType::Ipv4, &mut frag);
    assert_eq!(r.kept, 20);
    assert_eq!(checksum(&frag[..20]), 0);
}

#[test]
fn record_route_options_are_anonymised() {
    let mut h = ipv4(17, V4_A, V4_B, &[]);
    // Options: record route with two addresses, then end of list.
    let opt = [&[7, 11, 12][..], &V4_A, &V4_B, &[0]].concat();
    h.splice(20..20, opt);
    h[0] = 0x48;
    h[2..4].copy_from_slice(&32u16.to_be_bytes());
    h[10..12].fill(0);
    let c = checksum(&h[..32]);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    let r = anonymizer(PayloadPolicy::Strip).frame(LinkType::Ipv4, &mut h);
    assert!(r.stopped_early, "no UDP header in the capture");
    assert_eq!(h[23..27], image4(V4_A));
    assert_eq!(checksum(&h[..32]), 0);
    assert!(!contains(&h, &V4_A) && !contains(&h, &V4_B));
}

#[test]
fn truncated_and_garbage_frames_publish_nothing_unread() {
    let frame = ethernet(
        0x0800,
        &ipv4(17, V4_A, V4_B, &udp(b"payload", &V4_A, &V4_B)),
    );
    let mut a = anonymizer(PayloadPolicy::Strip);
    for cut in 0..frame.len() {
        let mut f = frame[..cut].to_vec();
        let r = a.frame(LinkType::Ethernet, &mut f);
        let out = &f[..r.kept];
        assert!(
            !contains(out, &V4_A) && !contains(out, &V4_B),
            "cut at {cut}: {out:?}"
        );
        assert!(!contains(out, &MAC_A[..4]), "cut at {cut}");
    }
    // Any bytes at all: no panic, and nothing beyond the input.
    let mut state = 1u64;
    for n in 0..2000 {
        let len = n % 200;
        let mut f: Vec<u8> = (0..len)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (state >> 56) as u8
            })
            .collect();
        if len > 14 {
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            f[14] = 0x45;
        }
        for link in [
            LinkType::Ethernet,
            LinkType::Raw,
            LinkType::LinuxSll,
            LinkType::Null,
        ] {
            let mut g = f.clone();
            let r = a.frame(link, &mut g);
            assert!(r.kept <= g.len());
        }
    }
}

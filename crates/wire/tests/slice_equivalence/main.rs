//! The slicer, now read through the protocol views and their constants, gives
//! exactly the answers of the slicer it replaced (`old_slice.rs`, a verbatim
//! copy of the old `src/slice.rs`): every accessor of `Slice`, its Display,
//! `wire::flow_bits`, on
//!
//! - frames built layer by layer under every link type (VLAN stacks with all
//!   three TPIDs and too many tags, IPv4 with options, odd lengths and
//!   fragments, IPv6 with chains of extension headers, TCP, UDP, ICMP,
//!   ICMPv6, ESP, AH, other protocols, non-IP EtherTypes), then mutated, and
//!   each cut at every length;
//! - the frames of the fuzz corpus (captured on loopback, and a few built
//!   ones with tags and extension headers), with every byte changed and at
//!   every length;
//! - arbitrary bytes under every link type.

mod old_slice;

use proptest::prelude::*;
use proptest::sample::{select, Index};
use wire::{slice, LinkType};

const LINKS: [LinkType; 8] = [
    LinkType::Ethernet,
    LinkType::LinuxSll,
    LinkType::LinuxSll2,
    LinkType::Null,
    LinkType::Raw,
    LinkType::Ipv4,
    LinkType::Ipv6,
    LinkType::Unknown(147),
];

/// The old slicer's flow with ICMP's type and code as its ports, as the
/// new one keys it since (the one intended change; `icmp()` is the same in
/// both, as checked below).
fn old_flow(f: Option<wire::FlowBits>, icmp: Option<(u8, u8)>) -> Option<wire::FlowBits> {
    f.map(|mut b| {
        if let Some((t, c)) = icmp {
            b.src_port = wire::icmp_port(t, c);
            b.dst_port = b.src_port;
        }
        b
    })
}

/// Every answer of the new slicer and the old one on `frame`, compared.
fn same(link: LinkType, frame: &[u8]) -> Result<(), TestCaseError> {
    let n = slice(link, frame);
    let o = old_slice::slice(link, frame);
    let ctx = || format!("{link} {frame:02x?}");
    prop_assert_eq!(n.vlans(), o.vlans(), "vlans {}", ctx());
    prop_assert_eq!(n.network(), o.network(), "network {}", ctx());
    prop_assert_eq!(n.five_tuple(), o.five_tuple(), "five_tuple {}", ctx());
    prop_assert_eq!(
        n.flow_bits(),
        old_flow(o.flow_bits(), o.icmp()),
        "flow_bits {}",
        ctx()
    );
    prop_assert_eq!(n.tcp_flags(), o.tcp_flags(), "tcp_flags {}", ctx());
    prop_assert_eq!(n.icmp(), o.icmp(), "icmp {}", ctx());
    prop_assert_eq!(n.ipsec_spi(), o.ipsec_spi(), "ipsec_spi {}", ctx());
    prop_assert_eq!(
        n.payload_offset(),
        o.payload_offset(),
        "payload_offset {}",
        ctx()
    );
    prop_assert_eq!(n.error(), o.error(), "error {}", ctx());
    prop_assert_eq!(
        n.network_offset(),
        o.network_offset(),
        "network_offset {}",
        ctx()
    );
    prop_assert_eq!(
        n.transport_offset(),
        o.transport_offset(),
        "transport_offset {}",
        ctx()
    );
    prop_assert_eq!(n.frame_len(), o.frame_len());
    prop_assert!(core::ptr::eq(n.frame(), o.frame()));
    prop_assert_eq!(n.to_string(), o.to_string(), "Display {}", ctx());
    if let Some(net) = n.network() {
        prop_assert_eq!(net.to_string(), old_slice::network_info_to_string(&net));
    }
    if let Some(t) = n.five_tuple() {
        prop_assert_eq!(t.to_string(), old_slice::five_tuple_to_string(&t));
    }
    if let Some(e) = n.error() {
        prop_assert_eq!(e.to_string(), o.error().unwrap().to_string());
    }
    let fast = wire::flow_bits(link, frame);
    prop_assert_eq!(
        fast,
        old_flow(old_slice::flow_bits(link, frame), o.icmp()),
        "fast flow_bits {}",
        ctx()
    );
    prop_assert_eq!(
        fast,
        n.flow_bits(),
        "fast flow_bits against slice {}",
        ctx()
    );
    Ok(())
}

/// [`same`] on every prefix of `frame`: truncation at every length.
fn same_at_every_length(link: LinkType, frame: &[u8]) -> Result<(), TestCaseError> {
    for n in 0..=frame.len() {
        same(link, &frame[..n])?;
    }
    Ok(())
}

/// How a length field is filled in.
#[derive(Clone, Copy, Debug)]
enum Len {
    /// What the packet really is.
    Right,
    /// 0 (IPv4: TSO's "use the frame"; IPv6: a jumbogram).
    Zero,
    /// The headers before the upper layer plus a few bytes: around where
    /// the ports end.
    Short(u8),
    /// The right length plus or minus a little.
    Off(i8),
    /// Anything.
    Any(u16),
}

impl Len {
    /// The field for a packet of `right` bytes whose upper layer starts at `upper`.
    fn of(self, upper: usize, right: usize) -> u16 {
        match self {
            Len::Right => right as u16,
            Len::Zero => 0,
            Len::Short(n) => (upper + usize::from(n)) as u16,
            Len::Off(d) => (right as i64 + i64::from(d)).clamp(0, 0xffff) as u16,
            Len::Any(v) => v,
        }
    }
}

fn len() -> impl Strategy<Value = Len> {
    prop_oneof![
        5 => Just(Len::Right),
        1 => Just(Len::Zero),
        3 => (0u8..10).prop_map(Len::Short),
        2 => (-24i8..24).prop_map(Len::Off),
        1 => (0u16..64).prop_map(Len::Any),
        1 => any::<u16>().prop_map(Len::Any),
    ]
}

/// The upper-layer protocol numbers the slicer treats apart (TCP and UDP,
/// whose ports `flow_bits` reads, most often), and any other.
fn protocol() -> impl Strategy<Value = u8> {
    prop_oneof![
        4 => select(vec![6u8, 17]),
        5 => select(vec![1u8, 58, 50, 51, 0, 43, 44, 60, 59, 132]),
        1 => any::<u8>(),
    ]
}

/// One IPv6 extension header: its type and its Hdr Ext Len.
fn extension() -> impl Strategy<Value = (u8, u8)> {
    (
        select(vec![0u8, 43, 60, 44, 44]),
        prop_oneof![4 => 0u8..3, 1 => any::<u8>()],
    )
}

/// A frame built layer by layer; [`Recipe::build`] writes it out.
#[derive(Clone, Debug)]
struct Recipe {
    link: LinkType,
    /// The BSD loopback family and whether it is written big-endian.
    family: (u32, bool),
    /// VLAN tags: the TPID (0x9200 is not one) and the TCI.
    tags: Vec<(u16, u16)>,
    /// 4, 6, or a non-IP EtherType.
    network: u16,
    /// The version byte's high nibble, usually the right one.
    version: u8,
    /// IPv4 IHL, usually 5.
    ihl: u8,
    ip_len: Len,
    /// IPv4 flags and fragment offset.
    frag: u16,
    ttl: u8,
    /// IPv6 extension headers, in order.
    extensions: Vec<(u8, u8)>,
    /// The upper-layer protocol (after the extension headers).
    protocol: u8,
    /// TCP data offset, UDP length, AH payload length, as fits the protocol.
    l4_len: u8,
    udp_len: Len,
    /// Bytes every header is filled with before its fields are set.
    noise: Vec<u8>,
    payload: Vec<u8>,
    /// Bytes XORed into the built frame.
    mutations: Vec<(Index, u8)>,
}

fn recipe() -> impl Strategy<Value = Recipe> {
    let tag = (
        select(vec![0x8100u16, 0x88a8, 0x9100, 0x9200]),
        any::<u16>(),
    );
    let link = (
        // Ethernet without tags is the fast path of `flow_bits`.
        prop_oneof![3 => Just(LinkType::Ethernet), 2 => select(LINKS.to_vec())],
        (
            select(vec![2u32, 10, 24, 28, 30, 17, 0x1e00_0000]),
            any::<bool>(),
        ),
        prop_oneof![
            3 => Just(vec![]),
            2 => proptest::collection::vec(tag.clone(), 1..3),
            1 => proptest::collection::vec(tag, 3..11),
        ],
        prop_oneof![
            4 => Just(4u16),
            4 => Just(6u16),
            1 => select(vec![0x0806u16, 0x88cc, 0x0800, 0x86dd, 0x8100, 0x0600]),
            1 => any::<u16>(),
        ],
    );
    let ip = (
        prop_oneof![10 => Just(None), 1 => (0u8..16).prop_map(Some)],
        prop_oneof![8 => Just(5u8), 1 => 0u8..5, 2 => 6u8..16],
        len(),
        prop_oneof![
            4 => Just(0u16),
            1 => Just(0x4000u16),
            4 => select(vec![0x2000u16, 0x20b9, 0x00b9, 0x1fff, 0x3fff, 0x0001]),
            1 => any::<u16>(),
        ],
        any::<u8>(),
        prop_oneof![
            3 => Just(vec![]),
            2 => proptest::collection::vec(extension(), 1..4),
            1 => proptest::collection::vec(extension(), 4..11),
        ],
        protocol(),
    );
    let l4 = (
        prop_oneof![4 => Just(None), 2 => (0u8..16).prop_map(Some), 1 => any::<u8>().prop_map(Some)],
        len(),
        proptest::collection::vec(any::<u8>(), 64),
        proptest::collection::vec(any::<u8>(), 0..48),
        prop_oneof![
            3 => Just(vec![]),
            1 => proptest::collection::vec((any::<Index>(), 1u8..=255), 1..4),
        ],
    );
    (link, ip, l4).prop_map(
        |(
            (link, family, tags, network),
            (version, ihl, ip_len, frag, ttl, extensions, protocol),
            (l4_len, udp_len, noise, payload, mutations),
        )| {
            let version = version.unwrap_or(if network == 6 { 6 } else { 4 });
            Recipe {
                link,
                family,
                tags,
                network,
                version,
                ihl,
                ip_len,
                frag,
                ttl,
                extensions,
                protocol,
                l4_len: l4_len.unwrap_or(match protocol {
                    6 => 5,
                    51 => 4,
                    _ => 0,
                }),
                udp_len,
                noise,
                payload,
                mutations,
            }
        },
    )
}

impl Recipe {
    /// `n` bytes of noise (repeated as needed).
    fn noise(&self, n: usize) -> Vec<u8> {
        self.noise.iter().copied().cycle().take(n).collect()
    }

    /// The transport header and payload for `proto`.
    fn transport(&self, proto: u8) -> Vec<u8> {
        let (hl, body) = match proto {
            6 => (usize::from(self.l4_len & 0x0f) * 4, 20),
            17 | 1 | 58 | 50 => (8, 8),
            51 => ((usize::from(self.l4_len) + 2) * 4, 12),
            _ => (0, 0),
        };
        let mut h = self.noise(hl.max(body));
        match proto {
            6 => h[12] = (self.l4_len << 4) | (h[12] & 0x0f),
            17 => {
                let l = self.udp_len.of(0, 8 + self.payload.len());
                h[4..6].copy_from_slice(&l.to_be_bytes());
            }
            51 => h[1] = self.l4_len,
            _ => {}
        }
        h.extend_from_slice(&self.payload);
        h
    }

    /// The network layer: IPv4, IPv6 or a non-IP payload.
    fn network(&self) -> Vec<u8> {
        match self.network {
            4 => {
                let hl = usize::from(self.ihl) * 4;
                let mut h = self.noise(hl.max(20));
                h[0] = (self.version << 4) | self.ihl;
                let l4 = self.transport(self.protocol);
                let tl = self.ip_len.of(hl, hl.max(20) + l4.len());
                h[2..4].copy_from_slice(&tl.to_be_bytes());
                h[6..8].copy_from_slice(&self.frag.to_be_bytes());
                h[8] = self.ttl;
                h[9] = self.protocol;
                h.extend_from_slice(&l4);
                h
            }
            6 => {
                let mut h = self.noise(40);
                h[0] = (self.version << 4) | (h[0] & 0x0f);
                h[7] = self.ttl;
                let mut rest = Vec::new();
                let mut nh = self.protocol;
                for &(kind, len) in self.extensions.iter().rev() {
                    let n = if kind == 44 {
                        8
                    } else {
                        (usize::from(len) + 1) * 8
                    };
                    let mut e = self.noise(n);
                    e[0] = nh;
                    if kind != 44 {
                        e[1] = len;
                    } else if len == 0 {
                        // A first fragment; other lengths leave the noise's offset.
                        e[2] = 0;
                        e[3] &= 0x07;
                    }
                    e.extend_from_slice(&rest);
                    rest = e;
                    nh = kind;
                }
                h[6] = nh;
                let mut tail = rest;
                let upper = tail.len();
                // The upper layer goes after the last extension header.
                tail.extend_from_slice(&self.transport(self.protocol));
                let pl = self.ip_len.of(upper, tail.len());
                h[4..6].copy_from_slice(&pl.to_be_bytes());
                h.extend_from_slice(&tail);
                h
            }
            _ => self.noise(usize::from(self.l4_len) + 8),
        }
    }

    /// The whole frame under `self.link`, mutated.
    fn build(&self) -> Vec<u8> {
        let ethertype = match self.network {
            4 => 0x0800,
            6 => 0x86dd,
            other => other,
        };
        // The TPIDs and the EtherType, each followed by what it announces.
        let mut tagged = Vec::new();
        let mut first = ethertype;
        for (i, &(tpid, tci)) in self.tags.iter().enumerate() {
            if i == 0 {
                first = tpid;
            }
            let next = self.tags.get(i + 1).map_or(ethertype, |t| t.0);
            tagged.extend_from_slice(&tci.to_be_bytes());
            tagged.extend_from_slice(&next.to_be_bytes());
        }
        let mut f = match self.link {
            LinkType::Ethernet => {
                let mut h = self.noise(12);
                h.extend_from_slice(&first.to_be_bytes());
                h.extend_from_slice(&tagged);
                h
            }
            LinkType::LinuxSll => {
                let mut h = self.noise(14);
                h.extend_from_slice(&first.to_be_bytes());
                h.extend_from_slice(&tagged);
                h
            }
            LinkType::LinuxSll2 => {
                let mut h = first.to_be_bytes().to_vec();
                h.extend_from_slice(&self.noise(18));
                h.extend_from_slice(&tagged);
                h
            }
            LinkType::Null => {
                let (family, big) = self.family;
                if big {
                    family.to_be_bytes().to_vec()
                } else {
                    family.to_le_bytes().to_vec()
                }
            }
            _ => Vec::new(),
        };
        f.extend_from_slice(&self.network());
        if !f.is_empty() {
            for (at, x) in &self.mutations {
                let i = at.index(f.len());
                f[i] ^= x;
            }
        }
        f
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// Built frames, mutated or not, cut at every length.
    #[test]
    fn built_frames_slice_as_before(r in recipe()) {
        let f = r.build();
        same_at_every_length(r.link, &f)?;
        // The same bytes under every other link type.
        for link in LINKS {
            same(link, &f)?;
        }
    }

    /// Arbitrary bytes under every link type.
    #[test]
    fn arbitrary_bytes_slice_as_before(bytes in proptest::collection::vec(any::<u8>(), 0..160)) {
        for link in LINKS {
            same(link, &bytes)?;
        }
    }
}

/// The frames of the fuzz corpus (after a first byte, the link type index of
/// the fuzz target; see fuzz/fuzz_targets/slice.rs) under every link type,
/// at every length and with every byte replaced by a few values.
#[test]
fn corpus_frames_slice_as_before() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/slice");
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let data = std::fs::read(entry.unwrap().path()).unwrap();
        let Some((_, frame)) = data.split_first() else {
            continue;
        };
        seen += 1;
        for link in LINKS {
            same_at_every_length(link, frame).unwrap();
            let mut f = frame.to_vec();
            for i in 0..f.len() {
                let was = f[i];
                for v in [0x00, 0xff, was ^ 0x01, was ^ 0x80, was.wrapping_add(0x10)] {
                    f[i] = v;
                    same(link, &f).unwrap();
                }
                f[i] = was;
            }
        }
    }
    assert!(seen >= 9, "the corpus at {dir} has {seen} frames");
}

/// The recipes reach the layers they are meant to: a check on the generator,
/// so that the comparisons above are not all made on frames that stop early.
#[test]
fn recipes_reach_every_layer() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    use std::collections::BTreeSet;
    use wire::Layer;
    let mut runner = TestRunner::deterministic();
    let mut reached = BTreeSet::new();
    let mut errors = BTreeSet::new();
    let (mut vlans, mut deep_v6, mut ok) = (0, 0, 0);
    for _ in 0..4000 {
        let r = recipe().new_tree(&mut runner).unwrap().current();
        let f = r.build();
        let s = slice(r.link, &f);
        if let Some(n) = s.network() {
            reached.insert(u8::from(n.protocol));
        }
        if let Some(e) = s.error() {
            errors.insert(format!("{:?}", e.layer));
        } else {
            ok += 1;
        }
        vlans += usize::from(s.vlans().len() >= 2);
        deep_v6 += usize::from(s.transport_offset().is_some_and(|t| t > 14 + 40 + 8));
    }
    for p in [6u8, 17, 1, 58, 50, 51, 0, 43, 44, 60, 132] {
        assert!(
            reached.contains(&p),
            "protocol {p} never reached: {reached:?}"
        );
    }
    // The link headers are only ever cut short by the cuts at every length.
    for l in [
        Layer::Vlan,
        Layer::Ip,
        Layer::Ipv4,
        Layer::Ipv6,
        Layer::Ipv6Ext,
        Layer::Tcp,
        Layer::Udp,
        Layer::Ah,
        Layer::Link,
    ] {
        assert!(
            errors.contains(&format!("{l:?}")),
            "no {l:?} error: {errors:?}"
        );
    }
    assert!(
        ok > 1000 && vlans > 100 && deep_v6 > 100,
        "{ok} {vlans} {deep_v6}"
    );
}

//! What the tests share: the expressions and link types they compile for,
//! a small pcap/pcapng reader and pcap writer, the sample captures, and
//! Ethernet frames re-framed for the other link types.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// LINKTYPE_NULL (BSD loopback).
pub const NULL: u16 = 0;
/// LINKTYPE_ETHERNET.
pub const ETHERNET: u16 = 1;
/// LINKTYPE_RAW (IPv4 or IPv6, no link header).
pub const RAW: u16 = 101;
/// LINKTYPE_LINUX_SLL.
pub const SLL: u16 = 113;
/// LINKTYPE_LINUX_SLL2.
pub const SLL2: u16 = 276;

/// The link types every expression is compiled for.
pub const LINK_TYPES: [u16; 5] = [ETHERNET, RAW, SLL, SLL2, NULL];

/// The expressions: every kind of primitive tcpdump users write, for the
/// addresses and ports of the sample captures and of the generated frames.
pub const EXPRESSIONS: &[&str] = &[
    "",
    "ip",
    "ip6",
    "arp",
    "tcp",
    "udp",
    "icmp",
    "icmp6",
    "host 127.0.0.1",
    "src host 198.18.7.1",
    "dst host 10.0.0.1",
    "host ::1",
    "net 198.18.0.0/15",
    "src net 10.0.0.0/8",
    "net fe80::/10",
    "port 80",
    "tcp port 18080",
    "udp port 53",
    "src port 40000",
    "dst port 47000",
    "portrange 40000-41000",
    "tcp dst portrange 1-1024",
    "tcp port 80 or udp port 53",
    "host 10.0.0.1 and not port 22",
    "proto 17",
    "ip proto 1",
    "ip6 proto 58",
    "ip6 and tcp",
    "tcp[tcpflags] & tcp-syn != 0",
    "tcp[tcpflags] & (tcp-fin|tcp-rst) != 0",
    "tcp[13] = 0x18",
    "vlan",
    "vlan 7",
    "vlan 100 and vlan 8",
    "vlan and vlan",
    "vlan and tcp",
    "mpls",
    "mpls 100 and ip",
    "icmp[icmptype] = icmp-echo",
    "icmp[icmptype] == icmp-unreach",
    "icmp6[icmp6type] = icmp6-echo",
    "greater 100",
    "less 80",
    "len > 60",
    "len <= 100 and udp",
    "ether host 02:00:00:00:00:01",
    "ether broadcast",
    "ether multicast",
    "ip multicast",
    "ip broadcast",
    "ip[2:2] > 100",
    "ip[0] & 0xf != 5",
    "ip[6:2] & 0x1fff = 0",
    "(ip[2:2] - ((ip[0] & 0xf) << 2)) > 40",
    "ip[8] % 3 = 1 or ip[8] / 7 = 9",
    "ip[0] >> 4 = 4 and ip[1] << 2 > 0",
    "ip[3] ^ 0xff = 0 or ip[9] * 3 = 18",
    "udp[4:2] - 8 > 10",
    "ip6 protochain 6",
    "ip protochain 17",
    "not (tcp or udp)",
    "ip and (tcp or icmp) and not host 127.0.0.1",
];

/// The expressions every link type must compile (the others name link
/// headers some link types do not have).
pub fn compiles_everywhere(expr: &str) -> bool {
    !["vlan", "mpls", "ether", "arp", "broadcast", "multicast"]
        .iter()
        .any(|w| expr.contains(w))
}

/// A captured packet: its bytes and its length on the wire.
#[derive(Clone, Debug)]
pub struct Packet {
    pub data: Vec<u8>,
    pub wire_len: u32,
}

/// A pcap file's link type, snap length, byte order and packets; `None`
/// if it is not a pcap file.
pub fn read_pcap(b: &[u8]) -> Option<(u16, u32, bool, Vec<Packet>)> {
    let magic = b.get(..4)?;
    let big = match magic {
        [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => true,
        [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => false,
        _ => return None,
    };
    let u32_at = |at: usize| -> Option<u32> {
        let w: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
        Some(if big {
            u32::from_be_bytes(w)
        } else {
            u32::from_le_bytes(w)
        })
    };
    let snaplen = u32_at(16)?;
    let link = (u32_at(20)? & 0xffff) as u16;
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= b.len() {
        let caplen = u32_at(at + 8)? as usize;
        let wire_len = u32_at(at + 12)?;
        let data = b.get(at + 16..at + 16 + caplen)?.to_vec();
        out.push(Packet { data, wire_len });
        at += 16 + caplen;
    }
    Some((link, snaplen, big, out))
}

/// A pcapng file's packets with their interface's link type (enhanced
/// packet blocks; one section).
pub fn read_pcapng(b: &[u8]) -> Vec<(u16, Packet)> {
    let mut links = Vec::new();
    let mut out = Vec::new();
    let mut big = false;
    let mut at = 0;
    let u32_at = |at: usize, big: bool| -> Option<u32> {
        let w: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
        Some(if big {
            u32::from_be_bytes(w)
        } else {
            u32::from_le_bytes(w)
        })
    };
    while at + 12 <= b.len() {
        if b[at..at + 4] == [0x0a, 0x0d, 0x0d, 0x0a] {
            big = b[at + 8..at + 12] == [0x1a, 0x2b, 0x3c, 0x4d];
            links.clear();
        }
        let Some(kind) = u32_at(at, big) else { break };
        let Some(len) = u32_at(at + 4, big).map(|l| l as usize) else {
            break;
        };
        if len < 12 || at + len > b.len() {
            break;
        }
        match kind {
            1 => {
                let lt = u32_at(at + 8, big).unwrap_or(0);
                let lt = if big { lt >> 16 } else { lt & 0xffff };
                links.push(lt as u16);
            }
            6 => {
                let iface = u32_at(at + 8, big).unwrap_or(0) as usize;
                let caplen = u32_at(at + 20, big).unwrap_or(0) as usize;
                let wire_len = u32_at(at + 24, big).unwrap_or(0);
                if let (Some(&lt), Some(data)) =
                    (links.get(iface), b.get(at + 28..at + 28 + caplen))
                {
                    out.push((
                        lt,
                        Packet {
                            data: data.to_vec(),
                            wire_len,
                        },
                    ));
                }
            }
            _ => {}
        }
        at += len;
    }
    out
}

/// A pcap file of `link` with `snaplen` in that byte order, with these
/// packets.
pub fn pcap_bytes(link: u16, snaplen: u32, big: bool, packets: &[Packet]) -> Vec<u8> {
    let w = |v: u32| {
        if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let h = |v: u16| {
        if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let mut out = Vec::new();
    out.extend(w(0xa1b2_c3d4));
    out.extend(h(2));
    out.extend(h(4));
    out.extend(w(0));
    out.extend(w(0));
    out.extend(w(snaplen));
    out.extend(w(u32::from(link)));
    for (i, p) in packets.iter().enumerate() {
        out.extend(w(1_700_000_000 + i as u32));
        out.extend(w(0));
        out.extend(w(p.data.len() as u32));
        out.extend(w(p.wire_len));
        out.extend(&p.data);
    }
    out
}

/// tests/data at the top of the workspace.
pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data")
}

/// Every packet of the sample captures (pcap and pcapng), with its link
/// type.
pub fn sample_packets() -> Vec<(u16, Packet)> {
    let mut out = Vec::new();
    let mut names: Vec<PathBuf> = std::fs::read_dir(data_dir())
        .expect("tests/data")
        .flatten()
        .map(|e| e.path())
        .collect();
    names.sort();
    for path in names {
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        if let Some((link, _, _, packets)) = read_pcap(&bytes) {
            out.extend(packets.into_iter().map(|p| (link, p)));
        } else if bytes.starts_with(&[0x0a, 0x0d, 0x0d, 0x0a]) {
            out.extend(read_pcapng(&bytes));
        }
    }
    out
}

/// An Ethernet frame's EtherType after its VLAN tags, and its payload.
pub fn ether_payload(frame: &[u8]) -> Option<(u16, &[u8])> {
    let mut at = 12;
    loop {
        let t = u16::from_be_bytes(frame.get(at..at + 2)?.try_into().ok()?);
        if matches!(t, 0x8100 | 0x88a8 | 0x9100) {
            at += 4;
        } else {
            return Some((t, frame.get(at + 2..)?));
        }
    }
}

/// An Ethernet frame as a frame of `link` would carry the same packet:
/// tags dropped, the link header of that type in front (`big`: the byte
/// order of a NULL header's address family). `None` when that link type
/// cannot carry it (RAW and NULL carry only IP). `seed` varies the
/// header fields that are not derived from the frame.
pub fn reframe(frame: &[u8], link: u16, big: bool, seed: u32) -> Option<Vec<u8>> {
    if link == ETHERNET {
        return Some(frame.to_vec());
    }
    let (ethertype, payload) = ether_payload(frame)?;
    let src = frame.get(6..12)?;
    let mut out = Vec::with_capacity(payload.len() + 20);
    let pkttype: u16 = [0, 4, 1, 3][seed as usize % 4];
    match link {
        RAW => {
            if !matches!(ethertype, 0x0800 | 0x86dd) {
                return None;
            }
        }
        SLL => {
            out.extend(pkttype.to_be_bytes());
            out.extend(1u16.to_be_bytes()); // ARPHRD_ETHER
            out.extend(6u16.to_be_bytes());
            out.extend(src);
            out.extend([0, 0]);
            out.extend(ethertype.to_be_bytes());
        }
        SLL2 => {
            out.extend(ethertype.to_be_bytes());
            out.extend([0, 0]);
            out.extend((seed % 5).to_be_bytes()); // interface index
            out.extend(1u16.to_be_bytes());
            out.push(pkttype as u8);
            out.push(6);
            out.extend(src);
            out.extend([0, 0]);
        }
        NULL => {
            let af: u32 = match ethertype {
                0x0800 => 2,
                // The BSDs' three values of AF_INET6.
                0x86dd => [24, 28, 30][seed as usize % 3],
                _ => return None,
            };
            out.extend(if big {
                af.to_be_bytes()
            } else {
                af.to_le_bytes()
            });
        }
        _ => return None,
    }
    out.extend(payload);
    Some(out)
}

/// A program for every expression that compiles for `link` (files of
/// byte order `big`, snap length 0), with its expression; the others are
/// counted in the second member.
pub fn programs(link: u16, big: bool) -> (Vec<(&'static str, bpf::Program)>, usize) {
    let mut out = Vec::new();
    let mut failed = 0;
    for &expr in EXPRESSIONS {
        match bpf::libpcap::compile_for_trace(expr, link, 0, big) {
            Ok(insns) => {
                let p = bpf::Program::new(&insns)
                    .unwrap_or_else(|e| panic!("`{expr}` on link type {link}: {e}"));
                out.push((expr, p));
            }
            Err(e) => {
                assert!(
                    link != ETHERNET && !compiles_everywhere(expr),
                    "`{expr}` does not compile for link type {link}: {e}"
                );
                failed += 1;
            }
        }
    }
    (out, failed)
}

//! Reassembly of IPv4 and IPv6 fragments, for both directions of IPsec:
//! inbound before decapsulation (RFC 4303 §3.4.1: ESP and AH cover whole
//! packets), and, in a gateway, outbound before protection (transport mode
//! carries no fragments; the kernel fragments a datagram larger than the
//! TUN MTU before the gateway sees it), the outer packet being fragmented
//! instead.
//!
//! Fragments that overlap drop their datagram (RFC 5722; the same for
//! IPv4, where overlaps are only ever an attack), exact duplicates are
//! ignored, every fragment but the last carries a multiple of 8 bytes, at
//! most 65,535 bytes. Bounded: a fixed number of datagrams at once (the
//! oldest makes room), each for at most [`TIMEOUT_SECS`]. A slot's buffers
//! are kept when it is freed, so steady traffic allocates nothing.

use std::net::IpAddr;

use wire::ipv4::{self, Ipv4Packet};
use wire::ipv6::{self, Ipv6Packet};
use wire::ipv6ext::{self, Ipv6ExtHeader, Ipv6FragmentHeader};
use wire::IpProtocol;

/// Seconds a datagram waits for its fragments.
pub const TIMEOUT_SECS: u64 = 30;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Key {
    src: IpAddr,
    dst: IpAddr,
    id: u32,
    protocol: u8,
}

/// One fragment: the unfragmentable part, where in it the next header is
/// named, the offset and the data.
struct Piece<'a> {
    key: Key,
    v6: bool,
    head: &'a [u8],
    next_at: usize,
    offset: usize,
    more: bool,
    data: &'a [u8],
}

/// Reads `p` as a fragment: `None` if it is not one or cannot be read.
fn piece(p: &[u8]) -> Option<Piece<'_>> {
    match wire::ip::version(*p.first()?) {
        ipv4::VERSION => {
            let ip = Ipv4Packet::new_checked(p).ok()?;
            let (ihl, total) = (ip.header_len(), usize::from(ip.total_len()));
            if total < ihl || p.len() < total {
                return None;
            }
            if !ip.more_frags() && ip.frag_offset() == 0 {
                return None;
            }
            Some(Piece {
                key: Key {
                    src: ip.src_addr().into(),
                    dst: ip.dst_addr().into(),
                    id: u32::from(ip.ident()),
                    protocol: ip.protocol().into(),
                },
                v6: false,
                head: &p[..ihl],
                next_at: ipv4::field::PROTOCOL,
                offset: usize::from(ip.frag_offset()),
                more: ip.more_frags(),
                data: &p[ihl..total],
            })
        }
        ipv6::VERSION => {
            let ip = Ipv6Packet::new_checked(p).ok()?;
            let total = ipv6::HEADER_LEN + usize::from(ip.payload_len());
            if p.len() < total {
                return None;
            }
            let p = &p[..total];
            let (mut next, mut at, mut off) =
                (ip.next_header(), ipv6::field::NXT_HDR, ipv6::HEADER_LEN);
            // Hop-by-hop, routing and destination options come before it.
            while matches!(
                next,
                IpProtocol::HopByHop | IpProtocol::Ipv6Route | IpProtocol::Ipv6Opts
            ) {
                let ext = Ipv6ExtHeader::new_checked(p.get(off..)?).ok()?;
                at = off + ipv6ext::field::NXT_HDR;
                next = ext.next_header();
                off += ext.header_len();
            }
            if next != IpProtocol::Ipv6Frag {
                return None;
            }
            let f = p
                .get(off..)
                .and_then(|f| Ipv6FragmentHeader::new_checked(f).ok())?;
            Some(Piece {
                key: Key {
                    src: ip.src_addr().into(),
                    dst: ip.dst_addr().into(),
                    id: f.ident(),
                    protocol: f.next_header().into(),
                },
                v6: true,
                head: &p[..off],
                next_at: at,
                offset: usize::from(f.frag_offset()),
                more: f.more_frags(),
                data: &p[off + ipv6ext::FRAGMENT_HEADER_LEN..],
            })
        }
        _ => None,
    }
}

/// Whether `p` is an IPv4 or IPv6 fragment.
pub fn is_fragment(p: &[u8]) -> bool {
    piece(p).is_some()
}

/// The protocol a fragment carries (IPv4's protocol field, or the IPv6
/// fragment header's next header); `None` if `p` is not a fragment.
pub fn fragment_protocol(p: &[u8]) -> Option<u8> {
    piece(p).map(|f| f.key.protocol)
}

#[derive(Default)]
struct Slot {
    key: Option<Key>,
    since: u64,
    /// The unfragmentable part from the first fragment, with the next
    /// header put back; empty until it comes.
    head: Vec<u8>,
    data: Vec<u8>,
    /// Byte ranges of `data` filled, sorted and disjoint.
    have: Vec<(usize, usize)>,
    /// The payload length, known from the last fragment.
    total: Option<usize>,
}

impl Slot {
    fn free(&mut self) {
        self.key = None;
        self.head.clear();
        self.data.clear();
        self.have.clear();
        self.total = None;
    }
}

/// What a fragment amounts to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// More fragments are needed.
    Held,
    /// The whole packet is in the output buffer.
    Done,
    /// Not a fragment that can be reassembled (bad length, an overlap):
    /// its datagram is dropped.
    Refused,
}

/// Fragments waiting for their datagrams.
pub struct Reassembler {
    slots: Vec<Slot>,
    /// Datagrams made whole.
    pub reassembled: u64,
    /// Datagrams whose fragments never all came (timed out or evicted).
    pub timed_out: u64,
    /// Fragments refused (bad lengths, overlaps), their datagrams dropped.
    pub refused: u64,
}

impl Reassembler {
    /// Room for `slots` datagrams at once.
    pub fn new(slots: usize) -> Reassembler {
        Reassembler {
            slots: (0..slots.max(1)).map(|_| Slot::default()).collect(),
            reassembled: 0,
            timed_out: 0,
            refused: 0,
        }
    }

    /// Adds the fragment `p` at time `now` (seconds); when it completes its
    /// datagram, the whole packet is put in `out`.
    pub fn add(&mut self, p: &[u8], now: u64, out: &mut Vec<u8>) -> Step {
        for s in &mut self.slots {
            if s.key.is_some() && now.saturating_sub(s.since) >= TIMEOUT_SECS {
                s.free();
                self.timed_out += 1;
            }
        }
        let Some(f) = piece(p) else {
            self.refused += 1;
            return Step::Refused;
        };
        let end = f.offset + f.data.len();
        let found = self.slots.iter().position(|s| s.key == Some(f.key));
        if (f.more && f.data.len() % 8 != 0) || end + f.head.len() > 65_535 {
            if let Some(i) = found {
                self.slots[i].free();
            }
            self.refused += 1;
            return Step::Refused;
        }
        let i = match found {
            Some(i) => i,
            None => {
                let i = match self.slots.iter().position(|s| s.key.is_none()) {
                    Some(i) => i,
                    None => {
                        // Full: the oldest datagram makes room.
                        let i = (0..self.slots.len())
                            .min_by_key(|&i| self.slots[i].since)
                            .unwrap_or(0);
                        self.slots[i].free();
                        self.timed_out += 1;
                        i
                    }
                };
                self.slots[i].key = Some(f.key);
                self.slots[i].since = now;
                i
            }
        };
        let s = &mut self.slots[i];
        if s.have.contains(&(f.offset, end)) {
            return Step::Held;
        }
        let overlaps = s.have.iter().any(|&(a, b)| f.offset < b && a < end);
        let bad_total = match (s.total, f.more) {
            (Some(t), _) if end > t => true,
            (Some(t), false) => t != end,
            (None, false) => s.have.last().is_some_and(|&(_, b)| b > end),
            _ => false,
        };
        if overlaps || bad_total || (f.data.is_empty() && f.more) {
            s.free();
            self.refused += 1;
            return Step::Refused;
        }
        if !f.more {
            s.total = Some(end);
        }
        if f.offset == 0 {
            s.head.clear();
            s.head.extend_from_slice(f.head);
            if f.v6 {
                s.head[f.next_at] = f.key.protocol;
            }
        }
        if s.data.len() < end {
            s.data.resize(end, 0);
        }
        s.data[f.offset..end].copy_from_slice(f.data);
        let at = s.have.partition_point(|&(a, _)| a < f.offset);
        s.have.insert(at, (f.offset, end));
        let mut reach = 0;
        let contiguous = s.have.iter().all(|&(a, b)| {
            let ok = a == reach;
            reach = b;
            ok
        });
        if !(contiguous && s.total == Some(reach)) || s.head.is_empty() {
            return Step::Held;
        }
        out.clear();
        out.extend_from_slice(&s.head);
        let hl = out.len();
        out.extend_from_slice(&s.data[..reach]);
        if f.v6 {
            // The fragment header is gone: the headers before it name what
            // it carried.
            let pl = (out.len() - 40) as u16;
            out[4..6].copy_from_slice(&pl.to_be_bytes());
        } else {
            let total = out.len() as u16;
            out[2..4].copy_from_slice(&total.to_be_bytes());
            out[6] &= 0x40;
            out[7] = 0;
            wire::ipv4::Ipv4Packet::new_unchecked(&mut out[..hl]).fill_checksum();
        }
        s.free();
        self.reassembled += 1;
        Step::Done
    }

    /// Datagrams waiting for more fragments.
    pub fn waiting(&self) -> usize {
        self.slots.iter().filter(|s| s.key.is_some()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Datagrams at once in these tests.
    const SLOTS: usize = 16;

    use crate::fuzzing::{ipv4_packet as v4, ipv6_packet as v6};

    /// IPv4 fragment of `whole` (from `v4`): bytes `from..to` of its
    /// payload.
    fn frag4(whole: &[u8], from: usize, to: usize, more: bool) -> Vec<u8> {
        let mut f = whole[..20].to_vec();
        f.extend_from_slice(&whole[20 + from..20 + to]);
        let len = f.len() as u16;
        f[2..4].copy_from_slice(&len.to_be_bytes());
        let flags = (from / 8) as u16 | if more { 0x2000 } else { 0 };
        f[6..8].copy_from_slice(&flags.to_be_bytes());
        f
    }

    #[test]
    fn fragments_in_any_order_give_the_datagram_once() {
        let whole = v4(17, false, &[], 100);
        let mut r = Reassembler::new(SLOTS);
        let mut out = Vec::new();
        let (a, b, c) = (
            frag4(&whole, 0, 40, true),
            frag4(&whole, 40, 80, true),
            frag4(&whole, 80, 100, false),
        );
        assert!(is_fragment(&a) && is_fragment(&c) && !is_fragment(&whole));
        assert_eq!(r.add(&c, 0, &mut out), Step::Held);
        assert_eq!(r.add(&a, 0, &mut out), Step::Held);
        // An exact duplicate is ignored.
        assert_eq!(r.add(&a, 0, &mut out), Step::Held);
        assert_eq!(r.add(&b, 0, &mut out), Step::Done);
        let mut want = whole.clone();
        wire::ipv4::Ipv4Packet::new_unchecked(&mut want[..20]).fill_checksum();
        assert_eq!(out, want);
        assert_eq!((r.reassembled, r.waiting()), (1, 0));
    }

    #[test]
    fn overlaps_bad_lengths_and_stale_datagrams_are_dropped() {
        let whole = v4(17, false, &[], 100);
        let mut r = Reassembler::new(SLOTS);
        let mut out = Vec::new();
        assert_eq!(r.add(&frag4(&whole, 0, 40, true), 0, &mut out), Step::Held);
        assert_eq!(
            r.add(&frag4(&whole, 32, 48, true), 0, &mut out),
            Step::Refused
        );
        assert_eq!(r.waiting(), 0);
        // Not a multiple of 8 before the end; past 65,535 bytes.
        assert_eq!(
            r.add(&frag4(&whole, 0, 41, true), 0, &mut out),
            Step::Refused
        );
        let mut far = frag4(&whole, 0, 40, false);
        far[6..8].copy_from_slice(&0x1fffu16.to_be_bytes());
        assert_eq!(r.add(&far, 0, &mut out), Step::Refused);
        // A last fragment that ends before data already held.
        assert_eq!(r.add(&frag4(&whole, 40, 80, true), 0, &mut out), Step::Held);
        assert_eq!(
            r.add(&frag4(&whole, 0, 16, false), 0, &mut out),
            Step::Refused
        );
        assert_eq!(r.refused, 4);
        // Timed out, and evicted when every slot is taken.
        assert_eq!(r.add(&frag4(&whole, 0, 40, true), 0, &mut out), Step::Held);
        assert_eq!(
            r.add(&frag4(&whole, 80, 100, false), TIMEOUT_SECS, &mut out),
            Step::Held
        );
        assert_eq!(r.timed_out, 1);
        let mut r = Reassembler::new(SLOTS);
        for id in 0..=SLOTS as u16 {
            let mut f = frag4(&whole, 0, 40, true);
            f[4..6].copy_from_slice(&id.to_be_bytes());
            assert_eq!(r.add(&f, u64::from(id), &mut out), Step::Held);
        }
        assert_eq!((r.waiting(), r.timed_out), (SLOTS, 1));
    }

    #[test]
    fn ipv6_fragments_lose_their_header_and_keep_the_others() {
        let whole = v6(60, &[17, 0, 1, 4, 0, 0, 0, 0], 64);
        let frag = |from: usize, to: usize, more: bool| {
            let mut f = whole[..40].to_vec();
            f[6] = 44;
            f.extend_from_slice(&[60, 0]);
            f.extend_from_slice(&((from as u16) | u16::from(more)).to_be_bytes());
            f.extend_from_slice(&7u32.to_be_bytes());
            f.extend_from_slice(&whole[40 + from..40 + to]);
            let pl = (f.len() - 40) as u16;
            f[4..6].copy_from_slice(&pl.to_be_bytes());
            f
        };
        let mut r = Reassembler::new(SLOTS);
        let mut out = Vec::new();
        assert_eq!(r.add(&frag(32, 72, false), 0, &mut out), Step::Held);
        assert_eq!(r.add(&frag(0, 32, true), 0, &mut out), Step::Done);
        assert_eq!(out, whole);
    }

    #[test]
    fn no_input_makes_it_panic() {
        // Every cut and many flips of real fragments.
        let whole = v4(17, false, &[], 200);
        let six = v6(0, &[44, 0, 1, 4, 0, 0, 0, 0, 17, 0, 0, 9, 0, 0, 0, 1], 64);
        let mut r = Reassembler::new(SLOTS);
        let mut out = Vec::new();
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        for base in [
            frag4(&whole, 0, 96, true),
            frag4(&whole, 96, 200, false),
            six,
        ] {
            for cut in 0..base.len() {
                r.add(&base[..cut], 0, &mut out);
                is_fragment(&base[..cut]);
            }
            for _ in 0..2000 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let mut p = base.clone();
                let i = (seed as usize) % p.len();
                p[i] ^= (seed >> 32) as u8 | 1;
                r.add(&p, seed % 40, &mut out);
            }
        }
    }
}

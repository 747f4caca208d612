//! Reassembly of IPv4 and IPv6 fragments before decapsulation (RFC 4303
//! §3.4.1: ESP and AH are applied to whole packets, so a fragmented one is
//! put back together first).
//!
//! Bounded: at most [`MAX_PENDING`] datagrams wait at once, each at most
//! 65,535 bytes, each for at most [`TIMEOUT_SECS`] of engine time. Fragments
//! that overlap are refused and their datagram dropped (RFC 5722; the same
//! for IPv4, where overlaps are only ever an attack); exact duplicates are
//! ignored.

use std::collections::HashMap;
use std::net::IpAddr;

use crate::ip::{self, Layout, Malformed, DEST_OPTS, FRAGMENT, HOP_BY_HOP, ROUTING};
use crate::reject::Reject;

pub(crate) const MAX_PENDING: usize = 64;
pub(crate) const TIMEOUT_SECS: u64 = 30;

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    src: IpAddr,
    dst: IpAddr,
    id: u32,
    protocol: u8,
}

struct Pending {
    since: u64,
    /// The unfragmentable part (IP header, and IPv6 headers before the
    /// fragment header) from the first fragment, next header fixed.
    head: Option<Vec<u8>>,
    data: Vec<u8>,
    /// Byte ranges of `data` filled, kept sorted and disjoint.
    have: Vec<(usize, usize)>,
    /// The datagram's payload length, known from the last fragment.
    total: Option<usize>,
}

/// What a fragment amounts to.
pub(crate) enum Step {
    /// More fragments are needed.
    Held,
    /// The whole packet.
    Done(Vec<u8>),
}

#[derive(Default)]
pub(crate) struct Reassembler {
    pending: HashMap<Key, Pending>,
    pub(crate) reassembled: u64,
    pub(crate) timed_out: u64,
}

/// One fragment's place: the unfragmentable part, the offset and the data.
struct Piece<'a> {
    key: Key,
    head: &'a [u8],
    /// Where, in `head`, the byte naming the next header is.
    next_at: usize,
    next: u8,
    offset: usize,
    more: bool,
    data: &'a [u8],
}

fn piece<'a>(p: &'a [u8], l: &Layout) -> Result<Piece<'a>, Malformed> {
    let p = &p[..l.total_len];
    if !l.v6 {
        let ihl = usize::from(p[0] & 0x0f) * 4;
        let frag = u16::from_be_bytes([p[6], p[7]]);
        return Ok(Piece {
            key: Key {
                src: l.src,
                dst: l.dst,
                id: u32::from(u16::from_be_bytes([p[4], p[5]])),
                protocol: p[9],
            },
            head: &p[..ihl],
            next_at: 9,
            next: p[9],
            offset: usize::from(frag & 0x1fff) * 8,
            more: frag & 0x2000 != 0,
            data: &p[ihl..],
        });
    }
    let mut next = p[6];
    let mut at = 6;
    let mut off = 40;
    while matches!(next, HOP_BY_HOP | ROUTING | DEST_OPTS) {
        let len = (usize::from(*p.get(off + 1).ok_or(Malformed::Truncated)?) + 1) * 8;
        at = off;
        next = p[off];
        off += len;
    }
    if next != FRAGMENT || off + 8 > p.len() {
        return Err(Malformed::BadHeader);
    }
    let f = &p[off..off + 8];
    let fo = u16::from_be_bytes([f[2], f[3]]);
    Ok(Piece {
        key: Key {
            src: l.src,
            dst: l.dst,
            id: u32::from_be_bytes([f[4], f[5], f[6], f[7]]),
            protocol: f[0],
        },
        head: &p[..off],
        next_at: at,
        next: f[0],
        offset: usize::from(fo >> 3) * 8,
        more: fo & 1 != 0,
        data: &p[off + 8..],
    })
}

impl Reassembler {
    /// The protocol a fragment carries (IPv4's protocol field, or the
    /// IPv6 fragment header's next header), to decide whether to keep it.
    pub(crate) fn protocol_of(p: &[u8], l: &Layout) -> Option<u8> {
        piece(p, l).ok().map(|x| x.key.protocol)
    }

    /// Adds the fragment `p` at engine time `now`.
    pub(crate) fn add(&mut self, p: &[u8], l: &Layout, now: u64) -> Result<Step, Reject> {
        self.expire(now);
        let f = piece(p, l)?;
        let end = f.offset + f.data.len();
        // Every fragment but the last carries a multiple of 8 bytes.
        if (f.more && f.data.len() % 8 != 0) || end + f.head.len() > 65_535 {
            self.pending.remove(&f.key);
            return Err(Reject::Fragment);
        }
        if !self.pending.contains_key(&f.key) && self.pending.len() >= MAX_PENDING {
            // Full: the oldest datagram makes room.
            if let Some(k) = self
                .pending
                .iter()
                .min_by_key(|(_, v)| v.since)
                .map(|(k, _)| *k)
            {
                self.pending.remove(&k);
                self.timed_out += 1;
            }
        }
        let d = self.pending.entry(f.key).or_insert_with(|| Pending {
            since: now,
            head: None,
            data: Vec::new(),
            have: Vec::new(),
            total: None,
        });
        // Exact duplicate: ignore; any other overlap: drop the datagram.
        if d.have.contains(&(f.offset, end)) {
            return Ok(Step::Held);
        }
        let overlaps = d.have.iter().any(|&(a, b)| f.offset < b && a < end);
        let bad_total = match (d.total, f.more) {
            (Some(t), _) if end > t => true,
            (Some(t), false) if t != end => true,
            _ => false,
        };
        if overlaps || bad_total || f.data.is_empty() && f.more {
            self.pending.remove(&f.key);
            return Err(Reject::Fragment);
        }
        if !f.more {
            d.total = Some(end);
        }
        if f.offset == 0 {
            let mut h = f.head.to_vec();
            h[f.next_at] = f.next;
            d.head = Some(h);
        }
        if d.data.len() < end {
            d.data.resize(end, 0);
        }
        d.data[f.offset..end].copy_from_slice(f.data);
        let i = d.have.partition_point(|&(a, _)| a < f.offset);
        d.have.insert(i, (f.offset, end));
        let complete = match d.total {
            Some(t) => {
                let mut at = 0;
                d.have.iter().all(|&(a, b)| {
                    let ok = a == at;
                    at = b;
                    ok
                }) && at == t
            }
            None => false,
        };
        if !complete || d.head.is_none() {
            return Ok(Step::Held);
        }
        let Some(d) = self.pending.remove(&f.key) else {
            return Ok(Step::Held);
        };
        let head = d.head.unwrap_or_default();
        let mut out = head;
        let hl = out.len();
        out.extend_from_slice(&d.data);
        if l.v6 {
            ip::fix_lengths(&mut out, true, 0);
        } else {
            out[6] = 0;
            out[7] = 0;
            ip::fix_lengths(&mut out, false, hl);
        }
        self.reassembled += 1;
        Ok(Step::Done(out))
    }

    fn expire(&mut self, now: u64) {
        let before = self.pending.len();
        self.pending
            .retain(|_, d| now.saturating_sub(d.since) < TIMEOUT_SECS);
        self.timed_out += (before - self.pending.len()) as u64;
    }

    /// Datagrams waiting for more fragments.
    pub(crate) fn waiting(&self) -> usize {
        self.pending.len()
    }
}

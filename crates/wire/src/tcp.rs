//! TCP headers (RFC 9293 §3.1), options kept as bytes, and the checksum over
//! the IPv4 (RFC 9293 §3.1) or IPv6 (RFC 8200 §8.1) pseudo-header.

use crate::checksum;
use crate::error::{need, Error, Layer, Result};
use crate::ip::IpProtocol;
use crate::{be16, be32};
use core::fmt;
use core::net::IpAddr;
use core::ops::BitOr;

/// Field offsets within the header.
pub mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const SEQ: Range<usize> = 4..8;
    pub const ACK: Range<usize> = 8..12;
    pub const FLAGS: Range<usize> = 12..14;
    pub const WINDOW: Range<usize> = 14..16;
    pub const CHECKSUM: Range<usize> = 16..18;
    pub const URGENT: Range<usize> = 18..20;
}

/// Length of a header without options.
pub const HEADER_LEN: usize = 20;
/// Longest options field (data offset 15).
pub const MAX_OPTIONS_LEN: usize = 40;

/// TCP control bits: the low 9 bits of header bytes 12–13.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct TcpFlags(pub u16);

impl TcpFlags {
    pub const FIN: TcpFlags = TcpFlags(0x001);
    pub const SYN: TcpFlags = TcpFlags(0x002);
    pub const RST: TcpFlags = TcpFlags(0x004);
    pub const PSH: TcpFlags = TcpFlags(0x008);
    pub const ACK: TcpFlags = TcpFlags(0x010);
    pub const URG: TcpFlags = TcpFlags(0x020);
    pub const ECE: TcpFlags = TcpFlags(0x040);
    pub const CWR: TcpFlags = TcpFlags(0x080);
    /// AE, formerly NS (RFC 3540, now RFC 9768 "AccECN").
    pub const AE: TcpFlags = TcpFlags(0x100);

    /// The raw bits.
    pub const fn bits(self) -> u16 {
        self.0
    }

    /// Flags from raw bits; bits above the nine defined ones are dropped.
    pub const fn from_bits_truncate(bits: u16) -> TcpFlags {
        TcpFlags(bits & 0x1ff)
    }

    /// Whether every flag in `other` is set.
    pub const fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether any flag in `other` is set.
    pub const fn intersects(self, other: TcpFlags) -> bool {
        self.0 & other.0 != 0
    }

    /// Whether no flag is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl BitOr for TcpFlags {
    type Output = TcpFlags;
    fn bitor(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | rhs.0)
    }
}

/// tcpdump's notation (print-tcp.c, `tcp_flag_values`): the letters in the
/// order F S R P . U E W e inside brackets, `[none]` when no flag is set.
impl fmt::Display for TcpFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const LETTERS: [(TcpFlags, char); 9] = [
            (TcpFlags::FIN, 'F'),
            (TcpFlags::SYN, 'S'),
            (TcpFlags::RST, 'R'),
            (TcpFlags::PSH, 'P'),
            (TcpFlags::ACK, '.'),
            (TcpFlags::URG, 'U'),
            (TcpFlags::ECE, 'E'),
            (TcpFlags::CWR, 'W'),
            (TcpFlags::AE, 'e'),
        ];
        if self.is_empty() {
            return f.write_str("[none]");
        }
        let mut buf = [0u8; 11];
        let mut n = 0;
        buf[n] = b'[';
        n += 1;
        for (flag, c) in LETTERS {
            if self.contains(flag) {
                buf[n] = c as u8;
                n += 1;
            }
        }
        buf[n] = b']';
        n += 1;
        f.write_str(core::str::from_utf8(&buf[..n]).map_err(|_| fmt::Error)?)
    }
}

/// A zero-copy view of a TCP segment.
#[derive(Debug, Clone, Copy)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Wraps a buffer without checking it.
    #[inline]
    pub const fn new_unchecked(buffer: T) -> Self {
        TcpPacket { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks that the data offset is at least 5 and the whole header with
    /// its options is in the buffer.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        need(Layer::Tcp, b, HEADER_LEN)?;
        let hl = self.header_len();
        if hl < HEADER_LEN {
            return Err(Error::bad_length(Layer::Tcp, hl, HEADER_LEN));
        }
        need(Layer::Tcp, b, hl)
    }

    /// Returns the wrapped buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::SRC_PORT])
    }
    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::DST_PORT])
    }
    /// Sequence number.
    #[inline]
    pub fn seq_number(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::SEQ])
    }
    /// Acknowledgment number.
    #[inline]
    pub fn ack_number(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::ACK])
    }
    /// Header length in bytes (data offset × 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::FLAGS.start] >> 4) * 4
    }
    /// Control bits.
    #[inline]
    pub fn flags(&self) -> TcpFlags {
        TcpFlags::from_bits_truncate(be16(&self.buffer.as_ref()[field::FLAGS]))
    }
    /// Window.
    #[inline]
    pub fn window_len(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::WINDOW])
    }
    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::CHECKSUM])
    }
    /// Urgent pointer.
    #[inline]
    pub fn urgent_at(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::URGENT])
    }
    /// Options bytes.
    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }
    /// The timestamps option (RFC 7323 §3), `(TSval, TSecr)`, if the
    /// options hold a well-formed one.
    pub fn timestamps(&self) -> Option<(u32, u32)> {
        timestamps_in(self.options())
    }
    /// Segment data.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }

    /// Whether the checksum over the pseudo-header and the whole buffer (the
    /// segment, no trailing padding) is right.
    #[inline]
    pub fn verify_checksum(&self, src: &IpAddr, dst: &IpAddr) -> bool {
        let b = self.buffer.as_ref();
        let ph = checksum::pseudo_header(src, dst, IpProtocol::Tcp, b.len() as u32);
        checksum::fold(ph + checksum::sum(b)) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, v: u16) {
        self.buffer.as_mut()[field::SRC_PORT].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        self.buffer.as_mut()[field::DST_PORT].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the sequence number.
    pub fn set_seq_number(&mut self, v: u32) {
        self.buffer.as_mut()[field::SEQ].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the acknowledgment number.
    pub fn set_ack_number(&mut self, v: u32) {
        self.buffer.as_mut()[field::ACK].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the data offset (from a header length in bytes) and the flags.
    pub fn set_header_len_and_flags(&mut self, header_len: usize, flags: TcpFlags) {
        let v = ((header_len as u16 / 4) << 12) | (flags.bits() & 0x1ff);
        self.buffer.as_mut()[field::FLAGS].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the window.
    pub fn set_window_len(&mut self, v: u16) {
        self.buffer.as_mut()[field::WINDOW].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the urgent pointer.
    pub fn set_urgent_at(&mut self, v: u16) {
        self.buffer.as_mut()[field::URGENT].copy_from_slice(&v.to_be_bytes());
    }
    /// Computes the checksum over the pseudo-header and the whole buffer,
    /// which must hold exactly the segment (header and data).
    pub fn fill_checksum(&mut self, src: &IpAddr, dst: &IpAddr) {
        self.set_checksum(0);
        let b = self.buffer.as_ref();
        let ph = checksum::pseudo_header(src, dst, IpProtocol::Tcp, b.len() as u32);
        let c = !checksum::fold(ph + checksum::sum(b));
        self.set_checksum(c);
    }
}

/// A parsed TCP header (the data is not part of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TcpRepr<'a> {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq_number: u32,
    pub ack_number: u32,
    pub flags: TcpFlags,
    pub window_len: u16,
    pub urgent_at: u16,
    /// Options, a multiple of 4 bytes, at most 40.
    pub options: &'a [u8],
}

impl<'a> TcpRepr<'a> {
    /// Reads a header; the checksum is not verified (see
    /// [`TcpPacket::verify_checksum`]).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &TcpPacket<&'a T>) -> Result<TcpRepr<'a>> {
        p.check_len()?;
        let b: &'a [u8] = p.buffer.as_ref();
        Ok(TcpRepr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            seq_number: p.seq_number(),
            ack_number: p.ack_number(),
            flags: p.flags(),
            window_len: p.window_len(),
            urgent_at: p.urgent_at(),
            options: &b[HEADER_LEN..p.header_len()],
        })
    }

    /// Header bytes [`emit`](Self::emit) writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.options.len()
    }

    /// Writes the header at the start of `buf` with a zero checksum; write the
    /// data after it, then call [`TcpPacket::fill_checksum`] on the segment.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        let hl = self.buffer_len();
        if self.options.len() & 3 != 0 || self.options.len() > MAX_OPTIONS_LEN {
            return Err(Error::bad_length(Layer::Tcp, hl, HEADER_LEN));
        }
        need(Layer::Tcp, buf, hl)?;
        let mut p = TcpPacket::new_unchecked(&mut buf[..hl]);
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_seq_number(self.seq_number);
        p.set_ack_number(self.ack_number);
        p.set_header_len_and_flags(hl, self.flags);
        p.set_window_len(self.window_len);
        p.set_checksum(0);
        p.set_urgent_at(self.urgent_at);
        buf[HEADER_LEN..hl].copy_from_slice(self.options);
        Ok(())
    }
}

impl fmt::Display for TcpRepr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tcp {} > {}: Flags {}, seq {}, ack {}, win {}",
            self.src_port,
            self.dst_port,
            self.flags,
            self.seq_number,
            self.ack_number,
            self.window_len
        )
    }
}

/// The copies of one handshake's SYN-ACK a server sent (the first and
/// up to three retransmissions, 1 + 2 + 4 s after it), to tell which one
/// the client's ACK answers: the copy whose TSval the ACK echoes
/// (RFC 7323), or, without timestamps, the only copy; with several
/// copies and nothing to tell them apart, none (Karn's rule), never the
/// last one by guess.
#[derive(Clone, Copy, Debug, Default)]
pub struct SynAckCopies {
    /// (time, TSval) of each copy remembered.
    copies: [(u64, Option<u32>); SynAckCopies::KEPT],
    /// Copies sent (saturating; more than are remembered).
    sent: u8,
    /// The SYN-ACK's sequence number (the latest copy's).
    seq: u32,
}

/// Which SYN-ACK copy an ACK answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answered {
    /// The ACK does not acknowledge this SYN-ACK (no copy sent, or
    /// another acknowledgement number).
    No,
    /// The copy sent at this time.
    Copy(u64),
    /// It answers one of several copies, but which cannot be told.
    Ambiguous,
}

impl SynAckCopies {
    /// SYN-ACK copies remembered.
    pub const KEPT: usize = 4;

    /// A copy with sequence number `seq` and `timestamps` went out at `ts`.
    pub fn sent(&mut self, ts: u64, seq: u32, timestamps: Option<(u32, u32)>) {
        let n = usize::from(self.sent);
        if n < Self::KEPT {
            self.copies[n] = (ts, timestamps.map(|t| t.0));
        }
        self.sent = self.sent.saturating_add(1);
        self.seq = seq;
    }

    /// Copies sent so far.
    pub fn count(&self) -> u8 {
        self.sent
    }

    /// Which copy an ACK with acknowledgement number `ack` and
    /// `timestamps` answers.
    pub fn answered(&self, ack: u32, timestamps: Option<(u32, u32)>) -> Answered {
        if self.sent == 0 || ack != self.seq.wrapping_add(1) {
            return Answered::No;
        }
        let copies = &self.copies[..usize::from(self.sent).min(Self::KEPT)];
        let at = match timestamps {
            Some((_, ecr)) if copies.iter().any(|c| c.1.is_some()) => {
                copies.iter().rev().find(|c| c.1 == Some(ecr)).map(|c| c.0)
            }
            _ if self.sent == 1 => Some(copies[0].0),
            _ => None,
        };
        at.map_or(Answered::Ambiguous, Answered::Copy)
    }
}

/// Option kinds (RFC 9293 §3.2, RFC 7323).
mod option {
    pub const END: u8 = 0;
    pub const NOP: u8 = 1;
    pub const TIMESTAMPS: u8 = 8;
    pub const TIMESTAMPS_LEN: usize = 10;
}

/// Walks an options field for the timestamps option: `(TSval, TSecr)`.
/// A malformed list (a length under 2 or past the end) ends the walk with
/// nothing, as a receiver would drop such options.
pub fn timestamps_in(opts: &[u8]) -> Option<(u32, u32)> {
    let mut i = 0;
    while i < opts.len() {
        match opts[i] {
            option::END => return None,
            option::NOP => i += 1,
            kind => {
                let len = usize::from(*opts.get(i + 1)?);
                if len < 2 || i + len > opts.len() {
                    return None;
                }
                if kind == option::TIMESTAMPS && len == option::TIMESTAMPS_LEN {
                    let o = &opts[i + 2..i + 10];
                    return Some((be32(&o[0..4]), be32(&o[4..8])));
                }
                i += len;
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};

    // SYN from 127.0.0.1:46974 to :18080 captured with tcpdump on Linux
    // loopback (ours); options MSS 65495, SACK permitted, timestamps, WS 10.
    // Loopback leaves the checksum partial (offloaded), so it is not checked.
    const LO_SYN: [u8; 40] = [
        0xb7, 0x7e, 0x46, 0xa0, 0xd1, 0x80, 0xd4, 0x94, 0, 0, 0, 0, 0xa0, 0x02, 0xff, 0xd7, 0xfe,
        0x30, 0, 0, 0x02, 0x04, 0xff, 0xd7, 0x04, 0x02, 0x08, 0x0a, 0x75, 0x6c, 0x6b, 0x7b, 0, 0,
        0, 0, 0x01, 0x03, 0x03, 0x0a,
    ];

    #[test]
    fn parse_syn() {
        let p = TcpPacket::new_checked(&LO_SYN[..]).unwrap();
        let r = TcpRepr::parse(&p).unwrap();
        assert_eq!(
            (r.src_port, r.dst_port, r.seq_number, r.window_len),
            (46974, 18080, 0xd180d494, 65495)
        );
        assert_eq!(r.flags, TcpFlags::SYN);
        assert_eq!(r.options.len(), 20);
        assert_eq!(r.options[..4], [2, 4, 0xff, 0xd7]);
        let mut b = [0u8; 40];
        r.emit(&mut b).unwrap();
        b[16..18].copy_from_slice(&LO_SYN[16..18]);
        assert_eq!(b, LO_SYN);
        assert_eq!(
            r.to_string(),
            "tcp 46974 > 18080: Flags [S], seq 3514881172, ack 0, win 65495"
        );
    }

    #[test]
    fn the_timestamps_option_is_found_and_malformed_lists_give_none() {
        // The captured SYN: TSval 0x756c6b7b, TSecr 0.
        let p = TcpPacket::new_checked(&LO_SYN[..]).unwrap();
        assert_eq!(p.timestamps(), Some((0x756c_6b7b, 0)));
        // NOP NOP then timestamps, as Linux writes it on data segments.
        let o = [1, 1, 8, 10, 0, 0, 0, 5, 0, 0, 0, 7];
        assert_eq!(timestamps_in(&o), Some((5, 7)));
        // End of list first, a length of 0 or 1, a length past the end,
        // a timestamps option of the wrong length: none, and no panic.
        assert_eq!(timestamps_in(&[0, 8, 10, 0, 0, 0, 5, 0, 0, 0, 7]), None);
        assert_eq!(timestamps_in(&[2, 0, 8, 10]), None);
        assert_eq!(timestamps_in(&[2, 1]), None);
        assert_eq!(timestamps_in(&[8, 10, 0, 0]), None);
        assert_eq!(timestamps_in(&[8, 6, 0, 0, 0, 5]), None);
        assert_eq!(timestamps_in(&[2]), None);
        for cut in 0..o.len() {
            assert_eq!(timestamps_in(&o[..cut]), None);
        }
    }

    #[test]
    fn an_ack_is_matched_to_the_synack_copy_it_echoes() {
        let mut c = SynAckCopies::default();
        assert_eq!(c.answered(1, None), Answered::No);
        c.sent(1_000, 7000, Some((50, 9)));
        assert_eq!(c.answered(7001, None), Answered::Copy(1_000));
        assert_eq!(c.answered(7002, None), Answered::No);
        c.sent(3_001_000, 7000, Some((80, 9)));
        // The ACK echoes the first copy's TSval: the round trip began there
        // (the retransmission crossed the ACK).
        assert_eq!(c.answered(7001, Some((1, 50))), Answered::Copy(1_000));
        assert_eq!(c.answered(7001, Some((1, 80))), Answered::Copy(3_001_000));
        // An echo of no copy, or no timestamps with two copies: no sample.
        assert_eq!(c.answered(7001, Some((1, 66))), Answered::Ambiguous);
        assert_eq!(c.answered(7001, None), Answered::Ambiguous);
        let mut plain = SynAckCopies::default();
        plain.sent(5, 1, None);
        plain.sent(9, 1, None);
        assert_eq!(plain.answered(2, Some((1, 1))), Answered::Ambiguous);
        // Copies past the kept ones are counted, not remembered.
        for i in 0..10 {
            plain.sent(10 + i, 1, None);
        }
        assert_eq!(plain.count(), 12);
        assert_eq!(plain.answered(2, None), Answered::Ambiguous);
    }

    #[test]
    fn flags_print_like_tcpdump() {
        let s = |f: TcpFlags| f.to_string();
        assert_eq!(s(TcpFlags::SYN | TcpFlags::ACK), "[S.]");
        assert_eq!(s(TcpFlags::PSH | TcpFlags::ACK), "[P.]");
        assert_eq!(s(TcpFlags::RST), "[R]");
        assert_eq!(s(TcpFlags::FIN | TcpFlags::ACK), "[F.]");
        assert_eq!(s(TcpFlags::SYN | TcpFlags::ECE | TcpFlags::CWR), "[SEW]");
        assert_eq!(s(TcpFlags(0x1ff)), "[FSRP.UEWe]");
        assert_eq!(s(TcpFlags(0)), "[none]");
    }

    #[test]
    fn checksum_v4_and_v6() {
        let mut seg = [0u8; 24];
        let r = TcpRepr {
            src_port: 1,
            dst_port: 80,
            seq_number: 5,
            ack_number: 0,
            flags: TcpFlags::SYN,
            window_len: 1024,
            urgent_at: 0,
            options: &[],
        };
        r.emit(&mut seg).unwrap();
        seg[20..].copy_from_slice(b"data");
        for (s, d) in [
            (
                IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
                IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            ),
            (
                IpAddr::V6(Ipv6Addr::LOCALHOST),
                IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1)),
            ),
        ] {
            let mut p = TcpPacket::new_checked(&mut seg[..]).unwrap();
            p.fill_checksum(&s, &d);
            assert!(p.verify_checksum(&s, &d));
            assert!(!p.verify_checksum(&d, &IpAddr::V4(Ipv4Addr::BROADCAST)));
        }
    }

    #[test]
    fn bad_data_offset() {
        let mut b = LO_SYN;
        b[12] = 0x40;
        assert_eq!(
            TcpPacket::new_checked(&b[..]).unwrap_err().to_string(),
            "tcp header malformed at offset 0: length field gives 16 bytes, at least 20 needed"
        );
    }
}

//! A packet as the stages see it: a frame with its link type and time.

use trace::{Packet, PacketKind, TsResolution};
use wire::LinkType;

/// A captured frame with its link type and time; what every source yields
/// in the end, whatever its own record type.
#[derive(Clone, Copy, Debug)]
pub struct Frame<'a> {
    pub link_type: LinkType,
    pub ts_ns: u64,
    /// Length on the wire.
    pub orig_len: u32,
    /// The bytes captured.
    pub data: &'a [u8],
}

impl<'a> Frame<'a> {
    /// The frame of a trace's packet, its time in nanoseconds.
    #[inline(always)]
    pub fn of(p: &Packet<'a>) -> Frame<'a> {
        Frame {
            link_type: p.link_type,
            ts_ns: p.ts_nanos(),
            orig_len: p.orig_len,
            data: p.data,
        }
    }

    /// The frame as a trace packet of interface 0 with nanosecond times
    /// (what a capture or a generator writes).
    pub fn packet(&self) -> Packet<'a> {
        Packet {
            interface: 0,
            link_type: self.link_type,
            ts: self.ts_ns,
            tsresol: TsResolution::NANO,
            orig_len: self.orig_len,
            data: self.data,
            options: &[],
            kind: PacketKind::Pcap,
        }
    }
}

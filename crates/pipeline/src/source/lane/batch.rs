//! A ring block's packets as the consumer gets them: copied into a
//! [`Batch`] of records (the block goes straight back to the kernel), or
//! [`Held`] where the kernel wrote them, read in place. A VLAN tag the
//! kernel moved into the block's metadata is put back into the frame
//! either way, so the consumer sees the frame as it was on the wire.

use capture::ring::{BlockCursor, OwnedBlock, RingPacket};

/// Bytes of a record header inside a batch: ts_ns u64, orig_len u32, caplen u32.
pub(super) const RECORD_HEADER: usize = 16;

/// Packets copied out of one ring block.
#[derive(Debug, Default)]
pub struct Batch {
    pub(super) buf: Vec<u8>,
    pub(super) packets: u32,
    pub(super) watermark_ns: Option<u64>,
}

/// One packet of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchPacket<'a> {
    /// Nanoseconds since the epoch.
    pub ts_ns: u64,
    /// Length on the wire, a re-inserted VLAN tag included.
    pub orig_len: u32,
    /// Captured bytes.
    pub data: &'a [u8],
}

impl Batch {
    /// Packets in the batch.
    pub fn len(&self) -> u32 {
        self.packets
    }

    /// Whether the batch holds no packet.
    pub fn is_empty(&self) -> bool {
        self.packets == 0
    }

    /// Bytes the batch holds: its packets' captured bytes, plus 16 bytes of
    /// record header each. This is what counts against
    /// [`PipelineConfig::queue_bytes`](super::PipelineConfig::queue_bytes).
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// On an empty heartbeat batch (see [`PipelineConfig::heartbeat`](super::PipelineConfig::heartbeat)):
    /// every packet the kernel stamped before this time (nanoseconds since
    /// the epoch) was in an earlier batch or counted as dropped. A consumer
    /// that works in time intervals (the profiler) can close them on time
    /// even when traffic stops.
    pub fn watermark_ns(&self) -> Option<u64> {
        self.watermark_ns
    }

    pub(super) fn clear(&mut self) {
        self.buf.clear();
        self.packets = 0;
        self.watermark_ns = None;
    }

    /// Appends a ring packet, putting back the VLAN tag the kernel removed
    /// (after the two MAC addresses, as it stood on the wire).
    pub(super) fn push(&mut self, p: &RingPacket) {
        let tag = tag_of(p);
        let extra = if tag.is_some() { 4 } else { 0 };
        let caplen = p.data.len() as u32 + extra;
        self.buf.extend_from_slice(&p.ts_ns.to_le_bytes());
        self.buf
            .extend_from_slice(&p.orig_len.saturating_add(extra).to_le_bytes());
        self.buf.extend_from_slice(&caplen.to_le_bytes());
        put_frame(p, tag, &mut self.buf);
        self.packets += 1;
    }

    /// The packets, in arrival order.
    pub fn iter(&self) -> impl Iterator<Item = BatchPacket<'_>> {
        let mut at = 0usize;
        std::iter::from_fn(move || {
            let (p, next) = self.packet_at(at)?;
            at = next;
            Some(p)
        })
    }

    /// The packet whose record starts at byte `at`, and where the next starts.
    pub(super) fn packet_at(&self, at: usize) -> Option<(BatchPacket<'_>, usize)> {
        let buf = &self.buf;
        let h = buf.get(at..at.checked_add(RECORD_HEADER)?)?;
        let ts_ns = u64::from_le_bytes(h[0..8].try_into().ok()?);
        let orig_len = u32::from_le_bytes(h[8..12].try_into().ok()?);
        let caplen = u32::from_le_bytes(h[12..16].try_into().ok()?) as usize;
        let end = at + RECORD_HEADER + caplen;
        let data = buf.get(at + RECORD_HEADER..end)?;
        Some((
            BatchPacket {
                ts_ns,
                orig_len,
                data,
            },
            end,
        ))
    }
}

/// The VLAN tag the kernel removed from `p`, as it stood on the wire; only
/// put back into a frame long enough to have both MAC addresses.
pub(super) fn tag_of(p: &RingPacket) -> Option<[u8; 4]> {
    match p.vlan {
        Some((tpid, tci)) if p.data.len() >= 12 => {
            let mut t = [0u8; 4];
            t[..2].copy_from_slice(&tpid.to_be_bytes());
            t[2..].copy_from_slice(&tci.to_be_bytes());
            Some(t)
        }
        _ => None,
    }
}

/// Appends `p`'s frame to `out`, with `tag` (its [`tag_of`]) back after
/// the two MAC addresses.
pub(super) fn put_frame(p: &RingPacket, tag: Option<[u8; 4]>, out: &mut Vec<u8>) {
    match tag {
        Some(t) => {
            out.extend_from_slice(&p.data[..12]);
            out.extend_from_slice(&t);
            out.extend_from_slice(&p.data[12..]);
        }
        None => out.extend_from_slice(p.data),
    }
}

/// A ring block the consumer reads in place: the packets stay where the
/// kernel wrote them, and the block goes back to the kernel when the
/// consumer is done with it.
pub(super) struct Held {
    pub(super) block: OwnedBlock,
    pub(super) cursor: BlockCursor,
    /// Packets still to hand to the consumer (fewer than the block holds
    /// when `count` cut it).
    pub(super) left: u32,
}

impl Held {
    /// All of `block`'s packets up to `deliver`, from its start.
    pub(super) fn new(block: OwnedBlock, deliver: u32) -> Held {
        Held {
            cursor: block.cursor(),
            block,
            left: deliver,
        }
    }

    /// The packets still to hand over.
    pub(super) fn packets(&self) -> impl Iterator<Item = RingPacket<'_>> {
        let mut cursor = self.cursor;
        (0..self.left).map_while(move |_| self.block.next_packet(&mut cursor))
    }

    /// The bytes its packets would take in a [`Batch`].
    pub(super) fn copy_bytes(&self) -> usize {
        self.packets()
            .map(|p| RECORD_HEADER + p.data.len() + if tag_of(&p).is_some() { 4 } else { 0 })
            .sum()
    }

    /// Copies the packets into `batch` and gives the block back to the
    /// kernel.
    pub(super) fn copy_into(self, batch: &mut Batch) {
        for p in self.packets() {
            batch.push(&p);
        }
    }
}

//! `wire`: zero-copy views over packet headers and their parsed forms.
//!
//! Most callers need one function: [`slice()`] takes a link type and a captured
//! frame and returns a [`Slice`] that says where each layer is and what the
//! flow key, TCP flags or ICMP type are, without allocating and without
//! panicking on any input. The first truncated or malformed layer is reported
//! as an [`Error`] naming the layer, the offset and the lengths involved.
//!
//! Beneath it, one module per protocol follows the same order (after smoltcp's
//! `wire`): RFC reference, field offsets (`field`), `HEADER_LEN`, a view
//! `Xxx<T: AsRef<[u8]>>` with `new_checked`/`check_len`, getters, setters, a
//! parsed `XxxRepr` with `parse`/`emit`/`buffer_len`, `Display`, then tests on
//! real bytes. [`slice()`] reads every header through these views and their
//! constants, and dispatches on the registries ([`LinkType`], [`EtherType`],
//! [`IpProtocol`]), so a header's layout is written down once. The traffic
//! generator (`synth`) builds packets with the views and reprs.
//!
//! This crate is about headers only: the [`esp`] and [`ah`] views read and
//! write SPIs, sequence numbers and AH's ICV bytes, but IPsec processing
//! (security associations, decryption, ICV checks, anti-replay) belongs to a
//! crate of its own.
//!
//! | layer | module |
//! |---|---|
//! | link | [`ethernet`], [`vlan`] (802.1Q / 802.1ad), [`sll`] (Linux cooked v1 and v2), [`null`] (BSD loopback) |
//! | network | [`ipv4`], [`ipv6`], [`ipv6ext`] (hop-by-hop, routing, fragment, destination options) |
//! | transport | [`tcp`], [`udp`], [`icmp`], [`icmpv6`] |
//! | IPsec headers | [`esp`], [`ah`] |
//!
//! Invariants: this crate does no I/O, never allocates (it is `no_std`,
//! without `alloc`), has no dependencies and no `unsafe`.

#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]

pub mod ah;
pub mod checksum;
pub mod error;
pub mod esp;
pub mod ethernet;
pub mod icmp;
pub mod icmpv6;
pub mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod ipv6ext;
pub mod link;
pub mod null;
mod slice;
pub mod sll;
pub mod tcp;
pub mod text;
pub mod udp;
pub mod vlan;

pub use error::{Error, ErrorKind, Layer, SliceError};
pub use ethernet::{EtherType, EthernetAddress};
pub use ip::IpProtocol;
pub use link::LinkType;
pub use slice::{
    flow_bits, icmp_port, slice, FiveTuple, FlowBits, NetworkInfo, Slice, MAX_IPV6_EXTENSIONS,
};
pub use tcp::TcpFlags;

/// Reads a big-endian u16 from the first two bytes; callers pass a checked range.
#[inline(always)]
pub(crate) fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

/// Reads a big-endian u32 from the first four bytes; callers pass a checked range.
#[inline(always)]
pub(crate) fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

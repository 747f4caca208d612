//! Errors shared by every view and `Repr` in this crate.
//!
//! An error always says where it happened: the layer, the byte offset of that
//! layer's header in the buffer that was sliced, and what was wrong in numbers.
//! Views see only their own buffer, so their errors carry offset 0; [`slice`]
//! (crate::slice) moves them to the absolute offset with [`Error::at`].

use core::fmt;

/// The protocol layer an [`Error`] refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layer {
    /// The link type itself (an unsupported LINKTYPE).
    Link,
    /// Ethernet II header.
    Ethernet,
    /// An 802.1Q or 802.1ad VLAN tag.
    Vlan,
    /// Linux cooked capture, version 1.
    Sll,
    /// Linux cooked capture, version 2.
    Sll2,
    /// BSD loopback (LINKTYPE_NULL) address family word.
    Null,
    /// A raw IP packet whose version nibble is not yet known.
    Ip,
    /// IPv4 header.
    Ipv4,
    /// IPv6 fixed header.
    Ipv6,
    /// An IPv6 extension header (hop-by-hop, routing, fragment, destination options).
    Ipv6Ext,
    /// TCP header.
    Tcp,
    /// UDP header.
    Udp,
    /// ICMP (v4) header.
    Icmp,
    /// ICMPv6 header.
    Icmpv6,
    /// ESP header.
    Esp,
    /// AH header.
    Ah,
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layer::Link => "link",
            Layer::Ethernet => "ethernet",
            Layer::Vlan => "vlan",
            Layer::Sll => "sll",
            Layer::Sll2 => "sll2",
            Layer::Null => "null",
            Layer::Ip => "ip",
            Layer::Ipv4 => "ipv4",
            Layer::Ipv6 => "ipv6",
            Layer::Ipv6Ext => "ipv6 extension",
            Layer::Tcp => "tcp",
            Layer::Udp => "udp",
            Layer::Icmp => "icmp",
            Layer::Icmpv6 => "icmp6",
            Layer::Esp => "esp",
            Layer::Ah => "ah",
        })
    }
}

/// What was wrong with a header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The buffer ended before the header did: `needed` bytes from the
    /// header's start were required, `had` were there.
    Truncated { needed: usize, had: usize },
    /// A length field gave `value` bytes, below the protocol minimum `min`
    /// (for example an IPv4 IHL of 4, or a TCP data offset of 3).
    BadLength { value: usize, min: usize },
    /// The IP version nibble was `found`, not the version the layer requires.
    BadVersion { found: u8 },
    /// More stacked headers (VLAN tags, IPv6 extension headers) than `limit`.
    TooDeep { limit: usize },
    /// The link type has no decoder here.
    UnsupportedLink { code: u16 },
}

/// A header that could not be read: which layer, at which offset, and why.
///
/// Display reads like
/// `ipv4 header truncated at offset 14: 20 bytes needed, 12 there`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Error {
    /// The layer whose header was bad.
    pub layer: Layer,
    /// Byte offset of that header in the sliced buffer.
    pub offset: usize,
    /// What was wrong.
    pub kind: ErrorKind,
}

/// The error [`crate::Slice::error`] reports; the same type as [`Error`].
pub type SliceError = Error;

/// `Result` with this crate's [`Error`].
pub type Result<T> = core::result::Result<T, Error>;

impl Error {
    /// A truncation error at offset 0 of the layer's own buffer.
    #[inline]
    pub const fn truncated(layer: Layer, needed: usize, had: usize) -> Error {
        Error {
            layer,
            offset: 0,
            kind: ErrorKind::Truncated { needed, had },
        }
    }

    /// A length-field error at offset 0 of the layer's own buffer.
    #[inline]
    pub const fn bad_length(layer: Layer, value: usize, min: usize) -> Error {
        Error {
            layer,
            offset: 0,
            kind: ErrorKind::BadLength { value, min },
        }
    }

    /// The same error moved `base` bytes further into the enclosing buffer.
    #[inline]
    pub const fn at(self, base: usize) -> Error {
        Error {
            offset: self.offset.saturating_add(base),
            ..self
        }
    }

    /// The length that was needed: bytes for truncation, the minimum for a bad
    /// length field, 0 otherwise.
    pub const fn needed(&self) -> usize {
        match self.kind {
            ErrorKind::Truncated { needed, .. } => needed,
            ErrorKind::BadLength { min, .. } => min,
            ErrorKind::TooDeep { limit } => limit,
            _ => 0,
        }
    }

    /// What was there: bytes present for truncation, the field's value for a
    /// bad length field, 0 otherwise.
    pub const fn had(&self) -> usize {
        match self.kind {
            ErrorKind::Truncated { had, .. } => had,
            ErrorKind::BadLength { value, .. } => value,
            _ => 0,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (layer, at) = (self.layer, self.offset);
        match self.kind {
            ErrorKind::Truncated { needed, had } => {
                write!(f, "{layer} header truncated at offset {at}: {needed} bytes needed, {had} there")
            }
            ErrorKind::BadLength { value, min } => write!(
                f,
                "{layer} header malformed at offset {at}: length field gives {value} bytes, at least {min} needed"
            ),
            ErrorKind::BadVersion { found } => {
                write!(f, "{layer} header malformed at offset {at}: version {found}")
            }
            ErrorKind::TooDeep { limit } => {
                write!(f, "{layer} headers nested too deep at offset {at}: more than {limit}")
            }
            ErrorKind::UnsupportedLink { code } => write!(f, "link type {code} not supported"),
        }
    }
}

impl core::error::Error for Error {}

/// Checks that `buf` holds at least `needed` bytes for `layer`.
#[inline(always)]
pub(crate) fn need(layer: Layer, buf: &[u8], needed: usize) -> Result<()> {
    if buf.len() < needed {
        Err(Error::truncated(layer, needed, buf.len()))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_layer_offset_and_lengths() {
        let e = Error::truncated(Layer::Ipv4, 20, 12).at(14);
        assert_eq!(
            e.to_string(),
            "ipv4 header truncated at offset 14: 20 bytes needed, 12 there"
        );
        assert_eq!((e.needed(), e.had()), (20, 12));
        let e = Error::bad_length(Layer::Tcp, 12, 20).at(34);
        assert_eq!(
            e.to_string(),
            "tcp header malformed at offset 34: length field gives 12 bytes, at least 20 needed"
        );
    }
}

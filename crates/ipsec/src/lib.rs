//! `ipsec`: kansoku's userspace IPsec (Ariga et al., an evaluation of KAME), the
//! protocol side only: no sockets, no files, no `unsafe`.
//!
//! - [`config`] reads security associations and policies set by hand in
//!   setkey(8)'s syntax, the `add` and `spdadd` lines of a `setkey.conf`, as
//!   KAME and FreeBSD write them, with `LINE:COLUMN` errors. Keys never
//!   appear in `Debug` output.
//! - [`Engine`] holds the SAs and policies and takes packets through them:
//!   [`Engine::outbound`] protects an IP packet with ESP (RFC 4303) and/or AH
//!   (RFC 4302), transport or tunnel mode, ESP in UDP (RFC 3948);
//!   [`Engine::inbound`] reassembles fragments, checks the replay window and
//!   the ICV (in constant time, before decrypting), the padding, and the
//!   inbound policy. Every refusal is a [`Reject`] reason, counted.
//! - The primitives are keyed once per SA ([`Keying::PerSa`]), or for every
//!   packet as KAME-era stacks did ([`Keying::PerPacket`]).
//! - [`esp_sa`] reads and writes Wireshark's ESP SA table, [`xfrm`] reads
//!   the SAs `ip xfrm state` lists, and [`read_sa_file`] tells the three
//!   formats apart.

#![forbid(unsafe_code)]

mod ah;
pub mod config;
mod crypto;
pub mod crypto_only;
mod engine;
mod esp;
pub mod esp_sa;
pub mod frag;
mod ip;
mod reject;
pub mod replay;
mod sa;
pub mod xfrm;

pub use config::{
    parse_setkey, AuthAlg, Config, EncAlg, Key, Level, Mode, ParseError, Policy, PolicyAction,
    PolicyDir, Prefix, Protocol, Sa, Transform, Upper,
};
pub use crypto::{KeyError, Keying};
pub use engine::{Engine, Inbound, Options, Outbound, PacketBuf, Totals, HEADROOM};
pub use reject::Reject;
pub use sa::{SaCounters, SaState};

/// What the `ipsec_inbound` fuzz target and the test that replays its
/// corpus share: one SA of every kind, IPv4 and IPv6, with fixed keys, so
/// that seed packets made once keep matching; and the plain test packets
/// this crate's and the gateway's tests build.
#[doc(hidden)]
pub mod fuzzing {
    use crate::{parse_setkey, Engine, Options};

    pub const SAS: &str = "
add 10.1.0.1 10.2.0.1 esp 0x1001 -E null;
add 10.1.0.1 10.2.0.1 esp 0x1002 -E 3des-cbc 0x0102030405060708090a0b0c0d0e0f101112131415161718 -A hmac-sha1 0x0102030405060708090a0b0c0d0e0f1011121314;
add 10.1.0.1 10.2.0.1 esp 0x1003 -m tunnel -E aes-cbc 0x0102030405060708090a0b0c0d0e0f10 -A hmac-sha256 0x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20;
add 10.1.0.1 10.2.0.1 esp 0x1004 -esn -E aes-gcm-16 0x0102030405060708090a0b0c0d0e0f1011121314;
add 10.1.0.1 10.2.0.1 esp 0x1005 -E chacha20-poly1305 0x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021222324;
add 10.1.0.1 10.2.0.1 esp 0x1006 -E blowfish-cbc 0x0011223344;
add 10.1.0.1 10.2.0.1 ah 0x2001 -A hmac-sha1 0x0102030405060708090a0b0c0d0e0f1011121314;
add 2001:db8::1 2001:db8::2 esp 0x3001 -E aes-gcm-16 0x0102030405060708090a0b0c0d0e0f1011121314;
add 2001:db8::1 2001:db8::2 ah 0x3002 -A hmac-sha256 0x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20;
add 2001:db8::1 2001:db8::2 esp 0x3003 -m tunnel -E 3des-cbc 0x0102030405060708090a0b0c0d0e0f101112131415161718;
";

    /// An engine with [`SAS`] installed.
    pub fn engine() -> Engine {
        let cfg = parse_setkey(SAS).unwrap_or_default();
        Engine::new(&cfg, Options::default()).unwrap_or_else(|_| {
            Engine::new(&Default::default(), Options::default()).unwrap_or_else(|_| unreachable!())
        })
    }

    /// An IPv4 packet from 10.0.0.1 to 10.0.0.2: `options`, then `len`
    /// bytes of payload of protocol `proto`, DF as `df` says.
    pub fn ipv4_packet(proto: u8, df: bool, options: &[u8], len: usize) -> Vec<u8> {
        let hl = 20 + options.len();
        let mut p = vec![0x40 | (hl / 4) as u8, 0];
        p.extend_from_slice(&((hl + len) as u16).to_be_bytes());
        p.extend_from_slice(&[0x12, 0x34, if df { 0x40 } else { 0 }, 0, 64, proto, 0, 0]);
        p.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
        p.extend_from_slice(options);
        wire::ipv4::Ipv4Packet::new_unchecked(&mut p[..]).fill_checksum();
        p.extend((0..len).map(|i| (i * 7 + 3) as u8));
        p
    }

    /// An IPv6 packet from fd00::1 to fd00::2: `ext` (whose first header
    /// is `first`), then `len` bytes of payload.
    pub fn ipv6_packet(first: u8, ext: &[u8], len: usize) -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0];
        p.extend_from_slice(&((ext.len() + len) as u16).to_be_bytes());
        p.extend_from_slice(&[first, 64]);
        let addr = |last: u8| {
            let mut a = [0u8; 16];
            a[0] = 0xfd;
            a[15] = last;
            a
        };
        p.extend_from_slice(&addr(1));
        p.extend_from_slice(&addr(2));
        p.extend_from_slice(ext);
        p.extend((0..len).map(|i| (i * 5 + 1) as u8));
        p
    }
}

pub use esp_sa::{esp_sa_unwritable, parse_esp_sa, write_esp_sa};
pub use xfrm::parse_xfrm_state;

/// The SA file formats kansoku reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaFormat {
    /// setkey(8)'s `add`/`spdadd` statements.
    Setkey,
    /// Wireshark's `esp_sa` table.
    EspSa,
    /// `ip xfrm state` output.
    Xfrm,
}

/// Which format `text` is in, by its first word outside a `#` comment line:
/// a double-quoted field (or an empty one, `,`) is `esp_sa`, `src` is `ip
/// xfrm state`, anything else setkey (whose parser then names a word it
/// does not know).
pub fn sa_format(text: &str) -> SaFormat {
    for line in text.lines() {
        let t = line.trim_start();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if t.starts_with('"') || t.starts_with(',') {
            return SaFormat::EspSa;
        }
        let first = t.split(|c: char| c.is_ascii_whitespace()).next();
        return if first == Some("src") {
            SaFormat::Xfrm
        } else {
            SaFormat::Setkey
        };
    }
    SaFormat::Setkey
}

/// Reads SAs, and setkey's policies, from a file in any of the three
/// formats ([`sa_format`] tells which). `esp_sa` and `ip xfrm state` have
/// SAs only.
pub fn read_sa_file(text: &str) -> Result<Config, ParseError> {
    match sa_format(text) {
        SaFormat::Setkey => parse_setkey(text),
        SaFormat::EspSa => Ok(Config {
            sas: parse_esp_sa(text)?,
            policies: Vec::new(),
        }),
        SaFormat::Xfrm => Ok(Config {
            sas: parse_xfrm_state(text)?,
            policies: Vec::new(),
        }),
    }
}

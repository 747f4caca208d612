//! `ipsec`: kansoku's userspace IPsec (paper 002, KAME's evaluation), the
//! protocol side only: no sockets, no files, no `unsafe`.
//!
//! This first step holds the configuration: [`config`] reads security
//! associations and policies set by hand in setkey(8)'s syntax, the `add`
//! and `spdadd` lines of a `setkey.conf`, as KAME and FreeBSD write them,
//! with `FILE:LINE:COLUMN` errors. Keys never appear in `Debug` output.
//! [`esp_sa`] reads and writes Wireshark's ESP SA table, [`xfrm`] reads the
//! SAs `ip xfrm state` lists, and [`read_sa_file`] tells the three apart.
//! ESP (RFC 4303) and AH (RFC 4302) processing come next.

#![forbid(unsafe_code)]

pub mod config;
pub mod esp_sa;
pub mod xfrm;

pub use config::{
    parse_setkey, AuthAlg, Config, EncAlg, Key, Level, Mode, ParseError, Policy, PolicyAction,
    PolicyDir, Prefix, Protocol, Sa, Transform, Upper,
};
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

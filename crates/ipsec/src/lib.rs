//! `ipsec`: kansoku's userspace IPsec (paper 002, KAME's evaluation), the
//! protocol side only: no sockets, no files, no `unsafe`.
//!
//! This first step holds the configuration: [`config`] reads security
//! associations and policies set by hand in setkey(8)'s syntax, the `add`
//! and `spdadd` lines of a `setkey.conf`, as KAME and FreeBSD write them,
//! with `FILE:LINE:COLUMN` errors. Keys never appear in `Debug` output.
//! ESP (RFC 4303) and AH (RFC 4302) processing come next.

#![forbid(unsafe_code)]

pub mod config;

pub use config::{
    parse_setkey, AuthAlg, Config, EncAlg, Key, Level, Mode, ParseError, Policy, PolicyAction,
    PolicyDir, Prefix, Protocol, Sa, Transform, Upper,
};

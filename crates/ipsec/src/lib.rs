//! `ipsec`: kansoku's userspace IPsec (paper 002, KAME's evaluation), the
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

#![forbid(unsafe_code)]

mod ah;
pub mod config;
mod crypto;
mod engine;
mod esp;
mod frag;
mod ip;
mod reject;
pub mod replay;
mod sa;

pub use config::{
    parse_setkey, AuthAlg, Config, EncAlg, Key, Level, Mode, ParseError, Policy, PolicyAction,
    PolicyDir, Prefix, Protocol, Sa, Transform, Upper,
};
pub use crypto::{KeyError, Keying};
pub use engine::{Engine, Inbound, Options, Outbound, Totals};
pub use reject::Reject;
pub use sa::{SaCounters, SaState};

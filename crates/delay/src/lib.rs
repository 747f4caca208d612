//! `delay`: a round-trip time per client address, put on real packets, as
//! dummynet did for the paper's web server benchmark (MAWI WG 2001, chapter
//! 3) and as netem would, on a kernel that has neither.
//!
//! - [`clients`]: client address lists (`100`, ranges, addresses).
//! - [`handshake`]: round trips from a capture at a server (SYN-ACK to
//!   ACK), written as a CDF file.
//! - [`profile`]: the distribution of round trips (`none`, `const:48ms`,
//!   `lognormal:median=48ms,sigma=1`, a CDF file) and the quantile each of
//!   N clients gets.
//! - [`schedule`]: when each held packet is due (half the round trip each
//!   way, an optional rate limit and loss), without sockets.
//! - [`rules`]: the iptables rules that queue the clients' packets, put in
//!   and taken out whole, and what a killed run left behind removed.
//! - [`mod@line`]: the running delay line over [`capture::nfqueue`], its
//!   counters, and whether the run was valid.
//!
//! No `unsafe` here: the netlink socket is in `capture`.

#![forbid(unsafe_code)]

pub mod clients;
pub mod handshake;
pub mod line;
pub mod profile;
pub mod rules;
pub mod schedule;

pub use line::{DelayConfig, DelayLine, DelayReport, Running, StartError};
pub use profile::{Profile, ProfileError};
pub use schedule::{Direction, Shaping};

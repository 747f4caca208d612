//! `capture`: live packet capture from AF_PACKET TPACKET_V3 rings.
//!
//! - [`ring::TpacketRing`] opens an AF_PACKET socket on one interface, maps its
//!   TPACKET_V3 receive ring, cuts packets to the snap length in the kernel,
//!   and hands out whole ring blocks; its [`ring::KernelStats`] are the
//!   kernel's own counters (PACKET_STATISTICS: packets, drops, freezes).
//! - The ring's lane (the thread that drains it, the queue bounded in bytes
//!   to the consumer, the drop accounting) is in the `pipeline` crate, which
//!   has no `unsafe`; this crate knows rings and sockets, not files.
//! - [`tx::PacketSender`] sends frames out of an interface with `sendmmsg`
//!   (the traffic generator's transmit side).
//! - [`privileges::User::lookup`] and [`privileges::drop_privileges`] are
//!   `tcpdump -Z`.
//! - [`usage::children_cpu_time`]: CPU time of ended child processes, which
//!   `kansoku bench capture` reports per captured packet.
//!
//! This is the only kansoku crate with `unsafe` code: system calls, the ring
//! mapping, and the block status word shared with the kernel. Each block
//! carries a `// SAFETY:` note.

pub mod privileges;
pub mod ring;
pub mod tx;
pub mod usage;

pub use ring::{KernelStats, RingConfig, TpacketRing};

//! `capture`: kansoku's kernel packet I/O. Every socket and device through
//! which packets enter or leave the kernel is opened here, and only here:
//! AF_PACKET TPACKET_V3 capture rings and the frame sender, AF_XDP, raw IP
//! and ESP-in-UDP sockets, TUN devices, NFQUEUE; with them the process's
//! side of that work (network namespaces, privileges, CPU usage). Sockets
//! are opened one way (`sys::socket_raw`, `SOCK_CLOEXEC`), and a thread's
//! CPU time is read one way ([`usage::thread_cpu_time`], the `cpu-time`
//! crate, as the trace writer reads its own).
//!
//! - [`ring::TpacketRing`] opens an AF_PACKET socket on one interface, maps its
//!   TPACKET_V3 receive ring, cuts packets to the snap length in the kernel,
//!   and hands out whole ring blocks; its [`ring::KernelStats`] are the
//!   kernel's own counters (PACKET_STATISTICS: packets, drops, freezes).
//! - The ring's lane (the thread that drains it, the queue bounded in bytes
//!   to the consumer, the drop accounting) is in the `pipeline` crate, which
//!   has no `unsafe`; this crate knows rings and sockets, not files.
//! - [`xdp::XdpSocket`] receives one interface queue through AF_XDP (an XDP
//!   program redirecting into a UMEM, generic or native mode): the
//!   alternative the ring was measured against.
//! - [`tx::PacketSender`] sends frames out of an interface with `sendmmsg`
//!   (the traffic generator's transmit side).
//! - [`tun::Tun`] is a TUN device (IP packets to and from the kernel's
//!   routing), [`rawip`] the raw IP and ESP-in-UDP sockets of an IPsec
//!   gateway's outer side, [`poll::wait_readable`] waits on any of them with
//!   a timeout, [`netns::enter`] moves a thread into a network namespace,
//!   and [`netns::VethPair`] joins two namespaces by a veth pair.
//! - [`nfqueue::NfQueue`] is an NFQUEUE queue (packets an iptables rule
//!   queues, held until a verdict names them): the delay line's input.
//! - [`privileges::User::lookup`] and [`privileges::drop_privileges`] are
//!   `tcpdump -Z`.
//! - [`usage::children_cpu_time`]: CPU time of ended child processes, which
//!   `kansoku bench capture` reports per captured packet.
//!
//! This is the only kansoku crate with `unsafe` code: system calls, the ring
//! mapping, and the block status word shared with the kernel. Each block
//! carries a `// SAFETY:` note.

pub mod netns;
pub mod nfqueue;
pub mod poll;
pub mod privileges;
pub mod rawip;
pub mod ring;
pub mod sockopt;
mod sys;
pub mod tun;
pub mod tx;
pub mod usage;
pub mod xdp;

pub use rawip::{RawIpReceiver, RawIpSender, SendFault, UdpEncap};
pub use ring::{KernelStats, OwnedBlock, RingConfig, SimRing, TpacketRing};
pub use tun::{Tun, VNET_HDR_LEN};

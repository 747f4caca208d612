//! NFQUEUE (`nfnetlink_queue`): packets that an iptables `NFQUEUE` rule
//! takes out of the kernel's path, handed to this process over netlink and
//! held by the kernel until a verdict names them. A delay line holds each
//! packet's verdict back for as long as the packet should be delayed; the
//! kernel keeps the packet itself, so nothing but its headers is copied.
//!
//! The protocol (`linux/netfilter/nfnetlink_queue.h`, `nfnetlink.h`,
//! `netlink.h`): every message is a 16-byte `nlmsghdr` (length, type,
//! flags, sequence, port id; host byte order), then a 4-byte `nfgenmsg`
//! (family, version 0, the queue number in network order), then attributes
//! (`nlattr`: a 16-bit length counting its 4-byte header, a 16-bit type,
//! the value padded to 4 bytes). Attribute values are in network order.
//! The message type is the subsystem (3, queue) shifted left 8 bits, or'ed
//! with `NFQNL_MSG_PACKET` (0, kernel to us), `NFQNL_MSG_VERDICT` (1) or
//! `NFQNL_MSG_CONFIG` (2). Verdicts may come in any order; several go in
//! one datagram.
//!
//! What the kernel counts for a queue is in `/proc/net/netfilter/
//! nfnetlink_queue` ([`QueueStats`]): packets dropped because the queue
//! held its maximum (`queue_dropped`), and because this socket's receive
//! buffer was full (`user_dropped`). With `fail_open` a packet that finds
//! the queue full is accepted instead, undelayed, and counted nowhere: a
//! user compares the iptables rule's packet count with what it received.

use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::Duration;

use crate::sys;

const NETLINK_NETFILTER: libc::c_int = 12;
const NFNL_SUBSYS_QUEUE: u16 = 3;
const NFQNL_MSG_PACKET: u16 = 0;
const NFQNL_MSG_VERDICT: u16 = 1;
const NFQNL_MSG_CONFIG: u16 = 2;

const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;

/// `nlmsghdr` and `nfgenmsg`.
const NLMSG_HDR_LEN: usize = 16;
const NFGEN_LEN: usize = 4;
const NLA_HDR_LEN: usize = 4;

// Attributes of a configuration message.
const NFQA_CFG_CMD: u16 = 1;
const NFQA_CFG_PARAMS: u16 = 2;
const NFQA_CFG_QUEUE_MAXLEN: u16 = 3;
const NFQA_CFG_MASK: u16 = 4;
const NFQA_CFG_FLAGS: u16 = 5;
const NFQNL_CFG_CMD_BIND: u8 = 1;
const NFQNL_COPY_PACKET: u8 = 2;
const NFQA_CFG_F_FAIL_OPEN: u32 = 1;
const NFQA_CFG_F_GSO: u32 = 4;

// Attributes of a packet and of a verdict.
const NFQA_PACKET_HDR: u16 = 1;
const NFQA_VERDICT_HDR: u16 = 2;
const NFQA_PAYLOAD: u16 = 10;
const NFQA_CAP_LEN: u16 = 13;
/// The attribute type without the nested and byte-order flag bits.
const NLA_TYPE_MASK: u16 = 0x3fff;

const NF_DROP: u32 = 0;
const NF_ACCEPT: u32 = 1;

/// Verdicts gathered before they go out in one datagram.
const VERDICT_BATCH: usize = 64;
/// One verdict message: header, nfgenmsg, the verdict attribute (4 + 8).
const VERDICT_LEN: usize = NLMSG_HDR_LEN + NFGEN_LEN + NLA_HDR_LEN + 8;

/// How a queue is set up ([`NfQueue::open`]).
#[derive(Clone, Debug)]
pub struct QueueConfig {
    /// The queue number the iptables rules name (`--queue-num`).
    pub queue: u16,
    /// Bytes of each packet copied to this process (its headers suffice).
    pub copy_range: u16,
    /// Packets the kernel holds for this queue at most; past that it drops
    /// them (counted), or accepts them undelayed with `fail_open`.
    pub max_len: u32,
    /// Accept packets that find the queue full instead of dropping them.
    pub fail_open: bool,
    /// The socket's receive buffer: packets wait there until read; the
    /// kernel drops (and counts) what does not fit.
    pub recv_buffer: usize,
}

/// Why bytes from the queue's socket are not a well-formed message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageError {
    /// A message header says more bytes than the datagram has left, or
    /// fewer than a header.
    BadLength { offset: usize, len: usize },
    /// An attribute runs past its message, or is shorter than its header.
    BadAttribute { offset: usize },
    /// A packet message without its packet header (`NFQA_PACKET_HDR`).
    NoPacketHeader { offset: usize },
}

impl fmt::Display for MessageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            MessageError::BadLength { offset, len } => {
                write!(f, "netlink message at byte {offset}: bad length {len}")
            }
            MessageError::BadAttribute { offset } => {
                write!(f, "netlink attribute at byte {offset}: bad length")
            }
            MessageError::NoPacketHeader { offset } => {
                write!(f, "queued packet at byte {offset}: no packet header")
            }
        }
    }
}

impl std::error::Error for MessageError {}

/// One queued packet, borrowed from the receive buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueuedPacket<'a> {
    /// The id a verdict names.
    pub id: u32,
    /// The netfilter hook: 0 PREROUTING, 1 INPUT, 2 FORWARD, 3 OUTPUT,
    /// 4 POSTROUTING.
    pub hook: u8,
    /// The link layer protocol (the EtherType: 0x0800 IPv4, 0x86dd IPv6).
    pub hw_protocol: u16,
    /// The packet from its IP header, cut at the copy range.
    pub payload: &'a [u8],
    /// The packet's whole length (the payload's when it was not cut).
    pub len: u32,
}

/// What one message from the queue's socket is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event<'a> {
    Packet(QueuedPacket<'a>),
    /// The kernel's answer to a request: 0 is an acknowledgement, else a
    /// negative errno (a verdict for an id it no longer holds: `-ENOENT`).
    Answer(i32),
    /// Any other message (ignored).
    Other,
}

fn u16_ne(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn u32_ne(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u32_be(b: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(..4)?.try_into().ok()?))
}

const fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// Walks the netlink messages of one datagram, giving each to `f`.
/// Stops at the first malformed message (those before it were given).
pub fn parse_messages<'a>(buf: &'a [u8], mut f: impl FnMut(Event<'a>)) -> Result<(), MessageError> {
    let mut at = 0;
    while at < buf.len() {
        if buf.len() - at < NLMSG_HDR_LEN {
            return Err(MessageError::BadLength {
                offset: at,
                len: buf.len() - at,
            });
        }
        let len = u32_ne(buf, at) as usize;
        if len < NLMSG_HDR_LEN || len > buf.len() - at {
            return Err(MessageError::BadLength { offset: at, len });
        }
        let kind = u16_ne(buf, at + 4);
        let msg = &buf[at..at + len];
        match kind {
            NLMSG_ERROR => {
                let errno = msg
                    .get(NLMSG_HDR_LEN..NLMSG_HDR_LEN + 4)
                    .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                    .ok_or(MessageError::BadLength { offset: at, len })?;
                f(Event::Answer(errno));
            }
            NLMSG_DONE => f(Event::Other),
            k if k == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET => {
                f(Event::Packet(parse_packet(msg, at)?));
            }
            _ => f(Event::Other),
        }
        at += align4(len).min(buf.len() - at);
    }
    Ok(())
}

/// A packet message's attributes; `at` is its offset in the datagram.
fn parse_packet(msg: &[u8], at: usize) -> Result<QueuedPacket<'_>, MessageError> {
    let mut i = NLMSG_HDR_LEN + NFGEN_LEN;
    if msg.len() < i {
        return Err(MessageError::BadLength {
            offset: at,
            len: msg.len(),
        });
    }
    let mut header = None;
    let mut payload: &[u8] = &[];
    let mut cap_len = None;
    while msg.len() - i >= NLA_HDR_LEN {
        let len = usize::from(u16_ne(msg, i));
        let kind = u16_ne(msg, i + 2) & NLA_TYPE_MASK;
        if len < NLA_HDR_LEN || len > msg.len() - i {
            return Err(MessageError::BadAttribute { offset: at + i });
        }
        let value = &msg[i + NLA_HDR_LEN..i + len];
        match kind {
            // struct nfqnl_msg_packet_hdr: id (be32), hw_protocol (be16), hook.
            NFQA_PACKET_HDR if value.len() >= 7 => {
                let id = u32::from_be_bytes([value[0], value[1], value[2], value[3]]);
                let hw = u16::from_be_bytes([value[4], value[5]]);
                header = Some((id, hw, value[6]));
            }
            NFQA_PACKET_HDR => return Err(MessageError::BadAttribute { offset: at + i }),
            NFQA_PAYLOAD => payload = value,
            NFQA_CAP_LEN => cap_len = u32_be(value),
            _ => {}
        }
        i += align4(len).min(msg.len() - i);
    }
    let (id, hw_protocol, hook) = header.ok_or(MessageError::NoPacketHeader { offset: at })?;
    Ok(QueuedPacket {
        id,
        hook,
        hw_protocol,
        payload,
        len: cap_len.unwrap_or(payload.len() as u32),
    })
}

/// Appends a message of `kind` for `queue` with `attrs` (type, value) to
/// `out`.
fn put_message(
    out: &mut Vec<u8>,
    kind: u16,
    flags: u16,
    seq: u32,
    queue: u16,
    attrs: &[(u16, &[u8])],
) {
    let start = out.len();
    out.extend_from_slice(&0u32.to_ne_bytes()); // length, set below
    out.extend_from_slice(&((NFNL_SUBSYS_QUEUE << 8) | kind).to_ne_bytes());
    out.extend_from_slice(&(NLM_F_REQUEST | flags).to_ne_bytes());
    out.extend_from_slice(&seq.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel's is 0
    out.extend_from_slice(&[libc::AF_UNSPEC as u8, 0]);
    out.extend_from_slice(&queue.to_be_bytes());
    for (t, v) in attrs {
        out.extend_from_slice(&((NLA_HDR_LEN + v.len()) as u16).to_ne_bytes());
        out.extend_from_slice(&t.to_ne_bytes());
        out.extend_from_slice(v);
        out.resize(align4(out.len()), 0);
    }
    let len = (out.len() - start) as u32;
    out[start..start + 4].copy_from_slice(&len.to_ne_bytes());
}

/// The kernel's counters for one queue, from `/proc/net/netfilter/
/// nfnetlink_queue`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Packets held now.
    pub held: u64,
    /// Dropped because the queue held its maximum (without `fail_open`).
    pub queue_dropped: u64,
    /// Dropped because the socket's receive buffer was full.
    pub user_dropped: u64,
    /// The last packet id given out.
    pub id_sequence: u64,
}

/// The line of `queue` in the text of `/proc/net/netfilter/nfnetlink_queue`
/// (`queue portid held copy_mode copy_range queue_dropped user_dropped
/// id_sequence 1`); `None` if no line names it or a line is cut short.
pub fn parse_queue_stats(text: &str, queue: u16) -> Option<QueueStats> {
    text.lines().find_map(|line| {
        let f: Vec<u64> = line
            .split_whitespace()
            .map(|w| w.parse().ok())
            .collect::<Option<_>>()?;
        (f.len() >= 8 && f[0] == u64::from(queue)).then(|| QueueStats {
            held: f[2],
            queue_dropped: f[5],
            user_dropped: f[6],
            id_sequence: f[7],
        })
    })
}

/// Sets the calling thread's timer slack to 1 ns (`PR_SET_TIMERSLACK`):
/// without it the kernel may wake a timed wait up to 50 us late, to
/// gather wake-ups. For a thread that releases packets on time.
pub fn precise_timers() {
    // SAFETY: prctl with PR_SET_TIMERSLACK takes an integer and touches no
    // memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// A bound NFQUEUE queue.
#[derive(Debug)]
pub struct NfQueue {
    fd: OwnedFd,
    queue: u16,
    buf: Vec<u8>,
    verdicts: Vec<u8>,
    pending: usize,
    seq: u32,
}

impl NfQueue {
    /// Opens a netlink socket, binds `cfg.queue` (fails with `EBUSY` if
    /// another process has it) and sets it up. Needs CAP_NET_ADMIN.
    pub fn open(cfg: &QueueConfig) -> io::Result<NfQueue> {
        let fd = sys::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW,
            NETLINK_NETFILTER,
            "AF_NETLINK, NETLINK_NETFILTER (needs root or CAP_NET_ADMIN)",
        )?;
        let v = libc::c_int::try_from(cfg.recv_buffer).unwrap_or(libc::c_int::MAX);
        sys::set_int(
            fd.as_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            v,
            "SO_RCVBUFFORCE",
        )
        .or_else(|_| {
            sys::set_int(
                fd.as_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                v,
                "SO_RCVBUF",
            )
        })?;
        let mut q = NfQueue {
            fd,
            queue: cfg.queue,
            // A message's headers, the packet's copy and slack for many.
            buf: vec![0; 256 * 1024],
            verdicts: Vec::with_capacity(VERDICT_BATCH * VERDICT_LEN),
            pending: 0,
            seq: 0,
        };
        // struct nfqnl_msg_config_cmd: command, pad, pf (be16).
        q.request(&[(NFQA_CFG_CMD, &[NFQNL_CFG_CMD_BIND, 0, 0, 0])], "bind")?;
        // struct nfqnl_msg_config_params: copy_range (be32), copy_mode.
        let mut params = [0u8; 5];
        params[..4].copy_from_slice(&u32::from(cfg.copy_range).to_be_bytes());
        params[4] = NFQNL_COPY_PACKET;
        let flags = NFQA_CFG_F_GSO
            | if cfg.fail_open {
                NFQA_CFG_F_FAIL_OPEN
            } else {
                0
            };
        let mask = NFQA_CFG_F_GSO | NFQA_CFG_F_FAIL_OPEN;
        q.request(
            &[
                (NFQA_CFG_PARAMS, &params),
                (NFQA_CFG_QUEUE_MAXLEN, &cfg.max_len.to_be_bytes()),
                (NFQA_CFG_MASK, &mask.to_be_bytes()),
                (NFQA_CFG_FLAGS, &flags.to_be_bytes()),
            ],
            "configure",
        )?;
        sys::set_nonblocking(q.fd.as_fd(), true)?;
        Ok(q)
    }

    /// The queue number.
    pub fn queue(&self) -> u16 {
        self.queue
    }

    /// Sends one configuration message and waits for its acknowledgement.
    fn request(&mut self, attrs: &[(u16, &[u8])], what: &str) -> io::Result<()> {
        self.seq += 1;
        let mut msg = Vec::with_capacity(64);
        put_message(
            &mut msg,
            NFQNL_MSG_CONFIG,
            NLM_F_ACK,
            self.seq,
            self.queue,
            attrs,
        );
        self.send(&msg)?;
        loop {
            let n = self.recv_raw()?;
            let mut answer = None;
            parse_messages(&self.buf[..n], |e| {
                if let Event::Answer(code) = e {
                    answer.get_or_insert(code);
                }
            })
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            match answer {
                Some(0) => return Ok(()),
                Some(code) => {
                    let e = io::Error::from_raw_os_error(-code);
                    return Err(io::Error::new(
                        e.kind(),
                        format!("NFQUEUE {}: {what}: {e}", self.queue),
                    ));
                }
                // A packet queued before the answer: it stays queued and
                // is dropped when this socket closes if the caller fails.
                None => continue,
            }
        }
    }

    fn send(&self, msg: &[u8]) -> io::Result<()> {
        // SAFETY: `msg` is valid for reading its length; an unconnected
        // netlink socket sends to the kernel (port id 0).
        let r = unsafe { libc::send(self.fd.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn recv_raw(&mut self) -> io::Result<usize> {
        // SAFETY: `self.buf` is valid for writing its length.
        let r = unsafe {
            libc::recv(
                self.fd.as_raw_fd(),
                self.buf.as_mut_ptr().cast(),
                self.buf.len(),
                0,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(r as usize)
    }

    /// Waits until packets can be read or `timeout` passes, to the
    /// nanosecond (`ppoll`, a high-resolution timer); `None` waits without
    /// end. A signal ends the wait early. Whether packets are waiting.
    pub fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        let mut p = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ts = timeout.map(|t| libc::timespec {
            tv_sec: t.as_secs().min(i32::MAX as u64) as libc::time_t,
            tv_nsec: t.subsec_nanos() as libc::c_long,
        });
        let tsp = ts
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: `p` is one valid pollfd, `tsp` null or a valid timespec;
        // no signal mask is given.
        let r = unsafe { libc::ppoll(&mut p, 1, tsp, std::ptr::null()) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(false);
            }
            return Err(e);
        }
        Ok(r > 0)
    }

    /// Reads one datagram of queued packets without waiting and gives each
    /// message to `f`; how many packets it held (0: nothing waiting).
    /// `ENOBUFS` (the kernel dropped packets for want of room in the
    /// socket's buffer; they are in [`QueueStats::user_dropped`]) is
    /// returned as is.
    pub fn recv(&mut self, mut f: impl FnMut(Event<'_>)) -> io::Result<usize> {
        let n = match self.recv_raw() {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(0),
            Err(e) => return Err(e),
        };
        let mut packets = 0;
        parse_messages(&self.buf[..n], |e| {
            if matches!(e, Event::Packet(_)) {
                packets += 1;
            }
            f(e)
        })
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        Ok(packets)
    }

    /// Queues a verdict for packet `id`: accept (let it go on) or drop.
    /// Verdicts go out in batches; [`NfQueue::flush`] sends the rest.
    pub fn verdict(&mut self, id: u32, accept: bool) -> io::Result<()> {
        let mut v = [0u8; 8];
        v[..4].copy_from_slice(&(if accept { NF_ACCEPT } else { NF_DROP }).to_be_bytes());
        v[4..].copy_from_slice(&id.to_be_bytes());
        put_message(
            &mut self.verdicts,
            NFQNL_MSG_VERDICT,
            0,
            0,
            self.queue,
            &[(NFQA_VERDICT_HDR, &v)],
        );
        self.pending += 1;
        if self.pending == VERDICT_BATCH {
            self.flush()?;
        }
        Ok(())
    }

    /// Sends the verdicts gathered so far.
    pub fn flush(&mut self) -> io::Result<()> {
        if self.pending == 0 {
            return Ok(());
        }
        let r = self.send(&self.verdicts);
        self.verdicts.clear();
        self.pending = 0;
        r
    }

    /// The kernel's counters for this queue.
    pub fn stats(&self) -> io::Result<QueueStats> {
        let text = std::fs::read_to_string("/proc/net/netfilter/nfnetlink_queue")?;
        parse_queue_stats(&text, self.queue).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "NFQUEUE {}: not in /proc/net/netfilter/nfnetlink_queue",
                    self.queue
                ),
            )
        })
    }
}

impl AsRawFd for NfQueue {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for NfQueue {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// What the `nfqueue` fuzz target and the corpus replay check: any bytes
/// parse into messages whose payloads lie inside them, or into an error;
/// never a panic.
pub fn fuzz_check(data: &[u8]) {
    let range = data.as_ptr_range();
    let _ = parse_messages(data, |e| {
        if let Event::Packet(p) = e {
            let r = p.payload.as_ptr_range();
            assert!(p.payload.is_empty() || (r.start >= range.start && r.end <= range.end));
        }
    });
}

/// Building queued-packet messages as the kernel does, for tests and fuzz
/// seeds.
pub mod testing {
    use super::*;

    /// A packet message for `queue` with the packet header and payload
    /// attributes (and the whole length, if given).
    pub fn packet_message(
        queue: u16,
        id: u32,
        hook: u8,
        payload: &[u8],
        cap_len: Option<u32>,
    ) -> Vec<u8> {
        let mut hdr = [0u8; 8];
        hdr[..4].copy_from_slice(&id.to_be_bytes());
        hdr[4..6].copy_from_slice(&0x0800u16.to_be_bytes());
        hdr[6] = hook;
        let cap = cap_len.map(u32::to_be_bytes);
        let mut attrs: Vec<(u16, &[u8])> =
            vec![(NFQA_PACKET_HDR, &hdr[..7]), (NFQA_PAYLOAD, payload)];
        if let Some(c) = &cap {
            attrs.push((NFQA_CAP_LEN, c));
        }
        let mut out = Vec::new();
        put_message(&mut out, NFQNL_MSG_PACKET, 0, 0, queue, &attrs);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::testing::packet_message;
    use super::*;

    /// Id, hook, payload and whole length of each packet.
    type Seen = Vec<(u32, u8, Vec<u8>, u32)>;

    fn packets(buf: &[u8]) -> Result<Seen, MessageError> {
        let mut v = Vec::new();
        parse_messages(buf, |e| {
            if let Event::Packet(p) = e {
                v.push((p.id, p.hook, p.payload.to_vec(), p.len));
            }
        })?;
        Ok(v)
    }

    #[test]
    fn packets_of_one_datagram_are_read_in_order() {
        let mut d = packet_message(7, 1, 3, &[0x45, 1, 2], None);
        d.extend(packet_message(7, 2, 1, &[0x45; 40], Some(1500)));
        let got = packets(&d).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0], (1, 3, vec![0x45, 1, 2], 3));
        assert_eq!((got[1].0, got[1].1, got[1].3), (2, 1, 1500));
    }

    #[test]
    fn an_answer_carries_its_errno() {
        let mut m = Vec::new();
        m.extend_from_slice(&36u32.to_ne_bytes());
        m.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(&(-2i32).to_ne_bytes());
        m.extend_from_slice(&[0; 16]);
        let mut got = Vec::new();
        parse_messages(&m, |e| got.push(e)).unwrap();
        assert_eq!(got, vec![Event::Answer(-2)]);
    }

    #[test]
    fn every_cut_of_a_message_is_an_error_or_a_shorter_packet_never_a_panic() {
        let d = packet_message(0, 9, 3, &[0x60; 48], Some(2000));
        for cut in 0..d.len() {
            let mut b = d[..cut].to_vec();
            // The header's length as sent: a cut datagram is then too short.
            let _ = packets(&b);
            // And a header that agrees with the cut.
            if cut >= 4 {
                b[..4].copy_from_slice(&(cut as u32).to_ne_bytes());
                let _ = packets(&b);
            }
        }
        assert!(matches!(
            packets(&d[..d.len() - 1]),
            Err(MessageError::BadLength { .. })
        ));
    }

    #[test]
    fn corrupt_lengths_are_refused() {
        let mut d = packet_message(0, 9, 3, &[1, 2, 3, 4], None);
        // An attribute claiming more than its message holds.
        d[NLMSG_HDR_LEN + NFGEN_LEN] = 200;
        assert!(matches!(
            packets(&d),
            Err(MessageError::BadAttribute { .. })
        ));
        // A message length below a header.
        let mut d = packet_message(0, 9, 3, &[1], None);
        d[..4].copy_from_slice(&4u32.to_ne_bytes());
        assert!(matches!(
            packets(&d),
            Err(MessageError::BadLength { len: 4, .. })
        ));
        // No packet header at all.
        let mut m = Vec::new();
        put_message(
            &mut m,
            NFQNL_MSG_PACKET,
            0,
            0,
            0,
            &[(NFQA_PAYLOAD, &[1, 2])],
        );
        assert_eq!(packets(&m), Err(MessageError::NoPacketHeader { offset: 0 }));
    }

    #[test]
    fn flipping_any_byte_never_panics() {
        let d = packet_message(3, 77, 1, &[0x45; 60], Some(60));
        for i in 0..d.len() {
            for bit in [0x01, 0x80, 0xff] {
                let mut b = d.clone();
                b[i] ^= bit;
                let _ = packets(&b);
            }
        }
    }

    #[test]
    fn queue_stats_are_read_from_procs_text() {
        let text = "    0  12345     0 2 65531     0     0        0  1\n\
                    \x20  7  23456     3 2    96    11     4     1000  1\n";
        let s = parse_queue_stats(text, 7).unwrap();
        assert_eq!(
            s,
            QueueStats {
                held: 3,
                queue_dropped: 11,
                user_dropped: 4,
                id_sequence: 1000
            }
        );
        assert_eq!(parse_queue_stats(text, 8), None);
        assert_eq!(parse_queue_stats("7 1 2", 7), None);
    }
}

//! When each held packet goes on: the delay line's clockwork, without
//! sockets (the runtime in [`crate::line`] feeds it packets and the time).
//!
//! Each client address has a round-trip time; a packet from it (leaving
//! towards the server) waits half of it, and a packet to it (coming back)
//! waits the other half, so that a TCP handshake, a request and its
//! answer each see the whole round trip. A rate limit, when set, is a link
//! of that rate per client and direction: a packet waits for the link to
//! be free, is sent in `len · 8 / rate`, then waits its delay. Loss drops a
//! packet with the given probability, in either direction.
//!
//! Held packets leave in order of their due time; packets due at the same
//! nanosecond leave in the order they came, so one client's packets are
//! never reordered.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::net::IpAddr;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Which way a packet goes, as seen from the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From a client (held at the OUTPUT hook of the client's host).
    Out,
    /// To a client (held at its INPUT hook).
    In,
}

/// What happens to a packet given to [`Schedule::arrive`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Held until the returned time (nanoseconds on the caller's clock).
    Held(u64),
    /// Dropped by the loss setting.
    Lost,
    /// Not from or to a client: let go at once.
    NotOurs,
}

/// One client's link state.
#[derive(Clone, Copy, Debug)]
struct Client {
    /// Half the round trip, in nanoseconds.
    one_way: u64,
    /// When each direction's link is free again (rate limit).
    free: [u64; 2],
}

/// Settings beside the per-client delays.
#[derive(Clone, Copy, Debug, Default)]
pub struct Shaping {
    /// Probability of dropping a packet, each direction.
    pub loss: f64,
    /// Bits per second of each client's link, each direction.
    pub rate_bps: Option<u64>,
    /// Seed of the loss's random numbers (the same run drops the same).
    pub seed: u64,
}

/// The held packets and the clients' delays.
#[derive(Debug)]
pub struct Schedule {
    clients: HashMap<IpAddr, Client>,
    shaping: Shaping,
    rng: SmallRng,
    heap: BinaryHeap<Reverse<(u64, u64, u32)>>,
    seq: u64,
}

impl Schedule {
    /// `rtts` gives each client address its round-trip time.
    pub fn new(rtts: &[(IpAddr, Duration)], shaping: Shaping) -> Schedule {
        let clients = rtts
            .iter()
            .map(|&(a, rtt)| {
                let one_way = (rtt.as_nanos() / 2).min(u128::from(u64::MAX)) as u64;
                (
                    a,
                    Client {
                        one_way,
                        free: [0; 2],
                    },
                )
            })
            .collect();
        Schedule {
            clients,
            shaping,
            rng: SmallRng::seed_from_u64(shaping.seed),
            heap: BinaryHeap::new(),
            seq: 0,
        }
    }

    /// A packet of `len` bytes between `client` and the far side, going
    /// `dir`, seen at `now`; held packets carry `id` until released.
    pub fn arrive(&mut self, id: u32, client: IpAddr, dir: Direction, len: u32, now: u64) -> Fate {
        let Some(c) = self.clients.get_mut(&client) else {
            return Fate::NotOurs;
        };
        if self.shaping.loss > 0.0 && self.rng.gen::<f64>() < self.shaping.loss {
            return Fate::Lost;
        }
        let mut start = now;
        if let Some(rate) = self.shaping.rate_bps {
            let link = &mut c.free[dir as usize];
            let send = (u128::from(len) * 8 * 1_000_000_000 / u128::from(rate.max(1))) as u64;
            *link = (*link).max(now) + send;
            start = *link;
        }
        let due = start + c.one_way;
        self.seq += 1;
        self.heap.push(Reverse((due, self.seq, id)));
        Fate::Held(due)
    }

    /// The earliest due time of a held packet.
    pub fn next_due(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse((due, _, _))| *due)
    }

    /// Takes the next packet due at or before `now`: `(id, due)`.
    pub fn pop_due(&mut self, now: u64) -> Option<(u32, u64)> {
        match self.heap.peek() {
            Some(Reverse((due, _, _))) if *due <= now => {
                self.heap.pop().map(|Reverse((due, _, id))| (id, due))
            }
            _ => None,
        }
    }

    /// Takes every held packet, due or not (to let them go at a stop).
    pub fn drain(&mut self) -> impl Iterator<Item = u32> + '_ {
        self.heap.drain().map(|Reverse((_, _, id))| id)
    }

    /// Packets held now.
    pub fn held(&self) -> usize {
        self.heap.len()
    }

    /// A client's round trip, if it is one.
    pub fn rtt(&self, client: IpAddr) -> Option<Duration> {
        self.clients
            .get(&client)
            .map(|c| Duration::from_nanos(c.one_way * 2))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(i: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, i])
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn each_direction_waits_half_the_round_trip() {
        let mut s = Schedule::new(
            &[
                (addr(2), Duration::from_millis(50)),
                (addr(3), Duration::from_millis(10)),
            ],
            Shaping::default(),
        );
        assert_eq!(
            s.arrive(1, addr(2), Direction::Out, 60, 0),
            Fate::Held(25 * MS)
        );
        assert_eq!(
            s.arrive(2, addr(3), Direction::In, 60, MS),
            Fate::Held(6 * MS)
        );
        assert_eq!(s.arrive(3, addr(9), Direction::In, 60, MS), Fate::NotOurs);
        assert_eq!(s.next_due(), Some(6 * MS));
        assert_eq!(s.pop_due(5 * MS), None);
        assert_eq!(s.pop_due(30 * MS), Some((2, 6 * MS)));
        assert_eq!(s.pop_due(30 * MS), Some((1, 25 * MS)));
        assert_eq!(s.pop_due(30 * MS), None);
        assert_eq!(s.rtt(addr(3)), Some(Duration::from_millis(10)));
    }

    #[test]
    fn one_clients_packets_keep_their_order() {
        let mut s = Schedule::new(&[(addr(2), Duration::from_millis(4))], Shaping::default());
        for id in 0..100 {
            s.arrive(id, addr(2), Direction::Out, 100, 1000);
        }
        let order: Vec<u32> = std::iter::from_fn(|| s.pop_due(u64::MAX).map(|p| p.0)).collect();
        assert_eq!(order, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn a_rate_limit_spaces_packets_by_their_sending_time() {
        // 8 Mbit/s: 1,000 bytes take 1 ms.
        let mut s = Schedule::new(
            &[(addr(2), Duration::from_millis(2))],
            Shaping {
                rate_bps: Some(8_000_000),
                ..Shaping::default()
            },
        );
        let dues: Vec<_> = (0..3)
            .map(|i| s.arrive(i, addr(2), Direction::Out, 1000, 0))
            .collect();
        assert_eq!(
            dues,
            vec![Fate::Held(2 * MS), Fate::Held(3 * MS), Fate::Held(4 * MS)]
        );
        // The other direction has a link of its own.
        assert_eq!(
            s.arrive(9, addr(2), Direction::In, 1000, 0),
            Fate::Held(2 * MS)
        );
    }

    #[test]
    fn loss_drops_about_its_share_and_the_same_seed_drops_the_same() {
        let run = |seed| {
            let mut s = Schedule::new(
                &[(addr(2), Duration::ZERO)],
                Shaping {
                    loss: 0.1,
                    seed,
                    ..Shaping::default()
                },
            );
            (0..10_000)
                .map(|i| s.arrive(i, addr(2), Direction::In, 60, 0) == Fate::Lost)
                .collect::<Vec<_>>()
        };
        let a = run(1);
        let lost = a.iter().filter(|&&x| x).count();
        assert!((800..1200).contains(&lost), "{lost}");
        assert_eq!(a, run(1));
        assert_ne!(a, run(2));
    }
}

/// Parses a link rate in bits per second: `10mbit`, `512kbit`, `1gbit`,
/// `9600bit` (tc's units).
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, scale) = [("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)]
        .iter()
        .find_map(|(u, k)| s.strip_suffix(u).map(|n| (n, *k)))
        .ok_or_else(|| format!("{s:?}: a rate with its unit (bit, kbit, mbit, gbit)"))?;
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?}: not a number followed by a unit"))?;
    let bps = v * scale;
    if !(1.0..=1e12).contains(&bps) {
        return Err(format!("{s:?}: between 1bit and 1000gbit"));
    }
    Ok(bps as u64)
}

#[cfg(test)]
mod rate_tests {
    use super::parse_rate;

    #[test]
    fn rates_parse_with_tc_units() {
        assert_eq!(parse_rate("10mbit"), Ok(10_000_000));
        assert_eq!(parse_rate("1.5gbit"), Ok(1_500_000_000));
        assert_eq!(parse_rate("512kbit"), Ok(512_000));
        assert!(parse_rate("10").is_err());
        assert!(parse_rate("-1mbit").is_err());
        assert!(parse_rate("0bit").is_err());
        assert!(parse_rate("xmbit").is_err());
    }
}

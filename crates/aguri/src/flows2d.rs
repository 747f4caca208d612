//! The 2-D view: traffic by source prefix × destination prefix, each pair
//! with the protocols and ports it carries, as aguri3 and agurim show it
//! (`[ 1] 203.0.113.10 10.1.2.3: 1816800 (71.96%)\t1200 (50.00%)` and, under
//! it, `[6:80:*] 92.80% 77.00% ...`).

use core::fmt;

use crate::label::{KeyKind, Prefix, V4_MAPPED, V4_MAPPED_LEN};

/// A port, or a power-of-two aligned range of them: the first `len` bits
/// of `port` (len 0: any port, 16: one port).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortRange {
    pub port: u16,
    pub len: u8,
}

impl PortRange {
    pub const ANY: PortRange = PortRange { port: 0, len: 0 };

    pub fn new(port: u16, len: u8) -> PortRange {
        let len = len.min(16);
        let mask = if len == 0 { 0 } else { u16::MAX << (16 - len) };
        PortRange {
            port: port & mask,
            len,
        }
    }

    pub fn exact(port: u16) -> PortRange {
        PortRange { port, len: 16 }
    }

    /// Whether `other` lies in this range.
    pub fn contains(&self, other: &PortRange) -> bool {
        self.len <= other.len && PortRange::new(other.port, self.len).port == self.port
    }
}

impl PortRange {
    /// `*` for any port, `80`, or `49152-65535`; with `zero_is_any`, as
    /// agurim, a range starting at 0 is `*` too.
    fn write(&self, f: &mut fmt::Formatter<'_>, zero_is_any: bool) -> fmt::Result {
        if self.len == 0 || zero_is_any && self.port == 0 && self.len < 16 {
            f.write_str("*")
        } else if self.len == 16 {
            write!(f, "{}", self.port)
        } else {
            let end = u32::from(self.port) + (1u32 << (16 - self.len)) - 1;
            write!(f, "{}-{end}", self.port)
        }
    }
}

impl fmt::Display for PortRange {
    /// As agurim: `*` for any port (and, as agurim, for a range starting
    /// at 0), `80`, or `49152-65535`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, true)
    }
}

/// Protocol and ports of a pair's traffic: `[6:80:*]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProtoSpec {
    /// `None`: any protocol (and then any ports).
    pub proto: Option<u8>,
    pub sport: PortRange,
    pub dport: PortRange,
}

impl fmt::Display for ProtoSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.proto {
            None | Some(0) => f.write_str("*:")?,
            Some(p) => write!(f, "{p}:")?,
        }
        write!(f, "{}:{}", self.sport, self.dport)
    }
}

/// A [`ProtoSpec`] as kansoku's own format writes it: as its `Display`,
/// except that a port range starting at 0 is written as the range
/// (`0-1023`) and protocol 0 as `0`, not as agurim's `*`, so that it reads
/// back the same.
pub struct ExactSpec(pub ProtoSpec);

impl fmt::Display for ExactSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.proto {
            None => f.write_str("*:")?,
            Some(p) => write!(f, "{p}:")?,
        }
        self.0.sport.write(f, false)?;
        f.write_str(":")?;
        self.0.dport.write(f, false)
    }
}

/// One protocol entry of a flow, with its exact counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProtoEntry {
    pub spec: ProtoSpec,
    pub bytes: u64,
    pub packets: u64,
}

/// One source × destination aggregate: its own counts (what more specific
/// flows listed beside it do not hold), and its protocols.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flow {
    pub src: Prefix,
    pub dst: Prefix,
    pub bytes: u64,
    pub packets: u64,
    /// Add up to at most the flow's counts (aguri3 drops the small ones).
    pub protos: Vec<ProtoEntry>,
}

/// An address prefix as agurim writes it: `*` (IPv4's 0/0), `*::` (IPv6's,
/// and kansoku's root), `10.1.0.0/16`, a host bare.
pub fn agurim_address(p: &Prefix) -> String {
    debug_assert_eq!(p.kind, KeyKind::Address);
    if p.len == 0 {
        "*::".to_string()
    } else if p.len == V4_MAPPED_LEN && p.key == V4_MAPPED {
        "*".to_string()
    } else {
        p.to_string()
    }
}

/// The inverse of [`agurim_address`].
pub fn parse_agurim_address(t: &str) -> Option<Prefix> {
    match t {
        "*" => Some(Prefix::new(KeyKind::Address, V4_MAPPED, V4_MAPPED_LEN)),
        "*::" => Some(Prefix::new(KeyKind::Address, 0, 0)),
        _ => Prefix::parse(KeyKind::Address, t).ok(),
    }
}

/// `*`, `80` or `49152-65535` (a power-of-two aligned range).
fn parse_port_range(t: &str) -> Option<PortRange> {
    if t == "*" {
        return Some(PortRange::ANY);
    }
    if let Some((a, b)) = t.split_once('-') {
        let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
        let n = b.checked_sub(a)?.checked_add(1)?;
        if b > 65535 || !n.is_power_of_two() || a % n != 0 {
            return None;
        }
        return Some(PortRange::new(a as u16, 16 - n.trailing_zeros() as u8));
    }
    Some(PortRange::exact(t.parse().ok()?))
}

/// `6:80:*`, `*:*:*`, `17:53:1024-2047`.
pub fn parse_proto_spec(t: &str) -> Option<ProtoSpec> {
    let mut it = t.split(':');
    let (p, s, d) = (it.next()?, it.next()?, it.next()?);
    if it.next().is_some() {
        return None;
    }
    let proto = match p {
        "*" => None,
        n => Some(n.parse::<u8>().ok()?),
    };
    Some(ProtoSpec {
        proto,
        sport: parse_port_range(s)?,
        dport: parse_port_range(d)?,
    })
}

/// One piece of traffic the 2-D view is made of: a source and destination
/// prefix, a protocol spec (`None`: not known, as a re-read flow's part
/// that no protocol entry holds), and its counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Item {
    pub src: Prefix,
    pub dst: Prefix,
    pub spec: Option<ProtoSpec>,
    pub bytes: u64,
    pub packets: u64,
}

impl Flow {
    /// The flow as items: one per protocol entry, and the rest unknown.
    pub fn items(&self) -> impl Iterator<Item = Item> + '_ {
        let (b, p) = self.protos.iter().fold((0u64, 0u64), |a, e| {
            (a.0.saturating_add(e.bytes), a.1.saturating_add(e.packets))
        });
        let rest = Item {
            src: self.src,
            dst: self.dst,
            spec: None,
            bytes: self.bytes.saturating_sub(b),
            packets: self.packets.saturating_sub(p),
        };
        self.protos
            .iter()
            .map(|e| Item {
                src: self.src,
                dst: self.dst,
                spec: Some(e.spec),
                bytes: e.bytes,
                packets: e.packets,
            })
            .chain((rest.bytes > 0 || rest.packets > 0).then_some(rest))
    }
}

/// A fast hash for the tables below (keys are addresses and ports, not
/// chosen by an attacker who sees the hash: a flood of distinct keys costs
/// memory, which the table's budget bounds, not collisions).
#[derive(Default, Clone, Copy)]
pub(crate) struct MixHasher(u64);

impl core::hash::Hasher for MixHasher {
    fn finish(&self) -> u64 {
        let mut x = self.0;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(b));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(23) ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn write_u128(&mut self, v: u128) {
        self.write_u64(v as u64);
        self.write_u64((v >> 64) as u64);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    fn write_u8(&mut self, v: u8) {
        self.write_u64(u64::from(v));
    }
}

type Mix = core::hash::BuildHasherDefault<MixHasher>;

/// A pair table key: addresses and port keys (`version:protocol:port`,
/// 32 bits) with their prefix lengths.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct PairKey {
    src: u128,
    dst: u128,
    sport: u32,
    dport: u32,
    /// Address lengths (128-bit keys) and port lengths (0 to 16 bits).
    lens: [u8; 4],
}

/// The traffic of one interval by 5-tuple, the 2-D view's input, in at most
/// `budget` entries: when it is full, every entry is coarsened (ephemeral
/// ports first, then all ports, then addresses to /24 and /64, /16 and /48,
/// /8 and /32, /0) until a quarter is free. Counts stay exact; detail goes.
pub(crate) struct PairTable {
    map: std::collections::HashMap<PairKey, (u64, u64), Mix>,
    budget: usize,
    /// How coarse the entries are (0: exact).
    pub(crate) level: u8,
}

/// Address lengths (IPv4 within its mapped /96, IPv6) per coarsening level
/// from 3 on.
const ADDRESS_STEPS: [(u8, u8); 4] = [(24, 64), (16, 48), (8, 32), (0, 0)];

impl PairTable {
    pub(crate) fn new(budget: usize) -> PairTable {
        PairTable {
            map: std::collections::HashMap::with_capacity_and_hasher(
                budget.min(1 << 16),
                Mix::default(),
            ),
            budget: budget.max(1024),
            level: 0,
        }
    }

    pub(crate) fn clear(&mut self) {
        self.map.clear();
        self.level = 0;
    }

    fn key_at(&self, mut k: PairKey) -> PairKey {
        if self.level >= 1 {
            // The ephemeral side (the higher port) becomes any port.
            let port = |x: u32| x & 0xffff;
            if port(k.sport) >= port(k.dport) {
                k.sport &= !0xffff;
                k.lens[2] = 0;
            } else {
                k.dport &= !0xffff;
                k.lens[3] = 0;
            }
        }
        if self.level >= 2 {
            k.sport &= !0xffff;
            k.dport &= !0xffff;
            k.lens[2] = 0;
            k.lens[3] = 0;
        }
        if self.level >= 3 {
            let (v4, v6) = ADDRESS_STEPS[usize::from(self.level - 3).min(ADDRESS_STEPS.len() - 1)];
            for (i, a) in [&mut k.src, &mut k.dst].into_iter().enumerate() {
                let is_v4 = *a >> 32 == V4_MAPPED >> 32;
                let len = if is_v4 { V4_MAPPED_LEN + v4 } else { v6 };
                let len = len.min(k.lens[i]);
                *a = Prefix::new(KeyKind::Address, *a, len).key;
                k.lens[i] = len;
            }
        }
        k
    }

    /// Counts a flow of `bytes` and `packets`.
    #[inline]
    pub(crate) fn add(
        &mut self,
        src: u128,
        dst: u128,
        sport: u32,
        dport: u32,
        bytes: u64,
        packets: u64,
    ) {
        let k = self.key_at(PairKey {
            src,
            dst,
            sport,
            dport,
            lens: [128, 128, 16, 16],
        });
        let c = self.map.entry(k).or_insert((0, 0));
        c.0 = c.0.saturating_add(bytes);
        c.1 = c.1.saturating_add(packets);
        if self.map.len() > self.budget {
            self.coarsen();
        }
    }

    fn coarsen(&mut self) {
        while self.map.len() > self.budget * 3 / 4
            && usize::from(self.level) < 3 + ADDRESS_STEPS.len()
        {
            self.level += 1;
            let old = std::mem::take(&mut self.map);
            let mut map =
                std::collections::HashMap::with_capacity_and_hasher(old.len(), Mix::default());
            for (k, (b, p)) in old {
                let c = map.entry(self.key_at(k)).or_insert((0u64, 0u64));
                c.0 = c.0.saturating_add(b);
                c.1 = c.1.saturating_add(p);
            }
            self.map = map;
        }
    }

    /// The entries as items.
    pub(crate) fn items(&self) -> impl Iterator<Item = Item> + '_ {
        self.map.iter().map(|(k, &(bytes, packets))| {
            let proto = (k.sport >> 16) as u8;
            Item {
                src: Prefix::new(KeyKind::Address, k.src, k.lens[0]),
                dst: Prefix::new(KeyKind::Address, k.dst, k.lens[1]),
                spec: Some(ProtoSpec {
                    proto: Some(proto),
                    sport: PortRange::new(k.sport as u16, k.lens[2]),
                    dport: PortRange::new(k.dport as u16, k.lens[3]),
                }),
                bytes,
                packets,
            }
        })
    }
}

/// The most specific of a set of prefixes that contains a given one.
struct Lookup {
    index: std::collections::HashMap<(u128, u8), usize, Mix>,
    /// Distinct lengths, longest first.
    lengths: Vec<u8>,
    root: usize,
}

impl Lookup {
    fn new(prefixes: &[Prefix], root: usize) -> Lookup {
        let mut lengths: Vec<u8> = prefixes.iter().map(|p| p.len).collect();
        lengths.sort_unstable_by(|a, b| b.cmp(a));
        lengths.dedup();
        Lookup {
            index: prefixes
                .iter()
                .enumerate()
                .map(|(i, p)| ((p.key, p.len), i))
                .collect(),
            lengths,
            root,
        }
    }

    /// The most specific prefix containing `p` no longer than `max_len`.
    fn holder(&self, p: &Prefix, max_len: u8) -> usize {
        for &len in self.lengths.iter().filter(|&&l| l <= p.len.min(max_len)) {
            let a = Prefix::new(p.kind, p.key, len);
            if let Some(&i) = self.index.get(&(a.key, a.len)) {
                return i;
            }
        }
        self.root
    }
}

/// The 2-D view of `items` over the source and destination aggregates of
/// the same traffic (the 1-D summaries' entries): each item is counted in
/// the cell of the most specific source and destination aggregates that
/// hold it; a cell below the threshold (`metric`, `percent` of the totals)
/// is folded into its parent cell, the more specific side first, up to
/// each family's `* *`, which is kept. Each flow's protocols are then
/// aggregated the same way at four times the threshold of the flow's own
/// counts (as aguri3): exact specs, then `proto:sport:*` or
/// `proto:*:dport`, then `proto:*:*`; what stays below is not listed.
/// The flows' counts add up to the items'.
pub fn aggregate(
    items: impl IntoIterator<Item = Item>,
    src_aggs: &[Prefix],
    dst_aggs: &[Prefix],
    metric: crate::tree::Metric,
    percent: f64,
) -> Vec<Flow> {
    TwoD::build(items, src_aggs, dst_aggs, (&[], &[]), metric, percent).flows
}

/// One side of the 2-D view: the aggregates, sorted, with their parents.
struct Side {
    prefixes: Vec<Prefix>,
    lookup: Lookup,
    parent: Vec<Option<usize>>,
    depth: Vec<usize>,
}

impl Side {
    /// `aggs` with the family roots and `roots` added; roots have no parent.
    fn new(aggs: &[Prefix], roots: &[Prefix]) -> Side {
        let v4_root = Prefix::new(KeyKind::Address, V4_MAPPED, V4_MAPPED_LEN);
        let root = Prefix::new(KeyKind::Address, 0, 0);
        let mut v: Vec<Prefix> = aggs
            .iter()
            .chain(roots)
            .copied()
            .filter(|p| p.kind == KeyKind::Address)
            .collect();
        v.push(root);
        v.push(v4_root);
        v.sort_by_key(|p| (p.key, p.len));
        v.dedup();
        let r = v.iter().position(|p| *p == root).unwrap_or(0);
        let lookup = Lookup::new(&v, r);
        let parent: Vec<Option<usize>> = v
            .iter()
            .map(|p| {
                if *p == root || *p == v4_root || roots.contains(p) {
                    None
                } else {
                    Some(lookup.holder(p, p.len - 1))
                }
            })
            .collect();
        let mut depth = vec![0usize; v.len()];
        for i in 0..v.len() {
            // Parents sort before their children.
            depth[i] = parent[i].map_or(0, |q| depth[q] + 1);
        }
        Side {
            prefixes: v,
            lookup,
            parent,
            depth,
        }
    }
}

/// A 2-D aggregation that can say where any item of its traffic went.
pub struct TwoD {
    /// Sorted by source, then destination.
    pub flows: Vec<Flow>,
    src: Side,
    dst: Side,
    /// Each starting cell's flow.
    cell_flow: std::collections::HashMap<(usize, usize), usize, Mix>,
}

impl TwoD {
    /// As [`aggregate`]; `roots` are the source and the destination
    /// prefixes above which nothing folds (a drilled-into flow's).
    pub fn build(
        items: impl IntoIterator<Item = Item>,
        src_aggs: &[Prefix],
        dst_aggs: &[Prefix],
        roots: (&[Prefix], &[Prefix]),
        metric: crate::tree::Metric,
        percent: f64,
    ) -> TwoD {
        use std::collections::HashMap;
        let src = Side::new(src_aggs, roots.0);
        let dst = Side::new(dst_aggs, roots.1);
        type Protos = HashMap<Option<ProtoSpec>, (u64, u64), Mix>;
        let mut cells: HashMap<(usize, usize), (u64, u64, Protos), Mix> = HashMap::default();
        let (mut tb, mut tp) = (0u64, 0u64);
        for it in items {
            if it.bytes == 0 && it.packets == 0 {
                continue;
            }
            tb = tb.saturating_add(it.bytes);
            tp = tp.saturating_add(it.packets);
            let key = (
                src.lookup.holder(&it.src, 128),
                dst.lookup.holder(&it.dst, 128),
            );
            let c = cells
                .entry(key)
                .or_insert_with(|| (0, 0, Protos::default()));
            c.0 = c.0.saturating_add(it.bytes);
            c.1 = c.1.saturating_add(it.packets);
            let e = c.2.entry(it.spec).or_insert((0, 0));
            e.0 = e.0.saturating_add(it.bytes);
            e.1 = e.1.saturating_add(it.packets);
        }
        // Where each cell went (itself if kept).
        let mut moved: HashMap<(usize, usize), (usize, usize), Mix> = HashMap::default();
        // Most specific cells first.
        let max_depth = src.depth.iter().max().copied().unwrap_or(0)
            + dst.depth.iter().max().copied().unwrap_or(0);
        let mut by_depth: Vec<Vec<(usize, usize)>> = vec![Vec::new(); max_depth + 1];
        for &(s, d) in cells.keys() {
            by_depth[src.depth[s] + dst.depth[d]].push((s, d));
        }
        for level in (1..=max_depth).rev() {
            let here = std::mem::take(&mut by_depth[level]);
            for (s, d) in here {
                let Some(&(b, p, _)) = cells.get(&(s, d)) else {
                    continue;
                };
                if metric.reaches((b, p), (tb, tp), percent) {
                    continue;
                }
                // Fold the deeper side into its parent (the source on a tie).
                let to = match (src.parent[s], dst.parent[d]) {
                    (Some(_), Some(pd)) if dst.depth[d] > src.depth[s] => (s, pd),
                    (Some(ps), _) => (ps, d),
                    (None, Some(pd)) => (s, pd),
                    (None, None) => continue,
                };
                let Some((b, p, protos)) = cells.remove(&(s, d)) else {
                    continue;
                };
                moved.insert((s, d), to);
                let fresh = !cells.contains_key(&to);
                let t = cells.entry(to).or_insert_with(|| (0, 0, Protos::default()));
                t.0 = t.0.saturating_add(b);
                t.1 = t.1.saturating_add(p);
                for (k, (x, y)) in protos {
                    let e = t.2.entry(k).or_insert((0, 0));
                    e.0 = e.0.saturating_add(x);
                    e.1 = e.1.saturating_add(y);
                }
                if fresh {
                    by_depth[src.depth[to.0] + dst.depth[to.1]].push(to);
                }
            }
        }
        type Cell = ((usize, usize), (u64, u64, Protos));
        let mut kept: Vec<Cell> = cells
            .into_iter()
            .filter(|(_, c)| c.0 > 0 || c.1 > 0)
            .collect();
        kept.sort_by_key(|((s, d), _)| (*s, *d));
        let index: HashMap<(usize, usize), usize, Mix> =
            kept.iter().enumerate().map(|(i, (k, _))| (*k, i)).collect();
        let mut cell_flow: HashMap<(usize, usize), usize, Mix> = index.clone();
        for &start in moved.keys() {
            let mut at = start;
            let mut hops = 0;
            while let Some(&next) = moved.get(&at) {
                at = next;
                hops += 1;
                if hops > max_depth + 1 {
                    break;
                }
            }
            if let Some(&i) = index.get(&at) {
                cell_flow.insert(start, i);
            }
        }
        let flows = kept
            .into_iter()
            .map(|((s, d), (bytes, packets, protos))| Flow {
                src: src.prefixes[s],
                dst: dst.prefixes[d],
                bytes,
                packets,
                protos: aggregate_protos(protos, bytes, packets, metric, percent * 4.0),
            })
            .collect();
        TwoD {
            flows,
            src,
            dst,
            cell_flow,
        }
    }

    /// The flow an item of this traffic was counted in.
    pub fn flow_of(&self, it: &Item) -> Option<usize> {
        let key = (
            self.src.lookup.holder(&it.src, 128),
            self.dst.lookup.holder(&it.dst, 128),
        );
        self.cell_flow.get(&key).copied()
    }
}

/// A flow's protocols: exact specs at the threshold, the rest folded to
/// one side's port, then to the protocol; what stays below is dropped.
fn aggregate_protos(
    protos: std::collections::HashMap<Option<ProtoSpec>, (u64, u64), Mix>,
    fb: u64,
    fp: u64,
    metric: crate::tree::Metric,
    percent: f64,
) -> Vec<ProtoEntry> {
    use std::collections::HashMap;
    let reaches = |b: u64, p: u64| metric.reaches((b, p), (fb, fp), percent.min(100.0));
    let mut out = Vec::new();
    let mut rest: Vec<(ProtoSpec, u64, u64)> = Vec::new();
    for (spec, (b, p)) in protos {
        let Some(spec) = spec else { continue };
        if reaches(b, p) {
            out.push(ProtoEntry {
                spec,
                bytes: b,
                packets: p,
            });
        } else {
            rest.push((spec, b, p));
        }
    }
    // One side's port: each spec goes to the larger of its two groups.
    let side = |s: &ProtoSpec, keep_src: bool| ProtoSpec {
        proto: s.proto,
        sport: if keep_src { s.sport } else { PortRange::ANY },
        dport: if keep_src { PortRange::ANY } else { s.dport },
    };
    let mut sums: HashMap<ProtoSpec, (u64, u64), Mix> = HashMap::default();
    for (s, b, p) in &rest {
        for k in [side(s, true), side(s, false)] {
            let e = sums.entry(k).or_insert((0, 0));
            e.0 = e.0.saturating_add(*b);
            e.1 = e.1.saturating_add(*p);
        }
    }
    let mut groups: HashMap<ProtoSpec, (u64, u64), Mix> = HashMap::default();
    for (s, b, p) in rest {
        let (a, z) = (side(&s, true), side(&s, false));
        let k = if sums[&a] >= sums[&z] { a } else { z };
        let e = groups.entry(k).or_insert((0, 0));
        e.0 = e.0.saturating_add(b);
        e.1 = e.1.saturating_add(p);
    }
    let mut protos: HashMap<ProtoSpec, (u64, u64), Mix> = HashMap::default();
    for (spec, (b, p)) in groups {
        if reaches(b, p) {
            out.push(ProtoEntry {
                spec,
                bytes: b,
                packets: p,
            });
        } else {
            let k = ProtoSpec {
                proto: spec.proto,
                sport: PortRange::ANY,
                dport: PortRange::ANY,
            };
            let e = protos.entry(k).or_insert((0, 0));
            e.0 = e.0.saturating_add(b);
            e.1 = e.1.saturating_add(p);
        }
    }
    for (spec, (b, p)) in protos {
        if reaches(b, p) {
            out.push(ProtoEntry {
                spec,
                bytes: b,
                packets: p,
            });
        }
    }
    // A spec can come out of two passes (an exact `6:*:80` kept, and small
    // `6:1234:80`s grouped into `6:*:80`): one entry each.
    let mut merged: HashMap<ProtoSpec, (u64, u64), Mix> = HashMap::default();
    for e in out {
        let m = merged.entry(e.spec).or_insert((0, 0));
        m.0 = m.0.saturating_add(e.bytes);
        m.1 = m.1.saturating_add(e.packets);
    }
    let mut out: Vec<ProtoEntry> = merged
        .into_iter()
        .map(|(spec, (bytes, packets))| ProtoEntry {
            spec,
            bytes,
            packets,
        })
        .collect();
    out.sort_by(|a, b| (b.bytes, b.packets, a.spec).cmp(&(a.bytes, a.packets, b.spec)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(t: &str) -> Prefix {
        parse_agurim_address(t).unwrap()
    }

    fn item(src: &str, dst: &str, spec: &str, bytes: u64) -> Item {
        Item {
            src: p(src),
            dst: p(dst),
            spec: Some(parse_proto_spec(spec).unwrap()),
            bytes,
            packets: 1,
        }
    }

    #[test]
    fn small_cells_fold_into_their_parents_and_nothing_is_lost() {
        let mut items = vec![
            item("10.0.0.1", "192.0.2.1", "6:80:40000", 600),
            item("10.0.0.1", "192.0.2.1", "6:80:40001", 300),
            item("10.0.0.2", "192.0.2.1", "17:53:5353", 5),
            item("10.0.0.3", "198.51.100.1", "6:22:50000", 4),
            item("2001:db8::1", "2001:db8::2", "6:443:1234", 91),
        ];
        for i in 0..50u32 {
            items.push(item(
                &format!("172.16.{}.{}", i, i),
                "192.0.2.9",
                "6:1234:80",
                1,
            ));
        }
        let srcs = [
            p("10.0.0.1"),
            p("10.0.0.0/24"),
            p("172.16.0.0/16"),
            p("2001:db8::1"),
        ];
        let dsts = [p("192.0.2.1"), p("192.0.2.0/24"), p("2001:db8::2")];
        let flows = aggregate(items.clone(), &srcs, &dsts, crate::tree::Metric::Bytes, 1.0);
        let total: u64 = items.iter().map(|i| i.bytes).sum();
        assert_eq!(flows.iter().map(|f| f.bytes).sum::<u64>(), total);
        let find = |s: &str, d: &str| flows.iter().find(|f| f.src == p(s) && f.dst == p(d));
        let heavy = find("10.0.0.1", "192.0.2.1").unwrap();
        assert_eq!(heavy.bytes, 900);
        // 600 and 300 of 900 both reach 4%: two exact entries.
        assert_eq!(heavy.protos.len(), 2);
        assert_eq!(heavy.protos[0].spec.to_string(), "6:80:40000");
        // The 50 one-byte sources are a /16 to 192.0.2.0/24 (1.0% of 1050).
        assert_eq!(find("172.16.0.0/16", "192.0.2.0/24").unwrap().bytes, 50);
        // 10.0.0.2 and 10.0.0.3 (9 bytes) are below 1% and folded up to `* *`.
        assert!(find("*", "*").is_some_and(|f| f.bytes == 9));
        assert!(find("2001:db8::1", "2001:db8::2").is_some());
    }

    #[test]
    fn a_full_pair_table_coarsens_and_keeps_the_counts() {
        let mut t = PairTable::new(1024);
        let mut total = 0u64;
        for i in 0..10_000u32 {
            let src = V4_MAPPED | u128::from(0x0a00_0000 | i);
            let dst = V4_MAPPED | u128::from(0xc000_0201u32);
            let sport = (4 << 24) | (6 << 16) | (1024 + i % 30000);
            t.add(src, dst, sport, (4 << 24) | (6 << 16) | 80, 100, 1);
            total += 100;
        }
        assert!(t.level >= 1 && t.map.len() <= 1024);
        assert_eq!(t.items().map(|i| i.bytes).sum::<u64>(), total);
    }

    #[test]
    fn the_profiler_makes_flows_that_add_up_read_back_and_merge() {
        use crate::profile::{FlowKey, ProfilerConfig};
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(2);
        let mut p = ProfilerConfig {
            interval_ns: 60_000_000_000,
            pairs: 4096,
            ..Default::default()
        }
        .build()
        .unwrap();
        let mut sums = Vec::new();
        let t0 = 1_795_132_800_000_000_000u64;
        for i in 0..60_000u64 {
            let r: f64 = rng.gen();
            let (src, dst, proto, sp, dp) = if r < 0.4 {
                (
                    [192, 0, 2, 1],
                    [198, 51, 100, 1],
                    6,
                    443,
                    rng.gen_range(1024..2000),
                )
            } else if r < 0.5 {
                ([10, 0, 0, rng.gen()], [198, 51, 100, 53], 17, rng.gen(), 53)
            } else {
                (rng.gen(), rng.gen(), 6, rng.gen(), 80)
            };
            let k = FlowKey {
                src: std::net::Ipv4Addr::from(src).into(),
                dst: std::net::Ipv4Addr::from(dst).into(),
                protocol: proto,
                src_port: sp,
                dst_port: dp,
            };
            sums.extend(p.add(t0 + i * 10_000_000, &k, rng.gen_range(60..1500)));
        }
        sums.extend(p.finish());
        assert_eq!(sums.len(), 10);
        for s in &sums {
            let (b, k) = s
                .flows
                .iter()
                .fold((0, 0), |a, f| (a.0 + f.bytes, a.1 + f.packets));
            assert_eq!((b, k), (s.sections[0].bytes, s.sections[0].packets));
            let heavy = s
                .flows
                .iter()
                .find(|f| f.src.to_string() == "192.0.2.1" && f.dst.to_string() == "198.51.100.1")
                .expect("the heavy pair");
            assert_eq!(heavy.protos.len(), 1, "{:?}", heavy.protos);
            assert_eq!(heavy.protos[0].spec.to_string(), "6:443:*");
            // The DNS clients (1-D: /27s of 10.0.0.0/24) to their server.
            let dns = s.flows.iter().filter(|f| {
                f.src.to_string().starts_with("10.0.0.") && f.dst.to_string() == "198.51.100.53"
            });
            assert!(dns.clone().count() >= 2, "{s}");
            assert!(
                dns.clone()
                    .all(|f| f.protos[0].spec.to_string() == "17:*:53"),
                "{s}"
            );
            // kansoku's format keeps the flows exactly.
            let back = crate::parse_summaries(&s.to_string()).unwrap();
            assert_eq!(back[0].flows, s.flows);
            // aguri3's keeps them but for the protocols' rounding.
            let text = crate::formats::write_aguri3(s).unwrap();
            let a3 = crate::formats::parse_aguri3(&text).unwrap();
            assert_eq!(a3[0].flows.len(), s.flows.len());
            assert_eq!(
                (a3[0].total_bytes(), a3[0].total_packets()),
                (s.total_bytes(), s.total_packets())
            );
        }
        let all =
            crate::merge_all(&mut sums.clone(), 0, 4096, crate::tree::Metric::Either, 1.0).unwrap();
        let (b, k) = all[0]
            .flows
            .iter()
            .fold((0, 0), |a, f| (a.0 + f.bytes, a.1 + f.packets));
        assert_eq!(
            (b, k),
            (all[0].sections[0].bytes, all[0].sections[0].packets)
        );
        assert!(all[0].flows.len() >= 3);
    }

    #[test]
    fn labels_as_agurim_writes_them() {
        for t in [
            "*",
            "*::",
            "10.1.0.0/16",
            "192.0.2.1",
            "2001:db8::/32",
            "2001:db8::1",
        ] {
            assert_eq!(agurim_address(&parse_agurim_address(t).unwrap()), t);
        }
        for t in [
            "6:80:*",
            "*:*:*",
            "17:53:1024-2047",
            "6:*:443",
            "1:2048:2048",
        ] {
            assert_eq!(parse_proto_spec(t).unwrap().to_string(), t);
        }
        assert!(parse_proto_spec("6:80").is_none());
        assert!(parse_proto_spec("6:1000-2000:*").is_none(), "not aligned");
        assert!(parse_proto_spec("300:1:1").is_none());
        assert!(PortRange::new(1024, 6).contains(&PortRange::exact(2047)));
        assert!(!PortRange::new(1024, 6).contains(&PortRange::exact(2048)));
    }
}

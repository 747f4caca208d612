//! `kansoku synth`: write a synthetic trace.

use std::net::IpAddr;

use synth::{FrameSize, IpVersion, PayloadPattern, ProtoMix, Synth, SynthConfig};
use wire::LinkType;

use crate::cli::{IpArg, PatternArgs, PayloadArg, ProtoArg, SynthArgs};
use crate::error::{CliError, CliResult};
use crate::progress::Progress;
use crate::sink::Sink;
use crate::{signals, time};

/// 2026-01-01T00:00:00Z, the default time of the first packet.
const DEFAULT_START_NS: u64 = 1_767_225_600_000_000_000;

/// The byte value of fixed payloads.
const FIXED_BYTE: u8 = 0x41;

pub fn run(args: &SynthArgs) -> CliResult<i32> {
    let Some(path) = args.out.write.as_deref() else {
        return Err(CliError::input(
            "synth needs -w FILE (or -w - for standard output)",
        ));
    };
    let cfg = config(args)?;
    let mut synth = Synth::new(cfg).map_err(|e| CliError::input(e.to_string()))?;
    let mut sink = Sink::new(&args.out, path)?;
    let progress = Progress::new(Some(args.count), true);
    let mut n = 0u64;
    while let Some((ts, frame)) = synth.next_frame() {
        if signals::stop_requested() {
            break;
        }
        let len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        sink.write_packet(LinkType::Ethernet, ts, len, frame)?;
        n += 1;
        progress.tick(n, n);
    }
    progress.finish();
    sink.finish()?.report(args.json)?;
    Ok(0)
}

fn config(args: &SynthArgs) -> CliResult<SynthConfig> {
    if !(args.rate > 0.0 && args.rate.is_finite()) {
        return Err(CliError::input(format!(
            "bad --rate {} (expected packets per second > 0)",
            args.rate
        )));
    }
    let start_ns = match &args.start {
        Some(t) => time::parse_time(t).map_err(CliError::input)?,
        None => DEFAULT_START_NS,
    };
    let interval_ns = (1e9 / args.rate).round().max(1.0) as u64;
    pattern_config(&args.pattern, args.count, start_ns, interval_ns)
}

/// The synth configuration for a traffic pattern given on the command line.
pub fn pattern_config(
    p: &PatternArgs,
    count: u64,
    start_ns: u64,
    interval_ns: u64,
) -> CliResult<SynthConfig> {
    Ok(SynthConfig {
        count,
        size: parse_size(&p.size)?,
        payload: match p.payload {
            PayloadArg::Fixed => PayloadPattern::Fixed(FIXED_BYTE),
            PayloadArg::Random => PayloadPattern::Random,
            PayloadArg::Worm => PayloadPattern::Worm,
        },
        proto: match p.proto {
            ProtoArg::Tcp => ProtoMix::Tcp,
            ProtoArg::Udp => ProtoMix::Udp,
            ProtoArg::Icmp => ProtoMix::Icmp,
            ProtoArg::Mix => ProtoMix::Mix,
        },
        ip: match p.ip {
            IpArg::V4 => IpVersion::V4,
            IpArg::V6 => IpVersion::V6,
            IpArg::Mix => IpVersion::Mix,
        },
        vlans: p.vlan.clone(),
        src_net: parse_prefix(&p.src_net, "--src-net")?,
        dst_net: parse_prefix(&p.dst_net, "--dst-net")?,
        start_ns,
        interval_ns,
        seed: p.seed,
    })
}

/// `64`, or `64-1518`.
fn parse_size(s: &str) -> CliResult<FrameSize> {
    let bad = || {
        CliError::input(format!(
            "bad --size '{s}' (expected BYTES or MIN-MAX, within 64-1518)"
        ))
    };
    let num = |t: &str| t.trim().parse::<usize>().map_err(|_| bad());
    let size = match s.split_once('-') {
        Some((a, b)) => FrameSize::Uniform(num(a)?, num(b)?),
        None => FrameSize::Fixed(num(s)?),
    };
    let ok = match size {
        FrameSize::Fixed(n) => (64..=1518).contains(&n),
        FrameSize::Uniform(a, b) => (64..=1518).contains(&a) && (64..=1518).contains(&b) && a <= b,
    };
    if ok {
        Ok(size)
    } else {
        Err(bad())
    }
}

/// `10.0.0.0/8`, `2001:db8::/32`.
fn parse_prefix(s: &str, flag: &str) -> CliResult<(IpAddr, u8)> {
    let bad = || {
        CliError::input(format!(
            "bad {flag} '{s}' (expected ADDRESS/LENGTH like 10.0.0.0/8)"
        ))
    };
    let (a, l) = s.split_once('/').ok_or_else(bad)?;
    let addr: IpAddr = a.parse().map_err(|_| bad())?;
    let len: u8 = l.parse().map_err(|_| bad())?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    if len > max {
        return Err(bad());
    }
    Ok((addr, len))
}

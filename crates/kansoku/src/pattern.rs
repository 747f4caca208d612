//! The synthetic traffic of `--size`, `--payload`, `--proto`, `--ip`,
//! `--vlan`, `--src-net`, `--dst-net`, `--seed`, `--flows` (`synth` and `generate`).

use pipeline::Error;
use synth::{parse_prefix, FrameSize, IpVersion, PayloadPattern, ProtoMix, SynthConfig};

use crate::args::{IpArg, PatternArgs, PayloadArg, ProtoArg};

/// The byte value of fixed payloads.
const FIXED_BYTE: u8 = 0x41;

/// The synth configuration for a traffic pattern given on the command line.
pub fn pattern_config(
    p: &PatternArgs,
    count: u64,
    start_ns: u64,
    interval_ns: u64,
) -> Result<SynthConfig, Error> {
    Ok(SynthConfig {
        count,
        size: FrameSize::parse(&p.size).map_err(Error::usage)?,
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
        src_net: parse_prefix(&p.src_net, "--src-net").map_err(Error::usage)?,
        dst_net: parse_prefix(&p.dst_net, "--dst-net").map_err(Error::usage)?,
        start_ns,
        interval_ns,
        seed: p.seed,
        flows: p.flows,
    })
}

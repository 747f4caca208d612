//! The command-line options of a synthetic traffic pattern (feature
//! `cli`): `--size`, `--payload`, `--proto`, `--ip`, `--vlan`, `--src-net`,
//! `--dst-net`, `--seed`, `--flows`, shared by `kansoku synth` and
//! `kansoku generate`.

use clap::{Args, ValueEnum};

use crate::{parse_prefix, FrameSize, IpVersion, PayloadPattern, ProtoMix, SynthConfig};

/// The synthetic traffic pattern shared by `synth` and `generate`.
#[derive(Debug, Args)]
pub struct PatternArgs {
    /// Frame size in bytes (64–1518), or a range MIN-MAX for uniformly random sizes.
    #[arg(long, default_value = "64")]
    pub size: String,
    /// Payload bytes: one byte value repeated (compressible), random (incompressible), or the paper's 418-byte worm packet.
    #[arg(long, value_enum, default_value_t = PayloadArg::Random)]
    pub payload: PayloadArg,
    /// Transport protocol, or a mix of all three.
    #[arg(long, value_enum, default_value_t = ProtoMix::Mix)]
    pub proto: ProtoMix,
    /// IP version, or a mix of both.
    #[arg(long, value_enum, default_value_t = IpVersion::V4)]
    pub ip: IpVersion,
    /// VLAN ids to tag frames with, outermost first (e.g. 100,7 for 802.1ad over 802.1Q).
    #[arg(long, value_delimiter = ',')]
    pub vlan: Vec<u16>,
    /// Source addresses are random inside this prefix.
    #[arg(long, default_value = "10.0.0.0/8")]
    pub src_net: String,
    /// Destination addresses are random inside this prefix.
    #[arg(long, default_value = "192.168.1.0/24")]
    pub dst_net: String,
    /// Seed for the pseudo-random generator (same seed, same traffic).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Frames come from this many flows active at once, each a 5-tuple carrying a heavy-tailed number of frames
    /// (Pareto, shape 1.2, at least 2) before a new one takes its place, as on a real link; 0: every frame's
    /// addresses and ports are new.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub flows: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PayloadArg {
    Fixed,
    Random,
    Worm,
}

/// The byte value of fixed payloads.
const FIXED_BYTE: u8 = 0x41;

impl PatternArgs {
    /// The configuration of `count` frames of this pattern, the first at
    /// `start_ns`, then one every `interval_ns`; a bad size or prefix is the
    /// message of a usage error.
    pub fn config(
        &self,
        count: u64,
        start_ns: u64,
        interval_ns: u64,
    ) -> Result<SynthConfig, String> {
        let p = self;
        Ok(SynthConfig {
            count,
            size: FrameSize::parse(&p.size)?,
            payload: match p.payload {
                PayloadArg::Fixed => PayloadPattern::Fixed(FIXED_BYTE),
                PayloadArg::Random => PayloadPattern::Random,
                PayloadArg::Worm => PayloadPattern::Worm,
            },
            proto: p.proto,
            ip: p.ip,
            vlans: p.vlan.clone(),
            src_net: parse_prefix(&p.src_net, "--src-net")?,
            dst_net: parse_prefix(&p.dst_net, "--dst-net")?,
            start_ns,
            interval_ns,
            seed: p.seed,
            flows: p.flows,
        })
    }
}

//! Synthetic traffic ([`synth::Synth`]) as a source of Ethernet frames.

use synth::{Synth, SynthConfig};
use wire::LinkType;

use crate::error::{Error, Result};
use crate::packet::Frame;
use crate::report::Report;
use crate::run::Source;

pub struct SynthSource {
    synth: Synth,
    packets: u64,
    bytes: u64,
}

impl SynthSource {
    pub fn new(cfg: SynthConfig) -> Result<SynthSource> {
        let synth = Synth::new(cfg).map_err(|e| Error::usage(e.to_string()))?;
        Ok(SynthSource {
            synth,
            packets: 0,
            bytes: 0,
        })
    }
}

impl Source for SynthSource {
    type Item<'a> = Frame<'a>;

    fn name(&self) -> &str {
        "synthetic traffic"
    }

    fn next(&mut self) -> Result<Option<Frame<'_>>> {
        let Some((ts_ns, data)) = self.synth.next_frame() else {
            return Ok(None);
        };
        let orig_len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        self.packets += 1;
        self.bytes += u64::from(orig_len);
        Ok(Some(Frame {
            link_type: LinkType::Ethernet,
            ts_ns,
            orig_len,
            data,
        }))
    }

    fn position(&self) -> u64 {
        self.packets
    }

    fn close(&mut self, report: &mut Report) {
        report.packets += self.packets;
        report.bytes += self.bytes;
    }
}

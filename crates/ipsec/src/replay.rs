//! The anti-replay window of RFC 4303 §3.4.3 (and RFC 4302 §3.4.3), with
//! the extended sequence numbers of RFC 4303 Appendix A2.
//!
//! The window is a bitmap of `size` packets ending at the highest sequence
//! number authenticated so far. A packet is checked twice: before its ICV
//! ([`Window::check`], cheap, so that a flood of replays costs no
//! cryptography) and again when it is accepted ([`Window::accept`]), which
//! is the only step that moves the window; a packet whose ICV fails never
//! touches it. The bitmap is kept as a ring of 64-bit words (RFC 6479), so
//! advancing costs at most one word per 64 packets skipped.

/// Why the window refused a sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplayError {
    /// Seen before, inside the window.
    Replayed,
    /// Older than the window reaches (`ip -s xfrm state`'s `replay-window`).
    TooOld,
    /// Sequence number 0, which a sender never uses.
    Zero,
}

/// An inbound SA's window.
#[derive(Clone, Debug)]
pub struct Window {
    /// Packets the window covers; 0 turns checking off.
    size: u32,
    esn: bool,
    /// The highest sequence number accepted (64 bits with ESN), 0 before any.
    top: u64,
    /// `words.len() * 64` bits: bit `seq % bits` is set when `seq` was seen.
    words: Vec<u64>,
}

impl Window {
    /// A window of `size` packets (rounded up to whole 64-bit words, plus
    /// one word so the ring never overwrites a bit still inside the window).
    pub fn new(size: u32, esn: bool) -> Window {
        let words = if size == 0 {
            0
        } else {
            (size as usize).div_ceil(64) + 1
        };
        Window {
            size,
            esn,
            top: 0,
            words: vec![0; words],
        }
    }

    /// The highest sequence number accepted.
    pub fn top(&self) -> u64 {
        self.top
    }

    /// Restarts the window at `top`, with nothing inside it seen (a
    /// restored SA continuing where it stopped).
    pub fn restart_at(&mut self, top: u64) {
        self.top = top;
        self.words.fill(0);
    }

    /// The packets the window covers.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The full sequence number a packet carrying the low 32 bits `low`
    /// stands for: `low` itself without ESN, or with the high 32 bits
    /// inferred as RFC 4303 Appendix A2.2 says. The ICV (which covers the
    /// high bits) confirms the guess.
    pub fn infer(&self, low: u32) -> u64 {
        if !self.esn {
            return u64::from(low);
        }
        let w = u64::from(self.size.max(1));
        let th = self.top >> 32;
        let tl = self.top & 0xffff_ffff;
        let low = u64::from(low);
        let hi = if tl >= w - 1 {
            // Case A: the window lies within one subspace.
            if low >= tl - (w - 1) {
                th
            } else {
                th + 1
            }
        } else {
            // Case B: the window spans two subspaces.
            let bottom = (tl + (1 << 32) - (w - 1)) & 0xffff_ffff;
            if low >= bottom {
                th.wrapping_sub(1)
            } else {
                th
            }
        };
        (hi << 32) | low
    }

    /// Whether `seq` (as [`Window::infer`] gave it) may be accepted.
    pub fn check(&self, seq: u64) -> Result<(), ReplayError> {
        if seq & 0xffff_ffff == 0 && (!self.esn || seq == 0) {
            return Err(ReplayError::Zero);
        }
        if self.size == 0 || seq > self.top {
            return Ok(());
        }
        if self.top - seq >= u64::from(self.size) {
            return Err(ReplayError::TooOld);
        }
        if self.bit(seq) {
            return Err(ReplayError::Replayed);
        }
        Ok(())
    }

    /// Records `seq` after its ICV checked, moving the window if it is new
    /// ground. Checks again, since another packet may have come in between.
    pub fn accept(&mut self, seq: u64) -> Result<(), ReplayError> {
        self.check(seq)?;
        if self.size == 0 {
            self.top = self.top.max(seq);
            return Ok(());
        }
        if seq > self.top {
            let n = self.words.len() as u64;
            let old = self.top / 64;
            let new = seq / 64;
            // Clear the words the window moves onto (all of them if it jumps
            // a whole ring).
            let clear = (new - old).min(n);
            for i in 1..=clear {
                let w = ((old + i) % n) as usize;
                self.words[w] = 0;
            }
            self.top = seq;
        }
        self.set(seq);
        Ok(())
    }

    fn bit(&self, seq: u64) -> bool {
        let n = self.words.len() as u64;
        let w = ((seq / 64) % n) as usize;
        self.words[w] & (1u64 << (seq % 64)) != 0
    }

    fn set(&mut self, seq: u64) {
        let n = self.words.len() as u64;
        let w = ((seq / 64) % n) as usize;
        self.words[w] |= 1u64 << (seq % 64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_reordered_replayed_and_old() {
        let mut w = Window::new(32, false);
        for s in 1..=10 {
            w.accept(s).unwrap();
        }
        assert_eq!(w.check(10), Err(ReplayError::Replayed));
        assert_eq!(w.check(0), Err(ReplayError::Zero));
        w.accept(40).unwrap();
        // 9 is 31 behind 40: inside a 32-packet window, and seen.
        assert_eq!(w.accept(9), Err(ReplayError::Replayed));
        assert_eq!(w.check(12), Ok(()), "reordered inside the window");
        w.accept(12).unwrap();
        assert_eq!(w.check(12), Err(ReplayError::Replayed));
        // 8 is 32 behind 40: just out of the window.
        assert_eq!(w.check(8), Err(ReplayError::TooOld));
        assert_eq!(w.check(41), Ok(()));
    }

    #[test]
    fn a_jump_past_the_whole_ring_forgets_everything_behind_it() {
        let mut w = Window::new(64, false);
        for s in 1..=100 {
            w.accept(s).unwrap();
        }
        w.accept(10_000).unwrap();
        for s in 10_000 - 63..10_000 {
            assert_eq!(w.check(s), Ok(()), "{s} is new and inside the window");
        }
        assert_eq!(w.check(10_000 - 64), Err(ReplayError::TooOld));
    }

    #[test]
    fn matches_a_plain_set_model() {
        // Every order of a small scramble: the ring answers as a set would.
        let mut w = Window::new(100, false);
        let mut seen = std::collections::BTreeSet::new();
        let mut top = 0u64;
        let mut x = 12345u64;
        for _ in 0..20_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let seq = (top + 20).saturating_sub((x >> 33) % 150).max(1);
            let want = if seq > top {
                Ok(())
            } else if top - seq >= 100 {
                Err(ReplayError::TooOld)
            } else if seen.contains(&seq) {
                Err(ReplayError::Replayed)
            } else {
                Ok(())
            };
            assert_eq!(w.accept(seq), want, "seq {seq} top {top}");
            if want.is_ok() {
                seen.insert(seq);
                top = top.max(seq);
            }
        }
    }

    #[test]
    fn esn_infers_the_high_bits_across_the_wrap() {
        let mut w = Window::new(64, true);
        w.accept(0xffff_fff0).unwrap();
        // Low bits that wrapped: the next subspace.
        assert_eq!(w.infer(5), 0x1_0000_0005);
        w.accept(0x1_0000_0005).unwrap();
        // Inside the window, behind the wrap: the previous subspace.
        assert_eq!(w.infer(0xffff_fff8), 0xffff_fff8);
        assert_eq!(w.check(0xffff_fff8), Ok(()));
        assert_eq!(w.check(0xffff_fff0), Err(ReplayError::Replayed));
        // Sequence number 2^32 (low bits 0) is legal with ESN.
        assert_eq!(Window::new(64, true).check(1 << 32), Ok(()));
    }

    #[test]
    fn size_zero_checks_nothing_but_zero() {
        let mut w = Window::new(0, false);
        w.accept(5).unwrap();
        w.accept(5).unwrap();
        w.accept(1).unwrap();
        assert_eq!(w.check(0), Err(ReplayError::Zero));
    }
}

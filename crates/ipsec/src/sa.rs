//! One installed SA: its keyed primitives, its outbound sequence number, its
//! inbound replay window, its lifetimes and its counters.

use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};

use crate::config::{Mode, Protocol, Sa};
use crate::crypto::{Cipher, Integrity, KeyError, Keying};
use crate::replay::Window;

/// What one SA has seen, as `ip -s xfrm state` shows it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SaCounters {
    /// Packets and bytes (of the protected payload) processed.
    pub packets: u64,
    pub bytes: u64,
    /// Inbound packets older than the window.
    pub replay_window: u64,
    /// Inbound packets seen before.
    pub replay: u64,
    /// Inbound packets whose ICV did not check.
    pub integrity_failed: u64,
    /// Inbound packets whose padding was wrong (RFC 4303 §2.4).
    pub padding_failed: u64,
    /// Inbound packets too short or of a length the cipher cannot have.
    pub malformed: u64,
    /// Packets refused because the SA's hard lifetime had passed.
    pub expired: u64,
    /// Outbound packets refused because the sequence number would wrap.
    pub seq_overflow: u64,
}

/// An SA ready to protect or check packets.
pub struct SaState {
    pub(crate) sa: Sa,
    pub(crate) cipher: Option<Cipher>,
    pub(crate) integrity: Option<Integrity>,
    /// The last sequence number sent (0 before the first).
    seq_out: u64,
    pub(crate) window: Window,
    pub(crate) counters: SaCounters,
    /// When the SA was first used (engine time, seconds).
    born: Option<u64>,
    soft_passed: bool,
    rng: StdRng,
    /// An IV to use for the next packet instead of a fresh one (test vectors).
    next_iv: Option<Vec<u8>>,
}

impl SaState {
    pub(crate) fn new(sa: &Sa, keying: Keying) -> Result<SaState, KeyError> {
        let cipher = match &sa.enc {
            Some((alg, key)) => Some(Cipher::new(*alg, key, keying)?),
            None if sa.protocol == Protocol::Esp => {
                return Err(KeyError(format!(
                    "ESP SA {:#x} has no encryption algorithm (-E null for none)",
                    sa.spi
                )))
            }
            None => None,
        };
        let integrity = match &sa.auth {
            Some((alg, key)) => Some(Integrity::new(*alg, key, keying)?),
            None if sa.protocol == Protocol::Ah => {
                return Err(KeyError(format!(
                    "AH SA {:#x} has no authentication algorithm (-A)",
                    sa.spi
                )))
            }
            None => None,
        };
        Ok(SaState {
            sa: sa.clone(),
            cipher,
            integrity,
            seq_out: 0,
            window: Window::new(sa.replay_window, sa.esn),
            counters: SaCounters::default(),
            born: None,
            soft_passed: false,
            rng: StdRng::from_entropy(),
            next_iv: None,
        })
    }

    /// The SA as configured.
    pub fn sa(&self) -> &Sa {
        &self.sa
    }

    pub fn counters(&self) -> &SaCounters {
        &self.counters
    }

    /// The highest sequence number sent, and the highest accepted.
    pub fn sequence(&self) -> (u64, u64) {
        (self.seq_out, self.window.top())
    }

    /// Whether the soft lifetime has passed (time to rekey).
    pub fn soft_expired(&self) -> bool {
        self.soft_passed
    }

    /// Whether the SA authenticates what it carries (AH, an AEAD, or ESP
    /// with `-A`): only then is the replay window used (RFC 4303 §3.4.3).
    pub(crate) fn authenticates(&self) -> bool {
        self.integrity.is_some() || self.cipher.as_ref().is_some_and(Cipher::is_aead)
    }

    pub(crate) fn protocol(&self) -> Protocol {
        self.sa.protocol
    }

    pub(crate) fn mode(&self) -> Mode {
        self.sa.mode
    }

    /// Uses `iv` for the next packet instead of a fresh one: how the RFCs'
    /// sample packets are reproduced. Only the next packet.
    pub fn set_next_iv(&mut self, iv: &[u8]) {
        self.next_iv = Some(iv.to_vec());
    }

    /// Sets the next outbound sequence number to `seq` (test vectors start
    /// at the RFC's number; a restored SA continues where it stopped).
    pub fn set_next_seq(&mut self, seq: u64) {
        self.seq_out = seq.saturating_sub(1);
    }

    /// Restarts the inbound window at `top` (a restored SA).
    pub fn set_window_top(&mut self, top: u64) {
        self.window.restart_at(top);
    }

    /// Takes the next outbound sequence number, or `None` when it would
    /// cycle (RFC 4303 §3.3.3: the SA must be replaced first).
    pub(crate) fn next_seq(&mut self) -> Option<u64> {
        let max = if self.sa.esn {
            u64::MAX
        } else {
            u64::from(u32::MAX)
        };
        if self.seq_out >= max {
            self.counters.seq_overflow += 1;
            return None;
        }
        self.seq_out += 1;
        Some(self.seq_out)
    }

    /// Fills `iv` for a CBC packet: fresh random bytes from the SA's own
    /// generator (ChaCha12 seeded from the OS), unless one was set.
    pub(crate) fn fill_iv(&mut self, iv: &mut [u8]) {
        match self.next_iv.take() {
            Some(v) if v.len() == iv.len() => iv.copy_from_slice(&v),
            _ => self.rng.fill_bytes(iv),
        }
    }

    /// The AEAD IV: the sequence number, unique per key as RFC 4106 §3.1
    /// asks, unless one was set.
    pub(crate) fn aead_iv(&mut self, seq: u64) -> [u8; 8] {
        match self.next_iv.take() {
            Some(v) => <[u8; 8]>::try_from(v.as_slice()).unwrap_or(seq.to_be_bytes()),
            None => seq.to_be_bytes(),
        }
    }

    /// Checks the lifetimes at engine time `now` (seconds); `false` once the
    /// hard lifetime has passed.
    #[inline]
    pub(crate) fn alive(&mut self, now: u64) -> bool {
        let born = *self.born.get_or_insert(now);
        let age = now.saturating_sub(born);
        if self.sa.lifetime_soft.is_some_and(|s| age >= s) {
            self.soft_passed = true;
        }
        if self.sa.lifetime_hard.is_some_and(|h| age >= h) {
            self.counters.expired += 1;
            return false;
        }
        true
    }
}

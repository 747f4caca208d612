//! The cryptography of one SA without the packet: the baseline
//! `kansoku bench ipsec` puts beside the engine's encap and decap. The same
//! keyed primitives and the same calls as [`crate::Engine`], on the bytes
//! ESP would encrypt and authenticate for an IP packet of a given length
//! (or AH authenticate), in as many buffers as the engine's packets, sealed
//! all, then opened all, as the bench runs encap then decap: what encap +
//! decap takes beyond this is what the engine adds (parsing, headers,
//! padding, copies, the replay window).

use crate::config::{Mode, Protocol, Sa};
use crate::crypto::{Cipher, Integrity, KeyError, Keying, MAX_ICV};
use crate::esp::spi_seq as esp_spi_seq;

pub struct CryptoOnly {
    protocol: Protocol,
    /// Packets' bytes, taken in turn: the same memory the engine's packets
    /// occupy, so that caches favour neither.
    bufs: Vec<Vec<u8>>,
    /// Each packet's ICV (or tag), from `seal` to `open`.
    icvs: Vec<[u8; MAX_ICV]>,
    cipher: Option<Cipher>,
    integrity: Option<Integrity>,
    esn: bool,
    spi: u32,
    /// The bytes covered by the ICV besides the ciphertext (SPI, sequence
    /// number, IV), or AH's (IP header, AH header).
    head: usize,
}

impl CryptoOnly {
    /// For `sa` and IP packets of `ip_len` bytes with a `header_len`-byte
    /// IP header (20 or 40), cycling through `packets` buffers (as many as
    /// the engine is given, for the same memory footprint).
    pub fn new(
        sa: &Sa,
        keying: Keying,
        ip_len: usize,
        header_len: usize,
        packets: usize,
    ) -> Result<CryptoOnly, KeyError> {
        let cipher = sa
            .enc
            .as_ref()
            .map(|(a, k)| Cipher::new(*a, k, keying))
            .transpose()?;
        let integrity = sa
            .auth
            .as_ref()
            .map(|(a, k)| Integrity::new(*a, k, keying))
            .transpose()?;
        // What the SA carries: the upper-layer payload in transport mode,
        // the whole packet in tunnel mode.
        let carried = match sa.mode {
            Mode::Transport => ip_len.saturating_sub(header_len),
            Mode::Tunnel => ip_len,
        };
        let (len, head) = match (&cipher, sa.protocol) {
            (Some(c), Protocol::Esp) => {
                let a = c.align();
                ((carried + 2).div_ceil(a) * a, 8 + c.iv_len())
            }
            _ => (carried, header_len + 24),
        };
        Ok(CryptoOnly {
            protocol: sa.protocol,
            cipher,
            integrity,
            esn: sa.esn,
            spi: sa.spi,
            bufs: vec![vec![0x5a; head + len]; packets.max(1)],
            icvs: vec![[0; MAX_ICV]; packets.max(1)],
            head,
        })
    }

    /// Bytes the primitives encrypt (ESP) or authenticate (AH) per packet.
    pub fn bytes(&self) -> usize {
        self.bufs[0].len() - self.head
    }

    /// Encrypts and computes the ICV of packet `i` (of the `packets`
    /// given to [`CryptoOnly::new`]) with sequence number `seq`; the ICV is
    /// kept for [`CryptoOnly::open`].
    pub fn seal(&mut self, i: usize, seq: u64) -> bool {
        let i = i % self.bufs.len();
        let (head, body) = self.bufs[i].split_at_mut(self.head);
        // `head` is at least 8 bytes (SPI and sequence number, or more),
        // written at once and used from the array as the associated data,
        // as the engine does (reading them back at once from the packet
        // where they were just stored in parts would stall).
        let spi_seq = esp_spi_seq(self.spi, seq);
        head[..8].copy_from_slice(&spi_seq);
        let hi = ((seq >> 32) as u32).to_be_bytes();
        let esn: &[u8] = if self.esn { &hi } else { &[] };
        let icv = &mut self.icvs[i];
        match (&self.cipher, self.protocol) {
            (Some(c), Protocol::Esp) if c.is_aead() => {
                c.seal(&seq.to_be_bytes(), &spi_seq, body, icv)
            }
            (Some(c), Protocol::Esp) => {
                let n = c.iv_len();
                let mut iv = [0u8; 16];
                iv[..n].copy_from_slice(&head[8..8 + n]);
                if !c.cbc_encrypt(&iv[..n], body) {
                    return false;
                }
                if let Some(a) = &self.integrity {
                    a.compute(&[head, body, esn], icv);
                }
                true
            }
            _ => match &self.integrity {
                Some(a) => {
                    a.compute(&[head, body, esn], icv);
                    true
                }
                None => false,
            },
        }
    }

    /// Verifies and decrypts packet `i` as sealed with `seq`; `false` if
    /// the check failed (it never should: this is the engine's work
    /// without the packet).
    pub fn open(&mut self, i: usize, seq: u64) -> bool {
        let i = i % self.bufs.len();
        let (head, body) = self.bufs[i].split_at_mut(self.head);
        let hi = ((seq >> 32) as u32).to_be_bytes();
        let esn: &[u8] = if self.esn { &hi } else { &[] };
        let icv = &self.icvs[i];
        match (&self.cipher, self.protocol) {
            (Some(c), Protocol::Esp) if c.is_aead() => {
                c.open(&seq.to_be_bytes(), &head[..8], body, icv)
            }
            (Some(c), Protocol::Esp) => {
                if let Some(a) = &self.integrity {
                    if !a.verify(&[head, body, esn], &icv[..a.icv_len()]) {
                        return false;
                    }
                }
                let n = c.iv_len();
                let mut iv = [0u8; 16];
                iv[..n].copy_from_slice(&head[8..8 + n]);
                c.cbc_decrypt(&iv[..n], body)
            }
            _ => match &self.integrity {
                Some(a) => a.verify(&[head, body, esn], &icv[..a.icv_len()]),
                None => false,
            },
        }
    }
}

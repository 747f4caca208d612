//! ESP (RFC 4303): the packet from the SPI to the ICV.
//!
//! ```text
//! SPI(4) | sequence number, low 32 bits(4) | IV | payload | padding
//!        | pad length(1) | next header(1) | ICV
//! ```
//!
//! The payload, padding, pad length and next header are encrypted. With a
//! separate integrity algorithm the ICV covers SPI to next header, with the
//! ESN's high 32 bits appended (§2.2.1) though not sent; with an AEAD
//! (RFC 4106, RFC 7634) the associated data is SPI and sequence number
//! (SPI, high and low halves with ESN) and the tag is the ICV. Padding is
//! 1, 2, 3, ... (§2.4), to the cipher's block (4 bytes for null and the
//! AEADs).

use crate::crypto::MAX_ICV;
use crate::reject::Reject;
use crate::sa::SaState;
use wire::esp::EspPacket;

/// The padding: 1, 2, 3, ... up to the longest a 16-byte block needs.
const PADDING: [u8; 15] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];

/// Bytes ESP puts before the payload for `sa`: SPI, sequence number, IV.
pub(crate) fn head_len(sa: &SaState) -> usize {
    8 + sa.cipher.as_ref().map_or(0, |c| c.iv_len())
}

/// Appends to `out` the ESP packet that carries `payload` with next header
/// `next_header`, taking the SA's next sequence number.
pub(crate) fn seal(
    sa: &mut SaState,
    payload: &[u8],
    next_header: u8,
    out: &mut Vec<u8>,
) -> Result<(), Reject> {
    let start = out.len();
    out.reserve(head_len(sa) + payload.len() + 64);
    out.resize(start + head_len(sa), 0);
    out.extend_from_slice(payload);
    seal_at(sa, out, start, next_header)
}

/// Seals, in place, the ESP packet that starts at `start` in `out`: the
/// first [`head_len`] bytes there are filled in (SPI, sequence number, IV),
/// the payload after them up to the end of `out` is encrypted, and the
/// trailer and ICV are appended. Taking the SA's next sequence number.
pub(crate) fn seal_at(
    sa: &mut SaState,
    out: &mut Vec<u8>,
    start: usize,
    next_header: u8,
) -> Result<(), Reject> {
    let seq = sa.next_seq().ok_or(Reject::SeqOverflow)?;
    let Some(cipher) = sa.cipher.as_ref() else {
        return Err(Reject::NoSa);
    };
    let iv_len = cipher.iv_len();
    let align = cipher.align();
    let tag_len = cipher.tag_len();
    let icv_len = sa.integrity.as_ref().map_or(0, |i| i.icv_len());
    let body = start + 8 + iv_len;
    let payload_len = out.len().saturating_sub(body);
    let pad = (align - (payload_len + 2) % align) % align;
    out.reserve(pad + 2 + tag_len + icv_len);
    let spi_seq = spi_seq(sa.sa.spi, seq);
    out[start..start + 8].copy_from_slice(&spi_seq);
    out.extend_from_slice(&PADDING[..pad]);
    out.extend_from_slice(&[pad as u8, next_header]);

    let hi = ((seq >> 32) as u32).to_be_bytes();
    if cipher.is_aead() {
        let iv = sa.aead_iv(seq);
        let cipher = sa.cipher.as_ref().ok_or(Reject::NoSa)?;
        out[start + 8..body].copy_from_slice(&iv);
        let mut aad = [0u8; 12];
        let aad = esp_aad(&spi_seq, sa.sa.esn, hi, &mut aad);
        // The tag is written by the cipher where it goes.
        let tag_at = out.len();
        out.resize(tag_at + tag_len, 0);
        let (text, tag) = out[body..].split_at_mut(tag_at - body);
        if !cipher.seal(&iv, aad, text, tag) {
            out.truncate(tag_at);
            return Err(Reject::Malformed);
        }
    } else {
        let mut iv = [0u8; 16];
        sa.fill_iv(&mut iv[..iv_len]);
        out[start + 8..body].copy_from_slice(&iv[..iv_len]);
        let cipher = sa.cipher.as_ref().ok_or(Reject::NoSa)?;
        if !cipher.cbc_encrypt(&iv[..iv_len], &mut out[body..]) {
            return Err(Reject::Malformed);
        }
        if let Some(integ) = sa.integrity.as_ref() {
            let mut icv = [0u8; MAX_ICV];
            let esn: &[u8] = if sa.sa.esn { &hi } else { &[] };
            integ.compute(&[&out[start..], esn], &mut icv);
            out.extend_from_slice(&icv[..icv_len]);
        }
    }
    sa.counters.packets += 1;
    sa.counters.bytes += payload_len as u64;
    Ok(())
}

/// ESP's first 8 bytes: the SPI and the low 32 bits of `seq`, put
/// together in a register, so that they are stored (and can be read back as
/// the associated data) at once: two 4-byte stores read back by one 8-byte
/// load right after stall store-to-load forwarding.
pub(crate) fn spi_seq(spi: u32, seq: u64) -> [u8; 8] {
    ((u64::from(spi) << 32) | (seq & 0xffff_ffff)).to_be_bytes()
}

/// SPI and sequence number as the AEAD's associated data (RFC 4106 §5).
fn esp_aad<'a>(spi_seq: &[u8], esn: bool, hi: [u8; 4], buf: &'a mut [u8; 12]) -> &'a [u8] {
    if esn {
        buf[..4].copy_from_slice(&spi_seq[..4]);
        buf[4..8].copy_from_slice(&hi);
        buf[8..12].copy_from_slice(&spi_seq[4..8]);
        &buf[..]
    } else {
        buf[..8].copy_from_slice(&spi_seq[..8]);
        &buf[..8]
    }
}

/// The SPI of the ESP packet `esp`.
pub(crate) fn spi(esp: &[u8]) -> Option<u32> {
    let spi = esp.get(wire::esp::field::SPI)?;
    Some(EspPacket::new_unchecked(spi).spi())
}

/// What can be checked of the ESP packet `esp` (SPI to ICV) before any
/// copy or cryptography: its lengths and the replay window. Returns the
/// full sequence number, and the lengths of the head (SPI to IV) and ICV.
fn precheck(sa: &mut SaState, esp: &[u8]) -> Result<(u64, usize, usize), Reject> {
    let Some(cipher) = sa.cipher.as_ref() else {
        return Err(Reject::NoSa);
    };
    let head = 8 + cipher.iv_len();
    let align = cipher.align();
    let icv_len = cipher.tag_len() + sa.integrity.as_ref().map_or(0, |i| i.icv_len());
    let Some(body_len) = esp.len().checked_sub(head + icv_len) else {
        sa.counters.malformed += 1;
        return Err(Reject::Truncated);
    };
    if body_len < 2 || body_len % align != 0 {
        sa.counters.malformed += 1;
        return Err(Reject::Truncated);
    }
    // The head (SPI to IV) is there: `body_len` was taken after it.
    let low = EspPacket::new_unchecked(esp).seq_number();
    let seq = sa.window.infer(low);
    if sa.authenticates() {
        if let Err(e) = sa.window.check(seq) {
            count_replay(sa, e.into());
            return Err(e.into());
        }
    }
    Ok((seq, head, icv_len))
}

/// Checks and decrypts the ESP packet `esp` (SPI to ICV), appending its
/// payload to `out`; returns the next header. The replay window has
/// accepted it when this returns `Ok`.
pub(crate) fn open(sa: &mut SaState, esp: &[u8], out: &mut Vec<u8>) -> Result<u8, Reject> {
    let (seq, head, icv_len) = precheck(sa, esp)?;
    let start = out.len();
    out.extend_from_slice(&esp[head..esp.len() - icv_len]);
    match open_parts(
        sa,
        seq,
        &esp[..head],
        &mut out[start..],
        &esp[esp.len() - icv_len..],
    ) {
        Ok((nh, n)) => {
            out.truncate(start + n);
            Ok(nh)
        }
        Err(e) => {
            out.truncate(start);
            Err(e)
        }
    }
}

/// [`open`] in place: `esp` (SPI to ICV) is decrypted where it is. Returns
/// the next header and the payload's length; the payload starts at
/// [`head_len`].
pub(crate) fn open_in_place(sa: &mut SaState, esp: &mut [u8]) -> Result<(u8, usize), Reject> {
    let (seq, head, icv_len) = precheck(sa, esp)?;
    let (h, rest) = esp.split_at_mut(head);
    let n = rest.len() - icv_len;
    let (body, icv) = rest.split_at_mut(n);
    open_parts(sa, seq, h, body, icv)
}

/// The ICV checked (constant time, before decrypting), `body` decrypted in
/// place, the trailer checked, the window moved. `head` is SPI to IV.
/// Returns the next header and the payload's length within `body`.
fn open_parts(
    sa: &mut SaState,
    seq: u64,
    head: &[u8],
    body: &mut [u8],
    icv: &[u8],
) -> Result<(u8, usize), Reject> {
    let Some(cipher) = sa.cipher.as_ref() else {
        return Err(Reject::NoSa);
    };
    let hi = ((seq >> 32) as u32).to_be_bytes();
    if cipher.is_aead() {
        let mut iv = [0u8; 8];
        iv.copy_from_slice(&head[8..16]);
        let mut aad = [0u8; 12];
        let aad = esp_aad(&head[..8], sa.sa.esn, hi, &mut aad);
        if !cipher.open(&iv, aad, body, icv) {
            sa.counters.integrity_failed += 1;
            return Err(Reject::Integrity);
        }
    } else {
        if let Some(integ) = sa.integrity.as_ref() {
            let esn: &[u8] = if sa.sa.esn { &hi } else { &[] };
            if !integ.verify(&[head, body, esn], icv) {
                sa.counters.integrity_failed += 1;
                return Err(Reject::Integrity);
            }
        }
        if !cipher.cbc_decrypt(&head[8..], body) {
            sa.counters.malformed += 1;
            return Err(Reject::Truncated);
        }
    }
    // The trailer: padding 1, 2, 3, ..., its length, the next header.
    let end = body.len();
    let next_header = body[end - 1];
    let pad = usize::from(body[end - 2]);
    let padding_ok = pad + 2 <= end
        && body[end - 2 - pad..end - 2]
            .iter()
            .enumerate()
            .all(|(i, b)| usize::from(*b) == i + 1);
    if !padding_ok {
        sa.counters.padding_failed += 1;
        return Err(Reject::Padding);
    }
    let n = end - 2 - pad;
    if sa.authenticates() {
        if let Err(e) = sa.window.accept(seq) {
            count_replay(sa, e.into());
            return Err(e.into());
        }
    }
    sa.counters.packets += 1;
    sa.counters.bytes += n as u64;
    Ok((next_header, n))
}

pub(crate) fn count_replay(sa: &mut SaState, r: Reject) {
    match r {
        Reject::TooOld => sa.counters.replay_window += 1,
        _ => sa.counters.replay += 1,
    }
}

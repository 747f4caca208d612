//! The SAs that `ip xfrm state` lists, and `ip -s xfrm state` with its
//! lifetimes and statistics, in iproute2's format (ip/ipxfrm.c,
//! ip/xfrm_state.c; iproute2 6.1):
//!
//! ```text
//! src 10.1.0.1 dst 10.2.0.1
//!     proto esp spi 0x00001001 reqid 1 mode transport
//!     replay-window 32 flag af-unspec
//!     auth-trunc hmac(sha1) 0x0102030405060708090a0b0c0d0e0f1011121314 96
//!     enc cbc(des3_ede) 0x0123456789abcdef0123456789abcdef0123456789abcdef
//!     anti-replay context: seq 0x0, oseq 0x0, bitmap 0x00000000
//!     sel src 0.0.0.0/0 dst 0.0.0.0/0
//! ```
//!
//! (The lines after the first start with a tab.) An entry starts at `src
//! ADDR dst ADDR`; the lines after it, up to the next such line, describe
//! it. Read:
//! - `proto esp|ah spi SPI reqid N mode transport|tunnel` (`-s` adds
//!   `(4097)` and `(0x00000001)`); reqid 0 is none;
//! - `replay-window N` (without the line, [`DEFAULT_REPLAY_WINDOW`]) and its `flag`s: `esn` is 64-bit sequence numbers,
//!   the others are the kernel's business. With ESN or a window over 32 the
//!   kernel keeps the window in `anti-replay esn context:`'s
//!   `replay_window N`, which then counts;
//! - `enc cbc(des3_ede)|cbc(aes)|cbc(blowfish)|ecb(cipher_null) KEY`,
//!   `aead rfc4106(gcm(aes)) KEY 128` (the key then its 4-byte salt, as
//!   setkey's aes-gcm-16), `aead rfc7539esp(chacha20,poly1305) KEY 128`,
//!   `auth-trunc hmac(sha1) KEY 96`, `auth-trunc hmac(sha256) KEY 128`, and
//!   `auth hmac(sha1) KEY` (96 bits, the kernel's default for SHA-1). Also
//!   the short names `ip xfrm state add` takes (`des3_ede`, `aes`,
//!   `blowfish`, `cipher_null`, `sha1`, `sha256`). `ecb(cipher_null)` has no
//!   key word;
//! - `encap type espinudp sport P dport Q addr A` (and `ip xfrm state add`'s
//!   `encap espinudp P Q A`): ESP in UDP, [`Sa::encap_udp`];
//! - `-s`'s `expire add: soft S(sec), hard H(sec)`: the lifetimes (0 is none).
//!
//! Passed over: `sel`, the `anti-replay` contexts, `lastused`, `mark`,
//! `output-mark`, `if_id`, `tfcpad`, `dir`, `pcpu-num`, `crypto offload
//! parameters`, `security context`, `coa`, and `-s`'s current lifetime and
//! statistics.
//!
//! Errors, `LINE:COLUMN: what`, for what kansoku cannot do: protocols other
//! than ESP and AH, modes other than transport and tunnel, IPComp (`comp`),
//! other algorithms, truncations other than 96 bits for SHA-1 and 128 for
//! SHA-256 (so `auth hmac(sha256)`, truncated to 96 bits by default), AEAD
//! ICVs other than 128 bits, keys of lengths setkey would not take,
//! `espinudp-nonike` and `espintcp`, byte and packet limits and `expire use`
//! lifetimes, and keys hidden by `nokeys`. Columns count bytes from 1 (a tab
//! is one). Messages never quote a key, nor a word that may be part of one.

use std::net::IpAddr;

use crate::config::{
    hex_bytes, AuthAlg, EncAlg, Key, Mode, ParseError, Protocol, Sa, DEFAULT_REPLAY_WINDOW,
};

/// A word of a line and where it starts.
#[derive(Clone, Copy, Debug)]
struct Word<'a> {
    text: &'a str,
    line: usize,
    column: usize,
}

impl Word<'_> {
    fn err(&self, message: impl Into<String>) -> ParseError {
        ParseError {
            line: self.line,
            column: self.column,
            message: message.into(),
        }
    }

    /// The word, for a message, unless it may hold a key: more than 8 hex
    /// digits in a row (an SPI has 8), or more than 40 bytes.
    fn shown(&self) -> String {
        let t = self.text;
        let longest_hex_run = t
            .split(|c: char| !c.is_ascii_hexdigit())
            .map(str::len)
            .max()
            .unwrap_or(0);
        if t.len() > 40 || longest_hex_run > 8 {
            return format!("a word of {} bytes", t.len());
        }
        format!("`{}`", t.escape_debug())
    }
}

/// Splits a line at ASCII whitespace.
fn words(line: &str, ln: usize) -> Vec<Word<'_>> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
            continue;
        }
        let start = i;
        while b.get(i).is_some_and(|c| !c.is_ascii_whitespace()) {
            i += 1;
        }
        // Whitespace is ASCII, so these are char boundaries.
        if let Some(text) = line.get(start..i) {
            out.push(Word {
                text,
                line: ln,
                column: start + 1,
            });
        }
    }
    out
}

/// The multi-line parts of an entry, for the lines that continue them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Section {
    Other,
    EsnContext,
    LifetimeCurrent,
    Stats,
}

/// An entry as far as it has been read.
struct Entry<'a> {
    at: Word<'a>,
    src: IpAddr,
    dst: IpAddr,
    proto: Option<(Word<'a>, Protocol, u32, Option<u32>, Mode)>,
    replay_window: u32,
    esn_window: Option<u32>,
    esn: bool,
    enc: Option<(Word<'a>, EncAlg, Key)>,
    auth: Option<(Word<'a>, AuthAlg, Key)>,
    encap: Option<(Word<'a>, u16, u16)>,
    lifetime_hard: Option<u64>,
    lifetime_soft: Option<u64>,
    section: Section,
}

/// Reads `ip xfrm state` (or `ip -s xfrm state`) output. Errors are
/// `LINE:COLUMN: what was expected`.
pub fn parse_xfrm_state(text: &str) -> Result<Vec<Sa>, ParseError> {
    let mut sas = Vec::new();
    let mut cur: Option<Entry> = None;
    for (ln, line) in text.lines().enumerate() {
        let ws = words(line, ln + 1);
        let Some(first) = ws.first() else { continue };
        if first.text == "src" {
            if let Some(e) = cur.take() {
                sas.push(finish(e)?);
            }
            cur = Some(start(&ws)?);
            continue;
        }
        let Some(e) = cur.as_mut() else {
            return Err(first.err(format!(
                "expected `src ADDRESS dst ADDRESS`, the first line of an `ip xfrm state` entry, found {}",
                first.shown()
            )));
        };
        entry_line(e, &ws)?;
    }
    if let Some(e) = cur.take() {
        sas.push(finish(e)?);
    }
    Ok(sas)
}

/// The word after `ws[i]`, or an error at the line's end.
fn after<'a>(ws: &[Word<'a>], i: usize, what: &str) -> Result<Word<'a>, ParseError> {
    if let Some(w) = ws.get(i + 1) {
        return Ok(*w);
    }
    let last = ws.get(i).or(ws.last());
    Err(match last {
        Some(l) => ParseError {
            line: l.line,
            column: l.column + l.text.len(),
            message: format!("expected {what}, found the end of the line"),
        },
        None => ParseError {
            line: 1,
            column: 1,
            message: format!("expected {what}"),
        },
    })
}

fn address(w: &Word<'_>) -> Result<IpAddr, ParseError> {
    if w.text.contains('/') {
        return Err(w.err(
            "an address with a prefix length: this looks like `ip xfrm policy` output; kansoku reads `ip xfrm state`",
        ));
    }
    w.text.parse().map_err(|_| {
        w.err(format!(
            "expected an IPv4 or IPv6 address, found {}",
            w.shown()
        ))
    })
}

/// `src ADDR dst ADDR`.
fn start<'a>(ws: &[Word<'a>]) -> Result<Entry<'a>, ParseError> {
    let src = address(&after(ws, 0, "the source address")?)?;
    let d = after(ws, 1, "dst")?;
    if d.text != "dst" {
        return Err(d.err(format!("expected dst, found {}", d.shown())));
    }
    let dw = after(ws, 2, "the destination address")?;
    let dst = address(&dw)?;
    if src.is_ipv4() != dst.is_ipv4() {
        return Err(dw.err("source and destination are of different IP versions"));
    }
    if let Some(extra) = ws.get(4) {
        return Err(extra.err("unexpected word after `src ADDRESS dst ADDRESS`"));
    }
    let at = ws.first().copied().unwrap_or(dw);
    Ok(Entry {
        at,
        src,
        dst,
        proto: None,
        replay_window: DEFAULT_REPLAY_WINDOW,
        esn_window: None,
        esn: false,
        enc: None,
        auth: None,
        encap: None,
        lifetime_hard: None,
        lifetime_soft: None,
        section: Section::Other,
    })
}

/// A number, without what `-s` puts after it in parentheses.
fn number<T: TryFrom<u64>>(w: &Word<'_>, what: &str) -> Result<T, ParseError> {
    let t = w.text.split('(').next().unwrap_or("");
    let t = t.strip_suffix(',').unwrap_or(t);
    let v = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) if !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()) => {
            u64::from_str_radix(h, 16).ok()
        }
        Some(_) => None,
        None if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) => t.parse().ok(),
        None => None,
    };
    v.and_then(|v| T::try_from(v).ok())
        .ok_or_else(|| w.err(format!("expected {what}, found {}", w.shown())))
}

/// `N(sec)` or `N(sec),`, seconds.
fn seconds(w: &Word<'_>) -> Result<u64, ParseError> {
    let t = w.text.strip_suffix(',').unwrap_or(w.text);
    t.strip_suffix("(sec)")
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| w.err(format!("expected SECONDS(sec), found {}", w.shown())))
}

fn entry_line<'a>(e: &mut Entry<'a>, ws: &[Word<'a>]) -> Result<(), ParseError> {
    let Some(first) = ws.first() else {
        return Ok(());
    };
    match first.text {
        "proto" => proto_line(e, ws),
        "replay-window" if e.section == Section::Stats => Ok(()),
        "replay-window" => replay_line(e, ws),
        "enc" | "aead" | "auth" | "auth-trunc" => algorithm_line(e, ws),
        "comp" => Err(first.err("IPComp (comp): kansoku does not compress")),
        "encap" => encap_line(e, ws),
        "anti-replay" => {
            e.section = if ws.get(1).is_some_and(|w| w.text == "esn") {
                Section::EsnContext
            } else {
                Section::Other
            };
            Ok(())
        }
        "seq-hi" => Ok(()),
        "replay_window" => {
            e.esn_window = Some(number(&after(ws, 0, "a window size")?, "a window size")?);
            Ok(())
        }
        "lifetime" => {
            e.section = if ws.get(1).is_some_and(|w| w.text == "current:") {
                Section::LifetimeCurrent
            } else {
                Section::Other
            };
            Ok(())
        }
        "limit:" => limit_line(ws),
        "expire" => expire_line(e, ws),
        "add" if e.section == Section::LifetimeCurrent => Ok(()),
        t if e.section == Section::LifetimeCurrent && t.ends_with("(bytes),") => Ok(()),
        "stats:" => {
            e.section = Section::Stats;
            Ok(())
        }
        "sel" | "lastused" | "mark" | "output-mark" | "if_id" | "tfcpad" | "dir" | "pcpu-num"
        | "crypto" | "security" | "coa" => Ok(()),
        _ if e.section == Section::EsnContext
            && ws
                .iter()
                .all(|w| w.text.len() <= 8 && w.text.bytes().all(|b| b.is_ascii_hexdigit())) =>
        {
            Ok(()) // the replay bitmap
        }
        _ => Err(first.err(format!(
            "unknown line in an `ip xfrm state` entry, starting with {}",
            first.shown()
        ))),
    }
}

/// `proto esp spi 0x00001001 reqid 1 mode transport`.
fn proto_line<'a>(e: &mut Entry<'a>, ws: &[Word<'a>]) -> Result<(), ParseError> {
    let first = ws.first().copied().unwrap_or(e.at);
    if e.proto.is_some() {
        return Err(first.err("a second `proto` line in one entry"));
    }
    let p = after(ws, 0, "a protocol (esp or ah)")?;
    let protocol = match p.text {
        "esp" => Protocol::Esp,
        "ah" => Protocol::Ah,
        _ => return Err(p.err(format!("protocol {}: kansoku does esp and ah", p.shown()))),
    };
    let mut spi = None;
    let mut reqid = None;
    let mut mode = None;
    let mut i = 2;
    while let Some(k) = ws.get(i) {
        let v = after(ws, i, &format!("a value after {}", k.shown()))?;
        match k.text {
            "spi" => {
                let s: u32 = number(&v, "an SPI (a 32-bit number)")?;
                if s < 256 {
                    return Err(v.err("SPIs 0 to 255 are reserved (RFC 4303 §2.1)"));
                }
                spi = Some(s);
            }
            "reqid" => reqid = Some(number::<u32>(&v, "a reqid")?).filter(|&r| r != 0),
            "mode" => {
                mode = Some(match v.text {
                    "transport" => Mode::Transport,
                    "tunnel" => Mode::Tunnel,
                    _ => {
                        return Err(v.err(format!(
                            "mode {}: kansoku does transport and tunnel",
                            v.shown()
                        )))
                    }
                })
            }
            _ => return Err(k.err(format!("expected spi, reqid or mode, found {}", k.shown()))),
        }
        i += 2;
    }
    let Some(spi) = spi else {
        return Err(first.err("expected `spi SPI` on the proto line"));
    };
    let Some(mode) = mode else {
        return Err(first.err("expected `mode transport|tunnel` on the proto line"));
    };
    e.proto = Some((first, protocol, spi, reqid, mode));
    Ok(())
}

/// `replay-window 32 [seq 0x...] [flag af-unspec esn ...] [extra_flag ...] [(0x...)]`.
fn replay_line<'a>(e: &mut Entry<'a>, ws: &[Word<'a>]) -> Result<(), ParseError> {
    e.replay_window = number(&after(ws, 0, "a window size")?, "a window size")?;
    let mut flags = false;
    let mut i = 2;
    while let Some(w) = ws.get(i) {
        i += 1;
        match w.text {
            "seq" => i += 1,
            "flag" | "extra_flag" => flags = true,
            "esn" if flags => e.esn = true,
            "noecn" | "decap-dscp" | "nopmtudisc" | "wildrecv" | "icmp" | "af-unspec"
            | "align4" | "dont-encap-dscp" | "oseq-may-wrap"
                if flags => {}
            t if t.starts_with("(0x") => {}
            // Flags iproute2 has no name for, in hex.
            t if flags && t.bytes().all(|b| b.is_ascii_hexdigit()) => {}
            _ => {
                return Err(w.err(format!(
                    "unexpected {} on the replay-window line",
                    w.shown()
                )))
            }
        }
    }
    Ok(())
}

/// The kernel's cipher names, and `ip xfrm state add`'s short ones.
fn enc_alg(name: &str) -> Option<EncAlg> {
    Some(match name {
        "cbc(des3_ede)" | "des3_ede" => EncAlg::TripleDesCbc,
        "cbc(aes)" | "aes" => EncAlg::AesCbc,
        "cbc(blowfish)" | "blowfish" => EncAlg::BlowfishCbc,
        "ecb(cipher_null)" | "cipher_null" => EncAlg::Null,
        _ => return None,
    })
}

fn aead_alg(name: &str) -> Option<EncAlg> {
    Some(match name {
        "rfc4106(gcm(aes))" => EncAlg::AesGcm16,
        "rfc7539esp(chacha20,poly1305)" => EncAlg::ChaCha20Poly1305,
        _ => return None,
    })
}

fn auth_alg(name: &str) -> Option<AuthAlg> {
    Some(match name {
        "hmac(sha1)" | "sha1" => AuthAlg::HmacSha1_96,
        "hmac(sha256)" | "sha256" => AuthAlg::HmacSha256_128,
        _ => return None,
    })
}

/// A cipher (enc, aead) or an integrity algorithm (auth, auth-trunc).
enum Alg {
    Enc(EncAlg),
    Auth(AuthAlg),
}

/// `enc NAME KEY`, `aead NAME KEY ICV-BITS`, `auth NAME KEY`,
/// `auth-trunc NAME KEY TRUNC-BITS`; `-s` puts `(N bits)` after the key.
fn algorithm_line<'a>(e: &mut Entry<'a>, ws: &[Word<'a>]) -> Result<(), ParseError> {
    let Some(kind) = ws.first().copied() else {
        return Ok(());
    };
    let name = after(ws, 0, "an algorithm")?;
    let alg = match kind.text {
        "enc" => Alg::Enc(enc_alg(name.text).ok_or_else(|| {
            name.err(format!(
                "cipher {}: kansoku does cbc(des3_ede), cbc(aes), cbc(blowfish) and ecb(cipher_null)",
                name.shown()
            ))
        })?),
        "aead" => Alg::Enc(aead_alg(name.text).ok_or_else(|| {
            name.err(format!(
                "AEAD {}: kansoku does rfc4106(gcm(aes)) and rfc7539esp(chacha20,poly1305)",
                name.shown()
            ))
        })?),
        _ => {
            let a = auth_alg(name.text).ok_or_else(|| {
                name.err(format!(
                    "integrity algorithm {}: kansoku does hmac(sha1) and hmac(sha256)",
                    name.shown()
                ))
            })?;
            if kind.text == "auth" && a == AuthAlg::HmacSha256_128 {
                return Err(name.err(
                    "`auth hmac(sha256)` is truncated to 96 bits (the kernel's default); kansoku's hmac-sha256 is HMAC-SHA-256-128, `auth-trunc hmac(sha256) KEY 128`",
                ));
            }
            Alg::Auth(a)
        }
    };
    // The key: no word for an empty one (ecb(cipher_null)).
    let mut i = 2;
    let key = match ws.get(i) {
        Some(w) if w.text.starts_with("0x") || w.text.starts_with("0X") => {
            i += 1;
            let hex = w.text.get(2..).unwrap_or("");
            Key::new(
                hex_bytes(hex)
                    .ok_or_else(|| w.err("expected a key of whole bytes in hex digits"))?,
            )
        }
        Some(w) if w.text == "<<Keys" => {
            return Err(w.err("keys hidden (`nokeys`): kansoku needs them"));
        }
        _ if matches!(alg, Alg::Enc(EncAlg::Null)) => Key::new(Vec::new()),
        Some(w) => return Err(w.err("expected a key: 0x and hex digits")),
        None => {
            return Err(ParseError {
                line: name.line,
                column: name.column + name.text.len(),
                message: "expected a key: 0x and hex digits, found the end of the line".into(),
            })
        }
    };
    // `-s`: ` (160 bits)`.
    if ws.get(i).is_some_and(|w| w.text.starts_with('('))
        && ws.get(i + 1).is_some_and(|w| w.text == "bits)")
    {
        i += 2;
    }
    let bits = match kind.text {
        "aead" | "auth-trunc" => {
            let w = after(ws, i - 1, "a length in bits")?;
            i += 1;
            Some((w, number::<u32>(&w, "a length in bits")?))
        }
        _ => None,
    };
    if let Some(extra) = ws.get(i) {
        return Err(extra.err(format!(
            "unexpected word after the {} line's key",
            kind.text
        )));
    }
    let key_word = ws.get(2).copied().unwrap_or(name);
    match alg {
        Alg::Enc(a) => {
            if e.enc.is_some() {
                return Err(kind.err("a second cipher (enc or aead) in one entry"));
            }
            if !a.key_len_ok(key.len()) {
                return Err(key_word.err(format!(
                    "{} takes {}, this key has {}",
                    a.name(),
                    a.key_lens(),
                    key.len()
                )));
            }
            if let Some((w, b)) = bits {
                if b != 128 {
                    return Err(w.err(format!(
                        "a {b}-bit ICV: kansoku's {} has a 128-bit one",
                        a.name()
                    )));
                }
            }
            e.enc = Some((kind, a, key));
        }
        Alg::Auth(a) => {
            if e.auth.is_some() {
                return Err(kind.err("a second integrity algorithm in one entry"));
            }
            if key.len() != a.key_len() {
                return Err(key_word.err(format!(
                    "{} takes a {}-byte key, this one has {}",
                    a.name(),
                    a.key_len(),
                    key.len()
                )));
            }
            let want = match a {
                AuthAlg::HmacSha1_96 => 96,
                AuthAlg::HmacSha256_128 => 128,
            };
            if let Some((w, b)) = bits {
                if b != want {
                    return Err(w.err(format!(
                        "truncated to {b} bits: kansoku's {} is truncated to {want}",
                        a.name()
                    )));
                }
            }
            e.auth = Some((kind, a, key));
        }
    }
    Ok(())
}

/// `encap type espinudp sport 4500 dport 4500 addr 0.0.0.0`, or
/// `encap espinudp 4500 4500 0.0.0.0`.
fn encap_line<'a>(e: &mut Entry<'a>, ws: &[Word<'a>]) -> Result<(), ParseError> {
    let first = ws.first().copied().unwrap_or(e.at);
    let labelled = ws.get(1).is_some_and(|w| w.text == "type");
    // The i-th value (from 1): word i, or word 2i after its label.
    let at = |i: usize, label: &str| -> Result<Word<'a>, ParseError> {
        if !labelled {
            return after(ws, i - 1, label);
        }
        let l = after(ws, 2 * i - 2, label)?;
        if l.text != label {
            return Err(l.err(format!("expected {label}, found {}", l.shown())));
        }
        after(ws, 2 * i - 1, &format!("a value after {label}"))
    };
    let t = at(1, "type")?;
    match t.text {
        "espinudp" => {}
        "espinudp-nonike" => {
            return Err(
                t.err("espinudp-nonike (non-IKE markers): kansoku does RFC 3948's espinudp only")
            )
        }
        "espintcp" => return Err(t.err("ESP in TCP (RFC 8229): kansoku does ESP in UDP only")),
        _ => {
            return Err(t.err(format!(
                "encapsulation {}: kansoku does espinudp",
                t.shown()
            )))
        }
    }
    let sport = number(&at(2, "sport")?, "a port")?;
    let dport = number(&at(3, "dport")?, "a port")?;
    let a = at(4, "addr")?;
    address(&a)?;
    let last = if labelled { 8 } else { 4 };
    if let Some(extra) = ws.get(last + 1) {
        return Err(extra.err("unexpected word after the encap line's address"));
    }
    if e.encap.is_some() {
        return Err(first.err("a second encap line in one entry"));
    }
    e.encap = Some((first, sport, dport));
    Ok(())
}

/// `limit: soft (INF)(bytes), hard (INF)(bytes)`: kansoku keeps no byte or
/// packet limits, so they must be infinite.
fn limit_line(ws: &[Word<'_>]) -> Result<(), ParseError> {
    for i in [2, 4] {
        let w = after(ws, i - 1, "a limit")?;
        let t = w.text.strip_suffix(',').unwrap_or(w.text);
        let v = t
            .strip_suffix("(bytes)")
            .or_else(|| t.strip_suffix("(packets)"));
        match v {
            Some("(INF)") => {}
            Some(_) => {
                return Err(
                    w.err("a byte or packet limit: kansoku's SA lifetimes are in seconds only")
                )
            }
            None => {
                return Err(w.err(format!(
                    "expected N(bytes) or N(packets), found {}",
                    w.shown()
                )))
            }
        }
    }
    Ok(())
}

/// `expire add: soft 3000(sec), hard 3600(sec)`; `expire use:` must be 0.
fn expire_line(e: &mut Entry<'_>, ws: &[Word<'_>]) -> Result<(), ParseError> {
    let what = after(ws, 0, "add: or use:")?;
    let soft_w = after(ws, 2, "the soft lifetime")?;
    let hard_w = after(ws, 4, "the hard lifetime")?;
    let (soft, hard) = (seconds(&soft_w)?, seconds(&hard_w)?);
    match what.text {
        "add:" => {
            e.lifetime_soft = Some(soft).filter(|&s| s != 0);
            e.lifetime_hard = Some(hard).filter(|&h| h != 0);
            Ok(())
        }
        "use:" if soft == 0 && hard == 0 => Ok(()),
        "use:" => {
            Err(what.err("lifetimes from first use: kansoku's count from when the SA is added"))
        }
        _ => Err(what.err(format!("expected add: or use:, found {}", what.shown()))),
    }
}

/// The SA an entry describes.
fn finish(e: Entry<'_>) -> Result<Sa, ParseError> {
    let Some((proto_w, protocol, spi, reqid, mode)) = e.proto else {
        return Err(e
            .at
            .err("this entry has no `proto PROTO spi SPI reqid N mode MODE` line"));
    };
    let (enc, auth) = match protocol {
        Protocol::Esp => {
            let Some((_, alg, key)) = e.enc else {
                return Err(proto_w.err("an ESP SA needs a cipher: an `enc` or `aead` line"));
            };
            if let (true, Some((w, _, _))) = (alg.is_aead(), &e.auth) {
                return Err(w.err(format!(
                    "{} authenticates by itself: no auth with it",
                    alg.name()
                )));
            }
            (Some((alg, key)), e.auth.map(|(_, a, k)| (a, k)))
        }
        Protocol::Ah => {
            if let Some((w, _, _)) = e.enc {
                return Err(w.err("AH does not encrypt: enc and aead are for ESP"));
            }
            if let Some((w, _, _)) = e.encap {
                return Err(w.err("ESP in UDP is for ESP, not AH"));
            }
            let Some((_, alg, key)) = e.auth else {
                return Err(proto_w.err("an AH SA needs an `auth-trunc` line"));
            };
            (None, Some((alg, key)))
        }
    };
    Ok(Sa {
        src: e.src,
        dst: e.dst,
        protocol,
        spi,
        mode,
        enc,
        auth,
        replay_window: e.esn_window.unwrap_or(e.replay_window),
        esn: e.esn,
        lifetime_hard: e.lifetime_hard,
        lifetime_soft: e.lifetime_soft,
        reqid,
        encap_udp: e.encap.map(|(_, s, d)| (s, d)),
        line: e.at.line,
    })
}

//! Security associations and policies in setkey(8)'s syntax, as KAME (the
//! paper's stack) and FreeBSD write a `setkey.conf`:
//!
//! ```text
//! add 10.1.0.1 10.2.0.1 esp 0x1001 -m transport -E 3des-cbc 0x0123... -A hmac-sha1 0x4567...;
//! add 10.1.0.1 10.2.0.1 ah 0x2001 -A hmac-sha1 "20-byte-secret-key!!";
//! spdadd 10.1.0.1 10.2.0.1 any -P out ipsec esp/transport//require ah/transport//require;
//! ```
//!
//! Statements end with `;` and may span lines; `#` starts a comment. Other
//! setkey commands (`flush;`, `spdflush;`) are accepted and do nothing here,
//! since a file is read into a fresh table.
//!
//! `add SRC DST PROTO SPI [options] [algorithms];` with
//! - PROTO `esp` or `ah`; SPI decimal or `0x` hex, at least 256 (RFC 4303
//!   reserves 1–255 and 0);
//! - `-m transport|tunnel|any` (`any` is transport here), `-r WINDOW` the
//!   anti-replay window in packets (setkey's own option; 0 turns it off),
//!   `-lh SECONDS` / `-ls SECONDS` the hard and soft lifetimes, `-u ID`
//!   (kept, unused); and kansoku's documented extensions for what setkey
//!   lacks: `-esn`, 64-bit extended sequence numbers (RFC 4303 §2.2.1), and
//!   `-udp-encap SPORT DPORT`, ESP in UDP (RFC 3948; 4500 4500 as IKE
//!   negotiates it);
//! - `-E ALGO KEY` (ESP only): setkey's names `null`, `3des-cbc`,
//!   `blowfish-cbc` (5 to 56 bytes of key), `rijndael-cbc` and its alias
//!   `aes-cbc` (16, 24 or 32 bytes); and `aes-gcm-16` (RFC 4106: the key
//!   followed by its 4-byte salt, 20, 28 or 36 bytes) and `chacha20-poly1305`
//!   (RFC 7634: 32 bytes of key and a 4-byte salt), which carry their own
//!   integrity and take no `-A`;
//! - `-A ALGO KEY`: `hmac-sha1` (20 bytes, HMAC-SHA-1-96) or `hmac-sha256`
//!   (32 bytes, HMAC-SHA-256-128). ESP without `-A` is encryption only, as
//!   the paper ran it; AH needs `-A`.
//! - KEY is `0x` followed by hex digits, or a double-quoted string.
//!
//! `spdadd SRC[/LEN][[PORT]] DST[/LEN][[PORT]] UPPER -P in|out POLICY;`
//! with UPPER `any`, `tcp`, `udp`, `icmp`, `icmp6` or a protocol number, and
//! POLICY `discard`, `none`, or `ipsec` followed by one or more
//! `PROTO/MODE/[TUNSRC-TUNDST]/LEVEL` (LEVEL `default`, `use`, `require` or
//! `unique`, optionally `unique:ID`).

use std::fmt;
use std::net::IpAddr;
use wire::IpProtocol;

/// ESP or AH.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    Esp,
    Ah,
}

impl Protocol {
    /// The IP protocol number (50 for ESP, 51 for AH).
    pub fn number(self) -> u8 {
        match self {
            Protocol::Esp => 50,
            Protocol::Ah => 51,
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Protocol::Esp => "esp",
            Protocol::Ah => "ah",
        })
    }
}

/// How the packet is protected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    Transport,
    Tunnel,
}

/// Encryption (and, for the AEAD ones, integrity) of ESP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EncAlg {
    Null,
    TripleDesCbc,
    BlowfishCbc,
    AesCbc,
    /// AES-GCM with a 16-byte ICV (RFC 4106).
    AesGcm16,
    /// ChaCha20-Poly1305 (RFC 7634).
    ChaCha20Poly1305,
}

impl EncAlg {
    /// By setkey's name (or kansoku's, for the AEADs).
    pub fn from_name(name: &str) -> Option<EncAlg> {
        Some(match name {
            "null" => EncAlg::Null,
            "3des-cbc" => EncAlg::TripleDesCbc,
            "blowfish-cbc" => EncAlg::BlowfishCbc,
            "rijndael-cbc" | "aes-cbc" => EncAlg::AesCbc,
            "aes-gcm-16" => EncAlg::AesGcm16,
            "chacha20-poly1305" => EncAlg::ChaCha20Poly1305,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            EncAlg::Null => "null",
            EncAlg::TripleDesCbc => "3des-cbc",
            EncAlg::BlowfishCbc => "blowfish-cbc",
            EncAlg::AesCbc => "aes-cbc",
            EncAlg::AesGcm16 => "aes-gcm-16",
            EncAlg::ChaCha20Poly1305 => "chacha20-poly1305",
        }
    }

    /// Whether the algorithm authenticates as well (AEAD): no `-A` then.
    pub fn is_aead(self) -> bool {
        matches!(self, EncAlg::AesGcm16 | EncAlg::ChaCha20Poly1305)
    }

    /// Whether `len` bytes is a valid key (with the salt, for the AEADs).
    pub fn key_len_ok(self, len: usize) -> bool {
        match self {
            EncAlg::Null => len == 0,
            EncAlg::TripleDesCbc => len == 24,
            EncAlg::BlowfishCbc => (5..=56).contains(&len),
            EncAlg::AesCbc => matches!(len, 16 | 24 | 32),
            EncAlg::AesGcm16 => matches!(len, 20 | 28 | 36),
            EncAlg::ChaCha20Poly1305 => len == 36,
        }
    }

    /// The key lengths it takes, in words, for error messages.
    pub(crate) fn key_lens(self) -> &'static str {
        match self {
            EncAlg::Null => "no key",
            EncAlg::TripleDesCbc => "24 bytes",
            EncAlg::BlowfishCbc => "5 to 56 bytes",
            EncAlg::AesCbc => "16, 24 or 32 bytes",
            EncAlg::AesGcm16 => "20, 28 or 36 bytes (the key, then its 4-byte salt)",
            EncAlg::ChaCha20Poly1305 => "36 bytes (the key, then its 4-byte salt)",
        }
    }
}

/// Integrity of AH, or of ESP with a non-AEAD cipher.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AuthAlg {
    /// HMAC-SHA-1 truncated to 96 bits (RFC 2404).
    HmacSha1_96,
    /// HMAC-SHA-256 truncated to 128 bits (RFC 4868).
    HmacSha256_128,
}

impl AuthAlg {
    pub fn from_name(name: &str) -> Option<AuthAlg> {
        Some(match name {
            "hmac-sha1" => AuthAlg::HmacSha1_96,
            "hmac-sha256" | "hmac-sha2-256" => AuthAlg::HmacSha256_128,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            AuthAlg::HmacSha1_96 => "hmac-sha1",
            AuthAlg::HmacSha256_128 => "hmac-sha256",
        }
    }

    /// The key length setkey requires.
    pub fn key_len(self) -> usize {
        match self {
            AuthAlg::HmacSha1_96 => 20,
            AuthAlg::HmacSha256_128 => 32,
        }
    }
}

/// Key bytes. Never shown: `Debug` and `Display` say only how long it is.
#[derive(Clone, PartialEq, Eq)]
pub struct Key(Vec<u8>);

impl Key {
    pub fn new(bytes: Vec<u8>) -> Key {
        Key(bytes)
    }

    /// The key itself, for the cipher.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key(<{} bytes>)", self.0.len())
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{} bytes>", self.0.len())
    }
}

/// A security association from an `add` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sa {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub protocol: Protocol,
    pub spi: u32,
    pub mode: Mode,
    /// ESP's cipher and key.
    pub enc: Option<(EncAlg, Key)>,
    /// The integrity algorithm and key (AH; ESP with a non-AEAD cipher).
    pub auth: Option<(AuthAlg, Key)>,
    /// Anti-replay window in packets (`-r`); 0 is off.
    pub replay_window: u32,
    /// 64-bit extended sequence numbers (`-esn`).
    pub esn: bool,
    /// Hard and soft lifetimes in seconds (`-lh`, `-ls`).
    pub lifetime_hard: Option<u64>,
    pub lifetime_soft: Option<u64>,
    /// `-u ID`.
    pub reqid: Option<u32>,
    /// ESP in UDP (RFC 3948): the UDP source and destination ports
    /// (kansoku's `-udp-encap` in setkey files; `ip xfrm state`'s `encap`).
    pub encap_udp: Option<(u16, u16)>,
    /// Where the SA is in its file (1-based line).
    pub line: usize,
}

/// The replay window an SA gets without `-r`: Linux's and strongSwan's default.
pub const DEFAULT_REPLAY_WINDOW: u32 = 32;

/// An address and its prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Prefix {
    pub addr: IpAddr,
    pub len: u8,
}

impl Prefix {
    /// Whether `a` lies inside the prefix.
    pub fn contains(&self, a: IpAddr) -> bool {
        match (self.addr, a) {
            (IpAddr::V4(p), IpAddr::V4(a)) => {
                let m = u32::MAX.checked_shl(32 - u32::from(self.len)).unwrap_or(0);
                u32::from(p) & m == u32::from(a) & m
            }
            (IpAddr::V6(p), IpAddr::V6(a)) => {
                let m = u128::MAX
                    .checked_shl(128 - u32::from(self.len))
                    .unwrap_or(0);
                u128::from(p) & m == u128::from(a) & m
            }
            _ => false,
        }
    }
}

/// The upper-layer protocol a policy selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Upper {
    Any,
    Protocol(u8),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PolicyDir {
    In,
    Out,
}

/// How strictly a transform is applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Level {
    Default,
    Use,
    Require,
    Unique,
}

/// One `PROTO/MODE/[SRC-DST]/LEVEL` of an `ipsec` policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transform {
    pub protocol: Protocol,
    pub mode: Mode,
    /// Tunnel endpoints, in tunnel mode.
    pub tunnel: Option<(IpAddr, IpAddr)>,
    pub level: Level,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PolicyAction {
    Discard,
    None,
    Ipsec(Vec<Transform>),
}

/// A policy from an `spdadd` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    pub src: Prefix,
    pub dst: Prefix,
    pub src_port: Option<u16>,
    pub dst_port: Option<u16>,
    pub upper: Upper,
    pub dir: PolicyDir,
    pub action: PolicyAction,
    pub line: usize,
}

/// Everything a file sets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    pub sas: Vec<Sa>,
    pub policies: Vec<Policy>,
}

/// Where a file is wrong and what was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    /// `LINE:COLUMN: what` (the caller puts the file name in front).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

impl std::error::Error for ParseError {}

/// A word and where it starts.
#[derive(Clone, Copy, Debug)]
struct Word<'a> {
    text: &'a str,
    line: usize,
    column: usize,
}

/// Splits `text` into statements of words: `;` ends a statement, `#` starts
/// a comment to the end of the line, double quotes keep a string (with its
/// quotes) as one word.
fn statements(text: &str) -> Result<Vec<Vec<Word<'_>>>, ParseError> {
    let mut out = Vec::new();
    let mut cur: Vec<Word> = Vec::new();
    for (ln, line) in text.lines().enumerate() {
        let b = line.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            if c == b'#' {
                break;
            }
            if c.is_ascii_whitespace() {
                i += 1;
                continue;
            }
            if c == b';' {
                out.push(std::mem::take(&mut cur));
                i += 1;
                continue;
            }
            let start = i;
            if c == b'"' {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += 1;
                }
                if i >= b.len() {
                    return Err(ParseError {
                        line: ln + 1,
                        column: start + 1,
                        message: "string not closed (expected a closing \" on this line)".into(),
                    });
                }
                i += 1;
            } else {
                while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b';' && b[i] != b'#' {
                    i += 1;
                }
            }
            // Word boundaries fall on ASCII bytes, so this is a char boundary.
            let Some(text) = line.get(start..i) else {
                return Err(ParseError {
                    line: ln + 1,
                    column: start + 1,
                    message: "not UTF-8 text".into(),
                });
            };
            cur.push(Word {
                text,
                line: ln + 1,
                column: start + 1,
            });
        }
    }
    if let Some(w) = cur.first() {
        return Err(ParseError {
            line: w.line,
            column: w.column,
            message: "statement not ended (expected `;`)".into(),
        });
    }
    Ok(out)
}

/// Reads a setkey file. Errors are `LINE:COLUMN: what was expected`.
pub fn parse_setkey(text: &str) -> Result<Config, ParseError> {
    let mut cfg = Config::default();
    for st in statements(text)? {
        let Some(first) = st.first() else { continue };
        match first.text {
            "add" => cfg.sas.push(parse_add(&st)?),
            "spdadd" => cfg.policies.push(parse_spdadd(&st)?),
            "flush" | "spdflush" => {}
            other => {
                return Err(err(
                    first,
                    format!("unknown command `{other}` (expected add, spdadd, flush or spdflush)"),
                ))
            }
        }
    }
    Ok(cfg)
}

fn err(w: &Word<'_>, message: impl Into<String>) -> ParseError {
    ParseError {
        line: w.line,
        column: w.column,
        message: message.into(),
    }
}

/// The words of a statement, one after another, with the statement's end
/// for "expected X, found the end" errors.
struct Words<'w, 'a> {
    words: &'w [Word<'a>],
    at: usize,
}

impl<'a> Words<'_, 'a> {
    fn next(&mut self, what: &str) -> Result<Word<'a>, ParseError> {
        match self.words.get(self.at) {
            Some(w) => {
                self.at += 1;
                Ok(*w)
            }
            None => {
                let last = self.words[self.words.len() - 1];
                Err(ParseError {
                    line: last.line,
                    column: last.column + last.text.len(),
                    message: format!("expected {what}, found the end of the statement"),
                })
            }
        }
    }

    fn peek(&self) -> Option<Word<'a>> {
        self.words.get(self.at).copied()
    }
}

/// Skips setkey's address-family flags (`-4`, `-6`, `-n`).
fn skip_family_flags(ws: &mut Words<'_, '_>) {
    while ws
        .peek()
        .is_some_and(|w| matches!(w.text, "-4" | "-6" | "-n" | "-46"))
    {
        ws.at += 1;
    }
}

fn addr(w: &Word<'_>) -> Result<IpAddr, ParseError> {
    w.text.parse().map_err(|_| {
        err(
            w,
            format!("expected an IPv4 or IPv6 address, found `{}`", w.text),
        )
    })
}

fn number<T: TryFrom<u64>>(w: &Word<'_>, what: &str) -> Result<T, ParseError> {
    let t = w.text;
    let v = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => t.parse::<u64>().ok(),
    };
    v.and_then(|v| T::try_from(v).ok())
        .ok_or_else(|| err(w, format!("expected {what}, found `{t}`")))
}

/// Bytes from hex digits (no `0x`), or None if one is not a hex digit or
/// their number is odd.
pub(crate) fn hex_bytes(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    hex.as_bytes()
        .chunks_exact(2)
        .map(|pair| match pair {
            [hi, lo] => {
                let hi = char::from(*hi).to_digit(16)?;
                let lo = char::from(*lo).to_digit(16)?;
                u8::try_from(hi * 16 + lo).ok()
            }
            _ => None,
        })
        .collect()
}

fn key(w: &Word<'_>) -> Result<Key, ParseError> {
    let t = w.text;
    if let Some(s) = t.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        return Ok(Key(s.as_bytes().to_vec()));
    }
    let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) else {
        return Err(err(w, "expected a key: 0x and hex digits, or a \"string\""));
    };
    if hex.len() % 2 != 0 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(err(
            w,
            "expected a key of whole bytes in hex digits (an even number of them)",
        ));
    }
    let bytes = (0..hex.len() / 2)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap_or(0))
        .collect();
    Ok(Key(bytes))
}

fn parse_add(st: &[Word<'_>]) -> Result<Sa, ParseError> {
    let mut ws = Words { words: st, at: 1 };
    skip_family_flags(&mut ws);
    let src_w = ws.next("the source address")?;
    let src = addr(&src_w)?;
    let dst_w = ws.next("the destination address")?;
    let dst = addr(&dst_w)?;
    if src.is_ipv4() != dst.is_ipv4() {
        return Err(err(
            &dst_w,
            "source and destination are of different IP versions",
        ));
    }
    let p = ws.next("a protocol (esp or ah)")?;
    let protocol = match p.text {
        "esp" => Protocol::Esp,
        "ah" => Protocol::Ah,
        other => {
            return Err(err(
                &p,
                format!("unsupported protocol `{other}` (expected esp or ah)"),
            ))
        }
    };
    let spi_w = ws.next("an SPI")?;
    let spi: u32 = number(&spi_w, "an SPI (a 32-bit number)")?;
    if spi < 256 {
        return Err(err(&spi_w, "SPIs 0 to 255 are reserved (RFC 4303 §2.1)"));
    }
    let mut sa = Sa {
        src,
        dst,
        protocol,
        spi,
        mode: Mode::Transport,
        enc: None,
        auth: None,
        replay_window: DEFAULT_REPLAY_WINDOW,
        esn: false,
        lifetime_hard: None,
        lifetime_soft: None,
        reqid: None,
        encap_udp: None,
        line: st[0].line,
    };
    while let Some(opt) = ws.peek() {
        ws.at += 1;
        match opt.text {
            "-m" => {
                let m = ws.next("a mode (transport or tunnel)")?;
                sa.mode = match m.text {
                    "transport" | "any" => Mode::Transport,
                    "tunnel" => Mode::Tunnel,
                    other => return Err(err(&m, format!("unknown mode `{other}`"))),
                };
            }
            "-r" => sa.replay_window = number(&ws.next("a window size")?, "a window size")?,
            "-lh" => sa.lifetime_hard = Some(number(&ws.next("seconds")?, "seconds")?),
            "-ls" => sa.lifetime_soft = Some(number(&ws.next("seconds")?, "seconds")?),
            "-u" => sa.reqid = Some(number(&ws.next("an id")?, "an id")?),
            "-esn" => sa.esn = true,
            "-udp-encap" => {
                if protocol == Protocol::Ah {
                    return Err(err(&opt, "AH cannot travel in UDP: -udp-encap is for ESP"));
                }
                let s = number(&ws.next("a UDP source port")?, "a UDP port")?;
                let d = number(&ws.next("a UDP destination port")?, "a UDP port")?;
                sa.encap_udp = Some((s, d));
            }
            "-E" => {
                if protocol == Protocol::Ah {
                    return Err(err(&opt, "AH does not encrypt: -E is for ESP"));
                }
                let a = ws.next("an encryption algorithm")?;
                let alg = EncAlg::from_name(a.text).ok_or_else(|| {
                    err(&a, format!("unknown encryption algorithm `{}` (expected null, 3des-cbc, blowfish-cbc, rijndael-cbc, aes-cbc, aes-gcm-16 or chacha20-poly1305)", a.text))
                })?;
                // null may come without a key.
                let k = match ws.peek() {
                    Some(w) if alg == EncAlg::Null && w.text.starts_with('-') => Key(Vec::new()),
                    None if alg == EncAlg::Null => Key(Vec::new()),
                    _ => {
                        let w = ws.next("a key")?;
                        let k = key(&w)?;
                        if !alg.key_len_ok(k.len()) {
                            return Err(err(
                                &w,
                                format!(
                                    "{} takes {}, this key has {}",
                                    alg.name(),
                                    alg.key_lens(),
                                    k.len()
                                ),
                            ));
                        }
                        k
                    }
                };
                sa.enc = Some((alg, k));
            }
            "-A" => {
                let a = ws.next("an authentication algorithm")?;
                let alg = AuthAlg::from_name(a.text).ok_or_else(|| {
                    err(
                        &a,
                        format!(
                            "unknown authentication algorithm `{}` (expected hmac-sha1 or hmac-sha256)",
                            a.text
                        ),
                    )
                })?;
                let w = ws.next("a key")?;
                let k = key(&w)?;
                if k.len() != alg.key_len() {
                    return Err(err(
                        &w,
                        format!(
                            "{} takes a {}-byte key, this one has {}",
                            alg.name(),
                            alg.key_len(),
                            k.len()
                        ),
                    ));
                }
                sa.auth = Some((alg, k));
            }
            other => {
                return Err(err(
                    &opt,
                    format!(
                        "unknown option `{other}` (expected -m, -r, -lh, -ls, -u, -esn, -E or -A)"
                    ),
                ))
            }
        }
    }
    let here = &st[0];
    match (protocol, &sa.enc, &sa.auth) {
        (Protocol::Ah, _, None) => return Err(err(here, "an AH SA needs -A ALGO KEY")),
        (Protocol::Esp, None, _) => return Err(err(here, "an ESP SA needs -E ALGO KEY")),
        (Protocol::Esp, Some((e, _)), Some(_)) if e.is_aead() => {
            return Err(err(
                here,
                format!("{} authenticates by itself: no -A with it", e.name()),
            ))
        }
        _ => {}
    }
    Ok(sa)
}

/// `ADDR[/LEN][[PORT]]`.
fn range(w: &Word<'_>) -> Result<(Prefix, Option<u16>), ParseError> {
    let (rest, port) = match w.text.strip_suffix(']').and_then(|r| r.rsplit_once('[')) {
        Some((r, "any")) => (r, None),
        Some((r, p)) => (
            r,
            Some(
                p.parse::<u16>()
                    .map_err(|_| err(w, format!("expected a port, found `{p}`")))?,
            ),
        ),
        None => (w.text, None),
    };
    let (a, len) = match rest.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (rest, None),
    };
    let addr: IpAddr = a.parse().map_err(|_| {
        err(
            w,
            format!("expected ADDRESS[/LENGTH][[PORT]], found `{}`", w.text),
        )
    })?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = match len {
        Some(l) => l
            .parse::<u8>()
            .ok()
            .filter(|&l| l <= max)
            .ok_or_else(|| err(w, format!("prefix length `{l}` is not 0 to {max}")))?,
        None => max,
    };
    Ok((Prefix { addr, len }, port))
}

fn parse_spdadd(st: &[Word<'_>]) -> Result<Policy, ParseError> {
    let mut ws = Words { words: st, at: 1 };
    skip_family_flags(&mut ws);
    let (src, src_port) = range(&ws.next("the source range")?)?;
    let dw = ws.next("the destination range")?;
    let (dst, dst_port) = range(&dw)?;
    if src.addr.is_ipv4() != dst.addr.is_ipv4() {
        return Err(err(
            &dw,
            "source and destination are of different IP versions",
        ));
    }
    let u = ws.next("an upper-layer protocol (any, tcp, udp, icmp, icmp6 or a number)")?;
    let upper = match u.text {
        "any" => Upper::Any,
        "tcp" => Upper::Protocol(IpProtocol::Tcp.into()),
        "udp" => Upper::Protocol(IpProtocol::Udp.into()),
        "icmp" => Upper::Protocol(IpProtocol::Icmp.into()),
        "icmp6" => Upper::Protocol(IpProtocol::Icmpv6.into()),
        _ => Upper::Protocol(number(&u, "an upper-layer protocol")?),
    };
    let p = ws.next("-P")?;
    if p.text != "-P" {
        return Err(err(&p, format!("expected -P, found `{}`", p.text)));
    }
    let d = ws.next("a direction (in or out)")?;
    let dir = match d.text {
        "in" => PolicyDir::In,
        "out" => PolicyDir::Out,
        other => return Err(err(&d, format!("expected in or out, found `{other}`"))),
    };
    let a = ws.next("discard, none or ipsec")?;
    let action = match a.text {
        "discard" => PolicyAction::Discard,
        "none" => PolicyAction::None,
        "ipsec" => {
            let mut v = Vec::new();
            while let Some(w) = ws.peek() {
                ws.at += 1;
                v.push(transform(&w)?);
            }
            if v.is_empty() {
                return Err(err(&a, "ipsec needs at least one PROTO/MODE/SRC-DST/LEVEL"));
            }
            PolicyAction::Ipsec(v)
        }
        other => {
            return Err(err(
                &a,
                format!("expected discard, none or ipsec, found `{other}`"),
            ))
        }
    };
    if let Some(extra) = ws.peek() {
        return Err(err(&extra, format!("unexpected `{}`", extra.text)));
    }
    Ok(Policy {
        src,
        dst,
        src_port,
        dst_port,
        upper,
        dir,
        action,
        line: st[0].line,
    })
}

/// `esp/transport//require`, `esp/tunnel/10.0.0.1-10.0.0.2/unique:3`.
fn transform(w: &Word<'_>) -> Result<Transform, ParseError> {
    let parts: Vec<&str> = w.text.split('/').collect();
    if parts.len() != 4 {
        return Err(err(
            w,
            format!("expected PROTO/MODE/SRC-DST/LEVEL, found `{}`", w.text),
        ));
    }
    let protocol = match parts[0] {
        "esp" => Protocol::Esp,
        "ah" => Protocol::Ah,
        other => {
            return Err(err(
                w,
                format!("unsupported protocol `{other}` (expected esp or ah)"),
            ))
        }
    };
    let mode = match parts[1] {
        "transport" => Mode::Transport,
        "tunnel" => Mode::Tunnel,
        other => return Err(err(w, format!("unknown mode `{other}`"))),
    };
    let tunnel = if parts[2].is_empty() {
        None
    } else {
        let (a, b) = parts[2]
            .split_once('-')
            .ok_or_else(|| err(w, "expected tunnel endpoints SRC-DST"))?;
        let a: IpAddr = a
            .parse()
            .map_err(|_| err(w, format!("expected an address, found `{a}`")))?;
        let b: IpAddr = b
            .parse()
            .map_err(|_| err(w, format!("expected an address, found `{b}`")))?;
        Some((a, b))
    };
    if mode == Mode::Tunnel && tunnel.is_none() {
        return Err(err(
            w,
            "tunnel mode needs its endpoints: PROTO/tunnel/SRC-DST/LEVEL",
        ));
    }
    let level = match parts[3].split(':').next().unwrap_or("") {
        "default" => Level::Default,
        "use" => Level::Use,
        "require" => Level::Require,
        "unique" => Level::Unique,
        other => {
            return Err(err(
                w,
                format!("unknown level `{other}` (expected default, use, require or unique)"),
            ))
        }
    };
    Ok(Transform {
        protocol,
        mode,
        tunnel,
        level,
    })
}

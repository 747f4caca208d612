//! Wireshark's ESP SA table: the file `esp_sa` of a Wireshark profile
//! (Preferences › Protocols › ESP › ESP SAs), which strongSwan's `save-keys`
//! plugin writes too. One ESP SA a line, the eight fields of Wireshark 4.0
//! (`esp_uat_flds` in epan/dissectors/packet-ipsec.c), each double-quoted,
//! separated by commas:
//!
//! ```text
//! "IPv4","10.1.0.1","10.2.0.1","0x00001001","TripleDES-CBC [RFC2451]","0x0123...","HMAC-SHA-1-96 [RFC2404]","0x0102..."
//! ```
//!
//! Protocol (`IPv4` or `IPv6`), Src IP, Dest IP, SPI, Encryption, Encryption
//! Key, Authentication, Authentication Key. Quoting is epan/uat.c's: `"`, `\`
//! and every byte that is not printable ASCII are written `\xHH`; reading
//! also takes `\NNN` (octal), `\a \b \e \f \n \r \t \v`, and `\` before any
//! other character for that character. A line starting with `#` is a
//! comment; a field may be empty (`,,`).
//!
//! The algorithms, by Wireshark's names:
//!
//! | kansoku (setkey)   | Encryption or Authentication                                  |
//! |--------------------|---------------------------------------------------------------|
//! | `null`             | `NULL`                                                        |
//! | `3des-cbc`         | `TripleDES-CBC [RFC2451]`                                     |
//! | `aes-cbc`          | `AES-CBC [RFC3602]`                                           |
//! | `blowfish-cbc`     | `BLOWFISH-CBC [RFC2451]` (Wireshark decrypts 16-byte keys only) |
//! | `aes-gcm-16`       | `AES-GCM with 16 octet ICV [RFC4106]`, Authentication `NULL`; the key then its 4-byte salt (20, 28 or 36 bytes), as setkey has it |
//! | `chacha20-poly1305`| `ChaCha20 with Poly1305 [RFC7634]`: read only, Wireshark 4.0 does not have it |
//! | no `-A`            | `NULL`                                                        |
//! | `hmac-sha1`        | `HMAC-SHA-1-96 [RFC2404]`                                     |
//! | `hmac-sha256`      | `HMAC-SHA-256-128 [RFC4868]`                                  |
//!
//! Keys are written `0x` and hex digits. Read as Wireshark reads them: `0x`
//! and hex digits (an odd number has a 0 put in front), `0x` alone or an
//! empty field for no key, anything else for the key's bytes as they stand.
//!
//! Reading: a row says nothing of mode, replay window, lifetimes or ESN, so
//! its SA is transport mode with [`DEFAULT_REPLAY_WINDOW`], no lifetimes, no
//! ESN. Rows of later Wireshark versions are read too: protocol `Any`,
//! ChaCha20-Poly1305, and two more fields, `SN` (`32-bit`, or `64-bit` for
//! [`Sa::esn`]) and `ESN High Bits`. Wireshark's wildcards (`*`, `10.1.*.*`,
//! `/24`, SPI `0x0000100*`) stand for many SAs and kansoku's SA is one, so
//! they are errors. Errors are `LINE:COLUMN: what`, the column of the field's
//! first byte, and never quote a field: a key may have slid into any of them.
//!
//! Writing: each SA becomes a row, or a `#` comment line saying why it is
//! not one ([`esp_sa_unwritable`]): AH SAs (the table is ESP's),
//! ChaCha20-Poly1305, and Blowfish with a key of other than 16 bytes (Wireshark
//! 4.0 decrypts neither). An ESN SA's row has a comment before it: Wireshark
//! 4.0 has no ESN, so it decrypts such an SA but fails its ICV check.

use std::net::IpAddr;

use crate::config::{
    hex_bytes, AuthAlg, EncAlg, Key, Mode, ParseError, Protocol, Sa, DEFAULT_REPLAY_WINDOW,
};

/// Wireshark 4.0's names of kansoku's ciphers (`esp_encryption_type_vals`).
const ENC_NAMES: [(EncAlg, &str); 6] = [
    (EncAlg::Null, "NULL"),
    (EncAlg::TripleDesCbc, "TripleDES-CBC [RFC2451]"),
    (EncAlg::AesCbc, "AES-CBC [RFC3602]"),
    (EncAlg::BlowfishCbc, "BLOWFISH-CBC [RFC2451]"),
    (EncAlg::AesGcm16, "AES-GCM with 16 octet ICV [RFC4106]"),
    // Not in 4.0; later versions' name.
    (EncAlg::ChaCha20Poly1305, "ChaCha20 with Poly1305 [RFC7634]"),
];

/// Wireshark's other ciphers, which kansoku does not implement.
const OTHER_ENC_NAMES: [&str; 9] = [
    "AES-CTR [RFC3686]",
    "DES-CBC [RFC2405]",
    "CAST5-CBC [RFC2144]",
    "TWOFISH-CBC",
    "AES-GCM [RFC4106]",
    "AES-GCM with 8 octet ICV [RFC4106]",
    "AES-GCM with 12 octet ICV [RFC4106]",
    "AES-GCM with IIV and 16 octet ICV [RFC4106 & RFC8750]",
    "ChaCha20 with Poly1305 and IIV [RFC7634 & RFC8750]",
];

/// Wireshark's names of kansoku's integrity algorithms
/// (`esp_authentication_type_vals`); `NULL` is none.
const AUTH_NAMES: [(AuthAlg, &str); 2] = [
    (AuthAlg::HmacSha1_96, "HMAC-SHA-1-96 [RFC2404]"),
    (AuthAlg::HmacSha256_128, "HMAC-SHA-256-128 [RFC4868]"),
];

/// Wireshark's other integrity algorithms.
const OTHER_AUTH_NAMES: [&str; 10] = [
    "HMAC-SHA-256-96 [draft-ietf-ipsec-ciph-sha-256-00]",
    "HMAC-SHA-384-192 [RFC4868]",
    "HMAC-SHA-512-256 [RFC4868]",
    "HMAC-MD5-96 [RFC2403]",
    "MAC-RIPEMD-160-96 [RFC2857]",
    "ANY 64 bit authentication [no checking]",
    "ANY 96 bit authentication [no checking]",
    "ANY 128 bit authentication [no checking]",
    "ANY 192 bit authentication [no checking]",
    "ANY 256 bit authentication [no checking]",
];

/// The fields' titles, as Wireshark shows them; the last two are later
/// versions'.
const FIELDS: [&str; 10] = [
    "Protocol",
    "Src IP",
    "Dest IP",
    "SPI",
    "Encryption",
    "Encryption Key",
    "Authentication",
    "Authentication Key",
    "SN",
    "ESN High Bits",
];

const HEADER: &str =
    "# Wireshark ESP SAs (esp_sa), written by kansoku: Protocol, Src IP, Dest IP, SPI, \
Encryption, Encryption Key, Authentication, Authentication Key\n";

/// Why `sa` cannot be a row of Wireshark 4.0's table, or None if it can.
pub fn esp_sa_unwritable(sa: &Sa) -> Option<&'static str> {
    if sa.protocol != Protocol::Esp {
        return Some("an AH SA: Wireshark's ESP SA table holds ESP SAs only");
    }
    let Some((enc, key)) = &sa.enc else {
        return Some("an ESP SA without a cipher");
    };
    match (enc, &sa.auth) {
        (EncAlg::ChaCha20Poly1305, _) => {
            Some("ChaCha20-Poly1305: Wireshark 4.0's ESP dissector does not have it (later versions do)")
        }
        (EncAlg::BlowfishCbc, _) if key.len() != 16 => Some(
            "Blowfish with a key of other than 16 bytes: Wireshark 4.0 decrypts 16-byte Blowfish keys only",
        ),
        (e, _) if !e.key_len_ok(key.len()) => Some("a key of a length its cipher does not take"),
        (e, Some(_)) if e.is_aead() => {
            Some("an AEAD cipher with an authenticator: Wireshark takes AES-GCM with NULL authentication only")
        }
        (_, Some((a, k))) if k.len() != a.key_len() => {
            Some("an authentication key of a length its algorithm does not take")
        }
        _ => None,
    }
}

/// Wireshark 4.0's `esp_sa` file for the ESP SAs of `sas`, in their order;
/// every other SA is a comment line saying why it is not there.
pub fn write_esp_sa(sas: &[Sa]) -> String {
    let mut out = String::from(HEADER);
    for sa in sas {
        let spi = format!("{:#010x}", sa.spi);
        if let Some(why) = esp_sa_unwritable(sa) {
            out.push_str(&format!(
                "# not written: {} SA {spi} {} > {} (line {}): {why}\n",
                sa.protocol.to_string().to_uppercase(),
                sa.src,
                sa.dst,
                sa.line
            ));
            continue;
        }
        let Some((enc, enc_key)) = &sa.enc else {
            continue; // esp_sa_unwritable said so
        };
        if sa.esn {
            out.push_str(&format!(
                "# {spi} uses 64-bit sequence numbers (ESN): Wireshark 4.0 has none, decrypts it but fails its ICV check\n"
            ));
        }
        let enc_name = ENC_NAMES
            .iter()
            .find(|(a, _)| a == enc)
            .map_or("NULL", |(_, n)| n);
        let (auth_name, auth_key) = match &sa.auth {
            Some((a, k)) => (
                AUTH_NAMES
                    .iter()
                    .find(|(x, _)| x == a)
                    .map_or("NULL", |(_, n)| n),
                hex_key(k),
            ),
            None => ("NULL", String::new()),
        };
        let family = if sa.src.is_ipv4() { "IPv4" } else { "IPv6" };
        let fields = [
            family.to_string(),
            sa.src.to_string(),
            sa.dst.to_string(),
            spi,
            enc_name.to_string(),
            hex_key(enc_key),
            auth_name.to_string(),
            auth_key,
        ];
        let row: Vec<String> = fields.iter().map(|f| quote(f)).collect();
        out.push_str(&row.join(","));
        out.push('\n');
    }
    out
}

/// `0x` and lowercase hex digits; nothing for no key.
fn hex_key(k: &Key) -> String {
    if k.is_empty() {
        return String::new();
    }
    let mut s = String::from("0x");
    for b in k.expose() {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// A field as epan/uat.c's `putfld` writes it.
fn quote(field: &str) -> String {
    let mut s = String::from("\"");
    for &b in field.as_bytes() {
        if b == b'"' || b == b'\\' || !(0x20..=0x7e).contains(&b) {
            s.push_str(&format!("\\x{b:02x}"));
        } else {
            s.push(char::from(b));
        }
    }
    s.push('"');
    s
}

/// A field's bytes (unescaped) and where it starts.
struct Field {
    bytes: Vec<u8>,
    line: usize,
    column: usize,
}

impl Field {
    fn text(&self) -> Option<&str> {
        std::str::from_utf8(&self.bytes).ok()
    }

    fn err(&self, message: impl Into<String>) -> ParseError {
        ParseError {
            line: self.line,
            column: self.column,
            message: message.into(),
        }
    }
}

/// Reads an `esp_sa` file. Errors are `LINE:COLUMN: what was expected`.
pub fn parse_esp_sa(text: &str) -> Result<Vec<Sa>, ParseError> {
    let mut sas = Vec::new();
    for (ln, line) in text.lines().enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let body = line.trim_start_matches([' ', '\t']);
        if body.is_empty() || body.starts_with('#') {
            continue;
        }
        let fields = split_row(line, ln + 1)?;
        sas.push(row(&fields, ln + 1, line.len() + 1)?);
    }
    Ok(sas)
}

/// Splits a row into its fields, unescaped.
fn split_row(line: &str, ln: usize) -> Result<Vec<Field>, ParseError> {
    let b = line.as_bytes();
    let at = |i: usize, message: &str| ParseError {
        line: ln,
        column: i + 1,
        message: message.into(),
    };
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while matches!(b.get(i), Some(b' ' | b'\t')) {
            i += 1;
        }
        let start = i;
        match b.get(i) {
            Some(b'"') => {
                i += 1;
                let mut v = Vec::new();
                loop {
                    match b.get(i) {
                        None => {
                            return Err(at(
                                start,
                                "field not closed (expected a closing \" on this line)",
                            ))
                        }
                        Some(b'"') => {
                            i += 1;
                            break;
                        }
                        Some(b'\\') => i = unescape(b, i + 1, &mut v),
                        Some(&c) => {
                            v.push(c);
                            i += 1;
                        }
                    }
                }
                out.push(Field {
                    bytes: v,
                    line: ln,
                    column: start + 1,
                });
            }
            // An empty field.
            Some(b',') | None => out.push(Field {
                bytes: Vec::new(),
                line: ln,
                column: start + 1,
            }),
            Some(_) => return Err(at(i, "expected a double-quoted field")),
        }
        while matches!(b.get(i), Some(b' ' | b'\t')) {
            i += 1;
        }
        match b.get(i) {
            None => return Ok(out),
            Some(b',') => i += 1,
            Some(_) => return Err(at(i, "expected `,` or the end of the line after a field")),
        }
    }
}

/// One escape of epan/uat.c's `uat_unesc`, `i` just after the backslash;
/// returns where the escape ends.
fn unescape(b: &[u8], i: usize, v: &mut Vec<u8>) -> usize {
    let Some(&c) = b.get(i) else { return i };
    let simple = match c {
        b'a' => Some(0x07),
        b'b' => Some(0x08),
        b'e' => Some(0x1b),
        b'f' => Some(0x0c),
        b'n' => Some(b'\n'),
        b'r' => Some(b'\r'),
        b't' => Some(b'\t'),
        b'v' => Some(0x0b),
        _ => None,
    };
    if let Some(s) = simple {
        v.push(s);
        return i + 1;
    }
    match c {
        b'0'..=b'7' => {
            let mut n = 0u32;
            let mut j = i;
            while j < i + 3 {
                match b.get(j) {
                    Some(&d @ b'0'..=b'7') => n = n * 8 + u32::from(d - b'0'),
                    _ => break,
                }
                j += 1;
            }
            v.push(u8::try_from(n).unwrap_or(255));
            j
        }
        b'x' => {
            let hex = b.get(i + 1..i + 3).and_then(|h| {
                let h = std::str::from_utf8(h).ok()?;
                hex_bytes(h)
            });
            match hex.as_deref() {
                Some(&[byte]) => {
                    v.push(byte);
                    i + 3
                }
                _ => {
                    v.push(b'x');
                    i + 1
                }
            }
        }
        other => {
            v.push(other);
            i + 1
        }
    }
}

/// One row's SA; `end` is the column after the line's last byte.
fn row(f: &[Field], ln: usize, end: usize) -> Result<Sa, ParseError> {
    let [proto, src, dst, spi, enc, enc_key, auth, auth_key, rest @ ..] = f else {
        return Err(ParseError {
            line: ln,
            column: end,
            message: format!(
                "expected 8 fields ({}), found {}",
                FIELDS[..8].join(", "),
                f.len()
            ),
        });
    };
    if let Some(extra) = rest.get(2) {
        return Err(extra.err(
            "more fields than Wireshark's esp_sa has (8; 10 in later versions, with SN and ESN High Bits)",
        ));
    }
    let family = match proto.text() {
        Some("IPv4") => Some(true),
        Some("IPv6") => Some(false),
        Some("Any") => None,
        _ => return Err(proto.err("expected IPv4 or IPv6 (Protocol)")),
    };
    let src_addr = address(src, "source", family)?;
    let dst_addr = address(dst, "destination", family)?;
    if src_addr.is_ipv4() != dst_addr.is_ipv4() {
        return Err(dst.err("source and destination are of different IP versions"));
    }
    let spi_value = spi_number(spi)?;

    let (enc_alg, enc_name) = match ENC_NAMES.iter().find(|(_, n)| enc.text() == Some(n)) {
        Some(&(a, n)) => (a, n),
        None => {
            return Err(
                match OTHER_ENC_NAMES.iter().find(|n| enc.text() == Some(n)) {
                    Some(n) => enc.err(format!("Wireshark's `{n}` is not a cipher kansoku has")),
                    None => enc.err(format!(
                        "unknown Encryption (expected one of: {})",
                        names(ENC_NAMES.iter().map(|(_, n)| *n))
                    )),
                },
            )
        }
    };
    let ek = key(enc_key)?;
    if !enc_alg.key_len_ok(ek.len()) {
        return Err(enc_key.err(if enc_alg == EncAlg::Null {
            format!("{enc_name} takes no key, this one has {} bytes", ek.len())
        } else {
            format!(
                "{enc_name} takes {}, this key has {}",
                enc_alg.key_lens(),
                ek.len()
            )
        }));
    }

    let auth_alg = match auth.text() {
        Some("NULL") => None,
        t => match AUTH_NAMES.iter().find(|(_, n)| t == Some(n)) {
            Some(&(a, _)) => Some(a),
            None => {
                return Err(match OTHER_AUTH_NAMES.iter().find(|n| t == Some(n)) {
                    Some(n) => auth.err(format!(
                        "Wireshark's `{n}` is not an integrity algorithm kansoku has"
                    )),
                    None => auth.err(format!(
                        "unknown Authentication (expected one of: NULL, {})",
                        names(AUTH_NAMES.iter().map(|(_, n)| *n))
                    )),
                })
            }
        },
    };
    let ak = key(auth_key)?;
    let auth_pair = match auth_alg {
        None if !ak.is_empty() => {
            return Err(auth_key.err(format!(
                "NULL authentication takes no key, this one has {} bytes",
                ak.len()
            )))
        }
        None => None,
        Some(_) if enc_alg.is_aead() => {
            return Err(auth.err(format!(
                "{enc_name} authenticates by itself: Authentication must be NULL"
            )))
        }
        Some(a) if ak.len() != a.key_len() => {
            return Err(auth_key.err(format!(
                "{} takes a {}-byte key, this one has {}",
                a.name(),
                a.key_len(),
                ak.len()
            )))
        }
        Some(a) => Some((a, ak)),
    };

    let esn = match rest.first() {
        None => false,
        Some(sn) => match sn.text() {
            Some("" | "32-bit") => false,
            Some("64-bit") => true,
            _ => return Err(sn.err("expected 32-bit or 64-bit (SN)")),
        },
    };
    if let Some(high) = rest.get(1) {
        let t = high.text().unwrap_or("\0");
        let digits = t
            .strip_prefix("0x")
            .or_else(|| t.strip_prefix("0X"))
            .unwrap_or(t);
        if digits.len() > 8 || !digits.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(high.err("expected up to 8 hex digits (ESN High Bits)"));
        }
    }

    Ok(Sa {
        src: src_addr,
        dst: dst_addr,
        protocol: Protocol::Esp,
        spi: spi_value,
        mode: Mode::Transport,
        enc: Some((enc_alg, ek)),
        auth: auth_pair,
        replay_window: DEFAULT_REPLAY_WINDOW,
        esn,
        lifetime_hard: None,
        lifetime_soft: None,
        reqid: None,
        encap_udp: None,
        line: ln,
    })
}

fn names<'a>(it: impl Iterator<Item = &'a str>) -> String {
    it.collect::<Vec<_>>().join(", ")
}

/// Src IP or Dest IP: one address, of the Protocol's version.
fn address(f: &Field, what: &str, ipv4: Option<bool>) -> Result<IpAddr, ParseError> {
    let t = f.text().unwrap_or("");
    if t.contains('*') || t.contains('/') {
        return Err(f.err(format!(
            "a wildcard or prefix: kansoku's SA has one {what} address"
        )));
    }
    let a: IpAddr = t
        .parse()
        .map_err(|_| f.err(format!("expected an IPv4 or IPv6 {what} address")))?;
    match ipv4 {
        Some(true) if !a.is_ipv4() => Err(f.err("Protocol is IPv4, this address is not")),
        Some(false) if a.is_ipv4() => Err(f.err("Protocol is IPv6, this address is not")),
        _ => Ok(a),
    }
}

/// The SPI as Wireshark reads it (`strtoul` with base 0: `0x` hex, a
/// leading 0 octal, else decimal), at least 256.
fn spi_number(f: &Field) -> Result<u32, ParseError> {
    let t = f.text().unwrap_or("");
    if t.contains('*') {
        return Err(f.err("a wildcard SPI: kansoku's SA has one SPI"));
    }
    let (digits, radix) = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => (h, 16),
        None => match t.strip_prefix('0') {
            Some(o) if !o.is_empty() => (o, 8),
            _ => (t, 10),
        },
    };
    let v = if !digits.is_empty() && digits.chars().all(|c| c.is_digit(radix)) {
        u32::from_str_radix(digits, radix).ok()
    } else {
        None
    };
    match v {
        Some(v) if v >= 256 => Ok(v),
        Some(_) => Err(f.err("SPIs 0 to 255 are reserved (RFC 4303 §2.1)")),
        None => Err(f.err("expected an SPI: a 32-bit number, 0x and hex digits")),
    }
}

/// A key as Wireshark's `compute_ascii_key` reads it.
fn key(f: &Field) -> Result<Key, ParseError> {
    let b = &f.bytes;
    let Some(hex) = b.strip_prefix(b"0x").or_else(|| b.strip_prefix(b"0X")) else {
        if b.contains(&0) {
            return Err(f.err("a key with a NUL byte (Wireshark would cut it there)"));
        }
        return Ok(Key::new(b.clone()));
    };
    let bytes = std::str::from_utf8(hex).ok().and_then(|h| {
        if !h.len().is_multiple_of(2) {
            hex_bytes(&format!("0{h}"))
        } else {
            hex_bytes(h)
        }
    });
    bytes
        .map(Key::new)
        .ok_or_else(|| f.err("expected a key of 0x and hex digits"))
}

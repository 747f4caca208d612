//! Text input that is not text: where in a file its first invalid UTF-8
//! byte is, as the `FILE:LINE:COLUMN` of every other parse error.

/// The bytes of a text file as `&str`, or the 1-based line and column
/// (in characters) of its first byte that is not UTF-8, with that byte.
pub fn utf8(bytes: &[u8]) -> Result<&str, NotUtf8> {
    core::str::from_utf8(bytes).map_err(|e| NotUtf8::locate(bytes, e.valid_up_to()))
}

/// Where a file stops being UTF-8 text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotUtf8 {
    pub line: usize,
    pub column: usize,
    /// The first byte that is not part of a valid character.
    pub byte: u8,
}

impl NotUtf8 {
    /// Where `bytes[at]` is, all before it being valid UTF-8 (a
    /// `Utf8Error`'s `valid_up_to`): for a caller that validated the bytes
    /// itself, as `String::from_utf8` does, so they are checked once.
    pub fn locate(bytes: &[u8], at: usize) -> NotUtf8 {
        let good = core::str::from_utf8(&bytes[..at]).unwrap_or_default();
        let line_start = good.rfind('\n').map_or(0, |i| i + 1);
        NotUtf8 {
            line: good.matches('\n').count() + 1,
            column: good[line_start..].chars().count() + 1,
            byte: bytes[at],
        }
    }
}

impl core::fmt::Display for NotUtf8 {
    /// `LINE:COLUMN: not UTF-8 text (byte 0xff)`, to follow `FILE:`.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{}:{}: not UTF-8 text (byte {:#04x})",
            self.line, self.column, self.byte
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_bad_byte_is_placed_by_line_and_column() {
        assert_eq!(utf8(b"ok\n"), Ok("ok\n"));
        let e = utf8(b"line one\nli\xc3\xa9\xffx\n").unwrap_err();
        assert_eq!((e.line, e.column, e.byte), (2, 4, 0xff));
        assert_eq!(e.to_string(), "2:4: not UTF-8 text (byte 0xff)");
        let e = utf8(b"\xfe").unwrap_err();
        assert_eq!((e.line, e.column), (1, 1));
        // A character cut at the end of the file.
        let e = utf8(b"a\nb\xc3").unwrap_err();
        assert_eq!((e.line, e.column, e.byte), (2, 2, 0xc3));
    }
}

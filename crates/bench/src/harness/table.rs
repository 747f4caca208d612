//! Markdown tables, as the benches print them: `| a | b |` rows under a
//! heading row and an alignment row (`|---|---:|`), so that a result pastes
//! straight into the `bench/*.md` notes.

use std::io::{self, Write};

/// How a column's cells are aligned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    Left,
    /// Numbers: `---:`.
    Right,
}

/// The heading row and the alignment row of a table.
pub fn header(o: &mut (impl Write + ?Sized), columns: &[(&str, Align)]) -> io::Result<()> {
    let names: Vec<&str> = columns.iter().map(|c| c.0).collect();
    row(o, &names)?;
    let mut rule = String::from("|");
    for (_, a) in columns {
        rule.push_str(match a {
            Align::Left => "---|",
            Align::Right => "---:|",
        });
    }
    writeln!(o, "{rule}")
}

/// The same alignment for every column.
pub fn header_all(o: &mut (impl Write + ?Sized), names: &[&str], align: Align) -> io::Result<()> {
    let columns: Vec<(&str, Align)> = names.iter().map(|n| (*n, align)).collect();
    header(o, &columns)
}

/// One row: `| a | b |`; an empty cell is `| |`.
pub fn row<S: AsRef<str>>(o: &mut (impl Write + ?Sized), cells: &[S]) -> io::Result<()> {
    let mut line = String::from("|");
    for c in cells {
        let c = c.as_ref();
        if c.is_empty() {
            line.push_str(" |");
        } else {
            line.push(' ');
            line.push_str(c);
            line.push_str(" |");
        }
    }
    writeln!(o, "{line}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_and_rules_are_markdown() {
        let mut o = Vec::new();
        header(
            &mut o,
            &[
                ("mode", Align::Left),
                ("MB/s", Align::Right),
                ("runs", Align::Left),
            ],
        )
        .unwrap();
        row(&mut o, &["memcpy", "1.5", ""]).unwrap();
        header_all(&mut o, &["a", "b"], Align::Left).unwrap();
        assert_eq!(
            String::from_utf8(o).unwrap(),
            "| mode | MB/s | runs |\n|---|---:|---|\n| memcpy | 1.5 | |\n| a | b |\n|---|---|\n"
        );
    }
}

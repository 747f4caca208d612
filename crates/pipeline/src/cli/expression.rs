//! tcpdump's filter expression where tcpdump takes it: the trailing words
//! of the command line, or `-F FILE`, and `-d` to print the program.

use std::path::{Path, PathBuf};

use clap::{ArgAction, Args};

use crate::error::{Error, Result};
use crate::expression::Expression;

/// The packets a command reads or captures, in tcpdump's filter language.
#[derive(Debug, Default, Args)]
pub struct ExpressionArgs {
    /// Read the filter expression from FILE, as tcpdump -F does (`#` starts a comment to the end of the line).
    #[arg(short = 'F', value_name = "FILE", conflicts_with = "expression")]
    pub expression_file: Option<PathBuf>,
    /// Print the filter expression's compiled program as tcpdump -d does, and exit (-dd: as a C array, -ddd: as
    /// decimal numbers).
    #[arg(short = 'd', action = ArgAction::Count)]
    pub dump: u8,
    /// Only packets this tcpdump filter expression accepts (pcap-filter(7)), e.g. `tcp port 80 and host 10.1.2.3`;
    /// compiled by libpcap, so it means what it means to tcpdump.
    #[arg(value_name = "EXPRESSION", trailing_var_arg = true)]
    pub expression: Vec<String>,
}

/// [`ExpressionArgs`] for a command whose positional arguments are files
/// (`stats`): the expression comes after `--`.
#[derive(Debug, Default, Args)]
pub struct LastExpressionArgs {
    /// Read the filter expression from FILE, as tcpdump -F does (`#` starts a comment to the end of the line).
    #[arg(short = 'F', value_name = "FILE", conflicts_with = "expression")]
    pub expression_file: Option<PathBuf>,
    /// Only packets this tcpdump filter expression accepts (pcap-filter(7)), after `--`: `stats x.pcap -- port 53`.
    #[arg(value_name = "EXPRESSION", last = true)]
    pub expression: Vec<String>,
}

/// What a command that reads packets is asked for: the program listed
/// (`-d`), which is all it does then, or the packets an expression keeps
/// (every packet without one).
pub enum Selection {
    Listing(String),
    Packets(Option<Expression>),
}

/// What a live capture is asked for: the program listed (`-d`), or the
/// packets the kernel's program keeps (every packet without one).
pub enum LiveSelection {
    Listing(String),
    Packets {
        expression: Option<Expression>,
        program: Option<Vec<bpf::Insn>>,
    },
}

impl ExpressionArgs {
    /// The expression given, if any.
    pub fn expression(&self) -> Result<Option<Expression>> {
        read_expression(self.expression_file.as_deref(), &self.expression)
    }

    /// For a command reading the trace at `path`: with `-d`, the program of
    /// its first interface, listed as `tcpdump -d -r` lists it.
    pub fn for_trace(&self, path: Option<&Path>) -> Result<Selection> {
        let expression = self.expression()?;
        match (path, self.dump) {
            (Some(path), 1..) => Ok(Selection::Listing(crate::expression::listing_for_trace(
                path,
                expression.as_ref(),
                self.dump,
            )?)),
            _ => Ok(Selection::Packets(expression)),
        }
    }

    /// For a capture on `interface`: the program libpcap compiles for it
    /// (with the kernel's VLAN data, as `tcpdump -i` does), or its listing.
    pub fn for_interface(&self, interface: &str, snaplen: u32) -> Result<LiveSelection> {
        let expression = self.expression()?;
        if expression.is_none() && self.dump == 0 {
            return Ok(LiveSelection::Packets {
                expression,
                program: None,
            });
        }
        let text = expression.as_ref().map_or("", Expression::text);
        let program = bpf::libpcap::compile_live(text, interface, snaplen)
            .map_err(|e| Error::usage(format!("{interface}: {e}")))?;
        Ok(match self.dump {
            0 => LiveSelection::Packets {
                expression,
                program: Some(program),
            },
            level => LiveSelection::Listing(bpf::dump(&program, level)),
        })
    }
}

impl LastExpressionArgs {
    /// The expression given, if any.
    pub fn expression(&self) -> Result<Option<Expression>> {
        read_expression(self.expression_file.as_deref(), &self.expression)
    }
}

/// The expression of `-F FILE` (comments blanked as tcpdump does; a file
/// with none selects every packet, as with tcpdump) or of the trailing
/// words.
fn read_expression(file: Option<&std::path::Path>, words: &[String]) -> Result<Option<Expression>> {
    let Some(path) = file else {
        return Ok(Expression::from_words(words));
    };
    let text = crate::error::read_text(path)?;
    let blanked: String = text
        .lines()
        .map(|l| l.split_once('#').map_or(l, |(before, _)| before))
        .collect::<Vec<_>>()
        .join(" ");
    // A file with no expression selects every packet, as with tcpdump.
    Ok(Expression::new(&blanked))
}

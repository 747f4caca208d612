//! tcpdump's filter expression where tcpdump takes it: the trailing words
//! of the command line, or `-F FILE`, and `-d` to print the program.

use std::path::PathBuf;

use clap::{ArgAction, Args};

use crate::error::Result;
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

impl ExpressionArgs {
    /// The expression given, if any.
    pub fn expression(&self) -> Result<Option<Expression>> {
        read_expression(self.expression_file.as_deref(), &self.expression)
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

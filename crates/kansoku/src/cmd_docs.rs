//! `kansoku completions SHELL` and `kansoku man`: shell completions and the
//! manual page, both generated from the CLI's own definition (clap_complete,
//! clap_mangen), so that they never drift from the flags.

use std::io::{self, Write};

use clap::CommandFactory;
use pipeline::{Error, Report};

use crate::args::{Cli, CompletionsArgs};

pub fn completions(args: &CompletionsArgs) -> pipeline::Result<Report> {
    // Generated into memory first: clap_complete panics when its writer
    // fails, and a closed pipe must end the command quietly instead.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "kansoku", &mut script);
    print(&script)
}

pub fn man() -> pipeline::Result<Report> {
    let mut page = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut page)
        .map_err(Error::stdout)?;
    print(&page)
}

fn print(bytes: &[u8]) -> pipeline::Result<Report> {
    let mut out = io::stdout().lock();
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .map_err(Error::stdout)?;
    Ok(Report::default())
}

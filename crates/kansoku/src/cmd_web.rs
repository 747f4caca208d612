//! `kansoku web DIR`: an agurim-like view of a directory of summaries
//! (the webview crate), on loopback unless told otherwise.

use std::sync::Arc;

use pipeline::{display_path, Error, Report};
use webview::{serve, DirSource};

use crate::args::WebArgs;
use crate::signals;

pub fn run(args: &WebArgs) -> pipeline::Result<Report> {
    let src = DirSource::open(&args.dir).map_err(|e| Error::input(e.to_string()))?;
    let dir = display_path(&args.dir);
    serve(Arc::new(src), args.listen, signals::stop_flag(), |addr| {
        // The address line is the one a script waits for.
        eprintln!("kansoku web: serving {dir} on http://{addr}/");
    })
    .map_err(|e| Error::output(format!("listening on {}", args.listen), &e))?;
    Ok(Report::default())
}

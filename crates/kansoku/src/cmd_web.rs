//! `kansoku web DIR` or `kansoku web --store URL`: an agurim-like view of a
//! directory of summaries or of a fleet store (the webview crate), on
//! loopback unless told otherwise.

use std::sync::Arc;

use pipeline::{display_path, extract, signals, sink::fleet, Error, Report};
use webview::{serve, DataSource, DirSource};

use crate::args::WebArgs;

pub fn run(args: &WebArgs) -> pipeline::Result<Report> {
    let (src, what): (Arc<dyn DataSource>, String) = match (&args.dir, &args.store) {
        (Some(dir), _) => (
            Arc::new(DirSource::open(dir).map_err(|e| Error::input(e.to_string()))?),
            display_path(dir),
        ),
        (None, Some(url)) => {
            let c = fleet::client(url, args.store_credentials.as_deref())?;
            let what = c.url.to_string();
            (
                Arc::new(store::StoreSource::open(c).map_err(fleet::error)?),
                what,
            )
        }
        (None, None) => return Err(Error::usage("give a directory of summaries or --store URL")),
    };
    let archive = args.traces.clone().map(|dir| -> webview::Archive {
        Arc::new(move |x: &webview::Extraction| {
            let (since, until, e) = (x.since_ns, x.until_ns, &x.expression);
            let extract::Extracted {
                pcap, packets, cut, ..
            } = extract::pcap_between(&dir, since, until, e, x.limit)?;
            Ok(webview::Extract { pcap, packets, cut })
        })
    });
    serve(src, archive, args.listen, signals::stop_flag(), |addr| {
        // The address line is the one a script waits for.
        eprintln!("kansoku web: serving {what} on http://{addr}/");
    })
    .map_err(|e| Error::output(format!("listening on {}", args.listen), &e))?;
    Ok(Report::default())
}

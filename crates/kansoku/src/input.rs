//! Opening a trace for reading, through its seek index when a time window
//! is asked for.

use std::path::Path;

use trace::read::TraceReader;
use trace::window::{open_window, WindowStats};

use crate::error::{CliError, CliResult};

/// Opens `path` ("-" is standard input). With a time window and a seekable
/// file, only the blocks the index says overlap the window are decompressed.
pub fn open(
    path: &Path,
    since: Option<u64>,
    until: Option<u64>,
) -> CliResult<(TraceReader, Option<WindowStats>)> {
    let stdin = path.as_os_str() == "-";
    if !stdin && (since.is_some() || until.is_some()) {
        let (reader, stats) =
            open_window(path, since, until).map_err(|e| CliError::file(path, e))?;
        return Ok((reader, Some(stats)));
    }
    let reader = TraceReader::open(path).map_err(|e| CliError::file(path, e))?;
    Ok((reader, None))
}

/// The size of the file behind `path`, for a progress bar.
pub fn file_size(path: &Path) -> Option<u64> {
    if path.as_os_str() == "-" {
        return None;
    }
    std::fs::metadata(path)
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len())
}

//! The trace files this process is reading, so that a writer never
//! truncates one of them (`kansoku read -r a.pcap -w a.pcap`): with `read`
//! the rest of the input would be lost without a word, and a mapped input
//! (see [`mapped`](super::mapped)) would hold the writer's open for the
//! lease's break time and then fault.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Mutex;

/// (device, inode, readers) of each file being read.
static READING: Mutex<Vec<(u64, u64, usize)>> = Mutex::new(Vec::new());

/// A file registered as being read, until dropped.
#[derive(Debug)]
pub(crate) struct Reading {
    dev: u64,
    ino: u64,
}

impl Reading {
    /// Registers the regular file `meta` describes.
    pub(crate) fn register(meta: &Metadata) -> Option<Reading> {
        if !meta.is_file() {
            return None;
        }
        let (dev, ino) = (meta.dev(), meta.ino());
        let mut v = READING.lock().unwrap_or_else(|p| p.into_inner());
        match v.iter_mut().find(|e| e.0 == dev && e.1 == ino) {
            Some(e) => e.2 += 1,
            None => v.push((dev, ino, 1)),
        }
        Some(Reading { dev, ino })
    }
}

impl Drop for Reading {
    fn drop(&mut self) {
        let mut v = READING.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = v.iter().position(|e| e.0 == self.dev && e.1 == self.ino) {
            v[i].2 -= 1;
            if v[i].2 == 0 {
                v.swap_remove(i);
            }
        }
    }
}

/// Whether `path` names a file this process is reading as a trace.
pub fn is_being_read(path: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    let v = READING.lock().unwrap_or_else(|p| p.into_inner());
    v.iter().any(|e| e.0 == meta.dev() && e.1 == meta.ino())
}

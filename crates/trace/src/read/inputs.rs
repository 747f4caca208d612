//! The trace files this process is reading, so that a writer never
//! truncates one of them: `kansoku read -r a.pcap -w a.pcap` had cut its
//! own input (the writer's `File::create` truncated it after the reader's
//! first 256 KiB read: a 20 MB file left as 262 KB, with only a "file cut
//! short" warning).

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Mutex;

/// (device, inode) of each file being read, once for each reader of it.
static READING: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());

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
        READING
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((dev, ino));
        Some(Reading { dev, ino })
    }
}

impl Drop for Reading {
    fn drop(&mut self) {
        let mut v = READING.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = v.iter().position(|e| *e == (self.dev, self.ino)) {
            v.swap_remove(i);
        }
    }
}

/// Whether `path` names a file this process is reading as a trace.
pub fn is_being_read(path: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    let v = READING.lock().unwrap_or_else(|p| p.into_inner());
    v.contains(&(meta.dev(), meta.ino()))
}

#[cfg(test)]
mod tests {
    use crate::read::TraceReader;
    use crate::write::{TraceWriter, WriterConfig};
    use crate::LinkType;

    #[test]
    fn a_writer_of_this_process_cannot_overwrite_a_trace_being_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.pcap");
        let other = dir.path().join("u.pcap");
        let link = dir.path().join("link.pcap");
        let mut bytes = Vec::new();
        crate::format::pcap::emit_file_header(&mut bytes, LinkType::Ethernet, 65535, false);
        crate::format::pcap::emit_record(&mut bytes, 1_000, false, 60, &[0u8; 60]);
        std::fs::write(&path, &bytes).unwrap();
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let r = TraceReader::open(&path).unwrap();
        for target in [&path, &link] {
            let err = TraceWriter::create(target, WriterConfig::default())
                .err()
                .expect("refused");
            assert!(err.to_string().contains("this process is reading"), "{err}");
        }
        // The input is intact, another file is writable.
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        assert!(TraceWriter::create(&other, WriterConfig::default()).is_ok());
        drop(r);
        assert!(TraceWriter::create(&path, WriterConfig::default()).is_ok());
    }
}

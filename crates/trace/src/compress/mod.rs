//! Compression codecs for trace files.

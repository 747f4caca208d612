//! synthetic traffic

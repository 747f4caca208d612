//! `wire`: zero-copy views over packet headers and their parsed forms.
//!
//! (Overview to be completed with the protocol modules.)

#![forbid(unsafe_code)]

pub mod link;

pub use link::LinkType;

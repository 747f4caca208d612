//! `anon`: traces made fit to publish, as the MAWI archive publishes its
//! own ("deleting the parts analysis does not need and scrambling the
//! addresses as needed", MAWI WG 2001, ch. 1): prefix-preserving address
//! anonymisation with
//! Crypto-PAn ([`cryptopan`]), every place an address hides rewritten and
//! the payload removed ([`packet`]), by a policy that is written down
//! ([`policy`]).

pub mod cryptopan;
pub mod packet;
pub mod policy;

pub use cryptopan::{new_key_text, parse_key, CryptoPan, KEY_LEN};
pub use packet::{AnonCounts, Anonymizer, Rewrite};
pub use policy::{MacPolicy, PayloadPolicy};
#[cfg(test)]
mod tests;

//! Why a packet was not passed: every refusal has a reason, and the engine
//! counts each reason.

use std::fmt;

use crate::ip::Malformed;
use crate::replay::ReplayError;

/// A packet refused, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reject {
    /// Not a readable IP packet (cut short, or a header that cannot be).
    Malformed,
    /// ESP/AH shorter than its headers and ICV, or a ciphertext that is not
    /// a whole number of blocks.
    Truncated,
    /// No SA for the SPI (and destination).
    NoSa,
    /// A policy asks for IPsec and no SA matches it (level `require`).
    NoSaForPolicy,
    /// A policy says `discard`.
    PolicyDiscard,
    /// Inbound: the packet does not satisfy the policy that covers it
    /// (clear where IPsec is required, or not the SAs the policy names).
    PolicyMismatch,
    /// Seen before, inside the replay window.
    Replayed,
    /// Older than the replay window.
    TooOld,
    /// Sequence number 0.
    SeqZero,
    /// The ICV did not check.
    Integrity,
    /// The padding or the pad length was wrong.
    Padding,
    /// The SA's hard lifetime has passed.
    Expired,
    /// The outbound sequence number would cycle.
    SeqOverflow,
    /// A fragment where a whole packet is needed (transport mode outbound),
    /// or fragments that overlap or exceed 65,535 bytes.
    Fragment,
    /// The protected packet would exceed the largest IP packet.
    TooBig,
    /// An IP option or IPv6 routing header AH cannot predict.
    Unsupported,
    /// Inside ESP: next header 59, a dummy packet (RFC 4303 §2.6).
    Dummy,
}

impl Reject {
    /// Every reason, in the order reports list them.
    pub const ALL: [Reject; 17] = [
        Reject::Malformed,
        Reject::Truncated,
        Reject::NoSa,
        Reject::NoSaForPolicy,
        Reject::PolicyDiscard,
        Reject::PolicyMismatch,
        Reject::Replayed,
        Reject::TooOld,
        Reject::SeqZero,
        Reject::Integrity,
        Reject::Padding,
        Reject::Expired,
        Reject::SeqOverflow,
        Reject::Fragment,
        Reject::TooBig,
        Reject::Unsupported,
        Reject::Dummy,
    ];

    /// A short name for reports and `--json` keys.
    pub fn name(self) -> &'static str {
        match self {
            Reject::Malformed => "malformed",
            Reject::Truncated => "truncated",
            Reject::NoSa => "no_sa",
            Reject::NoSaForPolicy => "no_sa_for_policy",
            Reject::PolicyDiscard => "policy_discard",
            Reject::PolicyMismatch => "policy_mismatch",
            Reject::Replayed => "replayed",
            Reject::TooOld => "too_old",
            Reject::SeqZero => "seq_zero",
            Reject::Integrity => "integrity",
            Reject::Padding => "padding",
            Reject::Expired => "expired",
            Reject::SeqOverflow => "seq_overflow",
            Reject::Fragment => "fragment",
            Reject::TooBig => "too_big",
            Reject::Unsupported => "unsupported",
            Reject::Dummy => "dummy",
        }
    }

    pub(crate) fn index(self) -> usize {
        Reject::ALL.iter().position(|r| *r == self).unwrap_or(0)
    }
}

impl fmt::Display for Reject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl From<Malformed> for Reject {
    fn from(_: Malformed) -> Reject {
        Reject::Malformed
    }
}

impl From<ReplayError> for Reject {
    fn from(e: ReplayError) -> Reject {
        match e {
            ReplayError::Replayed => Reject::Replayed,
            ReplayError::TooOld => Reject::TooOld,
            ReplayError::Zero => Reject::SeqZero,
        }
    }
}

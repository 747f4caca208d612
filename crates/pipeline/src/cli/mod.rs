//! The command-line options of the pipeline's jobs (feature `cli`): what
//! the commands that run a pipeline (`read`, `stats`, `filter`, `profile`,
//! `capture`, `generate`, `store`) take to configure its sources, stages
//! and sinks. The `kansoku` binary flattens these groups into its
//! subcommands and turns them into the pipeline's configurations.

pub mod anon;
mod expression;
mod live;
mod output;
mod profile;
mod store;

pub use anon::AnonArgs;
pub use expression::{ExpressionArgs, LastExpressionArgs, LiveSelection, Selection};
pub use live::{lane_path, CaptureArgs, GenerateArgs};
pub use output::{OutputArgs, PrecisionArg, StoreOpts, VerifyArgs};
pub use profile::{ProfileArgs, SummaryFormatArg};
pub use store::{StoreAction, StoreArgs, StoreRange};

//! Checks over the IR that every stage may rely on.
//!
//! - [`verify`]: structure and types (operands defined before use, each op's
//!   typing rule, terminators in place, task regions by `tasks`' rules).
//! - [`check_cluster_sync`]: every program of a cluster reaches each
//!   `cluster_barrier()` alike.
//! - [`check_task_region`]: the rules of `async_tasks!` regions.
//! - [`check_protocol`]: the synchronization protocol (barrier phases,
//!   buffer ownership, async copies) proved at build time.

mod cluster;
pub mod protocol;
mod tasks;
mod verify;

pub use cluster::{check_cluster_sync, ClusterSyncError};
pub use protocol::{check_protocol, Coverage, Finding, ProtocolReport, Rule};
pub use tasks::{check_task_region, TaskRuleError};
pub use verify::{verify, VerifyError, VerifyErrorKind};

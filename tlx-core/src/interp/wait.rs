//! What a blocked task waits for ([`WaitReason`]), where it waits
//! ([`Wait`]), and the per-task lines of a deadlock report ([`BlockedTask`]).

use std::fmt;

/// The condition a blocked task waits on, with the progress made towards it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WaitReason {
    /// Completion of `phase` of an mbarrier.
    MBarrier {
        /// The barrier's number in its program.
        barrier: usize,
        phase: u32,
        arrivals: u32,
        expected_arrivals: u32,
        /// Transaction bytes completed in this phase.
        tx_bytes: i64,
        /// Transaction bytes announced by `expect_tx` in this phase.
        expected_tx_bytes: i64,
        /// Where the waiting task's previous wait on this barrier passed,
        /// when the barrier has since completed the phase after that one
        /// and more: this wait skips a phase.
        skipped: Option<Skipped>,
    },
    /// `cluster_barrier()` short of programs of the cluster.
    ClusterBarrier { arrived: u32, expected: u32 },
    /// A named barrier (`bar.sync id, threads`) short of threads.
    NamedBarrier {
        barrier: u32,
        arrived_threads: u32,
        expected_threads: u32,
    },
    /// The end of `async_tasks`, short of tasks that have finished.
    Tasks { unfinished: u32 },
    /// `signal_wait_until`: the flag's value does not compare as asked.
    Signal {
        /// The flag's value now.
        value: i64,
        /// The comparison (`"ge"`, ...) and the value it waits for.
        cmp: &'static str,
        wanted: i64,
    },
}

impl fmt::Display for WaitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitReason::MBarrier {
                barrier,
                phase,
                arrivals,
                expected_arrivals,
                tx_bytes,
                expected_tx_bytes,
                ..
            } => write!(
                f,
                "mbarrier #{barrier} phase {phase}: {arrivals} of {expected_arrivals} arrivals, \
                 {tx_bytes} of {expected_tx_bytes} transaction bytes"
            ),
            WaitReason::ClusterBarrier { arrived, expected } => write!(
                f,
                "cluster barrier: {arrived} of the cluster's {expected} programs arrived \
                 (a program that finished never arrives)"
            ),
            WaitReason::NamedBarrier {
                barrier,
                arrived_threads,
                expected_threads,
            } => write!(
                f,
                "named barrier {barrier}: {arrived_threads} of {expected_threads} threads arrived"
            ),
            WaitReason::Tasks { unfinished } => {
                write!(f, "{unfinished} of its tasks have not finished")
            }
            WaitReason::Signal { value, cmp, wanted } => write!(
                f,
                "a flag at {value}, waited for until it is `{cmp}` {wanted} (no program sets it so)"
            ),
        }
    }
}

/// A task's wait: the op it is stuck at, its source line, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wait {
    pub op: &'static str,
    pub line: u32,
    pub reason: WaitReason,
}

/// A blocked wait's task passed on phase `passed` of the barrier at
/// `line`, and the barrier has completed `passed + 1` and more since.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    pub passed: i64,
    pub line: u32,
    /// The wait names `passed`'s parity again: its phase was not flipped
    /// when the ring wrapped. Otherwise it names the next phase's parity,
    /// which completed before the task could wait, and the one after it
    /// too: the barrier got more arrivals a phase than it counts.
    pub same_parity: bool,
}

/// One task of a deadlocked program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockedTask {
    /// The task's index in its program (0 is the default task).
    pub task: usize,
    pub name: String,
    pub wait: Wait,
}

impl fmt::Display for BlockedTask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "task {} `{}` waits at op `{}` line {}: {}",
            self.task, self.name, self.wait.op, self.wait.line, self.wait.reason
        )
    }
}

/// The body of a deadlock message: one indented line per blocked task.
pub(crate) fn list_blocked(tasks: &[BlockedTask]) -> String {
    tasks.iter().map(|t| format!("\n  {t}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocked_tasks_name_task_op_line_and_reason() {
        let task = BlockedTask {
            task: 1,
            name: "consumer".into(),
            wait: Wait {
                op: "barrier_wait",
                line: 30,
                reason: WaitReason::NamedBarrier {
                    barrier: 3,
                    arrived_threads: 128,
                    expected_threads: 256,
                },
            },
        };
        assert_eq!(
            list_blocked(&[task]),
            "\n  task 1 `consumer` waits at op `barrier_wait` line 30: \
             named barrier 3: 128 of 256 threads arrived"
        );
    }
}

//! The compile-time protocol checker: barrier phases, arrive counts,
//! transaction bytes, named barriers and the ordering of shared-memory
//! reads after asynchronous writes, checked while the kernel compiles.
//!
//! It runs the kernel's synchronization skeleton (`slice`) on the
//! interpreter ([`crate::interp::run_skeleton`]): the same barrier, phase
//! and buffer-state model as a normal interpreter run, minus the data, so
//! the checker and the interpreter never disagree. Run-time sizes are
//! unknown at compile time; `samples` says which values are tried and why
//! they decide for every trip count. What the skeleton cannot follow (a
//! phase loaded from memory) is reported as a warning, never passed
//! silently. `accumulator` adds one rule the interpreter has no run-time
//! form of: an `async_dot` result used before the wait that completes it.

mod accumulator;
mod diagnose;
mod flags;
mod names;
mod samples;
mod slice;

use samples::{Interleaving, EXPLORED_RUNS};

use crate::interp::{explore_skeleton, run_skeleton, InterpError};
use crate::ir::{Kernel, SrcLoc};

/// The protocol rules, one per class of bug the checker rejects.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// A wait for a phase no task will complete.
    Deadlock,
    /// A wait that passes at once on a phase it already passed on.
    StaleWait,
    /// `barrier_expect_bytes` that differs from the bytes the copies bring.
    ExpectBytes,
    /// More arrivals in a phase than the barrier was allocated for.
    ArriveCount,
    /// Named barrier misuse: ids, thread counts, mismatched arrive and wait.
    NamedBarrier,
    /// A read of a shared buffer not ordered after the write that fills it.
    UnorderedRead,
    /// A write into a shared buffer not ordered after its readers' release.
    OverwriteBeforeRelease,
    /// A buffer or barrier index outside its allocation.
    RingIndex,
    /// An `async_dot` result read before `async_dot_wait` completes it (or,
    /// in tensor memory, before a wait on the barrier that tracks it).
    AccumulatorBeforeWait,
    /// A tensor-memory MMA's completion tracked twice on one barrier
    /// (`mbarriers` and a `tcgen05_commit` of the same barrier).
    MmaCompletion,
    /// A cluster peer's buffer or barrier reached before the peer made it
    /// visible (init fence and cluster barrier) or after the peer exited,
    /// or a rank outside the cluster.
    ClusterAccess,
    /// An asynchronous copy still in flight when its task or program
    /// ends: a TMA store not waited for, or a copy into shared memory whose
    /// barrier no task waited on.
    InFlightAtExit,
    /// An async-proxy read (TMA store, `async_dot`, `tcgen05_mma`) of a
    /// buffer a peer's `remote_shmem_store` wrote, with no
    /// `fence_async_shared()` between the wait that ordered the store and
    /// the read.
    ProxyFence,
    /// A write by the threads (`local_store`, `remote_shmem_store`, a
    /// `cp.async` issue) into a buffer an asynchronous copy may still be
    /// landing in: the two writes land in either order.
    WriteDuringCopy,
    /// A cluster-launch-control request (`clc_try_cancel`, under
    /// `clc_producer`) by a program that has already decoded an answer
    /// saying no work was left: undefined in PTX.
    ClcAfterFailure,
    /// Something the checker cannot follow (a warning).
    Undecidable,
    /// A `signal_wait_until` on a flag no op of the kernel sets (a
    /// warning: another kernel or the host may).
    FlagNeverSet,
}

impl Rule {
    /// The rule's name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Rule::Deadlock => "deadlock",
            Rule::StaleWait => "stale-wait",
            Rule::ExpectBytes => "expect-bytes",
            Rule::ArriveCount => "arrive-count",
            Rule::NamedBarrier => "named-barrier",
            Rule::UnorderedRead => "unordered-read",
            Rule::OverwriteBeforeRelease => "overwrite-before-release",
            Rule::RingIndex => "ring-index",
            Rule::AccumulatorBeforeWait => "accumulator-before-wait",
            Rule::MmaCompletion => "mma-completion",
            Rule::ClusterAccess => "cluster-access",
            Rule::InFlightAtExit => "in-flight-at-exit",
            Rule::ProxyFence => "proxy-fence",
            Rule::WriteDuringCopy => "write-during-copy",
            Rule::ClcAfterFailure => "clc-after-failure",
            Rule::Undecidable => "undecidable",
            Rule::FlagNeverSet => "flag-never-set",
        }
    }

    /// The rule's stable code, which messages carry and
    /// docs/protocol-rules.md explains: errors `TLX-P001`.., in the order
    /// they were added (a new rule takes the next number, none is reused),
    /// the warnings `TLX-W001`...
    pub fn code(self) -> &'static str {
        match self {
            Rule::Deadlock => "TLX-P001",
            Rule::StaleWait => "TLX-P002",
            Rule::ExpectBytes => "TLX-P003",
            Rule::ArriveCount => "TLX-P004",
            Rule::NamedBarrier => "TLX-P005",
            Rule::UnorderedRead => "TLX-P006",
            Rule::OverwriteBeforeRelease => "TLX-P007",
            Rule::RingIndex => "TLX-P008",
            Rule::AccumulatorBeforeWait => "TLX-P009",
            Rule::MmaCompletion => "TLX-P010",
            Rule::ClusterAccess => "TLX-P011",
            Rule::InFlightAtExit => "TLX-P012",
            Rule::ProxyFence => "TLX-P013",
            Rule::WriteDuringCopy => "TLX-P014",
            Rule::ClcAfterFailure => "TLX-P015",
            Rule::Undecidable => "TLX-W001",
            Rule::FlagNeverSet => "TLX-W002",
        }
    }

    /// The rule named `name` (as [`Rule::name`] writes it).
    pub fn from_name(name: &str) -> Option<Rule> {
        Rule::ALL.into_iter().find(|rule| rule.name() == name)
    }

    /// Every rule, in the order of their codes.
    pub const ALL: [Rule; 17] = [
        Rule::Deadlock,
        Rule::StaleWait,
        Rule::ExpectBytes,
        Rule::ArriveCount,
        Rule::NamedBarrier,
        Rule::UnorderedRead,
        Rule::OverwriteBeforeRelease,
        Rule::RingIndex,
        Rule::AccumulatorBeforeWait,
        Rule::MmaCompletion,
        Rule::ClusterAccess,
        Rule::InFlightAtExit,
        Rule::ProxyFence,
        Rule::WriteDuringCopy,
        Rule::ClcAfterFailure,
        Rule::Undecidable,
        Rule::FlagNeverSet,
    ];
}

/// One finding, at the call it is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub rule: Rule,
    pub at: SrcLoc,
    pub message: String,
    /// What to write instead.
    pub hint: String,
}

/// What the checker found in one kernel.
#[derive(Clone, Debug, Default)]
pub struct ProtocolReport {
    /// Protocol errors: the kernel would hang or read stale data.
    pub errors: Vec<Finding>,
    /// Constructs the checker could not decide.
    pub warnings: Vec<Finding>,
    /// What the skeleton runs covered (`TLX_DUMP=protocol` writes it).
    pub coverage: Coverage,
}

/// Reports are equal when their findings are: what the runs covered is
/// how the checker got there, not what it found.
impl PartialEq for ProtocolReport {
    fn eq(&self, other: &ProtocolReport) -> bool {
        self.errors == other.errors && self.warnings == other.warnings
    }
}

impl Eq for ProtocolReport {}

/// What the checker ran a kernel's skeleton with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Skeleton runs tried (sizes x grids x interleavings), up to the
    /// first failure.
    pub runs: usize,
    /// Of them, runs under a random interleaving.
    pub random_interleavings: usize,
    /// Distinct sets of sizes.
    pub sizes: usize,
    /// The largest trip count every loop over a ring saw (`2S + 1`).
    pub trips: i64,
    /// Of the runs, interleavings the exploration of the smallest sizes ran.
    pub explored: usize,
    /// Whether the exploration ran every order of the dependent steps of
    /// the smallest sizes' first program (or cluster), within its budget.
    pub explored_all: bool,
}

impl std::fmt::Display for Coverage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let how_far = if self.explored_all {
            "every order of their dependent steps".to_owned()
        } else {
            format!("stopped at the budget of {EXPLORED_RUNS} runs")
        };
        write!(
            f,
            "{} skeleton runs: {} combinations of sizes and grid (every ring loop up to {} trips); the \
             smallest sizes under {} interleavings ({how_far}), the others round robin and {} under a \
             random interleaving",
            self.runs, self.sizes, self.trips, self.explored, self.random_interleavings
        )
    }
}

/// Task steps of one sample's run before it counts as endless (a loop that
/// does not end for those sizes: reported as undecidable).
const SAMPLE_STEPS: u64 = 4_000_000;

/// Task steps of the run that picks the pivot.
const PROBE_STEPS: u64 = 250_000;

/// Checks the synchronization protocol of `kernel`.
pub fn check_protocol(kernel: &Kernel) -> ProtocolReport {
    let mut report = ProtocolReport {
        errors: accumulator::check(kernel),
        warnings: flags::check(kernel),
        coverage: Coverage::default(),
    };
    let skeleton = slice::skeleton(kernel);
    // An accumulator read early also leaves its operands' reads open: the
    // skeleton would report the overwrite that follows, not the cause.
    if skeleton.is_empty() || !report.errors.is_empty() {
        return report;
    }
    // The exploration's runs, whether every one it began was complete, and
    // the run that failed, if one did.
    let explored = std::sync::Mutex::new((0, true, None));
    let run = |sample: &samples::Sample, max_steps: u64| match sample.interleaving {
        Interleaving::Fixed(schedule) => run_skeleton(
            kernel,
            &skeleton.keep,
            sample.grid,
            &sample.args,
            schedule,
            max_steps,
        ),
        Interleaving::Explored => {
            let exploration = explore_skeleton(
                kernel,
                &skeleton.keep,
                sample.grid,
                &sample.args,
                max_steps,
                EXPLORED_RUNS,
            );
            let mut explored = explored.lock().unwrap_or_else(|p| p.into_inner());
            explored.0 += exploration.runs;
            explored.1 &= exploration.complete;
            if exploration.result.is_err() {
                explored.2 = Some(exploration.runs);
            }
            exploration.result
        }
    };
    // The pivot: the highest whose run of every size at it stays short
    // (a persistent kernel multiplies its sizes; see `samples`).
    let sizes = samples::Sizes::new(kernel, &skeleton);
    let mut lowered = 0;
    while let Some(probe) = samples::all_at_pivot(kernel, &skeleton, &sizes, lowered) {
        match run(&probe, PROBE_STEPS) {
            Err(InterpError::StepBudget { .. }) if sizes.has_level(lowered + 1) => lowered += 1,
            _ => break,
        }
    }
    let samples = samples::samples(kernel, &skeleton, &sizes, lowered);
    // The smallest failing sizes explain the bug best; one is enough.
    let failure = first_failure(&samples, |s| run(s, SAMPLE_STEPS).err());
    let tried = failure.as_ref().map_or(samples.len(), |(sample, _)| {
        samples
            .iter()
            .position(|s| std::ptr::eq(s, *sample))
            .map_or(samples.len(), |i| i + 1)
    });
    let (runs, all, failing_run) = *explored.lock().unwrap_or_else(|p| p.into_inner());
    report.coverage = samples::coverage(&samples[..tried], sizes.max_trips(), (runs, all));
    if let Some((sample, error)) = failure {
        let mut described = samples::describe(kernel, sample);
        // The exploration's first run is the round-robin order, which the
        // interpreter takes by default; a later one is not.
        if let (Interleaving::Explored, Some(run @ 2..)) = (sample.interleaving, failing_run) {
            described.push_str(&format!(
                ", in an interleaving of its tasks other than round robin (run {} of the checker's exploration)",
                run
            ));
        }
        match diagnose::diagnose(kernel, &error, &described) {
            diagnose::Verdict::Error(finding) => report.errors.push(finding),
            diagnose::Verdict::Undecided(finding) => report.warnings.push(finding),
        }
    }
    report
}

/// The first of `samples` (in their order) on which `fails` gives an error,
/// with the error. The runs are independent, so they are spread over the
/// machine's cores (each worker takes every `n`-th sample and skips those
/// after a failure already found); the answer is the one a run in order
/// would give.
fn first_failure<E: Send>(
    samples: &[samples::Sample],
    fails: impl Fn(&samples::Sample) -> Option<E> + Sync,
) -> Option<(&samples::Sample, E)> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(samples.len())
        .max(1);
    let first = AtomicUsize::new(usize::MAX);
    let found: Vec<(usize, E)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let (first, fails) = (&first, &fails);
                scope.spawn(move || {
                    for i in (w..samples.len()).step_by(workers) {
                        if i > first.load(Ordering::Relaxed) {
                            return None;
                        }
                        if let Some(e) = fails(&samples[i]) {
                            first.fetch_min(i, Ordering::Relaxed);
                            return Some((i, e));
                        }
                    }
                    None
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    found
        .into_iter()
        .min_by_key(|(i, _)| *i)
        .map(|(i, e)| (&samples[i], e))
}

#[cfg(test)]
mod tests {
    use super::Rule;

    #[test]
    fn every_rule_is_found_by_its_name() {
        for rule in Rule::ALL {
            assert_eq!(Rule::from_name(rule.name()), Some(rule));
        }
        assert_eq!(Rule::from_name("no-such-rule"), None);
    }

    #[test]
    fn codes_are_unique() {
        let mut codes: Vec<&str> = Rule::ALL.into_iter().map(Rule::code).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), Rule::ALL.len());
    }

    /// docs/protocol-rules.md has a section for every rule, headed by its
    /// code and name (the ui-tests check the cases each section lists).
    #[test]
    fn every_rule_has_a_section_in_the_rules_page() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/protocol-rules.md");
        let page = std::fs::read_to_string(path).expect("reading docs/protocol-rules.md");
        let missing: Vec<&str> = Rule::ALL
            .into_iter()
            .filter(|rule| !page.contains(&format!("## {} `{}`", rule.code(), rule.name())))
            .map(Rule::code)
            .collect();
        assert!(
            missing.is_empty(),
            "docs/protocol-rules.md has no section for {missing:?}"
        );
    }

    /// The language guide's table of what the checker rejects lists every
    /// rule (the warning `undecidable` is described in its prose).
    #[test]
    fn every_rule_has_a_row_in_the_language_guide() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/language.md");
        let guide = std::fs::read_to_string(path).expect("reading docs/language.md");
        let missing: Vec<&str> = Rule::ALL
            .into_iter()
            .filter(|&rule| rule != Rule::Undecidable)
            .map(Rule::name)
            .filter(|name| !guide.contains(&format!("| `{name}` |")))
            .collect();
        assert!(
            missing.is_empty(),
            "docs/language.md has no row for {missing:?}"
        );
    }
}

//! Each task's view of the mbarrier phases, for the two phase bugs PTX
//! cannot see.
//!
//! Stale waits: a `barrier_wait` that passes on a completed phase its task
//! already waited for. That is harmless while the barrier stays there (a
//! one-shot barrier waited for again), but once the barrier moved on, the
//! wait meant the newer phase and returned at once instead: the forgotten
//! `phase ^= 1`, which on the GPU reads a stage before it is filled. The
//! wait is reported at once when the next phase has already begun, else
//! when the program ends if that phase completed by then.
//!
//! Early arrivals: an arrive that lands in the phase after the one the
//! same task's previous arrive completed, with no wait of the task in
//! between. It completes (or counts towards) a phase with an arrival meant
//! for the last one: a release counted twice, a signal sent faster than
//! the waiter can tell phases apart (parity aliases after two).

use std::collections::HashMap;

use super::error::InterpError;
use super::mbarrier::MBarrier;
use super::wait::Skipped;

/// A task's re-observation of a phase, not (yet) known to be stale.
#[derive(Debug)]
struct Suspect {
    task: usize,
    barrier: usize,
    phase: i64,
    error: InterpError,
}

/// Per task and barrier, the latest completed phase its waits passed on.
#[derive(Debug, Default)]
pub(crate) struct Observations {
    /// (task, barrier) -> (phase, line of the wait that passed on it).
    seen: HashMap<(usize, usize), (i64, u32)>,
    suspects: Vec<Suspect>,
    /// (task, barrier) -> line of the task's arrive that completed a phase
    /// of the barrier, until the task next waits on anything.
    completing_arrivals: HashMap<(usize, usize), u32>,
    /// Per program of the cluster (by rank), the line of a `clc_query`
    /// that decoded "no work left": a later request by that program is
    /// undefined.
    clc_failed: HashMap<usize, u32>,
}

impl Observations {
    pub(crate) fn clear(&mut self) {
        self.seen.clear();
        self.suspects.clear();
        self.completing_arrivals.clear();
        self.clc_failed.clear();
    }

    /// Program `member` decoded a cluster-launch-control answer saying no
    /// work was left, at `line` (the first time counts).
    pub(crate) fn clc_failed(&mut self, member: usize, line: u32) {
        self.clc_failed.entry(member).or_insert(line);
    }

    /// The line where program `member` first decoded "no work left", if it has.
    pub(crate) fn clc_failure(&self, member: usize) -> Option<u32> {
        self.clc_failed.get(&member).copied()
    }

    /// `task` waited (on any barrier): its next arrivals are for new phases.
    pub(crate) fn waited(&mut self, task: usize) {
        self.completing_arrivals.retain(|&(t, _), _| t != task);
    }

    /// `task` arrives at `line` on `barrier`; `completes` whether this
    /// arrival completes the phase. Returns the line of the task's earlier
    /// arrival that completed the previous phase when the task has not
    /// waited since (an early arrival).
    pub(crate) fn arrive(
        &mut self,
        task: usize,
        barrier: usize,
        completes: bool,
        line: u32,
    ) -> Option<u32> {
        let earlier = self.completing_arrivals.get(&(task, barrier)).copied();
        if completes {
            self.completing_arrivals.insert((task, barrier), line);
        }
        earlier
    }

    /// A wait of `task` at `line` passed on completed `phase` of `barrier`
    /// (-1: the phase before the first). Returns the line of the earlier
    /// wait of the task that passed on the same phase, if any.
    pub(crate) fn observe(
        &mut self,
        task: usize,
        barrier: usize,
        phase: i64,
        line: u32,
    ) -> Option<u32> {
        match self.seen.get(&(task, barrier)) {
            Some(&(seen, first_line)) if seen == phase => Some(first_line),
            _ => {
                self.seen.insert((task, barrier), (phase, line));
                None
            }
        }
    }

    /// The latest phase of `barrier` a wait of `task` passed on.
    pub(crate) fn last_passed(&self, task: usize, barrier: usize) -> Option<i64> {
        self.seen.get(&(task, barrier)).map(|&(phase, _)| phase)
    }

    /// Where `task`'s last wait on `barrier` passed, when the barrier has
    /// completed the phase after that one and more: a wait for `parity`
    /// now blocked on phase `current` skips one (see [`Skipped`]). A first
    /// wait counts from the phase before the first (completed, parity 1):
    /// a first wait for phase 0 blocked on phase 2 or later skipped phase 0
    /// (it has no earlier line to blame, so only that form counts).
    pub(crate) fn skipped(
        &self,
        task: usize,
        barrier: usize,
        current: u32,
        parity: u32,
    ) -> Option<Skipped> {
        let Some(&(passed, line)) = self.seen.get(&(task, barrier)) else {
            return (current >= 2 && parity & 1 == 0).then_some(Skipped {
                passed: -1,
                line: 0,
                same_parity: false,
            });
        };
        (i64::from(current) >= passed + 2).then_some(Skipped {
            passed,
            line,
            same_parity: passed.rem_euclid(2) == i64::from(parity & 1),
        })
    }

    /// Keeps `error` (a `StaleWait`) until the end of the program: it holds
    /// if the barrier completes the phase after `phase` by then.
    pub(crate) fn suspect(&mut self, task: usize, barrier: usize, phase: i64, error: InterpError) {
        self.suspects.push(Suspect {
            task,
            barrier,
            phase,
            error,
        });
    }

    /// The suspect re-observation by `task` of `barrier`, taken out: a race
    /// on a buffer that barrier guards is its consequence, not the cause.
    pub(crate) fn take_suspect(&mut self, task: usize, barrier: usize) -> Option<InterpError> {
        let at = self
            .suspects
            .iter()
            .position(|s| s.task == task && s.barrier == barrier)?;
        Some(self.suspects.swap_remove(at).error)
    }

    /// Any suspect re-observation by `task`, taken out: a reader that runs
    /// ahead of its producer on a stale wait is the cause of the overwrite
    /// that follows.
    pub(crate) fn take_suspect_of(&mut self, task: usize) -> Option<InterpError> {
        let at = self.suspects.iter().position(|s| s.task == task)?;
        Some(self.suspects.swap_remove(at).error)
    }

    /// At the end of a program: the first suspect whose barrier moved past
    /// the phase after the one re-observed.
    pub(crate) fn take_stale(&mut self, barriers: &[MBarrier]) -> Option<InterpError> {
        let at = self.suspects.iter().position(|s| {
            barriers
                .get(s.barrier)
                .is_some_and(|bar| i64::from(bar.phase()) >= s.phase + 2)
        })?;
        Some(self.suspects.swap_remove(at).error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_pass_on_the_same_phase_is_a_reobservation() {
        let mut seen = Observations::default();
        assert_eq!(seen.observe(1, 0, -1, 10), None);
        assert_eq!(seen.observe(1, 0, -1, 12), Some(10));
        assert_eq!(seen.observe(2, 0, -1, 12), None, "another task");
        assert_eq!(seen.observe(1, 0, 0, 12), None, "a newer phase");
        assert_eq!(seen.observe(1, 0, 0, 14), Some(12));
    }

    #[test]
    fn a_wait_past_the_phase_after_the_last_one_seen_skips_it() {
        let mut seen = Observations::default();
        assert_eq!(seen.skipped(1, 0, 0, 0), None, "no wait seen yet");
        seen.observe(1, 0, -1, 10);
        assert_eq!(seen.skipped(1, 0, 0, 0), None, "the next phase");
        let skipped = |same_parity| {
            Some(Skipped {
                passed: -1,
                line: 10,
                same_parity,
            })
        };
        // Waiting with parity 1 again on phase 1: not flipped.
        assert_eq!(seen.skipped(1, 0, 1, 1), skipped(true));
        // Parity 0 meant phase 0, which completed, and phase 1 too.
        assert_eq!(seen.skipped(1, 0, 2, 0), skipped(false));
        assert_eq!(seen.skipped(2, 0, 1, 1), None, "another task");
    }

    #[test]
    fn a_suspect_is_stale_once_the_next_phase_completed(
    ) -> Result<(), crate::interp::mbarrier::MBarrierError> {
        let mut seen = Observations::default();
        let error = || InterpError::EmptyGrid {
            kernel: "k".into(),
            grid: [0, 1, 1],
        };
        seen.suspect(1, 0, 0, error());
        let mut bar = MBarrier::new(1)?;
        bar.arrive(1)?;
        assert!(
            seen.take_stale(std::slice::from_ref(&bar)).is_none(),
            "phase 1 is current"
        );
        bar.arrive(1)?;
        assert!(
            seen.take_stale(std::slice::from_ref(&bar)).is_some(),
            "phase 1 completed"
        );
        Ok(())
    }
}

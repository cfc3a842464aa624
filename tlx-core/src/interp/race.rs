//! Shared-memory race detection for asynchronous writes (TMA-style copies
//! into shared buffers that complete on an mbarrier): per buffer, the last
//! asynchronous writer and which tasks have since waited for its completion.
//! A read by a task that has not waited, and is not ordered after a task
//! that did (an arrive -> wait chain through named barriers or mbarriers,
//! as FA3's second consumer follows the first, which waited), is a race.

use std::collections::HashMap;

/// A shared-memory buffer of a program, by number.
pub type SharedBufferId = usize;

/// The last asynchronous write into a shared buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
struct AsyncWrite {
    writer: String,
    /// The writing op's name and line.
    op: &'static str,
    line: u32,
    barrier: usize,
    /// The barrier phase whose completion signals the write landed.
    phase: u32,
    /// Further barrier phases whose completion also signals it (an MMA
    /// with several `mbarriers`).
    also: Vec<(usize, u32)>,
    /// Tasks that waited for that phase after the write was issued, each
    /// with its clock tick at the wait (see [`super::clocks`]).
    observed_by: Vec<(usize, u64)>,
}

/// A read of a shared buffer that raced with an asynchronous write.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "read of shared buffer #{buffer} (written asynchronously by task `{writer}` at line {line}) \
     before waiting on its barrier (mbarrier #{barrier} phase {phase})"
)]
pub struct SharedRace {
    pub buffer: SharedBufferId,
    pub writer: String,
    pub line: u32,
    pub barrier: usize,
    pub phase: u32,
}

/// An asynchronous write no task waited for (see [`AsyncWrites::unwaited`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnwaitedWrite {
    pub buffer: SharedBufferId,
    pub writer: String,
    pub op: &'static str,
    pub line: u32,
    pub barrier: usize,
    pub phase: u32,
}

/// The asynchronous-write records of one program's shared buffers.
#[derive(Clone, Debug, Default)]
pub struct AsyncWrites {
    last: HashMap<SharedBufferId, AsyncWrite>,
}

impl AsyncWrites {
    /// Forgets every record (a new program starts).
    pub fn clear(&mut self) {
        self.last.clear();
    }

    /// Task `writer` (at source `line`) started an asynchronous write into
    /// `buffer` whose completion `phase` of mbarrier `barrier` will signal.
    pub fn record_write(
        &mut self,
        buffer: SharedBufferId,
        writer: &str,
        (op, line): (&'static str, u32),
        barrier: usize,
        phase: u32,
    ) {
        self.last.insert(
            buffer,
            AsyncWrite {
                writer: writer.to_owned(),
                op,
                line,
                barrier,
                phase,
                also: Vec::new(),
                observed_by: Vec::new(),
            },
        );
    }

    /// [`AsyncWrites::record_write`] for a write whose completion each of
    /// `signals` (barrier, phase) announces: a wait for any of them makes
    /// it visible.
    pub fn record_write_signalled(
        &mut self,
        buffer: SharedBufferId,
        writer: &str,
        at: (&'static str, u32),
        signals: &[(usize, u32)],
    ) {
        let Some(&(barrier, phase)) = signals.first() else {
            return;
        };
        self.record_write(buffer, writer, at, barrier, phase);
        if let Some(write) = self.last.get_mut(&buffer) {
            write.also = signals[1..].to_vec();
        }
    }

    /// `barrier`'s `phase` also signals the last asynchronous write into
    /// `buffer` (a `tcgen05_commit` tracks every earlier MMA of its thread).
    pub fn also_signalled(&mut self, buffer: SharedBufferId, barrier: usize, phase: u32) {
        if let Some(write) = self.last.get_mut(&buffer) {
            write.also.push((barrier, phase));
        }
    }

    /// Task `task` saw `completed_phase` of `barrier` complete (a successful
    /// wait, its clock then at `tick`): writes signalled by that phase or
    /// earlier are visible to it, and to whatever is ordered after it.
    pub fn record_wait(&mut self, task: usize, tick: u64, barrier: usize, completed_phase: u32) {
        for write in self.last.values_mut() {
            let signalled = std::iter::once((write.barrier, write.phase))
                .chain(write.also.iter().copied())
                .any(|(b, phase)| b == barrier && phase <= completed_phase);
            if signalled && !write.observed_by.iter().any(|&(t, _)| t == task) {
                write.observed_by.push((task, tick));
            }
        }
    }

    /// The first (by line, then buffer) last write into a buffer that no
    /// task has waited for: at the program's exit, a copy that may land
    /// after its shared memory is reused.
    pub fn unwaited(&self) -> Option<UnwaitedWrite> {
        self.last
            .iter()
            .filter(|(_, write)| write.observed_by.is_empty())
            .min_by_key(|(&buffer, write)| (write.line, buffer))
            .map(|(&buffer, write)| UnwaitedWrite {
                buffer,
                writer: write.writer.clone(),
                op: write.op,
                line: write.line,
                barrier: write.barrier,
                phase: write.phase,
            })
    }

    /// Checks a read of `buffer` by `task`, whose vector clock is `seen`.
    pub fn check_read(
        &self,
        buffer: SharedBufferId,
        task: usize,
        seen: &[u64],
    ) -> Result<(), SharedRace> {
        let ordered = |write: &AsyncWrite| {
            write
                .observed_by
                .iter()
                .any(|&(t, at)| t == task || seen.get(t).is_some_and(|&s| s >= at))
        };
        match self.last.get(&buffer) {
            Some(write) if !ordered(write) => Err(SharedRace {
                buffer,
                writer: write.writer.clone(),
                line: write.line,
                barrier: write.barrier,
                phase: write.phase,
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reading_before_the_wait_is_a_race_and_after_it_is_not() {
        let mut writes = AsyncWrites::default();
        assert_eq!(
            writes.check_read(4, 1, &[]),
            Ok(()),
            "never written asynchronously"
        );
        writes.record_write(4, "producer", ("async_descriptor_load", 17), 2, 0);
        let race = writes.check_read(4, 1, &[]).unwrap_err();
        assert_eq!(
            race.to_string(),
            "read of shared buffer #4 (written asynchronously by task `producer` at line 17) \
             before waiting on its barrier (mbarrier #2 phase 0)"
        );
        writes.record_wait(1, 1, 2, 0);
        assert_eq!(writes.check_read(4, 1, &[]), Ok(()));
        assert!(
            writes.check_read(4, 0, &[]).is_err(),
            "the writer itself has not waited"
        );
    }

    #[test]
    fn only_the_signalling_barrier_and_phase_count() {
        let mut writes = AsyncWrites::default();
        writes.record_write(0, "producer", ("async_descriptor_load", 5), 1, 3);
        writes.record_wait(1, 1, 0, 3);
        assert!(writes.check_read(0, 1, &[]).is_err(), "another barrier");
        writes.record_wait(1, 1, 1, 2);
        assert!(writes.check_read(0, 1, &[]).is_err(), "an earlier phase");
        writes.record_wait(1, 1, 1, 4);
        assert_eq!(
            writes.check_read(0, 1, &[]),
            Ok(()),
            "a later phase implies it"
        );
    }

    #[test]
    fn a_read_ordered_after_another_tasks_wait_is_not_a_race() {
        let mut writes = AsyncWrites::default();
        writes.record_write(3, "producer", ("async_descriptor_load", 9), 1, 0);
        // Task 1 waits at its tick 5; task 2 then learns of ticks up to 4
        // and later up to 5 of task 1 (a named barrier's arrive -> wait).
        writes.record_wait(1, 5, 1, 0);
        assert!(
            writes.check_read(3, 2, &[0, 4, 7]).is_err(),
            "before the wait"
        );
        assert_eq!(writes.check_read(3, 2, &[0, 5, 7]), Ok(()), "after it");
    }

    #[test]
    fn a_new_write_needs_a_new_wait() {
        let mut writes = AsyncWrites::default();
        writes.record_write(0, "producer", ("async_descriptor_load", 5), 1, 0);
        writes.record_wait(1, 1, 1, 0);
        writes.record_write(0, "producer", ("async_descriptor_load", 5), 1, 1);
        assert!(writes.check_read(0, 1, &[]).is_err());
        writes.clear();
        assert_eq!(writes.check_read(0, 1, &[]), Ok(()));
    }

    #[test]
    fn a_write_nobody_waited_for_is_left_at_exit() {
        let mut writes = AsyncWrites::default();
        writes.record_write(0, "producer", ("async_descriptor_load", 5), 1, 0);
        writes.record_write(1, "producer", ("async_descriptor_load", 6), 2, 0);
        writes.record_wait(1, 3, 1, 0);
        let left = writes
            .unwaited()
            .expect("buffer 1's copy is never waited for");
        assert_eq!((left.buffer, left.line, left.barrier), (1, 6, 2));
        writes.record_wait(1, 4, 2, 0);
        assert_eq!(writes.unwaited(), None);
    }
}

//! Happens-before between the tasks of a program, as vector clocks, for
//! the one race the per-buffer write records cannot see: an asynchronous
//! write (a TMA or `cp.async` copy, a `local_store`) into a buffer whose
//! readers in other tasks have not released it, i.e. whose reads are not
//! ordered before the write by a chain of arrive -> wait (mbarriers, named
//! barriers) or fork/join. That is the producer overwriting a stage the
//! consumer still reads.
//!
//! A task's clock advances at each primitive it runs. An arrive publishes
//! the task's clock into the barrier phase it arrives at (a copy publishes
//! its issuer's clock into the phase its bytes complete); a wait that
//! passes on a phase takes in that phase's clock. A read is recorded with
//! the reader's clock when it ends: at once for `local_load` and TMA
//! store sources... and for `async_dot` operands when the `async_dot_wait`
//! that retires its group runs, since the tensor cores read until then.
//! Until then the read is open, and any write by another task races it.

use std::collections::HashMap;

use super::memory::BufferId;

/// A vector clock: per task (the scheduler's index), the latest of its
/// events known to happen before.
type Clock = Vec<u64>;

fn join(into: &mut Clock, from: &[u64]) {
    if into.len() < from.len() {
        into.resize(from.len(), 0);
    }
    for (a, &b) in into.iter_mut().zip(from) {
        *a = (*a).max(b);
    }
}

/// A read of a buffer: by whom, where, and at which of their clock ticks
/// it ended (`None` while open).
#[derive(Clone, Debug)]
struct Read {
    task: usize,
    name: String,
    line: u32,
    ended: Option<u64>,
}

/// A write that races a read its writer was not ordered after.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Unreleased {
    pub(crate) reader_task: usize,
    pub(crate) reader: String,
    pub(crate) line: u32,
    /// Whether the read was still in flight (an `async_dot` not yet waited for).
    pub(crate) open: bool,
}

#[derive(Debug, Default)]
pub(crate) struct Clocks {
    tasks: Vec<Clock>,
    /// (mbarrier, phase) -> what its arrivals and copies published.
    phases: HashMap<(usize, u32), Clock>,
    /// (named barrier, generation) -> what its arrivals published.
    named: HashMap<(u32, u64), Clock>,
    /// Per shared buffer, the reads since its last write.
    reads: HashMap<usize, Vec<Read>>,
    /// Per shared buffer, its last write if a peer's synchronous store
    /// (`remote_shmem_store`) made it: a read must be ordered after it.
    stores: HashMap<usize, Store>,
    /// Per task, its clock at its last proxy fence (`fence_async_shared`):
    /// the generic-proxy stores it had seen by then are visible to its
    /// later async-proxy reads (TMA stores, wgmma, tensor-core MMAs).
    fences: HashMap<usize, Clock>,
    /// Per global element (buffer, byte offset), what releasing atomics on
    /// it published (a signal's flag): an acquire there takes it in.
    flags: HashMap<(BufferId, i64), Clock>,
}

/// A synchronous store into a buffer by a task of another program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Store {
    pub(crate) task: usize,
    pub(crate) name: String,
    pub(crate) line: u32,
    tick: u64,
}

impl Clocks {
    pub(crate) fn clear(&mut self) {
        self.tasks.clear();
        self.phases.clear();
        self.named.clear();
        self.reads.clear();
        self.stores.clear();
        self.fences.clear();
        self.flags.clear();
    }

    /// `task` releases at the global element `at` (an atomic with release
    /// semantics): what it has seen is published there.
    pub(crate) fn release_at(&mut self, task: usize, at: (BufferId, i64)) {
        let clock = self.snapshot(task);
        join(self.flags.entry(at).or_default(), &clock);
    }

    /// `task` acquires at the global element `at` (an atomic with acquire
    /// semantics, a `signal_wait_until` that passed).
    pub(crate) fn acquire_at(&mut self, task: usize, at: (BufferId, i64)) {
        if let Some(seen) = self.flags.get(&at).cloned() {
            join(self.clock(task), &seen);
        }
    }

    fn clock(&mut self, task: usize) -> &mut Clock {
        if self.tasks.len() <= task {
            self.tasks.resize(task + 1, Clock::new());
        }
        let clock = &mut self.tasks[task];
        if clock.len() <= task {
            clock.resize(task + 1, 0);
        }
        clock
    }

    /// `task` runs an event; its own component advances.
    pub(crate) fn tick(&mut self, task: usize) -> u64 {
        let clock = self.clock(task);
        clock[task] += 1;
        clock[task]
    }

    /// `task`'s clock as it stands (empty before its first event).
    pub(crate) fn seen(&self, task: usize) -> &[u64] {
        self.tasks.get(task).map_or(&[], Vec::as_slice)
    }

    /// A copy of `task`'s clock (what an asynchronous copy it issues carries).
    pub(crate) fn snapshot(&mut self, task: usize) -> Clock {
        self.clock(task).clone()
    }

    /// `child` starts with everything `parent` has seen.
    pub(crate) fn fork(&mut self, parent: usize, child: usize) {
        let seen = self.snapshot(parent);
        join(self.clock(child), &seen);
    }

    /// `parent` resumes after `child` finished.
    pub(crate) fn join_child(&mut self, parent: usize, child: usize) {
        let seen = self.snapshot(child);
        join(self.clock(parent), &seen);
    }

    /// An arrival (or completed copy carrying `clock`) in `phase` of `barrier`.
    pub(crate) fn publish(&mut self, barrier: usize, phase: u32, clock: &[u64]) {
        join(self.phases.entry((barrier, phase)).or_default(), clock);
    }

    /// `task` arrives at `phase` of `barrier`.
    pub(crate) fn arrive(&mut self, task: usize, barrier: usize, phase: u32) {
        let clock = self.snapshot(task);
        self.publish(barrier, phase, &clock);
    }

    /// `task` passed a wait on completed `phase` of `barrier`.
    pub(crate) fn acquire(&mut self, task: usize, barrier: usize, phase: u32) {
        if let Some(seen) = self.phases.get(&(barrier, phase)).cloned() {
            join(self.clock(task), &seen);
        }
    }

    /// `task` arrives at `generation` of named barrier `id`.
    pub(crate) fn named_arrive(&mut self, task: usize, id: u32, generation: u64) {
        let clock = self.snapshot(task);
        join(self.named.entry((id, generation)).or_default(), &clock);
    }

    /// `task`'s wait on `generation` of named barrier `id` passed.
    pub(crate) fn named_acquire(&mut self, task: usize, id: u32, generation: u64) {
        if let Some(seen) = self.named.get(&(id, generation)).cloned() {
            join(self.clock(task), &seen);
        }
    }

    /// `task` reads `buffer` at `line`; `open` while the read goes on
    /// after this step (an `async_dot` operand).
    pub(crate) fn read(&mut self, task: usize, name: &str, line: u32, buffer: usize, open: bool) {
        let ended = if open { None } else { Some(self.tick(task)) };
        let reads = self.reads.entry(buffer).or_default();
        reads.retain(|r| r.task != task || r.ended.is_none());
        reads.push(Read {
            task,
            name: name.to_owned(),
            line,
            ended,
        });
    }

    /// `task`'s open reads of `buffers` end now (its `async_dot_wait`).
    pub(crate) fn end_reads(&mut self, task: usize, buffers: &[usize]) {
        let now = self.tick(task);
        for buffer in buffers {
            if let Some(reads) = self.reads.get_mut(buffer) {
                for read in reads.iter_mut().filter(|r| r.task == task) {
                    read.ended.get_or_insert(now);
                }
            }
        }
    }

    /// `task` (named `name`) stored into `buffer` at `line` synchronously,
    /// after [`Clocks::write`] checked the store.
    pub(crate) fn store(&mut self, task: usize, name: &str, line: u32, buffer: usize) {
        let tick = self.tick(task);
        let store = Store {
            task,
            name: name.to_owned(),
            line,
            tick,
        };
        self.stores.insert(buffer, store);
    }

    /// The synchronous store into `buffer` that `task`'s read is not
    /// ordered after, if any.
    pub(crate) fn unordered_store(&self, task: usize, buffer: usize) -> Option<&Store> {
        let store = self.stores.get(&buffer)?;
        let seen = self.tasks.get(task).and_then(|c| c.get(store.task));
        (store.task != task && seen.copied().unwrap_or(0) < store.tick).then_some(store)
    }

    /// `task` runs a proxy fence (`fence_async_shared`).
    pub(crate) fn proxy_fence(&mut self, task: usize) {
        let seen = self.snapshot(task);
        self.fences.insert(task, seen);
    }

    /// The synchronous store into `buffer` (a generic-proxy write) that
    /// `task` had not seen at its last proxy fence, if any: what an
    /// async-proxy read of the buffer by `task` may miss.
    pub(crate) fn unfenced_store(&self, task: usize, buffer: usize) -> Option<&Store> {
        let store = self.stores.get(&buffer)?;
        let fenced = self.fences.get(&task).and_then(|c| c.get(store.task));
        (fenced.copied().unwrap_or(0) < store.tick).then_some(store)
    }

    /// `task` writes `buffer`: every read of it by another task must
    /// happen before. The buffer's reads are then forgotten (new contents).
    pub(crate) fn write(&mut self, task: usize, buffer: usize) -> Result<(), Unreleased> {
        self.stores.remove(&buffer);
        let seen = self.snapshot(task);
        let reads = self.reads.remove(&buffer).unwrap_or_default();
        let racing = reads.iter().find(|r| {
            r.task != task
                && match r.ended {
                    None => true,
                    Some(at) => seen.get(r.task).copied().unwrap_or(0) < at,
                }
        });
        match racing {
            Some(r) => Err(Unreleased {
                reader_task: r.task,
                reader: r.name.clone(),
                line: r.line,
                open: r.ended.is_none(),
            }),
            None => {
                // The writer's own open reads stay (its wgmma still reads).
                let own: Vec<Read> = reads.into_iter().filter(|r| r.task == task).collect();
                if !own.is_empty() {
                    self.reads.insert(buffer, own);
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_after_the_readers_release_is_ordered() {
        let mut clocks = Clocks::default();
        // Task 1 reads buffer 7, then arrives on barrier 0 phase 0.
        clocks.read(1, "consumer", 10, 7, false);
        clocks.tick(1);
        clocks.arrive(1, 0, 0);
        // Task 2 waits for that phase, then writes the buffer.
        clocks.acquire(2, 0, 0);
        assert_eq!(clocks.write(2, 7), Ok(()));
    }

    #[test]
    fn a_write_before_the_release_races() {
        let mut clocks = Clocks::default();
        clocks.read(1, "consumer", 10, 7, false);
        let race = clocks.write(2, 7).expect_err("not ordered");
        assert_eq!(
            (race.reader.as_str(), race.line, race.open),
            ("consumer", 10, false)
        );
    }

    #[test]
    fn an_open_read_races_until_it_ends_and_is_released() {
        let mut clocks = Clocks::default();
        clocks.read(1, "consumer", 12, 3, true);
        // Released before the wgmma was waited for: still racing.
        clocks.arrive(1, 0, 0);
        clocks.acquire(2, 0, 0);
        assert!(clocks.write(2, 3).expect_err("open").open);
        clocks.read(1, "consumer", 12, 3, true);
        clocks.end_reads(1, &[3]);
        clocks.arrive(1, 0, 1);
        clocks.acquire(2, 0, 1);
        assert_eq!(clocks.write(2, 3), Ok(()));
    }
}

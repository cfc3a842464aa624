//! Races on global memory between the tasks of a cooperative run (every
//! program of a kernel that waits on flags, or the ranks of a mesh, in one
//! schedule), where programs hand data to each other through global memory
//! and signals: a read of an element another task wrote, or a write of an
//! element another task wrote or read, that no chain of release -> acquire
//! orders after it. Release and acquire are the signals' atomics (`sem =
//! "release"` publishes the writer's clock at the flag, an acquiring atomic
//! or a `signal_wait_until` that passes takes it in; see [`Clocks`]), the
//! mbarriers and named barriers within a program, and fork/join. Atomics
//! are not data accesses here: they are how tasks synchronize.

use std::collections::HashMap;

use crate::ir::MemSem;

use super::clocks::Clocks;
use super::memory::BufferId;
use super::value::Ptr;

/// An element of global memory: its buffer and byte offset.
type Location = (BufferId, i64);

/// One access to an element: by which task, at which of its clock ticks.
#[derive(Clone, Debug)]
struct Touch {
    task: usize,
    tick: u64,
    name: String,
    line: u32,
}

/// An element's last write and the reads since.
#[derive(Debug, Default)]
struct Cell {
    write: Option<Touch>,
    reads: Vec<Touch>,
}

/// The accesses of a cooperative run, per element.
#[derive(Debug, Default)]
pub(crate) struct GlobalAccesses {
    cells: HashMap<Location, Cell>,
}

/// Which accesses raced.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum GlobalRaceKind {
    /// A read of what another task wrote, before anything ordered the write first.
    ReadBeforeSignal,
    /// A write over what another task still reads (or read, unreleased).
    OverwriteBeforeRelease,
    /// Two writes no signal orders.
    UnorderedWrites,
}

/// A race on global memory (see [`GlobalAccesses`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GlobalRace {
    pub kind: GlobalRaceKind,
    /// The task whose access raced.
    pub task: String,
    /// The other access's task and line.
    pub other: String,
    pub other_line: u32,
    pub buffer: BufferId,
    pub byte_offset: i64,
}

/// What an op does at its elements.
#[derive(Copy, Clone, Debug)]
pub(crate) enum GlobalAccess {
    Read,
    Write,
    /// An atomic: synchronization by its semantics, not a data access.
    Atomic(MemSem),
}

/// Who accesses: the task's index in the schedule, its name and the line.
pub(crate) struct Accessor<'a> {
    pub(crate) task: usize,
    pub(crate) name: &'a str,
    pub(crate) line: u32,
}

impl GlobalAccesses {
    /// `who` performs `access` at the unmasked lanes of `ptrs`.
    pub(crate) fn access(
        &mut self,
        clocks: &mut Clocks,
        who: &Accessor<'_>,
        access: GlobalAccess,
        ptrs: &[Ptr],
        mask: Option<&[bool]>,
    ) -> Result<(), GlobalRace> {
        match access {
            GlobalAccess::Read => self.read(clocks, who, ptrs, mask),
            GlobalAccess::Write => self.write(clocks, who, ptrs, mask),
            GlobalAccess::Atomic(sem) => {
                synchronize(clocks, who.task, sem, ptrs, mask);
                Ok(())
            }
        }
    }

    /// `who` reads the unmasked lanes of `ptrs`.
    fn read(
        &mut self,
        clocks: &mut Clocks,
        who: &Accessor<'_>,
        ptrs: &[Ptr],
        mask: Option<&[bool]>,
    ) -> Result<(), GlobalRace> {
        let tick = clocks.tick(who.task);
        for location in lanes(ptrs, mask) {
            let cell = self.cells.entry(location).or_default();
            if let Some(write) = cell
                .write
                .as_ref()
                .filter(|w| unordered(clocks, who.task, w))
            {
                return Err(race(who, GlobalRaceKind::ReadBeforeSignal, write, location));
            }
            cell.reads.retain(|r| r.task != who.task);
            cell.reads.push(touch(who, tick));
        }
        Ok(())
    }

    /// `who` writes the unmasked lanes of `ptrs`.
    fn write(
        &mut self,
        clocks: &mut Clocks,
        who: &Accessor<'_>,
        ptrs: &[Ptr],
        mask: Option<&[bool]>,
    ) -> Result<(), GlobalRace> {
        let tick = clocks.tick(who.task);
        for location in lanes(ptrs, mask) {
            let cell = self.cells.entry(location).or_default();
            if let Some(write) = cell
                .write
                .as_ref()
                .filter(|w| unordered(clocks, who.task, w))
            {
                return Err(race(who, GlobalRaceKind::UnorderedWrites, write, location));
            }
            if let Some(read) = cell.reads.iter().find(|r| unordered(clocks, who.task, r)) {
                return Err(race(
                    who,
                    GlobalRaceKind::OverwriteBeforeRelease,
                    read,
                    location,
                ));
            }
            cell.reads.clear();
            cell.write = Some(touch(who, tick));
        }
        Ok(())
    }
}

/// An atomic's acquire (it takes in what releases at its elements
/// published) and release (it publishes what `task` has seen there).
fn synchronize(clocks: &mut Clocks, task: usize, sem: MemSem, ptrs: &[Ptr], mask: Option<&[bool]>) {
    let (acquires, releases) = match sem {
        MemSem::Relaxed => (false, false),
        MemSem::Acquire => (true, false),
        MemSem::Release => (false, true),
        MemSem::AcqRel => (true, true),
    };
    for at in lanes(ptrs, mask) {
        if acquires {
            clocks.acquire_at(task, at);
        }
        if releases {
            clocks.release_at(task, at);
        }
    }
}

/// The elements the unmasked lanes touch (a lane-wide mask of one element
/// covers every lane).
fn lanes<'p>(ptrs: &'p [Ptr], mask: Option<&'p [bool]>) -> impl Iterator<Item = Location> + 'p {
    ptrs.iter().enumerate().filter_map(move |(i, p)| {
        let on = mask.is_none_or(|m| m[if m.len() == 1 { 0 } else { i }]);
        on.then_some((p.buffer, p.byte_offset))
    })
}

/// Whether `other` is another task's access that `task` has not seen.
fn unordered(clocks: &Clocks, task: usize, other: &Touch) -> bool {
    other.task != task && clocks.seen(task).get(other.task).copied().unwrap_or(0) < other.tick
}

fn touch(who: &Accessor<'_>, tick: u64) -> Touch {
    Touch {
        task: who.task,
        tick,
        name: who.name.to_owned(),
        line: who.line,
    }
}

fn race(
    who: &Accessor<'_>,
    kind: GlobalRaceKind,
    other: &Touch,
    (buffer, byte_offset): Location,
) -> GlobalRace {
    GlobalRace {
        kind,
        task: who.name.to_owned(),
        other: other.name.clone(),
        other_line: other.line,
        buffer,
        byte_offset,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(task: usize) -> Accessor<'static> {
        Accessor {
            task,
            name: "t",
            line: 7,
        }
    }

    fn ptr(byte_offset: i64) -> Ptr {
        Ptr {
            buffer: BufferId(3),
            byte_offset,
        }
    }

    #[test]
    fn a_read_after_the_signal_is_ordered_and_one_before_races() {
        let mut clocks = Clocks::default();
        let mut accesses = GlobalAccesses::default();
        accesses
            .write(&mut clocks, &at(0), &[ptr(0), ptr(4)], None)
            .expect("first write");
        // Task 1 reads before any signal: a race on the first element.
        let early = accesses
            .read(&mut clocks, &at(1), &[ptr(4)], None)
            .expect_err("unordered");
        assert_eq!(
            (early.kind, early.byte_offset),
            (GlobalRaceKind::ReadBeforeSignal, 4)
        );
        // After a release by 0 and an acquire by 1 at a flag, it is ordered.
        clocks.release_at(0, (BufferId(9), 0));
        clocks.acquire_at(1, (BufferId(9), 0));
        accesses
            .read(&mut clocks, &at(1), &[ptr(0), ptr(4)], None)
            .expect("ordered");
        // Masked-off lanes touch nothing.
        accesses
            .read(&mut clocks, &at(2), &[ptr(0)], Some(&[false]))
            .expect("masked");
    }

    #[test]
    fn an_overwrite_before_the_reader_releases_races() {
        let mut clocks = Clocks::default();
        let mut accesses = GlobalAccesses::default();
        accesses
            .read(&mut clocks, &at(1), &[ptr(8)], None)
            .expect("read of host data");
        let early = accesses
            .write(&mut clocks, &at(0), &[ptr(8)], None)
            .expect_err("reader did not release");
        assert_eq!(early.kind, GlobalRaceKind::OverwriteBeforeRelease);
        clocks.release_at(1, (BufferId(9), 4));
        clocks.acquire_at(0, (BufferId(9), 4));
        accesses
            .write(&mut clocks, &at(0), &[ptr(8)], None)
            .expect("released");
    }
}

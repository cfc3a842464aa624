//! Scheduler tests on real multi-task programs: scripted producer/consumer
//! tasks that hand data through a ring of shared slots guarded by mbarriers
//! (the shape of a warp-specialized TMA pipeline), correct and with the
//! classic synchronization bugs.

use std::cell::RefCell;
use std::rc::Rc;

use super::bind_args;
use super::error::{InterpError, Site};
use super::exec::Executor;
use super::mbarrier::MBarrier;
use super::memory::HostMemory;
use super::schedule::{run_tasks, ProgramLabel, ProgramShared, Schedule, StepOutcome, Task};
use super::tests::{add_args, download_f32, noise, upload_f32, vector_add};
use super::wait::Wait;

/// One step of a scripted task; barrier and buffer numbers index the program's tables.
#[derive(Clone, Copy, Debug)]
enum Action {
    /// `mbarrier.try_wait.parity` in a loop: blocks until the phase completes.
    Wait {
        barrier: usize,
        parity: u32,
    },
    ExpectTx {
        barrier: usize,
        bytes: u32,
    },
    Arrive {
        barrier: usize,
    },
    /// Starts an asynchronous copy of `value` into a shared slot; it lands
    /// (signals `barrier`) at the next `Land`.
    IssueCopy {
        buffer: usize,
        barrier: usize,
        value: i64,
    },
    Land {
        barrier: usize,
        bytes: u32,
    },
    /// Reads a shared slot into the task's log.
    Read {
        buffer: usize,
    },
}

impl Action {
    fn op(self) -> &'static str {
        match self {
            Action::Wait { .. } => "mbarrier_wait",
            Action::ExpectTx { .. } => "mbarrier_expect_tx",
            Action::Arrive { .. } => "mbarrier_arrive",
            Action::IssueCopy { .. } => "async_copy",
            Action::Land { .. } => "async_copy_complete",
            Action::Read { .. } => "local_load",
        }
    }
}

/// What the tasks of one test program share besides the barriers.
#[derive(Default)]
struct World {
    slots: Vec<i64>,
    /// Values the consumer read, in order.
    consumed: Vec<i64>,
    /// (task, source line) of every executed action, in schedule order.
    trace: Vec<(usize, u32)>,
}

struct ScriptedTask {
    name: &'static str,
    /// Each action with its source line.
    script: Vec<(u32, Action)>,
    pc: usize,
    world: Rc<RefCell<World>>,
}

impl ScriptedTask {
    fn site(&self, op: &'static str, line: u32) -> Site {
        Site {
            kernel: "pipeline".into(),
            file: "".into(),
            program: [0; 3],
            op,
            line,
            buffers: Default::default(),
        }
    }
}

impl<'t> Task<'t> for ScriptedTask {
    fn name(&self) -> &str {
        self.name
    }

    fn step(
        &mut self,
        index: usize,
        shared: &mut ProgramShared,
    ) -> Result<StepOutcome<'t>, InterpError> {
        let Some(&(line, action)) = self.script.get(self.pc) else {
            return Ok(StepOutcome::Finished);
        };
        let misuse = |error| InterpError::MBarrier {
            at: self.site(action.op(), line),
            task: self.name.into(),
            error,
        };
        let mut world = self.world.borrow_mut();
        match action {
            Action::Wait {
                barrier: id,
                parity,
            } => {
                let bar = &shared.barriers[id];
                if !bar.try_wait_parity(parity) {
                    return Ok(StepOutcome::Blocked(Wait {
                        op: action.op(),
                        line,
                        reason: bar.wait_reason(id),
                    }));
                }
                if let Some(completed) = bar.phase().checked_sub(1) {
                    shared.async_writes.record_wait(index, 0, id, completed);
                }
            }
            Action::ExpectTx { barrier: id, bytes } => {
                shared.barriers[id].expect_tx(bytes).map_err(misuse)?;
            }
            Action::Arrive { barrier: id } => {
                shared.barriers[id].arrive(1).map_err(misuse)?;
            }
            Action::IssueCopy {
                buffer,
                barrier: id,
                value,
            } => {
                let phase = shared.barriers[id].phase();
                shared.async_writes.record_write(
                    buffer,
                    self.name,
                    ("async_descriptor_load", line),
                    id,
                    phase,
                );
                world.slots[buffer] = value;
            }
            Action::Land { barrier: id, bytes } => {
                shared.barriers[id].complete_tx(bytes).map_err(misuse)?;
            }
            Action::Read { buffer } => {
                shared
                    .async_writes
                    .check_read(buffer, index, &[])
                    .map_err(|race| InterpError::SharedMemoryRace {
                        at: self.site(action.op(), line),
                        task: self.name.into(),
                        race: Box::new(race),
                    })?;
                let value = world.slots[buffer];
                world.consumed.push(value);
            }
        }
        world.trace.push((index, line));
        self.pc += 1;
        Ok(if self.pc == self.script.len() {
            StepOutcome::Finished
        } else {
            StepOutcome::Ran
        })
    }
}

/// Source lines of the pipeline's actions, as if from a kernel.
const PRODUCER_WAIT_EMPTY: u32 = 11;
const PRODUCER_EXPECT: u32 = 12;
const PRODUCER_ARRIVE: u32 = 13;
const PRODUCER_COPY: u32 = 14;
const PRODUCER_LAND: u32 = 15;
const CONSUMER_WAIT_FULL: u32 = 21;
const CONSUMER_READ: u32 = 22;
const CONSUMER_RELEASE: u32 = 23;

const SLOT_BYTES: u32 = 16384;

/// The bugs a pipeline can be built with.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Bug {
    None,
    /// The producer's first wait on an empty slot uses parity 0, not 1.
    ProducerStartsAtPhaseZero,
    /// The consumer never arrives on the empty barrier.
    ConsumerNeverReleases,
    /// The producer does not announce the copy's bytes, so the full barrier
    /// completes on the arrival alone, before the copy lands.
    ProducerForgetsExpectTx,
}

/// A `stages`-deep ring handing `items` values from a producer to a
/// consumer. Barriers: full[s] = s, empty[s] = stages + s; buffer s is slot s.
struct Pipeline {
    tasks: Vec<ScriptedTask>,
    shared: ProgramShared,
    world: Rc<RefCell<World>>,
}

fn item(i: usize) -> i64 {
    (i * i) as i64 + 1
}

fn pipeline(stages: usize, items: usize, bug: Bug) -> Result<Pipeline, InterpError> {
    let world = Rc::new(RefCell::new(World {
        slots: vec![0; stages],
        ..World::default()
    }));
    let mut producer = Vec::new();
    let mut consumer = Vec::new();
    for i in 0..items {
        let slot = i % stages;
        let round_parity = ((i / stages) & 1) as u32;
        let (full, empty) = (slot, stages + slot);
        let empty_parity = match bug {
            Bug::ProducerStartsAtPhaseZero => round_parity,
            _ => round_parity ^ 1,
        };
        producer.push((
            PRODUCER_WAIT_EMPTY,
            Action::Wait {
                barrier: empty,
                parity: empty_parity,
            },
        ));
        if bug != Bug::ProducerForgetsExpectTx {
            producer.push((
                PRODUCER_EXPECT,
                Action::ExpectTx {
                    barrier: full,
                    bytes: SLOT_BYTES,
                },
            ));
        }
        producer.push((PRODUCER_ARRIVE, Action::Arrive { barrier: full }));
        producer.push((
            PRODUCER_COPY,
            Action::IssueCopy {
                buffer: slot,
                barrier: full,
                value: item(i),
            },
        ));
        if bug != Bug::ProducerForgetsExpectTx {
            producer.push((
                PRODUCER_LAND,
                Action::Land {
                    barrier: full,
                    bytes: SLOT_BYTES,
                },
            ));
        }
        consumer.push((
            CONSUMER_WAIT_FULL,
            Action::Wait {
                barrier: full,
                parity: round_parity,
            },
        ));
        consumer.push((CONSUMER_READ, Action::Read { buffer: slot }));
        if bug != Bug::ConsumerNeverReleases {
            consumer.push((CONSUMER_RELEASE, Action::Arrive { barrier: empty }));
        }
    }
    let task = |name, script| ScriptedTask {
        name,
        script,
        pc: 0,
        world: Rc::clone(&world),
    };
    let tasks = vec![task("producer", producer), task("consumer", consumer)];
    let mut shared = ProgramShared::default();
    for _ in 0..2 * stages {
        let barrier = MBarrier::new(1).map_err(|error| InterpError::MBarrier {
            at: tasks[0].site("mbarrier_init", 1),
            task: "default".into(),
            error,
        })?;
        shared.barriers.push(barrier);
    }
    Ok(Pipeline {
        tasks,
        shared,
        world,
    })
}

const LABEL: ProgramLabel<'static> = ProgramLabel {
    kernel: "pipeline",
    file: "src/pipe.rs",
    program: [0, 0, 0],
    index: 0,
};

impl Pipeline {
    fn run(mut self, schedule: Schedule) -> Result<World, InterpError> {
        let mut tasks: Vec<&mut dyn Task> =
            self.tasks.iter_mut().map(|t| t as &mut dyn Task).collect();
        run_tasks(&mut tasks, &mut self.shared, schedule, &LABEL, None, None)?;
        drop(tasks);
        drop(self.tasks);
        Ok(self.world.take())
    }
}

fn run(stages: usize, items: usize, bug: Bug, schedule: Schedule) -> Result<World, InterpError> {
    pipeline(stages, items, bug)?.run(schedule)
}

#[test]
fn handoff_completes_under_round_robin_and_random_schedules() -> Result<(), InterpError> {
    let expected: Vec<i64> = (0..10).map(item).collect();
    let round_robin = run(2, 10, Bug::None, Schedule::RoundRobin)?;
    assert_eq!(round_robin.consumed, expected);
    let mut distinct_traces = vec![round_robin.trace];
    for seed in 0..50 {
        let world = run(2, 10, Bug::None, Schedule::Random { seed })?;
        assert_eq!(world.consumed, expected, "seed {seed}");
        if !distinct_traces.contains(&world.trace) {
            distinct_traces.push(world.trace);
        }
    }
    assert!(
        distinct_traces.len() > 10,
        "random schedules barely differ: {} traces",
        distinct_traces.len()
    );
    Ok(())
}

#[test]
fn random_schedules_are_reproducible() -> Result<(), InterpError> {
    let first = run(3, 7, Bug::None, Schedule::Random { seed: 42 })?;
    let again = run(3, 7, Bug::None, Schedule::Random { seed: 42 })?;
    assert_eq!(first.trace, again.trace);
    Ok(())
}

fn deadlock_text(stages: usize, items: usize, bug: Bug, schedule: Schedule) -> String {
    match run(stages, items, bug, schedule) {
        Err(err @ InterpError::Deadlock { .. }) => err.to_string(),
        Err(other) => panic!("expected a deadlock, got {other}"),
        Ok(_) => panic!("expected a deadlock, the pipeline completed"),
    }
}

#[test]
fn a_phase_bug_deadlocks_naming_both_tasks_barriers_and_phases() {
    for schedule in [Schedule::RoundRobin, Schedule::Random { seed: 9 }] {
        let text = deadlock_text(2, 4, Bug::ProducerStartsAtPhaseZero, schedule);
        assert_eq!(
            text,
            "kernel `pipeline` (src/pipe.rs), program (0, 0, 0): deadlock, every live task is blocked:\n  \
             task 0 `producer` waits at op `mbarrier_wait` line 11: \
             mbarrier #2 phase 0: 0 of 1 arrivals, 0 of 0 transaction bytes\n  \
             task 1 `consumer` waits at op `mbarrier_wait` line 21: \
             mbarrier #0 phase 0: 0 of 1 arrivals, 0 of 0 transaction bytes"
        );
    }
}

#[test]
fn a_missing_arrive_deadlocks_once_the_ring_is_full() {
    let text = deadlock_text(2, 5, Bug::ConsumerNeverReleases, Schedule::RoundRobin);
    // Two items went through; the producer waits for slot 0 to be released
    // and the consumer for the third item.
    assert!(
        text.contains(
            "task 0 `producer` waits at op `mbarrier_wait` line 11: \
             mbarrier #2 phase 0: 0 of 1 arrivals"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "task 1 `consumer` waits at op `mbarrier_wait` line 21: \
             mbarrier #0 phase 1: 0 of 1 arrivals"
        ),
        "{text}"
    );
}

#[test]
fn an_in_flight_copy_is_pending_in_the_report() {
    // The producer issued the copy but it never lands: the consumer's wait
    // shows the arrival done and the bytes missing.
    let mut pipe = match pipeline(1, 1, Bug::None) {
        Ok(pipe) => pipe,
        Err(e) => panic!("{e}"),
    };
    pipe.tasks[0]
        .script
        .retain(|(line, _)| *line != PRODUCER_LAND);
    let text = match pipe.run(Schedule::RoundRobin) {
        Err(err) => err.to_string(),
        Ok(_) => panic!("the copy never lands, yet the consumer finished"),
    };
    assert!(
        text.ends_with(
            "task 1 `consumer` waits at op `mbarrier_wait` line 21: \
             mbarrier #0 phase 0: 1 of 1 arrivals, 0 of 16384 transaction bytes"
        ),
        "{text}"
    );
    assert!(!text.contains("producer"), "the producer finished: {text}");
}

#[test]
fn reading_a_slot_before_its_copy_lands_is_a_race() {
    match run(1, 1, Bug::ProducerForgetsExpectTx, Schedule::RoundRobin) {
        Err(err @ InterpError::SharedMemoryRace { .. }) => assert_eq!(
            err.to_string(),
            "kernel `pipeline`, program (0, 0, 0), op `local_load` at line 22, task `consumer`: \
             read of shared buffer #0 (written asynchronously by task `producer` at line 14) \
             before waiting on its barrier (mbarrier #0 phase 1)"
        ),
        Err(other) => panic!("expected a race, got {other}"),
        Ok(_) => panic!("the race went unnoticed"),
    }
}

#[test]
fn a_single_blocked_task_is_a_deadlock_too() {
    let mut pipe = match pipeline(1, 1, Bug::None) {
        Ok(pipe) => pipe,
        Err(e) => panic!("{e}"),
    };
    pipe.tasks.remove(0);
    let text = match pipe.run(Schedule::RoundRobin) {
        Err(err) => err.to_string(),
        Ok(_) => panic!("nobody fills the slot, yet the consumer finished"),
    };
    assert!(
        text.ends_with(
            "blocked:\n  task 0 `consumer` waits at op `mbarrier_wait` line 21: \
             mbarrier #0 phase 0: 0 of 1 arrivals, 0 of 0 transaction bytes"
        ),
        "{text}"
    );
}

#[test]
fn barrier_misuse_fails_the_program_with_its_task_and_line() {
    let mut pipe = match pipeline(1, 1, Bug::None) {
        Ok(pipe) => pipe,
        Err(e) => panic!("{e}"),
    };
    // A second arrival on a barrier initialized for one.
    pipe.tasks[0]
        .script
        .insert(2, (PRODUCER_ARRIVE, Action::Arrive { barrier: 0 }));
    let err = match pipe.run(Schedule::RoundRobin) {
        Err(err) => err,
        Ok(_) => panic!("the extra arrival went unnoticed"),
    };
    assert!(matches!(err, InterpError::MBarrier { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("line 13, task `producer`: 1 arrivals"),
        "{text}"
    );
}

#[test]
fn the_kernel_body_runs_as_one_task_among_others() -> Result<(), InterpError> {
    let n = 100;
    let kernel = vector_add();
    let mem = HostMemory::new();
    let (xs, ys) = (noise(n, 5), noise(n, 6));
    let (x, y) = (upload_f32(&mem, &xs), upload_f32(&mem, &ys));
    let sums: Vec<f32> = xs.iter().zip(&ys).map(|(a, b)| a + b).collect();
    for (schedule, bug) in [
        (Schedule::RoundRobin, Bug::None),
        (Schedule::Random { seed: 1 }, Bug::None),
        (Schedule::Random { seed: 2 }, Bug::None),
        (Schedule::RoundRobin, Bug::ProducerStartsAtPhaseZero),
    ] {
        let out = mem.alloc(n * 4);
        let params: Vec<Rc<_>> = bind_args(&kernel, &add_args(x, y, out, n))?
            .into_iter()
            .map(Rc::new)
            .collect();
        let mut executor = Executor::new(&kernel, &mem, true, [1, 1, 1], None);
        executor.start_program([0, 0, 0], &params)?;
        let mut pipe = pipeline(2, 6, bug)?;
        let mut tasks: Vec<&mut dyn Task> = vec![&mut executor];
        tasks.extend(pipe.tasks.iter_mut().map(|t| t as &mut dyn Task));
        let result = run_tasks(&mut tasks, &mut pipe.shared, schedule, &LABEL, None, None);
        // Blocked tasks never hold up the others: the kernel body completes either way.
        assert_eq!(download_f32(&mem, out), sums, "{schedule}");
        match (bug, result) {
            (Bug::None, Ok(())) => {
                let consumed = pipe.world.borrow().consumed.clone();
                assert_eq!(consumed, (0..6).map(item).collect::<Vec<_>>());
            }
            (Bug::None, Err(e)) => return Err(e),
            (_, Err(InterpError::Deadlock { tasks, .. })) => {
                let names: Vec<_> = tasks.iter().map(|t| (t.task, t.name.as_str())).collect();
                assert_eq!(names, [(1, "producer"), (2, "consumer")]);
            }
            (_, other) => panic!("expected a deadlock, got {other:?}"),
        }
    }
    Ok(())
}

//! The per-program task scheduler. A program is a set of tasks (logical
//! threads: TLX async tasks) over the program's shared state; each step the
//! scheduler picks one runnable task, round robin or from a seeded PRNG, and
//! advances it by one op. A blocked task is polled again once another task
//! makes progress; when every live task is blocked, the program deadlocked.
//! A task may fork (`async_tasks`): its children join the schedule and it
//! waits until they have all finished.

use std::fmt;
use std::str::FromStr;

use std::collections::HashMap;

use super::clocks::Clocks;
use super::cluster::ClusterMap;
use super::error::{BytesShortfall, InterpError, Site};
use super::explore::{Access, Actor, Footprint, Guide, Object};
use super::global_race::GlobalAccesses;
use super::inflight::InFlightCopy;
use super::mbarrier::MBarrier;
use super::phases::Observations;
use super::race::{AsyncWrites, UnwaitedWrite};
use super::shared::{NamedBarriers, SharedMemory};
use super::trace::ProgramTimeline;
use super::wait::{BlockedTask, Wait, WaitReason};

/// How the tasks of one program are interleaved.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum Schedule {
    /// Tasks take turns, one op each, in task order (deterministic).
    #[default]
    RoundRobin,
    /// Each step runs a runnable task chosen by a PRNG seeded from `seed` and
    /// the program's index, so a run is reproducible for any thread count.
    Random { seed: u64 },
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("schedule `{0}` is neither `round-robin` nor `random:<seed>` (seed a u64)")]
pub struct ScheduleParseError(String);

/// Parses `round-robin` or `random:<seed>` (the `TLX_SCHEDULE` syntax).
impl FromStr for Schedule {
    type Err = ScheduleParseError;

    fn from_str(text: &str) -> Result<Schedule, ScheduleParseError> {
        let text = text.trim();
        if text == "round-robin" {
            return Ok(Schedule::RoundRobin);
        }
        text.strip_prefix("random:")
            .and_then(|seed| seed.trim().parse().ok())
            .map(|seed| Schedule::Random { seed })
            .ok_or_else(|| ScheduleParseError(text.to_owned()))
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Schedule::RoundRobin => f.write_str("round-robin"),
            Schedule::Random { seed } => write!(f, "random:{seed}"),
        }
    }
}

/// A `barrier_expect_bytes` call: where, the phase it announced bytes for,
/// and the task that made it.
#[derive(Clone, Debug)]
pub(crate) struct ExpectSite {
    pub(crate) at: Site,
    pub(crate) phase: u32,
    pub(crate) task: String,
}

/// State shared by the tasks scheduled together: its mbarriers, shared
/// buffers and their asynchronous-write records, named barriers, and the
/// barrier of the cluster (the programs of a cluster run as tasks of one
/// schedule, each with its own buffers and mbarriers here; `cluster` says
/// whose each one is).
#[derive(Debug, Default)]
pub(crate) struct ProgramShared {
    pub(crate) barriers: Vec<MBarrier>,
    pub(crate) async_writes: AsyncWrites,
    pub(crate) cluster_barrier: ClusterBarrier,
    pub(crate) smem: SharedMemory,
    /// Per program of the cluster (by rank): its 16 hardware barriers.
    pub(crate) named_barriers: Vec<NamedBarriers>,
    /// TMA copies issued and not yet landed.
    pub(crate) in_flight: Vec<InFlightCopy>,
    /// Tensor-memory MMAs issued and not yet tracked by a barrier.
    pub(crate) mmas: Vec<super::exec::PendingMma>,
    /// Which program of the cluster made each allocation and barrier.
    pub(crate) cluster: ClusterMap,
    /// The phases each task's waits passed on, to find stale waits.
    pub(crate) observations: Observations,
    /// Happens-before between the tasks, for overwrites of unreleased buffers.
    pub(crate) clocks: Clocks,
    /// Per mbarrier, the latest `barrier_expect_bytes` on it.
    pub(crate) expect_sites: HashMap<usize, ExpectSite>,
    /// Steps a skeleton run may still take (it must end even if the kernel
    /// loops forever for some sample); `None`: unbounded.
    pub(crate) steps_left: Option<u64>,
    /// Copies issued so far: the next one's number, which names it in an
    /// explored schedule.
    pub(crate) copies_issued: u64,
    /// What the current step touched, in an explored schedule.
    pub(crate) footprint: Footprint,
    /// `Some` when every program of the grid runs in this schedule (a
    /// kernel that waits on flags, the ranks of a mesh), each a cluster of
    /// one: the tasks given are the programs in grid order, not the ranks
    /// of one cluster; and their global accesses, checked for races.
    pub(crate) cooperative: Option<GlobalAccesses>,
}

impl ProgramShared {
    /// Empties the state for the next program (or cluster of `cluster_size`).
    pub(crate) fn reset(&mut self, cluster_size: usize) {
        self.barriers.clear();
        self.async_writes.clear();
        self.smem.clear();
        self.named_barriers.clear();
        self.named_barriers
            .resize_with(cluster_size, NamedBarriers::default);
        self.in_flight.clear();
        self.mmas.clear();
        self.cluster.clear();
        self.observations.clear();
        self.expect_sites.clear();
        self.clocks.clear();
        // A cooperative run's programs are each a cluster of one.
        let members = if self.cooperative.is_some() {
            1
        } else {
            cluster_size
        };
        self.cluster_barrier = ClusterBarrier::new(members);
        self.copies_issued = 0;
        self.footprint.record(false);
    }

    /// The number of the copy issued next.
    pub(crate) fn next_copy(&mut self) -> u64 {
        self.copies_issued += 1;
        self.copies_issued - 1
    }
}

impl ProgramShared {
    /// The named barriers of the cluster's program `rank`: each program has
    /// its own, as each CTA has its own hardware barriers.
    pub(crate) fn named_barriers(&mut self, rank: usize) -> &mut NamedBarriers {
        if self.named_barriers.len() <= rank {
            self.named_barriers
                .resize_with(rank + 1, NamedBarriers::default);
        }
        &mut self.named_barriers[rank]
    }
}

/// `barrier.cluster.arrive` + `wait` over the programs of one cluster: a
/// generation completes when every member has arrived.
#[derive(Debug, Default)]
pub(crate) struct ClusterBarrier {
    arrived: usize,
    generation: u64,
    /// Per member: the generation it arrived in and waits to complete.
    waiting: Vec<Option<u64>>,
}

impl ClusterBarrier {
    pub(crate) fn new(members: usize) -> ClusterBarrier {
        ClusterBarrier {
            arrived: 0,
            generation: 0,
            waiting: vec![None; members],
        }
    }

    /// How many generations have completed (the number of the one members
    /// arrive in next).
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// The generation member `member` arrived in, or arrives in next.
    pub(crate) fn arrival_generation(&self, member: usize) -> u64 {
        self.waiting
            .get(member)
            .copied()
            .flatten()
            .unwrap_or(self.generation)
    }

    /// Whether member `member` has arrived in the current generation and
    /// waits for it to complete.
    pub(crate) fn has_arrived(&self, member: usize) -> bool {
        self.waiting.get(member).is_some_and(Option::is_some)
    }

    /// Member `member` arrives (once per generation) and passes when its
    /// generation has completed; otherwise says what it waits for.
    pub(crate) fn arrive_and_wait(&mut self, member: usize) -> Result<(), WaitReason> {
        let members = self.waiting.len();
        let Some(slot) = self.waiting.get_mut(member) else {
            // A task that is not a member never completes a generation.
            return Err(self.reason(members));
        };
        let generation = match *slot {
            Some(g) => g,
            None => {
                *slot = Some(self.generation);
                let g = self.generation;
                self.arrived += 1;
                if self.arrived == members {
                    self.generation += 1;
                    self.arrived = 0;
                }
                g
            }
        };
        if self.generation > generation {
            self.waiting[member] = None;
            Ok(())
        } else {
            Err(self.reason(members))
        }
    }

    fn reason(&self, members: usize) -> WaitReason {
        WaitReason::ClusterBarrier {
            arrived: self.arrived as u32,
            expected: members as u32,
        }
    }
}

/// What one step of a task did. `'t` bounds the tasks it may fork.
pub(crate) enum StepOutcome<'t> {
    /// Executed an op; more remain.
    Ran,
    /// Could not proceed; the task stays at the same op and is polled again later.
    Blocked(Wait),
    /// Executed its last op (or had none left).
    Finished,
    /// Started `tasks` and waits, at `at` (whose reason the scheduler keeps
    /// up to date), until every one of them has finished.
    Forked {
        tasks: Vec<Box<dyn Task<'t> + 't>>,
        at: Wait,
    },
}

/// A logical thread of a program.
pub(crate) trait Task<'t> {
    fn name(&self) -> &str;

    /// Advances the task by one op. `index` is the task's number in its program.
    fn step(
        &mut self,
        index: usize,
        shared: &mut ProgramShared,
    ) -> Result<StepOutcome<'t>, InterpError>;
}

/// Which program the scheduler runs, for deadlock reports and seeding.
pub(crate) struct ProgramLabel<'a> {
    pub(crate) kernel: &'a str,
    pub(crate) file: &'a str,
    pub(crate) program: [u32; 3],
    /// The program's linear index in the grid (x fastest).
    pub(crate) index: usize,
}

impl ProgramLabel<'_> {
    /// The error for a program that exits with `write` unwaited for.
    fn write_in_flight(&self, write: UnwaitedWrite) -> InterpError {
        InterpError::WriteInFlightAtExit {
            at: Site {
                kernel: self.kernel.to_owned(),
                file: self.file.into(),
                program: self.program,
                op: write.op,
                line: write.line,
                buffers: Default::default(),
            },
            task: write.writer,
            buffer: write.buffer,
            barrier: write.barrier,
            phase: write.phase,
        }
    }

    /// The error for a program whose live tasks are all blocked: a phase
    /// whose arrivals are all in but whose transaction bytes never match
    /// what was expected is a wrong `barrier_expect_bytes`, named at that
    /// call; any other is a deadlock listing every blocked task.
    fn deadlock(&self, shared: &ProgramShared, tasks: Vec<BlockedTask>) -> InterpError {
        let short_of_bytes = tasks.iter().find_map(|t| match t.wait.reason {
            WaitReason::MBarrier {
                barrier,
                phase,
                arrivals,
                expected_arrivals,
                tx_bytes,
                expected_tx_bytes,
                ..
            } if arrivals == expected_arrivals && tx_bytes != expected_tx_bytes => {
                let at = shared.expect_sites.get(&barrier)?.at.clone();
                Some((at, barrier, phase, tx_bytes, expected_tx_bytes))
            }
            _ => None,
        });
        if let Some((at, barrier, phase, landed, expected)) = short_of_bytes {
            return InterpError::ExpectBytes {
                at,
                shortfall: Box::new(BytesShortfall {
                    barrier,
                    phase,
                    expected,
                    landed,
                    tasks,
                }),
            };
        }
        InterpError::Deadlock {
            kernel: self.kernel.to_owned(),
            file: self.file.to_owned(),
            program: self.program,
            tasks,
        }
    }
}

/// SplitMix64: tiny, fast and good enough to pick among a few tasks.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..bound` (`bound` > 0); the modulo bias is irrelevant here.
    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }
}

#[derive(Clone, Debug)]
enum TaskState {
    Runnable,
    Blocked(Wait),
    /// Forked at `at` and waits for `unfinished` children.
    Joining {
        at: Wait,
        unfinished: usize,
    },
    Finished,
}

enum Picker<'g> {
    RoundRobin {
        next: usize,
    },
    Random(SplitMix64),
    /// An explored schedule: `guide` chooses every step and records it;
    /// `pending` is the step chosen and not yet recorded, with the actors
    /// it was chosen from.
    Guided {
        guide: &'g mut Guide,
        pending: Option<(Actor, Vec<Actor>)>,
        /// The guide ended the run: what follows repeats an explored order.
        ended: bool,
    },
}

impl<'g> Picker<'g> {
    fn new(schedule: Schedule, program_index: usize, guide: Option<&'g mut Guide>) -> Picker<'g> {
        if let Some(guide) = guide {
            return Picker::Guided {
                guide,
                pending: None,
                ended: false,
            };
        }
        match schedule {
            Schedule::RoundRobin => Picker::RoundRobin { next: 0 },
            Schedule::Random { seed } => {
                // One independent stream per program, so the schedule inside a
                // program does not depend on which OS thread runs it.
                let mut mixer = SplitMix64(seed ^ (program_index as u64).rotate_left(32));
                Picker::Random(SplitMix64(mixer.next()))
            }
        }
    }

    /// Which in-flight copy (of `in_flight`) lands before the next task step,
    /// if one does: the oldest, at once, in round robin; a random one at
    /// random points in a random schedule; the guide's choice in an
    /// explored one (which also chooses the task `pick` then gives). When
    /// no task can run, one always lands.
    fn copy_to_land(
        &mut self,
        in_flight: &[InFlightCopy],
        states: &[TaskState],
        runnable: usize,
    ) -> Option<usize> {
        if let Picker::Guided {
            guide,
            pending,
            ended,
        } = self
        {
            let enabled: Vec<Actor> = (states.iter().enumerate())
                .filter(|(_, s)| matches!(s, TaskState::Runnable))
                .map(|(i, _)| Actor::Task(i))
                .chain(in_flight.iter().map(|c| Actor::Copy(c.seq)))
                .collect();
            if enabled.is_empty() {
                return None;
            }
            let Some(actor) = guide.choose(&enabled) else {
                *ended = true;
                return None;
            };
            *pending = Some((actor, enabled));
            return match actor {
                Actor::Copy(seq) => in_flight.iter().position(|c| c.seq == seq),
                Actor::Task(_) => None,
            };
        }
        if in_flight.is_empty() {
            return None;
        }
        match self {
            Picker::RoundRobin { .. } => Some(0),
            Picker::Random(rng) => {
                (runnable == 0 || rng.below(4) == 0).then(|| rng.below(in_flight.len()))
            }
            Picker::Guided { .. } => None,
        }
    }

    /// Whether an explored schedule's guide ended the run.
    fn ended(&self) -> bool {
        matches!(self, Picker::Guided { ended: true, .. })
    }

    /// Records, in an explored schedule, what the step just taken touched
    /// (`None`: the task blocked, no step).
    fn took_step(&mut self, touches: Option<Vec<(Object, Access)>>) {
        if let Picker::Guided { guide, pending, .. } = self {
            if let Some((actor, enabled)) = pending.take() {
                guide.record(actor, enabled, touches);
            }
        }
    }

    /// A runnable task, or `None` when there is none.
    fn pick(&mut self, states: &[TaskState], runnable: usize) -> Option<usize> {
        if runnable == 0 {
            return None;
        }
        let is_runnable = |s: &TaskState| matches!(s, TaskState::Runnable);
        match self {
            Picker::RoundRobin { next } => {
                let n = states.len();
                let chosen = (0..n)
                    .map(|offset| (*next + offset) % n)
                    .find(|&i| is_runnable(&states[i]))?;
                *next = (chosen + 1) % n;
                Some(chosen)
            }
            Picker::Guided { pending, .. } => match pending {
                Some((Actor::Task(task), _)) => Some(*task),
                _ => None,
            },
            Picker::Random(rng) => {
                let nth = rng.below(runnable);
                states
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| is_runnable(s))
                    .nth(nth)
                    .map(|(i, _)| i)
            }
        }
    }
}

/// A task the scheduler was given or one that a task forked.
enum Slot<'s, 't> {
    Given(&'s mut dyn Task<'t>),
    Forked(Box<dyn Task<'t> + 't>),
}

impl<'t> Slot<'_, 't> {
    fn task(&mut self) -> &mut dyn Task<'t> {
        match self {
            Slot::Given(task) => &mut **task,
            Slot::Forked(task) => task.as_mut(),
        }
    }

    fn name(&self) -> &str {
        match self {
            Slot::Given(task) => task.name(),
            Slot::Forked(task) => task.name(),
        }
    }
}

/// Runs the tasks of one program (or the programs of one cluster, given in
/// rank order), and those they fork, until all finish, one fails, or all
/// live ones are blocked (a deadlock).
pub(crate) fn run_tasks<'t>(
    tasks: &mut [&mut dyn Task<'t>],
    shared: &mut ProgramShared,
    schedule: Schedule,
    label: &ProgramLabel<'_>,
    mut timeline: Option<&mut ProgramTimeline>,
    guide: Option<&mut Guide>,
) -> Result<(), InterpError> {
    let mut slots: Vec<Slot<'_, 't>> = tasks
        .iter_mut()
        .map(|task| Slot::Given(&mut **task))
        .collect();
    let mut states = vec![TaskState::Runnable; slots.len()];
    // The task that forked each one, which joins when its last child finishes.
    let mut parents: Vec<Option<usize>> = vec![None; slots.len()];
    let mut runnable = slots.len();
    let mut blocked = 0;
    shared.footprint.record(guide.is_some());
    let mut picker = Picker::new(schedule, label.index, guide);
    while runnable + blocked > 0 {
        if let Some(copy) = picker.copy_to_land(&shared.in_flight, &states, runnable) {
            shared.land(copy)?;
            picker.took_step(Some(shared.footprint.take()));
            // The landing may complete a phase a blocked task waits for.
            for state in &mut states {
                if matches!(state, TaskState::Blocked(_)) {
                    *state = TaskState::Runnable;
                }
            }
            runnable += blocked;
            blocked = 0;
            continue;
        }
        if picker.ended() {
            return Ok(());
        }
        let Some(chosen) = picker.pick(&states, runnable) else {
            return Err(label.deadlock(shared, stuck_tasks(&states, &slots)));
        };
        if let Some(left) = &mut shared.steps_left {
            if *left == 0 {
                return Err(InterpError::StepBudget {
                    kernel: label.kernel.to_owned(),
                    program: label.program,
                });
            }
            *left -= 1;
        }
        let outcome = slots[chosen].task().step(chosen, shared)?;
        if let Some(timeline) = timeline.as_deref_mut() {
            let waits_on = match &outcome {
                StepOutcome::Blocked(wait) | StepOutcome::Forked { at: wait, .. } => {
                    Some(&wait.reason)
                }
                StepOutcome::Ran | StepOutcome::Finished => None,
            };
            timeline.step(chosen, slots[chosen].name(), waits_on);
            if matches!(outcome, StepOutcome::Finished) {
                timeline.finish(chosen, slots[chosen].name());
            }
        }
        let made_progress = !matches!(outcome, StepOutcome::Blocked(_));
        // A blocked step that changed nothing (a wait polled) is no step
        // of the run; one that arrived first (a named or cluster barrier)
        // is.
        let touches = shared.footprint.take();
        let changed = made_progress || touches.iter().any(|(_, a)| *a != Access::Read);
        let mut touches = changed.then_some(touches);
        match outcome {
            StepOutcome::Ran => {}
            StepOutcome::Blocked(wait) => {
                states[chosen] = TaskState::Blocked(wait);
                runnable -= 1;
                blocked += 1;
            }
            StepOutcome::Finished => {
                states[chosen] = TaskState::Finished;
                runnable -= 1;
                if parents[chosen].is_none() {
                    // A program's own task (given in rank order) ended:
                    // the program has exited, and its shared memory with it
                    // (a cluster's; a cooperative run's programs are
                    // clusters of one, which no peer reaches).
                    if shared.cooperative.is_none() {
                        shared.cluster.exit(chosen);
                    }
                    if let Some(touches) = &mut touches {
                        touches.push((Object::ClusterMap, Access::Write));
                    }
                }
                if let Some(parent) = parents[chosen] {
                    shared.clocks.join_child(parent, chosen);
                    if let TaskState::Joining { unfinished, .. } = &mut states[parent] {
                        *unfinished -= 1;
                        if *unfinished == 0 {
                            states[parent] = TaskState::Runnable;
                            runnable += 1;
                        }
                    }
                }
            }
            StepOutcome::Forked {
                tasks: children,
                at,
            } => {
                if !children.is_empty() {
                    states[chosen] = TaskState::Joining {
                        at,
                        unfinished: children.len(),
                    };
                    runnable += children.len() - 1;
                    for child in children {
                        shared.clocks.fork(chosen, slots.len());
                        slots.push(Slot::Forked(child));
                        states.push(TaskState::Runnable);
                        parents.push(Some(chosen));
                    }
                }
            }
        }
        picker.took_step(touches);
        if made_progress && blocked > 0 {
            // The step may have released what blocked tasks wait for.
            for state in &mut states {
                if matches!(state, TaskState::Blocked(_)) {
                    *state = TaskState::Runnable;
                }
            }
            runnable += blocked;
            blocked = 0;
        }
    }
    if let Some(stale) = shared.observations.take_stale(&shared.barriers) {
        return Err(stale);
    }
    match shared.async_writes.unwaited() {
        Some(write) => Err(label.write_in_flight(write)),
        None => Ok(()),
    }
}

/// The deadlock report's tasks: the blocked ones, and those waiting for
/// their forked tasks.
fn stuck_tasks(states: &[TaskState], slots: &[Slot<'_, '_>]) -> Vec<BlockedTask> {
    states
        .iter()
        .zip(slots)
        .enumerate()
        .filter_map(|(task, (state, slot))| {
            let wait = match state {
                TaskState::Blocked(wait) => wait.clone(),
                TaskState::Joining { at, unfinished } => Wait {
                    reason: WaitReason::Tasks {
                        unfinished: *unfinished as u32,
                    },
                    ..at.clone()
                },
                TaskState::Runnable | TaskState::Finished => return None,
            };
            Some(BlockedTask {
                task,
                name: slot.name().to_owned(),
                wait,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_parse_and_print() {
        for text in ["round-robin", "random:0", "random:18446744073709551615"] {
            let schedule: Schedule = text.parse().unwrap();
            assert_eq!(schedule.to_string(), text);
        }
        assert_eq!(
            " random: 7 ".parse::<Schedule>(),
            Ok(Schedule::Random { seed: 7 })
        );
        for bad in ["", "random", "random:-1", "random:x", "fifo"] {
            assert!(bad.parse::<Schedule>().is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn round_robin_cycles_over_runnable_tasks() {
        let mut picker = Picker::new(Schedule::RoundRobin, 0, None);
        let blocked = TaskState::Blocked(Wait {
            op: "wait",
            line: 1,
            reason: crate::interp::wait::WaitReason::NamedBarrier {
                barrier: 0,
                arrived_threads: 0,
                expected_threads: 1,
            },
        });
        let states = [TaskState::Runnable, blocked, TaskState::Runnable];
        let picks: Vec<_> = (0..4).filter_map(|_| picker.pick(&states, 2)).collect();
        assert_eq!(picks, [0, 2, 0, 2]);
        assert_eq!(picker.pick(&states, 0), None);
    }

    #[test]
    fn random_picks_depend_only_on_seed_and_program() {
        let states = vec![TaskState::Runnable; 5];
        let picks = |seed, program| {
            let mut picker = Picker::new(Schedule::Random { seed }, program, None);
            (0..64)
                .map(|_| picker.pick(&states, 5).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(picks(3, 1), picks(3, 1));
        assert_ne!(picks(3, 1), picks(4, 1));
        assert_ne!(picks(3, 1), picks(3, 2));
        let seen = picks(3, 1);
        assert!((0..5).all(|t| seen.contains(&t)), "{seen:?} misses a task");
    }
}

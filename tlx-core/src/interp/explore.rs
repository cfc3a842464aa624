//! Systematic exploration of one program's interleavings, for the protocol
//! checker: stateless dynamic partial-order reduction (Flanagan and
//! Godefroid, POPL 2005) over the tasks of a program (or the programs of a
//! cluster) and its in-flight copies.
//!
//! A run is a sequence of steps, each by one *actor* (a task, or the copy
//! engine landing one copy). Each step records what shared state it
//! touched (an mbarrier, a buffer, a named barrier, the cluster barrier,
//! the cluster's map of visible allocations), read or written. Two steps of
//! different actors that touch one object, one of them writing, are
//! *dependent*; reordering independent steps cannot change what a run
//! does, so one run per order of dependent steps (a Mazurkiewicz trace)
//! covers every interleaving. After each run the explorer finds the pairs
//! of dependent steps that no chain of other steps orders (races), and for
//! each adds the later step's actor to the choices still to try at the
//! point before the earlier step (every actor enabled there when the later
//! one was not: the classic persistent-set fallback). The next run replays
//! the choices up to the deepest point with an untried choice, takes it,
//! and runs on with the default order. When no point has one left, every
//! order of dependent steps has been run: the exploration is complete.
//!
//! A run is replayed by its choices alone (the interpreter is
//! deterministic given them), so nothing is saved between runs but the
//! choice points. A step whose task blocked touched nothing (it changed
//! nothing); the task is retried once another actor makes progress, as in
//! the other schedules. The step that forked a task, or issued a copy,
//! orders that actor's first step. The number of runs is bounded by the
//! caller: a kernel whose dependent steps admit more orders than the budget
//! is explored partially, and the report says so.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

/// Who takes a step: a task of the program (by its number in the
/// scheduler) or the copy engine landing an in-flight copy (by the order
/// the program issued it in, stable across runs).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Actor {
    Task(usize),
    Copy(u64),
}

/// Shared state a step can touch.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Object {
    MBarrier(usize),
    /// The named barriers of the cluster's program of this rank.
    NamedBarriers(usize),
    ClusterBarrier,
    /// Which allocations and barriers of the cluster's programs are
    /// visible to peers, and which programs have exited.
    ClusterMap,
    /// A shared buffer, by its id in shared memory.
    Buffer(usize),
}

/// How a step touches an object. Arrivals on a barrier commute with each
/// other and with reads, except the arrival that completes the phase (or
/// generation), which counts as a write: which arrival comes last decides
/// whose clock the phase publishes, the order of the others does not.
/// Likewise each program's records in the cluster's map.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Arrive,
    Write,
}

type Touch = (Object, Access);

/// What the current step touched; records only while a guided run is on.
/// Interior mutability, because some lookups that decide a step (a peer's
/// visible buffers) read the shared state through a shared reference.
#[derive(Debug, Default)]
pub(crate) struct Footprint {
    recording: Cell<bool>,
    touches: RefCell<Vec<Touch>>,
}

impl Footprint {
    pub(crate) fn touch(&self, object: Object, access: Access) {
        if self.recording.get() {
            self.touches.borrow_mut().push((object, access));
        }
    }

    pub(crate) fn record(&self, on: bool) {
        self.recording.set(on);
        self.touches.borrow_mut().clear();
    }

    /// The current step's touches; the next step starts with none.
    pub(crate) fn take(&self) -> Vec<Touch> {
        std::mem::take(&mut *self.touches.borrow_mut())
    }
}

/// One step of a guided run.
#[derive(Clone, Debug)]
struct Step {
    actor: Actor,
    /// The actors that could have taken this step.
    enabled: Vec<Actor>,
    touches: Vec<Touch>,
    /// The actors asleep at this point (see [`Guide`]).
    sleep: Vec<Asleep>,
}

/// An actor asleep at a point, with what its step there touches.
type Asleep = (Actor, Vec<Touch>);

/// One run's choices: the explorer's prefix replayed, then the default
/// order (a copy lands as soon as it is issued, tasks take turns round
/// robin); every step is recorded for the explorer. A task chosen that
/// blocks took no step: the scheduler sets it aside until another actor
/// makes progress, and the guide chooses again at the same point.
///
/// Sleep sets (Godefroid): an actor already run from a point, whose step
/// there is independent of the step now taken, stays asleep while the
/// steps taken are independent of it: running it then would only reorder
/// independent steps of a run explored already. The default order skips
/// sleeping actors; a point where every enabled actor sleeps ends the run
/// (what follows repeats an explored order).
#[derive(Debug, Default)]
pub(crate) struct Guide {
    prefix: Vec<Actor>,
    /// The choices already run from the prefix's last point, with their
    /// steps' touches.
    last_done: Vec<Asleep>,
    /// The actors asleep at the current point (from the prefix's last
    /// point on).
    sleep: Vec<Asleep>,
    steps: Vec<Step>,
    /// Steps taken (recorded or past `max_steps`).
    depth: usize,
    /// Per actor, the step it was first offered at: the step before (a
    /// fork, a copy's issue) made it, and orders its first step. Offered
    /// counts even when it blocked there (a blocked attempt is no step).
    first_offered: HashMap<Actor, usize>,
    previous_task: Option<usize>,
    /// The replay met a choice that was not enabled (a nondeterministic
    /// run): the rest of the run took the default order.
    diverged: bool,
    /// Steps after which the explorer stops recording (a run this long is
    /// beyond its budget; the run itself goes on).
    max_steps: usize,
}

impl Guide {
    /// The actor to take the next step, among `enabled` (not empty);
    /// `None` when every one of them is asleep: the run should end.
    pub(crate) fn choose(&mut self, enabled: &[Actor]) -> Option<Actor> {
        for &a in enabled {
            self.first_offered.entry(a).or_insert(self.depth);
        }
        let asleep = |a: &Actor| self.sleep.iter().any(|(s, _)| s == a);
        if let Some(&planned) = self.prefix.get(self.depth) {
            if enabled.contains(&planned) {
                return Some(planned);
            }
            if self.depth + 1 < self.prefix.len() {
                self.diverged = true;
            } else {
                // The new choice blocked: take one not run from here yet.
                return enabled
                    .iter()
                    .find(|a| !asleep(a) && !self.last_done.iter().any(|(d, _)| d == *a))
                    .copied();
            }
        }
        let awake: Vec<Actor> = enabled.iter().filter(|a| !asleep(a)).copied().collect();
        if let Some(&copy) = awake.iter().find(|a| matches!(a, Actor::Copy(_))) {
            return Some(copy);
        }
        let previous = self.previous_task;
        let after = |a: &&Actor| matches!(a, Actor::Task(t) if previous.is_none_or(|p| *t > p));
        awake.iter().find(after).or(awake.first()).copied()
    }

    /// Records the step `actor` took, from `enabled`, touching `touches`;
    /// `None`: the task blocked and took no step.
    pub(crate) fn record(
        &mut self,
        actor: Actor,
        enabled: Vec<Actor>,
        touches: Option<Vec<Touch>>,
    ) {
        let Some(touches) = touches else {
            return;
        };
        if let Actor::Task(t) = actor {
            self.previous_task = Some(t);
        }
        let depth = self.depth;
        self.depth += 1;
        if depth + 1 < self.prefix.len() {
            // Replayed: the explorer has this point already.
            self.steps.push(Step {
                actor,
                enabled,
                touches,
                sleep: Vec::new(),
            });
            return;
        }
        let entry = std::mem::take(&mut self.sleep);
        // At the new choice, the choices run there before it fall asleep too.
        let earlier = if depth + 1 == self.prefix.len() {
            self.last_done.clone()
        } else {
            Vec::new()
        };
        self.sleep = entry
            .iter()
            .chain(&earlier)
            .filter(|(a, t)| *a != actor && !dependent(t, &touches))
            .cloned()
            .collect();
        self.sleep.dedup_by(|a, b| a.0 == b.0);
        if self.steps.len() < self.max_steps {
            self.steps.push(Step {
                actor,
                enabled,
                touches,
                sleep: entry,
            });
        }
    }
}

/// A choice point of the current run, with what is left to try there.
#[derive(Debug)]
struct Node {
    chosen: Actor,
    enabled: Vec<Actor>,
    /// Choices run from this point (in this or an earlier run), with the
    /// touches of their steps.
    done: Vec<Asleep>,
    /// Actors asleep here: never chosen here.
    sleep: Vec<Asleep>,
    /// Choices that blocked when run from here (no step).
    blocked: Vec<Actor>,
    /// Choices a race says must be run from this point.
    backtrack: Vec<Actor>,
}

impl Node {
    /// Whether `actor` is still to be run from this point.
    fn untried(&self, actor: Actor) -> bool {
        !self
            .sleep
            .iter()
            .chain(&self.done)
            .any(|(a, _)| *a == actor)
            && !self.blocked.contains(&actor)
    }

    /// `actor` must be run from this point, unless it sleeps here.
    fn backtrack(&mut self, actor: Actor) {
        let asleep = self.sleep.iter().any(|(a, _)| *a == actor);
        if !asleep && !self.backtrack.contains(&actor) {
            self.backtrack.push(actor);
        }
    }
}

/// The exploration's state between runs.
#[derive(Debug)]
pub(crate) struct Explorer {
    nodes: Vec<Node>,
    runs: usize,
    /// Longest run (in steps) whose races are analysed.
    max_steps: usize,
    /// Whether every run so far was analysed in full (none was cut at
    /// `max_steps` or diverged): only then does an exhausted search mean
    /// every order was run.
    exact: bool,
    finished: bool,
}

impl Explorer {
    pub(crate) fn new(max_steps: usize) -> Explorer {
        Explorer {
            nodes: Vec::new(),
            runs: 0,
            max_steps,
            exact: true,
            finished: false,
        }
    }

    /// Runs taken so far.
    pub(crate) fn runs(&self) -> usize {
        self.runs
    }

    /// Whether every order of dependent steps has been run.
    pub(crate) fn complete(&self) -> bool {
        self.finished && self.exact
    }

    /// The guide of the next run, or `None` when no order is left to try.
    pub(crate) fn next_run(&mut self) -> Option<Guide> {
        if self.finished {
            return None;
        }
        let last = self.nodes.last();
        Some(Guide {
            prefix: self.nodes.iter().map(|n| n.chosen).collect(),
            last_done: last.map(|n| n.done.clone()).unwrap_or_default(),
            sleep: last.map(|n| n.sleep.clone()).unwrap_or_default(),
            max_steps: self.max_steps,
            ..Guide::default()
        })
    }

    /// Takes in a finished run: its choice points, its races, and the
    /// next choice to try.
    pub(crate) fn learn(&mut self, guide: Guide) {
        self.runs += 1;
        let replayed = self.nodes.len();
        if guide.diverged || guide.steps.len() >= self.max_steps {
            self.exact = false;
        }
        // The new choice may have blocked, and another been taken instead.
        if let (Some(node), Some(step)) = (
            self.nodes.last_mut(),
            replayed.checked_sub(1).and_then(|d| guide.steps.get(d)),
        ) {
            if node.chosen != step.actor {
                node.blocked.push(node.chosen);
            }
            node.chosen = step.actor;
            if !node.done.iter().any(|(a, _)| *a == step.actor) {
                node.done.push((step.actor, step.touches.clone()));
            }
        }
        // Steps past the prefix are new choice points.
        for step in guide.steps.iter().skip(replayed) {
            self.nodes.push(Node {
                chosen: step.actor,
                enabled: step.enabled.clone(),
                done: vec![(step.actor, step.touches.clone())],
                sleep: step.sleep.clone(),
                blocked: Vec::new(),
                backtrack: Vec::new(),
            });
        }
        // A run shorter than the prefix (cut at `max_steps`) keeps only
        // the points it recorded.
        self.nodes.truncate(guide.steps.len());
        for (earlier, actor) in races(&guide.steps, &guide.first_offered) {
            let node = &mut self.nodes[earlier];
            if node.enabled.contains(&actor) {
                node.backtrack(actor);
            } else {
                for a in node.enabled.clone() {
                    node.backtrack(a);
                }
            }
        }
        // The deepest point with a choice not yet run.
        while let Some(node) = self.nodes.last_mut() {
            let untried = node
                .backtrack
                .iter()
                .copied()
                .filter(|&a| node.untried(a))
                .min();
            if let Some(actor) = untried {
                node.chosen = actor;
                return;
            }
            self.nodes.pop();
        }
        self.finished = true;
    }
}

/// The races of a run: pairs of dependent steps of different actors that
/// no chain of program order, forks, copy issues and other dependent steps
/// orders, as (the earlier step's index, the later step's actor).
/// `first_offered`: the step each actor was first offered at (see
/// [`Guide`]).
fn races(steps: &[Step], first_offered: &HashMap<Actor, usize>) -> Vec<(usize, Actor)> {
    // Actors as dense indices, for vector clocks.
    let mut actors: Vec<Actor> = steps.iter().map(|s| s.actor).collect();
    actors.sort_unstable();
    actors.dedup();
    let index = |a: Actor| actors.binary_search(&a).ok();
    // The step after which an actor was first offered (its fork or
    // issue) orders its first step.
    let creator: Vec<Option<usize>> = actors
        .iter()
        .map(|a| first_offered.get(a).and_then(|d| d.checked_sub(1)))
        .collect();
    let mut clocks: Vec<Vec<u32>> = Vec::with_capacity(steps.len());
    let mut last_of: Vec<Option<usize>> = vec![None; actors.len()];
    // Per object and actor, the latest step that wrote it and the latest
    // that touched it at all: an earlier step of that actor on the object
    // is ordered before it (program order), so it races with a later step
    // only if that latest one does, and is covered by it.
    let mut latest: HashMap<Object, Vec<Latest>> = HashMap::new();
    let mut found = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let Some(me) = index(step.actor) else {
            continue;
        };
        let mut clock = match last_of[me].or(creator[me]) {
            Some(before) => clocks[before].clone(),
            None => vec![0; actors.len()],
        };
        // Latest first: a step ordered after an earlier one carries it in
        // its clock, so only unordered pairs count as races.
        let mut earlier: Vec<usize> = (step.touches.iter())
            .filter_map(|(object, access)| Some((latest.get(object)?, access)))
            .flat_map(|(per_actor, access)| {
                per_actor.iter().filter_map(move |l| match access {
                    Access::Write => l.any,
                    Access::Read | Access::Arrive => l.write,
                })
            })
            .collect();
        earlier.sort_unstable_by(|a, b| b.cmp(a));
        earlier.dedup();
        for j in earlier {
            let other = &steps[j];
            if other.actor == step.actor || !dependent(&other.touches, &step.touches) {
                continue;
            }
            let Some(them) = index(other.actor) else {
                continue;
            };
            if clocks[j][them] > clock[them] {
                found.push((j, step.actor));
                for (mine, theirs) in clock.iter_mut().zip(&clocks[j]) {
                    *mine = (*mine).max(*theirs);
                }
            }
        }
        for (object, access) in &step.touches {
            let per_actor = latest
                .entry(*object)
                .or_insert_with(|| vec![Latest::default(); actors.len()]);
            per_actor[me].any = Some(i);
            if *access == Access::Write {
                per_actor[me].write = Some(i);
            }
        }
        clock[me] += 1;
        clocks.push(clock);
        last_of[me] = Some(i);
    }
    found
}

/// An actor's latest steps on one object (see `races`).
#[derive(Copy, Clone, Debug, Default)]
struct Latest {
    write: Option<usize>,
    any: Option<usize>,
}

/// Whether two steps touching `a` and `b` may not commute: they touch one
/// object and one of them writes it.
fn dependent(a: &[Touch], b: &[Touch]) -> bool {
    a.iter().any(|(object, access)| {
        b.iter().any(|(other, other_access)| {
            object == other && (*access == Access::Write || *other_access == Access::Write)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(actor: Actor, enabled: &[Actor], touches: &[Touch]) -> Step {
        Step {
            actor,
            enabled: enabled.to_vec(),
            touches: touches.to_vec(),
            sleep: Vec::new(),
        }
    }

    /// What a guide would have noted: each actor first offered where it
    /// first appears among the steps' enabled actors.
    fn races(steps: &[Step]) -> Vec<(usize, Actor)> {
        let mut offered = HashMap::new();
        for (i, step) in steps.iter().enumerate() {
            for &a in &step.enabled {
                offered.entry(a).or_insert(i);
            }
        }
        super::races(steps, &offered)
    }

    const T0: Actor = Actor::Task(0);
    const T1: Actor = Actor::Task(1);
    const B: Object = Object::MBarrier(0);
    const W: Access = Access::Write;
    const R: Access = Access::Read;

    #[test]
    fn dependent_steps_of_two_tasks_race_and_independent_ones_do_not() {
        let steps = [
            step(T0, &[T0, T1], &[(B, W)]),
            step(T1, &[T0, T1], &[(B, W)]),
        ];
        assert_eq!(races(&steps), [(0, T1)]);
        let reads = [
            step(T0, &[T0, T1], &[(B, R)]),
            step(T1, &[T0, T1], &[(B, R)]),
        ];
        assert!(races(&reads).is_empty());
        let apart = [
            step(T0, &[T0, T1], &[(B, W)]),
            step(T1, &[T0, T1], &[(Object::MBarrier(1), W)]),
        ];
        assert!(races(&apart).is_empty());
    }

    #[test]
    fn a_race_ordered_through_a_third_step_is_no_race() {
        // T0 writes B, T1 reads B (a race), T1 writes C, T0 reads C: T1's
        // write of C is ordered after T0's write of B, but nothing orders
        // it before T0's read of C, so that pair races too.
        let c = Object::MBarrier(1);
        let steps = [
            step(T0, &[T0, T1], &[(B, W)]),
            step(T1, &[T0, T1], &[(B, R)]),
            step(T1, &[T0, T1], &[(c, W)]),
            step(T0, &[T0, T1], &[(c, R)]),
        ];
        assert_eq!(races(&steps), [(0, T1), (2, T0)]);
    }

    #[test]
    fn a_copy_is_ordered_after_its_issue() {
        let copy = Actor::Copy(0);
        let steps = [
            step(T0, &[T0], &[(B, W)]),
            step(copy, &[T0, copy], &[(B, W)]),
        ];
        assert!(races(&steps).is_empty());
    }

    /// Explores two tasks of `steps` steps each, task `t`'s steps touching
    /// `touches(t)`; the explorer and every run's order of tasks.
    fn explore_two_tasks(
        steps: usize,
        touches: fn(usize) -> Vec<Touch>,
    ) -> (Explorer, Vec<Vec<usize>>) {
        let mut explorer = Explorer::new(1_000);
        let mut orders = Vec::new();
        while let Some(mut guide) = explorer.next_run() {
            let mut left = [steps; 2];
            let mut order = Vec::new();
            while left.iter().any(|&l| l > 0) {
                let enabled: Vec<Actor> =
                    (0..2).filter(|&t| left[t] > 0).map(Actor::Task).collect();
                let Some(actor) = guide.choose(&enabled) else {
                    break;
                };
                let Actor::Task(t) = actor else {
                    unreachable!()
                };
                left[t] -= 1;
                order.push(t);
                guide.record(actor, enabled, Some(touches(t)));
            }
            orders.push(order);
            explorer.learn(guide);
            assert!(explorer.runs() < 100, "the exploration does not end");
        }
        (explorer, orders)
    }

    /// Two tasks each writing one shared object twice: the explorer runs
    /// every order of the four writes up to equivalence (6 interleavings
    /// of two sequences of two) and then stops.
    #[test]
    fn the_explorer_runs_every_order_of_dependent_steps_once() {
        let (explorer, mut orders) = explore_two_tasks(2, |_| vec![(B, W)]);
        orders.sort();
        let before = orders.len();
        orders.dedup();
        assert_eq!(orders.len(), before, "an order ran twice");
        assert_eq!(orders.len(), 6);
        assert!(explorer.complete());
    }

    /// Independent steps are not reordered: one run covers them.
    #[test]
    fn independent_tasks_take_one_run() {
        let (explorer, _) = explore_two_tasks(3, |t| vec![(Object::Buffer(t), W)]);
        assert_eq!(explorer.runs(), 1);
        assert!(explorer.complete());
    }
}

//! Timelines of interpreted launches (`TLX_TRACE`): when each task of each
//! program ran and when it waited, on the scheduler's logical clock (one
//! tick per task step of that program): a slice per task and per wait
//! inside it, which the runtime writes as Chrome trace JSON.

use std::sync::Mutex;

use super::wait::WaitReason;

/// What a slice of a timeline was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceKind {
    /// The task, from its first step to its last.
    Task,
    /// Blocked, from the step that found the condition unmet to the one
    /// that went on; the text says on what.
    Wait(String),
}

/// One slice: `[start, end)` in the program's task steps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceEvent {
    pub program: [u32; 3],
    pub task: String,
    pub kind: TraceKind,
    pub start: u64,
    pub end: u64,
}

/// Where the programs of one launch (run on several OS threads) put their
/// slices.
#[derive(Debug, Default)]
pub struct Trace {
    events: Mutex<Vec<TraceEvent>>,
}

impl Trace {
    /// The slices recorded so far, by program, task and start.
    pub fn events(&self) -> Vec<TraceEvent> {
        let mut events = self.events.lock().map(|e| e.clone()).unwrap_or_default();
        events.sort_by(|a, b| (a.program, &a.task, a.start).cmp(&(b.program, &b.task, b.start)));
        events
    }

    pub(crate) fn record(&self, slices: Vec<TraceEvent>) {
        if let Ok(mut events) = self.events.lock() {
            events.extend(slices);
        }
    }
}

/// The slices of one program's tasks while the scheduler runs them.
pub(crate) struct ProgramTimeline {
    program: [u32; 3],
    clock: u64,
    started: Vec<Option<u64>>,
    waiting: Vec<Option<(u64, String)>>,
    slices: Vec<TraceEvent>,
}

impl ProgramTimeline {
    pub(crate) fn new(program: [u32; 3]) -> Self {
        ProgramTimeline {
            program,
            clock: 0,
            started: Vec::new(),
            waiting: Vec::new(),
            slices: Vec::new(),
        }
    }

    fn slot(&mut self, task: usize) {
        if self.started.len() <= task {
            self.started.resize(task + 1, None);
            self.waiting.resize(task + 1, None);
        }
    }

    /// Task `task` takes a step; `blocked` when it found its wait unmet.
    pub(crate) fn step(&mut self, task: usize, name: &str, blocked: Option<&WaitReason>) {
        self.slot(task);
        let now = self.clock;
        self.clock += 1;
        self.started[task].get_or_insert(now);
        match (blocked, self.waiting[task].take()) {
            (Some(_), Some(open)) => self.waiting[task] = Some(open),
            (Some(reason), None) => self.waiting[task] = Some((now, wait_label(reason))),
            (None, Some((since, label))) => self.slices.push(TraceEvent {
                program: self.program,
                task: name.to_string(),
                kind: TraceKind::Wait(label),
                start: since,
                end: now,
            }),
            (None, None) => {}
        }
    }

    /// Task `task` ran its last step.
    pub(crate) fn finish(&mut self, task: usize, name: &str) {
        self.slot(task);
        let start = self.started[task].unwrap_or(self.clock);
        self.slices.push(TraceEvent {
            program: self.program,
            task: name.to_string(),
            kind: TraceKind::Task,
            start,
            end: self.clock,
        });
    }

    pub(crate) fn into_slices(self) -> Vec<TraceEvent> {
        self.slices
    }
}

fn wait_label(reason: &WaitReason) -> String {
    match reason {
        WaitReason::MBarrier { barrier, phase, .. } => {
            format!("wait: mbarrier {barrier}, phase {phase}")
        }
        WaitReason::ClusterBarrier { .. } => "wait: cluster_barrier".to_string(),
        WaitReason::NamedBarrier { barrier, .. } => format!("wait: named barrier {barrier}"),
        WaitReason::Tasks { .. } => "wait: tasks to finish".to_string(),
        WaitReason::Signal { cmp, wanted, .. } => format!("wait: flag {cmp} {wanted}"),
    }
}

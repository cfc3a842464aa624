//! The interpreter's errors: where a failure happened ([`Site`]) and what it
//! was ([`InterpError`]). Op evaluation reports a [`Fault`] without a site;
//! the executor, which knows the program and the op, attaches it.

use std::fmt;

use crate::ir::ValueId;

use super::cluster::RemoteError;
use super::global_race::{GlobalRace, GlobalRaceKind};
use super::mbarrier::MBarrierError;
use super::memory::BufferId;
use super::race::SharedRace;
use super::shared::NamedBarrierError;
use super::wait::{list_blocked, BlockedTask};

/// The kernel, program and op a failure happened in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    pub kernel: String,
    /// The user's source file, when the kernel records it. (Shared, like
    /// `buffers`: a site is built per fault, and errors stay small.)
    pub file: std::sync::Arc<str>,
    /// Program id (x, y, z).
    pub program: [u32; 3],
    /// The op's name as in the IR text ("load", "store", "div", ...).
    pub op: &'static str,
    /// 1-based source line (0 when unknown).
    pub line: u32,
    /// The kernel's pointer parameters, by the buffer each was given, so a
    /// report can say `out` rather than a buffer number.
    pub buffers: std::sync::Arc<Vec<(BufferId, String)>>,
}

impl Site {
    /// `buffer` as a report names it: "`out` (buffer#1)", or "buffer#1"
    /// when no parameter was given it (a buffer reached by arithmetic).
    pub fn buffer_name(&self, buffer: BufferId) -> String {
        let names: Vec<&str> = self
            .buffers
            .iter()
            .filter(|(id, _)| *id == buffer)
            .map(|(_, name)| name.as_str())
            .collect();
        if names.is_empty() {
            buffer.to_string()
        } else {
            format!("`{}` ({buffer})", names.join("`/`"))
        }
    }
}

/// For the error messages below.
fn named(at: &Site, buffer: &BufferId) -> String {
    at.buffer_name(*buffer)
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [x, y, z] = self.program;
        write!(
            f,
            "kernel `{}`, program ({x}, {y}, {z}), op `{}` at ",
            self.kernel, self.op
        )?;
        if !self.file.is_empty() {
            write!(f, "{}:", self.file)?;
        }
        write!(f, "line {}", self.line)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum InterpError {
    #[error("kernel `{kernel}`: grid {grid:?} has a zero dimension")]
    EmptyGrid { kernel: String, grid: [u32; 3] },
    #[error(
        "kernel `{kernel}`: grid {grid:?} is not a whole number of clusters of {cluster:?} \
         programs (ctas_per_cga); make each grid dimension a multiple of the cluster's"
    )]
    ClusterGrid {
        kernel: String,
        grid: [u32; 3],
        cluster: [u32; 3],
    },
    #[error(
        "kernel `{kernel}`: the interpreter runs {programs} programs in one schedule (a kernel \
         that waits on flags with `signal_wait_until`, or launches run together); {reason}"
    )]
    Cooperative {
        kernel: String,
        programs: usize,
        reason: &'static str,
    },
    #[error("kernel `{kernel}` takes {expected} arguments, got {got}")]
    ArgCount {
        kernel: String,
        expected: usize,
        got: usize,
    },
    #[error("kernel `{kernel}`: argument {index} (`{param}`) must be {expected}, got {got}")]
    ArgMismatch {
        kernel: String,
        index: usize,
        param: String,
        expected: String,
        got: String,
    },
    #[error("{buffer} is not a live buffer (never allocated or already freed)")]
    UnknownBuffer { buffer: BufferId },
    #[error(
        "host access of {len} bytes at byte {offset} is outside {buffer} of {buffer_len} bytes"
    )]
    HostAccessOutOfBounds {
        buffer: BufferId,
        offset: usize,
        len: usize,
        buffer_len: usize,
    },
    #[error("{at}: element {element} accesses byte offset {byte_offset} outside {} of {buffer_len} bytes", named(.at, .buffer))]
    OutOfBounds {
        at: Site,
        element: usize,
        byte_offset: i64,
        buffer: BufferId,
        buffer_len: usize,
    },
    #[error("{at}: element {element} accesses byte offset {byte_offset} of {}, which is not a multiple of the access size {align}", named(.at, .buffer))]
    Misaligned {
        at: Site,
        element: usize,
        byte_offset: i64,
        buffer: BufferId,
        align: usize,
    },
    #[error("{at}: element {element} uses {}, which is freed or was never allocated", named(.at, .buffer))]
    FreedBuffer {
        at: Site,
        element: usize,
        buffer: BufferId,
    },
    #[error("{at}: element {element} reads never-written bytes at byte offset {byte_offset} of {} ({buffer_len} bytes)", named(.at, .buffer))]
    UninitRead {
        at: Site,
        element: usize,
        byte_offset: i64,
        buffer: BufferId,
        buffer_len: usize,
    },
    #[error("{at}: element {element} of the {what} is undefined: it comes from a masked-off lane of the `load` at line {origin_line}, which has no `other`")]
    UndefinedUse {
        at: Site,
        element: usize,
        /// The operand that uses it ("stored value", "branch condition", ...).
        what: &'static str,
        /// The line of the load that left it undefined.
        origin_line: u32,
    },
    #[error("{at}: device_assert failed at element {element}: {message}")]
    AssertFailed {
        at: Site,
        message: String,
        element: usize,
    },
    #[error(
        "{at}: `multiple_of` promised a multiple of {factor}, but the value is {value}; \
         a wrong promise would make the GPU's vector accesses misaligned"
    )]
    NotAMultiple {
        at: Site,
        value: String,
        factor: u32,
    },
    #[error("{at}: integer division by zero at element {element}")]
    DivisionByZero { at: Site, element: usize },
    #[error("{at}: loop step {step} is not positive")]
    NonPositiveStep { at: Site, step: i64 },
    #[error(
        "{at}: this TMA copy's innermost offset, {offset}, is {} bytes into a row; TMA starts a \
         box only on a 16-byte boundary of the row (the GPU stops with an illegal instruction): \
         make that offset a multiple of {} elements",
        .offset * i64::from(*.elem_bytes),
        16 / .elem_bytes
    )]
    TmaOffset {
        at: Site,
        offset: i64,
        elem_bytes: u32,
    },
    #[error(
        "{at}: this TMA store's offset {offset} along dimension {dim} is negative; a TMA \
         store's block must start inside the tensor (the GPU stops with an illegal \
         instruction), though it may reach past its end: start the block at 0 or later"
    )]
    TmaStoreBeforeStart { at: Site, dim: usize, offset: i64 },
    #[error(
        "{at}: this tensor descriptor breaks TMA's rules: {reason} (on the GPU the copies \
         through it fail or move the wrong bytes)"
    )]
    BadTensorDescriptor { at: Site, reason: String },
    #[error("{at}: malformed IR: {detail}")]
    MalformedIr { at: Site, detail: String },
    #[error(
        "kernel `{kernel}`{}, program {}: deadlock, every live task is blocked:{}",
        in_file(file),
        program_text(*program),
        list_blocked(tasks)
    )]
    Deadlock {
        kernel: String,
        file: String,
        program: [u32; 3],
        tasks: Vec<BlockedTask>,
    },
    #[error(
        "{at}: `barrier_expect_bytes` announced {} bytes for phase {} of mbarrier #{}, but the \
         copies completing on it brought {}, so the phase never completes; blocked:{}",
        .shortfall.expected,
        .shortfall.phase,
        .shortfall.barrier,
        .shortfall.landed,
        list_blocked(&.shortfall.tasks)
    )]
    ExpectBytes {
        /// The `barrier_expect_bytes` of the phase.
        at: Site,
        // Boxed: the blocked tasks would make every InterpError larger.
        shortfall: Box<BytesShortfall>,
    },
    #[error(
        "kernel `{kernel}`, program {}: the checker's run of the synchronization skeleton \
         took too many steps (a loop that does not end for these sizes?)",
        program_text(*program)
    )]
    StepBudget { kernel: String, program: [u32; 3] },
    #[error("{at}, task `{task}`: {error}")]
    MBarrier {
        at: Site,
        task: String,
        error: MBarrierError,
    },
    /// A remote view used before the peer made its buffer or barrier
    /// visible to the cluster, or of a program outside it.
    #[error("{at}, task `{task}`: {error}")]
    Remote {
        at: Site,
        task: String,
        // Boxed: it would otherwise make every InterpError larger.
        error: Box<RemoteError>,
    },
    #[error("{at}, task `{task}`: {error}")]
    NamedBarrier {
        at: Site,
        task: String,
        // Boxed: it would otherwise make every InterpError larger.
        error: Box<NamedBarrierError>,
    },
    #[error(
        "{at}, task `{task}`: read of shared buffer #{buffer}, which nothing has written yet \
         (a missing `barrier_wait` before reading what an asynchronous copy brings?)"
    )]
    UnwrittenShared {
        at: Site,
        task: String,
        buffer: usize,
    },
    #[error(
        "{at}, task `{task}`: access of tensor-memory buffer #{} {}",
        .access.buffer,
        match (.access.mma_line, .access.barrier) {
            (None, _) => "before anything wrote it (no `async_dot` or `local_store` into it came first)".to_owned(),
            (Some(line), Some((bar, phase))) => format!("before the `async_dot` into it at line {line} completed (wait on mbarrier #{bar} phase {phase}, which tracks it)"),
            (Some(line), None) => format!("while the `async_dot` into it at line {line} is in flight and no barrier tracks it (give it `mbarriers` or `tcgen05_commit` one)"),
        }
    )]
    AccumulatorBeforeCompletion {
        at: Site,
        task: String,
        // Boxed: it would otherwise make every InterpError larger.
        access: Box<EarlyAccumulatorAccess>,
    },
    #[error(
        "{at}, task `{task}`: `tcgen05_commit` on mbarrier #{barrier}, on which the `mbarriers` \
         of the `async_dot`s it tracks already arrive: the barrier gets two arrivals for them"
    )]
    DoubleMmaCompletion {
        at: Site,
        task: String,
        barrier: usize,
    },
    #[error(
        "{at}, task `{task}`: a cluster-launch-control request after this program decoded an \
         answer saying no work was left (`clc_query` at line {failed_line}): \
         PTX leaves a request after an observed failure undefined"
    )]
    ClcAfterFailure {
        at: Site,
        task: String,
        failed_line: u32,
    },
    #[error(
        "{at}, task `{task}`: write into shared buffer #{buffer} while the {} at line {} may \
         still be landing in it{}",
        .copy.op,
        .copy.line,
        .copy.barrier.map_or(String::new(), |(b, p)| format!(" (it completes phase {p} of mbarrier #{b})"))
    )]
    WriteDuringCopy {
        at: Site,
        task: String,
        buffer: usize,
        copy: Box<PendingCopy>,
    },
    #[error(
        "{at}, task `{task}`: read of shared buffer #{buffer} while an `async_load` of this task \
         may still be filling it; commit the group and `async_load_wait_group` for it first"
    )]
    AsyncLoadPending {
        at: Site,
        task: String,
        buffer: usize,
    },
    #[error(
        "{at}: a {:?} slice at {:?} does not fit in a {:?} buffer",
        .slice.shape,
        .slice.offsets,
        .slice.of
    )]
    SliceBounds {
        at: Site,
        // Boxed: three vectors would make every InterpError larger.
        slice: Box<SliceWindow>,
    },
    #[error("{at}: index {index} of {count} buffers or barriers; `local_view` takes 0..{count}")]
    ViewIndex { at: Site, index: i64, count: usize },
    #[error(
        "{at}, task `{task}`: this wait on mbarrier #{barrier} passes at once on phase \
         {}, which this task already waited for at line {first_line}, while the barrier \
         has moved on (a phase that was not flipped?)",
        phase_text(*.phase)
    )]
    StaleWait {
        at: Site,
        task: String,
        barrier: usize,
        /// The completed phase the wait passed on (-1: the one before init).
        phase: i64,
        /// The line of the wait that first passed on it.
        first_line: u32,
    },
    #[error(
        "{at}, task `{task}`: this arrive on mbarrier #{barrier} lands in phase {phase}, but \
         this task's arrive at line {earlier} completed the phase before and the task has not \
         waited since: one release counted for two phases"
    )]
    EarlyArrive {
        at: Site,
        task: String,
        barrier: usize,
        phase: u32,
        earlier: u32,
    },
    #[error(
        "{at}: the synchronization skeleton needs {value}, which the checker does not \
         compute (it depends on memory or on data)"
    )]
    Undecidable { at: Site, value: ValueId },
    #[error(
        "{at}, task `{task}`: this write into shared buffer #{buffer} is not ordered after \
         task `{}`'s read of it at line {}{}: nothing the reader arrived on after reading was \
         waited for before writing, so it may overwrite data still in use",
        .read.reader,
        .read.line,
        if .read.in_flight { " (still in flight: an `async_dot` before its `async_dot_wait`, or a TMA store before its `async_descriptor_store_wait`)" } else { "" }
    )]
    OverwriteBeforeRelease {
        at: Site,
        task: String,
        buffer: usize,
        // Boxed: the reader's name would make every InterpError larger.
        read: Box<UnreleasedRead>,
    },
    #[error(
        "{at}, task `{task}`: the task ends while this {} may still be {} shared buffer #{buffer}: \
         nothing waited for it (`{}`), so the program's shared memory may be reused under it",
        .copy.op(),
        .copy.access(),
        .copy.wait()
    )]
    CopyInFlightAtTaskEnd {
        at: Site,
        task: String,
        buffer: usize,
        copy: TaskCopy,
    },
    #[error(
        "{at}, task `{task}`: the program exits while this asynchronous write into shared \
         buffer #{buffer} was never waited for (mbarrier #{barrier} phase {phase}): it may land \
         after the program's shared memory is reused"
    )]
    WriteInFlightAtExit {
        at: Site,
        task: String,
        buffer: usize,
        barrier: usize,
        phase: u32,
    },
    #[error(
        "{at}, task `{task}`: this reads shared buffer #{}, which task `{}` stored into at line \
         {} (`remote_shmem_store`), and nothing orders that store before this read: the writer \
         must arrive on a barrier this task waits for after storing",
        .store.buffer,
        .store.writer,
        .store.line
    )]
    UnorderedStoreRead {
        at: Site,
        task: String,
        // Boxed: the writer's name would make every InterpError larger.
        store: Box<PeerStore>,
    },
    #[error(
        "{at}, task `{task}`: `{}` reads shared buffer #{} through the async proxy, but task \
         `{}` wrote it at line {} with `remote_shmem_store` (the generic proxy) and this task \
         ran no `fence_async_shared()` after seeing that store: the read may miss it",
        .read.reader,
        .read.store.buffer,
        .read.store.writer,
        .read.store.line
    )]
    UnfencedProxyRead {
        at: Site,
        task: String,
        // Boxed: the writer's name would make every InterpError larger.
        read: Box<UnfencedRead>,
    },
    #[error(
        "{at}: `barrier_expect_bytes` announced too few bytes for phase {phase} of mbarrier \
         #{barrier}: the phase completed before the copy at line {copy_line} landed, which \
         counts toward the next phase, and a reader that waited for phase {phase} read its \
         buffer before it"
    )]
    ExpectBytesShort {
        at: Site,
        barrier: usize,
        phase: u32,
        copy_line: u32,
    },
    #[error(
        "{at}, task `{}`: {}",
        .race.task,
        global_race_message(.at, .race)
    )]
    GlobalRace {
        at: Site,
        // Boxed: the record's strings would otherwise make every InterpError larger.
        race: Box<GlobalRace>,
    },
    #[error("{at}, task `{task}`: {race}")]
    SharedMemoryRace {
        at: Site,
        task: String,
        // Boxed: the record's strings would otherwise make every InterpError larger.
        race: Box<SharedRace>,
    },
}

/// A peer's synchronous store into a buffer (see
/// [`InterpError::UnorderedStoreRead`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerStore {
    pub buffer: usize,
    pub writer: String,
    pub line: u32,
}

/// An async-proxy read of a peer's synchronous store with no proxy fence
/// between (see [`InterpError::UnfencedProxyRead`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnfencedRead {
    /// The reading primitive (`async_descriptor_store`, `async_dot`, ...).
    pub reader: &'static str,
    pub store: PeerStore,
}

/// A copy a task issues and waits for itself (see
/// [`InterpError::CopyInFlightAtTaskEnd`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum TaskCopy {
    /// `async_descriptor_store`, reading its buffer until
    /// `async_descriptor_store_wait`.
    TmaStore,
    /// `async_load` (`cp.async`), writing its buffer until
    /// `async_load_wait_group`.
    AsyncLoad,
}

impl TaskCopy {
    pub fn op(self) -> &'static str {
        match self {
            TaskCopy::TmaStore => "async_descriptor_store",
            TaskCopy::AsyncLoad => "async_load",
        }
    }

    /// What the copy does to its shared buffer while in flight.
    pub fn access(self) -> &'static str {
        match self {
            TaskCopy::TmaStore => "reading",
            TaskCopy::AsyncLoad => "writing",
        }
    }

    /// The call that waits for it.
    pub fn wait(self) -> &'static str {
        match self {
            TaskCopy::TmaStore => "async_descriptor_store_wait(0)",
            TaskCopy::AsyncLoad => "async_load_commit_group(); async_load_wait_group(0)",
        }
    }
}

/// A tensor-memory accumulator accessed before the MMA into it completed.
#[derive(Clone, Debug)]
pub struct EarlyAccumulatorAccess {
    pub buffer: usize,
    /// The MMA that writes it; `None` when nothing has.
    pub mma_line: Option<u32>,
    /// The barrier phase that tracks the MMA, once one does.
    pub barrier: Option<(usize, u32)>,
}

/// A read of a shared buffer that a later write was not ordered after.
#[derive(Clone, Debug)]
pub struct UnreleasedRead {
    pub reader: String,
    pub line: u32,
    /// Whether the read was still going on (a wgmma not yet waited for).
    pub in_flight: bool,
}

/// A phase whose announced transaction bytes differ from what landed.
#[derive(Clone, Debug)]
pub struct BytesShortfall {
    pub barrier: usize,
    pub phase: u32,
    pub expected: i64,
    pub landed: i64,
    pub tasks: Vec<BlockedTask>,
}

/// A `local_slice` window: its offsets and shape, and its buffer's shape.
#[derive(Clone, Debug)]
pub struct SliceWindow {
    pub offsets: Vec<i64>,
    pub shape: Vec<usize>,
    pub of: Vec<usize>,
}

fn in_file(file: &str) -> String {
    if file.is_empty() {
        String::new()
    } else {
        format!(" ({file})")
    }
}

fn phase_text(phase: i64) -> String {
    if phase < 0 {
        "-1 (the phase before the barrier's first)".to_owned()
    } else {
        phase.to_string()
    }
}

fn program_text([x, y, z]: [u32; 3]) -> String {
    format!("({x}, {y}, {z})")
}

/// A failure inside one op, before the executor adds where it happened.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Fault {
    OutOfBounds {
        element: usize,
        byte_offset: i64,
        buffer: BufferId,
        buffer_len: usize,
    },
    Misaligned {
        element: usize,
        byte_offset: i64,
        buffer: BufferId,
        align: usize,
    },
    FreedBuffer {
        element: usize,
        buffer: BufferId,
    },
    UninitRead {
        element: usize,
        byte_offset: i64,
        buffer: BufferId,
        buffer_len: usize,
    },
    AssertFailed {
        message: String,
        element: usize,
    },
    NotAMultiple {
        value: String,
        factor: u32,
    },
    UndefinedUse {
        element: usize,
        what: &'static str,
        origin_line: u32,
    },
    DivisionByZero {
        element: usize,
    },
    NonPositiveStep {
        step: i64,
    },
    TmaOffset {
        offset: i64,
        elem_bytes: u32,
    },
    TmaStoreBeforeStart {
        dim: usize,
        offset: i64,
    },
    BadTensorDescriptor(String),
    /// A skeleton run read a value it does not compute.
    Undecidable {
        value: ValueId,
    },
    /// IR the frontend should never produce (wrong operand kinds or shapes,
    /// undefined values); reported, never panicked on.
    Malformed(String),
    /// A global access of a cooperative run that no signal orders.
    GlobalRace(Box<GlobalRace>),
}

impl Fault {
    pub(crate) fn malformed(detail: impl Into<String>) -> Fault {
        Fault::Malformed(detail.into())
    }

    pub(crate) fn at(self, at: Site) -> InterpError {
        match self {
            Fault::OutOfBounds {
                element,
                byte_offset,
                buffer,
                buffer_len,
            } => InterpError::OutOfBounds {
                at,
                element,
                byte_offset,
                buffer,
                buffer_len,
            },
            Fault::Misaligned {
                element,
                byte_offset,
                buffer,
                align,
            } => InterpError::Misaligned {
                at,
                element,
                byte_offset,
                buffer,
                align,
            },
            Fault::FreedBuffer { element, buffer } => InterpError::FreedBuffer {
                at,
                element,
                buffer,
            },
            Fault::UninitRead {
                element,
                byte_offset,
                buffer,
                buffer_len,
            } => InterpError::UninitRead {
                at,
                element,
                byte_offset,
                buffer,
                buffer_len,
            },
            Fault::AssertFailed { message, element } => InterpError::AssertFailed {
                at,
                message,
                element,
            },
            Fault::NotAMultiple { value, factor } => {
                InterpError::NotAMultiple { at, value, factor }
            }
            Fault::UndefinedUse {
                element,
                what,
                origin_line,
            } => InterpError::UndefinedUse {
                at,
                element,
                what,
                origin_line,
            },
            Fault::DivisionByZero { element } => InterpError::DivisionByZero { at, element },
            Fault::NonPositiveStep { step } => InterpError::NonPositiveStep { at, step },
            Fault::TmaOffset { offset, elem_bytes } => InterpError::TmaOffset {
                at,
                offset,
                elem_bytes,
            },
            Fault::TmaStoreBeforeStart { dim, offset } => {
                InterpError::TmaStoreBeforeStart { at, dim, offset }
            }
            Fault::BadTensorDescriptor(reason) => InterpError::BadTensorDescriptor { at, reason },
            Fault::Undecidable { value } => InterpError::Undecidable { at, value },
            Fault::Malformed(detail) => InterpError::MalformedIr { at, detail },
            Fault::GlobalRace(race) => InterpError::GlobalRace { at, race },
        }
    }
}

pub(crate) type FaultResult<T> = Result<T, Fault>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_kernel_program_op_and_line() {
        let at = Site {
            kernel: "add".into(),
            file: "src/k.rs".into(),
            program: [3, 0, 1],
            op: "load",
            line: 12,
            buffers: vec![(BufferId(1), "x".into()), (BufferId(2), "out".into())].into(),
        };
        let err = Fault::OutOfBounds {
            element: 5,
            byte_offset: 4096,
            buffer: BufferId(2),
            buffer_len: 4096,
        }
        .at(at);
        let text = err.to_string();
        for part in [
            "`add`",
            "(3, 0, 1)",
            "`load`",
            "src/k.rs:line 12",
            "element 5",
            "outside `out` (buffer#2)",
            "4096 bytes",
        ] {
            assert!(text.contains(part), "{text} lacks {part}");
        }
    }
}

/// An asynchronous copy into a buffer, not yet known to have landed.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingCopy {
    /// `async_load`, or any copy that completes on an mbarrier.
    pub op: &'static str,
    pub line: u32,
    /// The (mbarrier, phase) whose completion says it landed; none for an
    /// `async_load`, which its group's wait retires.
    pub barrier: Option<(usize, u32)>,
}

/// What a [`InterpError::GlobalRace`] says after its site and task.
fn global_race_message(at: &Site, race: &GlobalRace) -> String {
    let element = format!("byte {} of {}", race.byte_offset, named(at, &race.buffer));
    let (other, line) = (&race.other, race.other_line);
    match race.kind {
        GlobalRaceKind::ReadBeforeSignal => format!(
            "this reads {element}, which task `{other}` wrote at line {line}, and no signal \
             orders that write before this read: the writer must release a flag after writing \
             (`atomic_xchg(flag, v, sem = \"release\", scope = \"sys\")`) and this task wait \
             for it (`signal_wait_until`) before reading"
        ),
        GlobalRaceKind::OverwriteBeforeRelease => format!(
            "this overwrites {element}, which task `{other}` read at line {line} and has not \
             released: the reader must signal that it is done (a release after its read) and \
             this task wait for that signal before writing"
        ),
        GlobalRaceKind::UnorderedWrites => format!(
            "this writes {element}, which task `{other}` also wrote at line {line}, and no \
             signal orders the two writes"
        ),
    }
}

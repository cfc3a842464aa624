//! The CPU interpreter: runs an [`ir::Kernel`] over a grid of programs on
//! host memory, one tile op at a time (block level, like Triton's
//! interpreter), with bounds, initialization and assertion checks that name
//! the kernel, the program, the op and the source line.
//!
//! Structure: [`run_kernel`] validates the launch and hands programs to OS
//! threads (work stealing on an atomic counter). A program is a set of tasks
//! (logical threads, TLX's async tasks) over the program's shared state
//! (mbarriers, asynchronous-write records of shared buffers); the
//! `schedule` module interleaves them one op at a time, round robin or from
//! a seeded PRNG ([`Schedule`]), and reports a deadlock when every live task
//! is blocked ([`InterpError::Deadlock`]). The kernel body is a task: an
//! `exec::Executor`, a resumable state machine over an explicit value
//! environment and frame stack; at `async_tasks` it forks one executor per
//! replica of each task, over a copy of its values, and waits for them. The op modules (`elementwise`,
//! `shape`, `reduce`, `dot`, `global`) compute on whole tiles; `mbarrier`
//! and `race` hold the state machines barrier and shared-memory ops will use.
//! In checked mode `undef` follows the unspecified lanes of masked loads
//! without `other` and reports their observable uses
//! ([`InterpError::UndefinedUse`]).

mod clocks;
mod cluster;
mod dot;
mod elementwise;
mod error;
mod exec;
mod explore;
mod global;
mod global_race;
mod inflight;
mod launch_queue;
pub mod mbarrier;
pub mod memory;
mod phases;
pub mod race;
mod reduce;
mod schedule;
mod shape;
mod shared;
mod trace;
mod undef;
mod value;
mod wait;

#[cfg(test)]
mod schedule_tests;
#[cfg(test)]
mod task_tests;
#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use crate::ir::{self, ParamKind, ScalarType};
use crate::numeric::{float_from_bits, int_from_bits};

pub use cluster::RemoteError;
pub use error::{
    BytesShortfall, InterpError, PeerStore, PendingCopy, Site, SliceWindow, TaskCopy, UnfencedRead,
    UnreleasedRead,
};
pub use memory::{BufferId, HostMemory};
pub use schedule::{Schedule, ScheduleParseError};
pub use shared::NamedBarrierError;
pub use trace::{Trace, TraceEvent, TraceKind};
pub use value::address_of;
pub use wait::{BlockedTask, Skipped, Wait, WaitReason};

use exec::Executor;
use launch_queue::PendingClusters;
use schedule::{run_tasks, ProgramLabel, ProgramShared, Task};
use trace::ProgramTimeline;
use value::{Data, GlobalTensor, Handle, Ptr, Repr, Tensor};

/// The raw bits of a scalar argument in its type's memory encoding,
/// zero-extended to 64 bits (an f32 is `x.to_bits()`, an f16 its 16 bits, an
/// i32 `x as u32`, a bool 0 or 1). See the `ArgValue` constructors.
pub type ScalarBits = u64;

/// A kernel argument.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ArgValue {
    /// A global pointer: `offset_elems` pointee elements into `buffer`.
    Ptr { buffer: BufferId, offset_elems: i64 },
    /// A scalar of the given type with its bits.
    Scalar(ScalarType, ScalarBits),
    /// A tensor descriptor over `buffer` from `offset_elems` on: the first
    /// `rank` entries of `shape` and `strides` (in elements, outermost first).
    TensorDesc {
        buffer: BufferId,
        offset_elems: i64,
        elem: ScalarType,
        rank: u8,
        shape: [i64; 5],
        strides: [i64; 5],
    },
}

impl ArgValue {
    /// A pointer to the start of `buffer`.
    pub fn ptr(buffer: BufferId) -> ArgValue {
        ArgValue::Ptr {
            buffer,
            offset_elems: 0,
        }
    }

    pub fn i32(x: i32) -> ArgValue {
        ArgValue::Scalar(ScalarType::I32, u64::from(x as u32))
    }

    pub fn i64(x: i64) -> ArgValue {
        ArgValue::Scalar(ScalarType::I64, x as u64)
    }

    pub fn u32(x: u32) -> ArgValue {
        ArgValue::Scalar(ScalarType::U32, u64::from(x))
    }

    pub fn f32(x: f32) -> ArgValue {
        ArgValue::Scalar(ScalarType::F32, u64::from(x.to_bits()))
    }

    pub fn bool(x: bool) -> ArgValue {
        ArgValue::Scalar(ScalarType::Bool, u64::from(x))
    }

    fn describe(&self) -> String {
        match self {
            ArgValue::Ptr { .. } => "a pointer".into(),
            ArgValue::Scalar(ty, _) => format!("a {ty} scalar"),
            ArgValue::TensorDesc { elem, rank, .. } => {
                format!("a {rank}-d tensor descriptor of {elem}")
            }
        }
    }
}

/// How to run a kernel.
#[derive(Clone, Debug)]
pub struct InterpOptions {
    /// OS threads running programs; 0 means `std::thread::available_parallelism`.
    pub threads: usize,
    /// Report loads (and atomics) of bytes that were never written, and uses
    /// of the unspecified values a masked load without `other` leaves in its
    /// masked-off lanes (stored, used as a pointer, mask, condition, loop
    /// bound, printed or asserted).
    pub check_uninit: bool,
    /// How the tasks inside each program are interleaved.
    pub schedule: Schedule,
    /// Where to record each task's timeline (`TLX_TRACE`), if anywhere.
    pub trace: Option<std::sync::Arc<Trace>>,
}

impl InterpOptions {
    /// Options with the default (round-robin) schedule.
    pub fn new(threads: usize, check_uninit: bool) -> Self {
        InterpOptions {
            threads,
            check_uninit,
            schedule: Schedule::default(),
            trace: None,
        }
    }

    pub fn with_schedule(self, schedule: Schedule) -> Self {
        InterpOptions { schedule, ..self }
    }
}

impl Default for InterpOptions {
    fn default() -> Self {
        InterpOptions::new(0, true)
    }
}

/// Checks `args` against the kernel's parameters and turns them into values.
fn bind_args(kernel: &ir::Kernel, args: &[ArgValue]) -> Result<Vec<Tensor>, InterpError> {
    if args.len() != kernel.params.len() {
        return Err(InterpError::ArgCount {
            kernel: kernel.name.clone(),
            expected: kernel.params.len(),
            got: args.len(),
        });
    }
    kernel
        .params
        .iter()
        .zip(args)
        .enumerate()
        .map(|(index, (param, arg))| bind_arg(kernel, index, param, *arg))
        .collect()
}

/// Checks argument `index` against its parameter and turns it into a value.
fn bind_arg(
    kernel: &ir::Kernel,
    index: usize,
    param: &ir::Param,
    arg: ArgValue,
) -> Result<Tensor, InterpError> {
    let data = match (param.kind, arg) {
        (
            ParamKind::Ptr(pointee),
            ArgValue::Ptr {
                buffer,
                offset_elems,
            },
        ) => Data::Ptr(vec![Ptr {
            buffer,
            byte_offset: offset_elems.wrapping_mul(pointee.size_bytes() as i64),
        }]),
        (
            ParamKind::TensorDesc(block),
            ArgValue::TensorDesc {
                buffer,
                offset_elems,
                elem,
                rank,
                shape,
                strides,
            },
        ) if block.elem() == elem && block.shape().len() == usize::from(rank) => {
            let rank = usize::from(rank);
            Data::Handle(vec![Handle::Desc(GlobalTensor {
                base: Ptr {
                    buffer,
                    byte_offset: offset_elems.wrapping_mul(elem.size_bytes() as i64),
                },
                shape: shape[..rank].to_vec(),
                strides: strides[..rank].to_vec(),
            })])
        }
        (ParamKind::Scalar(expected), ArgValue::Scalar(ty, bits)) if expected == ty => {
            match Repr::of_scalar(ty) {
                Repr::Float => Data::Float(vec![float_from_bits(ty, bits)]),
                Repr::F64 => Data::F64(vec![f64::from_bits(bits)]),
                Repr::Bool => Data::Bool(vec![bits & 1 != 0]),
                Repr::Int => Data::Int(vec![int_from_bits(ty, bits)]),
            }
        }
        _ => {
            let expected = match param.kind {
                ParamKind::Ptr(p) => format!("a pointer to {p}"),
                ParamKind::Scalar(s) => format!("a {s} scalar"),
                ParamKind::TensorDesc(block) => format!(
                    "a {}-d tensor descriptor of {}",
                    block.shape().len(),
                    block.elem()
                ),
            };
            return Err(InterpError::ArgMismatch {
                kernel: kernel.name.clone(),
                index,
                param: param.name.clone(),
                expected,
                got: arg.describe(),
            });
        }
    };
    Ok(Tensor {
        shape: Vec::new(),
        data,
    })
}

/// The program id of the `index`-th program, x fastest.
fn program_at(grid: [u32; 3], index: usize) -> [u32; 3] {
    let [gx, gy, _] = grid.map(|d| d as usize);
    [
        (index % gx) as u32,
        ((index / gx) % gy) as u32,
        (index / (gx * gy)) as u32,
    ]
}

/// The linear index of `program` in `grid`, x fastest.
pub(crate) fn linear_index(grid: [u32; 3], program: [u32; 3]) -> usize {
    let [gx, gy, _] = grid.map(|d| d as usize);
    let [x, y, z] = program.map(|d| d as usize);
    x + gx * (y + gy * z)
}

/// The threads programs run on when `InterpOptions::threads` is 0: one per
/// available core.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Programs run in parallel on `opts.threads` threads. After the first
/// failure no new program starts; the error returned is the one of the
/// lowest-numbered failing program (x fastest), which does not depend on the
/// thread count because programs start in index order and every started
/// program runs to its end or its error. The programs of a cluster
/// (`ctas_per_cga`) run together on one thread, interleaved op by op as the
/// tasks of one schedule, so `cluster_barrier` can block; errors are then
/// ordered by cluster.
pub fn run_kernel(
    kernel: &ir::Kernel,
    grid: [u32; 3],
    args: &[ArgValue],
    mem: &HostMemory,
    opts: &InterpOptions,
) -> Result<(), InterpError> {
    let params = bind_args(kernel, args)?;
    run_programs(kernel, grid, &params, mem, opts, None, None)
}

/// One of several launches [`run_together`] runs.
pub struct Launch<'a> {
    pub kernel: &'a ir::Kernel,
    pub grid: [u32; 3],
    pub args: &'a [ArgValue],
}

/// Runs `launches` as one: every program of every launch in one schedule,
/// as the programs of a kernel that waits on flags are, so a program of
/// one launch may wait (`signal_wait_until`) on a flag a program of
/// another sets: the interpreter's model of kernels in flight at once on
/// several GPUs or streams, such as the ranks of a distributed kernel.
/// Tasks are named after their program and launch. At most 4096 programs
/// in all, and no clusters yet.
pub fn run_together(
    launches: &[Launch<'_>],
    mem: &HostMemory,
    opts: &InterpOptions,
) -> Result<(), InterpError> {
    let Some(first) = launches.first() else {
        return Ok(());
    };
    let count = |grid: [u32; 3]| grid.iter().map(|&d| d as usize).product::<usize>();
    let total: usize = launches.iter().map(|l| count(l.grid)).sum();
    let mut params = Vec::with_capacity(launches.len());
    for launch in launches {
        if launch.grid.contains(&0) {
            return Err(InterpError::EmptyGrid {
                kernel: launch.kernel.name.clone(),
                grid: launch.grid,
            });
        }
        check_cooperative(launch.kernel, total)?;
        let bound = bind_args(launch.kernel, launch.args)?;
        params.push(bound.into_iter().map(Rc::new).collect::<Vec<_>>());
    }
    let mut executors = Vec::with_capacity(total);
    for (index, (launch, params)) in launches.iter().zip(&params).enumerate() {
        for p in 0..count(launch.grid) {
            let mut executor =
                Executor::new(launch.kernel, mem, opts.check_uninit, launch.grid, None);
            executor.start_program(program_at(launch.grid, p), params)?;
            executor.set_member(executors.len());
            executor.name_after_program((launches.len() > 1).then_some(index));
            executors.push(executor);
        }
    }
    let mut shared = ProgramShared {
        cooperative: Some(Default::default()),
        ..ProgramShared::default()
    };
    shared.reset(executors.len());
    let mut tasks: Vec<&mut dyn Task> = executors.iter_mut().map(|e| e as &mut dyn Task).collect();
    let label = ProgramLabel {
        kernel: &first.kernel.name,
        file: &first.kernel.source_file,
        program: [0; 3],
        index: 0,
    };
    run_tasks(&mut tasks, &mut shared, opts.schedule, &label, None, None)
}

/// Runs the synchronization skeleton of `kernel` (the protocol checker's
/// abstract execution): only the ops in `keep` execute, the others and the
/// arguments given as `None` are opaque, no data moves, and barriers,
/// phases, transaction bytes and buffer states follow the same rules as in
/// [`run_kernel`], so both report the same errors for the same protocol.
/// One OS thread; the programs of `grid` run one after another.
/// A run that takes more than `max_steps` task steps stops with
/// [`InterpError::StepBudget`].
pub fn run_skeleton(
    kernel: &ir::Kernel,
    keep: &HashSet<ir::OpId>,
    grid: [u32; 3],
    args: &[Option<ArgValue>],
    schedule: Schedule,
    max_steps: u64,
) -> Result<(), InterpError> {
    let params = bind_skeleton_args(kernel, args)?;
    let opts = skeleton_options(schedule);
    let skeleton = Some((keep, max_steps));
    run_programs(
        kernel,
        grid,
        &params,
        &HostMemory::new(),
        &opts,
        skeleton,
        None,
    )
}

/// The steps of one run [`explore_skeleton`] records and analyses: the
/// analysis keeps a vector clock per step, as wide as the run has actors
/// (tasks and copies).
pub const EXPLORED_STEPS: usize = 20_000;

/// The most programs a kernel that waits on flags may run on the
/// interpreter (all in one schedule).
const MAX_COOPERATIVE_PROGRAMS: usize = 4096;

/// Whether `programs` programs, `kernel`'s among them, can run in one
/// schedule (a cooperative run).
fn check_cooperative(kernel: &ir::Kernel, programs: usize) -> Result<(), InterpError> {
    let reason = if kernel.options.cluster_size() > 1 {
        "clusters (`ctas_per_cga`) are not supported with it yet"
    } else if programs > MAX_COOPERATIVE_PROGRAMS {
        "at most 4096 programs are (a GPU runs fewer at once, and waits on flags need them resident)"
    } else {
        return Ok(());
    };
    Err(InterpError::Cooperative {
        kernel: kernel.name.clone(),
        programs,
        reason,
    })
}

/// How a skeleton run runs: on one thread, no data to check.
fn skeleton_options(schedule: Schedule) -> InterpOptions {
    InterpOptions {
        threads: 1,
        check_uninit: false,
        schedule,
        trace: None,
    }
}

/// How far [`explore_skeleton`] went.
#[derive(Debug)]
pub struct Exploration {
    /// Runs taken (each one interleaving).
    pub runs: usize,
    /// Whether every order of the first program's (or cluster's)
    /// dependent steps was run: no interleaving of it can do otherwise.
    pub complete: bool,
    /// The first run's failure, if one failed.
    pub result: Result<(), InterpError>,
}

/// Runs the skeleton of [`run_skeleton`] under every interleaving of the
/// first program's (or cluster's) tasks and copy landings, up to
/// reordering steps that touch nothing in common (see `explore`), and at
/// most `max_runs` of them; stops at the first failure. The other
/// programs of `grid` run round robin. A run longer than
/// [`EXPLORED_STEPS`] steps (or `max_steps / 4`) is explored only as far
/// as it was recorded, and the exploration is then not complete.
pub fn explore_skeleton(
    kernel: &ir::Kernel,
    keep: &HashSet<ir::OpId>,
    grid: [u32; 3],
    args: &[Option<ArgValue>],
    max_steps: u64,
    max_runs: usize,
) -> Exploration {
    let params = match bind_skeleton_args(kernel, args) {
        Ok(params) => params,
        Err(error) => {
            return Exploration {
                runs: 0,
                complete: false,
                result: Err(error),
            }
        }
    };
    let opts = skeleton_options(Schedule::RoundRobin);
    let recorded = usize::try_from(max_steps / 4)
        .unwrap_or(usize::MAX)
        .min(EXPLORED_STEPS);
    let mut explorer = explore::Explorer::new(recorded);
    while explorer.runs() < max_runs {
        let Some(guide) = explorer.next_run() else {
            break;
        };
        let guide = Mutex::new(guide);
        let skeleton = Some((keep, max_steps));
        let run = run_programs(
            kernel,
            grid,
            &params,
            &HostMemory::new(),
            &opts,
            skeleton,
            Some(&guide),
        );
        explorer.learn(guide.into_inner().unwrap_or_else(|p| p.into_inner()));
        if run.is_err() {
            return Exploration {
                runs: explorer.runs(),
                complete: false,
                result: run,
            };
        }
    }
    Exploration {
        runs: explorer.runs(),
        complete: explorer.complete(),
        result: Ok(()),
    }
}

/// A skeleton run's parameters: `None` arguments are opaque.
fn bind_skeleton_args(
    kernel: &ir::Kernel,
    args: &[Option<ArgValue>],
) -> Result<Vec<Tensor>, InterpError> {
    if args.len() != kernel.params.len() {
        return Err(InterpError::ArgCount {
            kernel: kernel.name.clone(),
            expected: kernel.params.len(),
            got: args.len(),
        });
    }
    kernel
        .params
        .iter()
        .zip(args)
        .enumerate()
        .map(|(index, (param, arg))| match arg {
            Some(arg) => bind_arg(kernel, index, param, *arg),
            None => Ok(Tensor::opaque()),
        })
        .collect()
}

/// `run_kernel` with bound parameters, in a skeleton run or not.
fn run_programs(
    kernel: &ir::Kernel,
    grid: [u32; 3],
    params: &[Tensor],
    mem: &HostMemory,
    opts: &InterpOptions,
    skeleton: Option<(&HashSet<ir::OpId>, u64)>,
    guide: Option<&Mutex<explore::Guide>>,
) -> Result<(), InterpError> {
    let (skeleton, max_steps) = match skeleton {
        Some((keep, steps)) => (Some(keep), Some(steps)),
        None => (None, None),
    };
    if grid.contains(&0) {
        return Err(InterpError::EmptyGrid {
            kernel: kernel.name.clone(),
            grid,
        });
    }
    let cluster = kernel.options.cluster;
    if cluster.contains(&0) || grid.iter().zip(cluster).any(|(g, c)| g % c != 0) {
        return Err(InterpError::ClusterGrid {
            kernel: kernel.name.clone(),
            grid,
            cluster,
        });
    }
    // A kernel whose programs wait on flags other programs set runs them
    // all in one schedule, as the programs of one cluster are: a wait
    // then blocks until the flag is set, whichever program sets it.
    let cooperative = kernel.uses_prim(ir::Prim::SignalWaitUntil);
    if cooperative {
        check_cooperative(kernel, grid.iter().map(|&d| d as usize).product())?;
    }
    let (cluster, cluster_grid) = if cooperative {
        (grid, [1, 1, 1])
    } else {
        (cluster, [0, 1, 2].map(|a| grid[a] / cluster[a]))
    };
    let members = cluster.iter().map(|&d| d as usize).product::<usize>();
    let clusters = cluster_grid.iter().map(|&d| d as usize).product::<usize>();
    let threads = match opts.threads {
        0 => default_threads(),
        n => n,
    }
    .min(clusters);

    // The skeleton's ops as a table by op id, asked once per op executed.
    let keep: Option<Vec<bool>> = skeleton.map(|ops| {
        let mut table = vec![false; ops.iter().map(|op| op.0 as usize + 1).max().unwrap_or(0)];
        for op in ops {
            table[op.0 as usize] = true;
        }
        table
    });
    let pending = PendingClusters::new(cluster_grid, cluster);
    let stop = AtomicBool::new(false);
    let failures: Mutex<Vec<(usize, InterpError)>> = Mutex::new(Vec::new());
    let worker = || {
        let params: Vec<Rc<Tensor>> = params.iter().cloned().map(Rc::new).collect();
        let mut executors: Vec<Executor> = (0..members)
            .map(|_| {
                let executor = Executor::new(kernel, mem, opts.check_uninit, grid, keep.as_deref());
                // A cooperative run starts every program at once: nothing
                // is left for cluster launch control to cancel.
                match cooperative {
                    true => executor,
                    false => executor.with_pending_clusters(&pending),
                }
            })
            .collect();
        let mut shared = ProgramShared {
            steps_left: max_steps,
            cooperative: cooperative.then(Default::default),
            ..ProgramShared::default()
        };
        while !stop.load(Ordering::Relaxed) {
            let Some(index) = pending.take() else {
                break;
            };
            let first = pending.first_program(index);
            let label = ProgramLabel {
                kernel: &kernel.name,
                file: &kernel.source_file,
                program: first,
                index: linear_index(grid, first),
            };
            let run = executors
                .iter_mut()
                .enumerate()
                .try_for_each(|(rank, executor)| {
                    let local = program_at(cluster, rank);
                    let program = [0, 1, 2].map(|a| first[a] + local[a]);
                    executor.start_program(program, &params)?;
                    executor.set_member(rank);
                    if members > 1 {
                        executor.name_after_program(None);
                    }
                    Ok(())
                })
                .and_then(|()| {
                    shared.reset(members);
                    let mut tasks: Vec<&mut dyn Task> =
                        executors.iter_mut().map(|e| e as &mut dyn Task).collect();
                    let mut timeline = opts.trace.as_ref().map(|_| ProgramTimeline::new(first));
                    // An explored schedule covers the first program (or
                    // cluster); the others run round robin.
                    let mut guided = guide
                        .filter(|_| index == 0)
                        .map(|g| g.lock().unwrap_or_else(|p| p.into_inner()));
                    let run = run_tasks(
                        &mut tasks,
                        &mut shared,
                        opts.schedule,
                        &label,
                        timeline.as_mut(),
                        guided.as_deref_mut(),
                    );
                    // A run that failed keeps what it recorded: where a
                    // deadlock began is what its timeline is for.
                    if let (Some(trace), Some(timeline)) = (&opts.trace, timeline) {
                        trace.record(timeline.into_slices());
                    }
                    run
                });
            if let Err(e) = run {
                stop.store(true, Ordering::Relaxed);
                failures
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((index, e));
            }
        }
    };
    if threads <= 1 {
        worker();
    } else {
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(worker);
            }
        });
    }
    let failures = failures.into_inner().unwrap_or_else(|p| p.into_inner());
    match failures.into_iter().min_by_key(|(index, _)| *index) {
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}

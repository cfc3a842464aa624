//! The per-program executor: an explicit environment of values (indexed by
//! `ValueId`) and an explicit stack of frames (block + program counter +
//! what to do when the block yields), so a program is a state machine that
//! the scheduler advances one op at a time (it is a [`Task`]) rather than a
//! Rust call tree. In checked mode it also keeps each value's undefined
//! elements (see `undef`) beside the value and checks the uses that observe them.
//!
//! A skeleton run (the protocol checker's, see `check::protocol`) executes
//! only the ops of the kernel's synchronization skeleton: the others leave
//! an opaque stand-in as their results, and primitives skip the data they
//! would move, keeping every barrier, phase and buffer-state rule.

use std::io::Write;
use std::rc::Rc;

use crate::ir::{Block, Elem, Kernel, Op, OpKind, ScalarType, TaskRegion, Type, ValueId};
use crate::numeric::wrap_int;

use super::error::{Fault, FaultResult, InterpError, Site, TaskCopy};
use super::explore::{Access, Object};
use super::global_race::{Accessor, GlobalAccess};
use super::launch_queue::PendingClusters;
use super::memory::HostMemory;
use super::schedule::{ProgramShared, StepOutcome, Task};
use super::undef::{self, Flags, ALL_DEFINED};
use super::value::{Data, Tensor};
use super::wait::{Wait, WaitReason};
use super::{dot, elementwise as ew, global, reduce, shape};

mod prim;

pub(crate) use prim::PendingMma;

/// A value handed to block args or op results, with its undefined elements.
type Carried = (Rc<Tensor>, Flags);

/// What happens when a frame's block reaches its terminator.
#[derive(Clone, Copy)]
enum Continuation<'k> {
    /// The kernel body: finishing it finishes the program.
    Root,
    ForBody {
        op: &'k Op,
        body: &'k Block,
        iv: i64,
        upper: i64,
        step: i64,
    },
    WhileCond {
        op: &'k Op,
        cond: &'k Block,
        body: &'k Block,
    },
    WhileBody {
        op: &'k Op,
        cond: &'k Block,
        body: &'k Block,
    },
    IfArm {
        op: &'k Op,
    },
}

impl<'k> Continuation<'k> {
    /// The control-flow op whose block this is (none for the kernel body).
    fn owner(&self) -> Option<&'k Op> {
        match *self {
            Continuation::Root => None,
            Continuation::ForBody { op, .. }
            | Continuation::WhileCond { op, .. }
            | Continuation::WhileBody { op, .. }
            | Continuation::IfArm { op } => Some(op),
        }
    }
}

struct Frame<'k> {
    block: &'k Block,
    pc: usize,
    cont: Continuation<'k>,
}

/// Runs programs of one kernel; reused across the programs one OS thread runs.
pub(crate) struct Executor<'k> {
    kernel: &'k Kernel,
    mem: &'k HostMemory,
    check_uninit: bool,
    env: Vec<Option<Rc<Tensor>>>,
    /// Undefined elements per value, beside `env`; all `None` unless `check_uninit`.
    flags: Vec<Flags>,
    frames: Vec<Frame<'k>>,
    /// Which task of which program this executor runs.
    task: TaskIdentity,
    /// This task's asynchronous work not yet waited for.
    in_flight: TaskInFlight,
    /// In a skeleton run, whether to execute each op (by its id); `None`
    /// in a normal run. Dense: it is asked once per op executed.
    skeleton: Option<&'k [bool]>,
    /// Ops this task has executed: its `clock64()`.
    ops_run: u64,
    /// The launch's clusters not yet started, which `clc_try_cancel`
    /// takes; `None` where every program runs at once.
    pending: Option<&'k PendingClusters>,
}

/// Which task an executor runs, and where.
struct TaskIdentity {
    grid: [u32; 3],
    program: [u32; 3],
    /// The task's name in deadlock reports.
    name: String,
    /// What the names of the program's tasks end with when programs run
    /// together (a cluster's, a cooperative run's): which program, and of
    /// which launch when several run together.
    program_suffix: Option<String>,
    /// The replica of the task of `async_tasks` this executor runs (0 outside one).
    replica: u32,
    /// The program's place among the programs scheduled together: its
    /// rank in its cluster, or in a cooperative run its index among every
    /// program of every launch (named barriers are per program).
    member: usize,
    /// The GPU threads the task stands for (named barriers count them).
    threads: u32,
}

/// A task's asynchronous operations in flight.
#[derive(Default)]
struct TaskInFlight {
    /// Shared buffers this task's `async_load`s are filling: the open group,
    /// then the committed groups not yet waited for, oldest first.
    async_loads: prim::AsyncLoads,
    /// The shared buffers each `async_dot` group of this task reads, oldest
    /// first, until an `async_dot_wait` retires it.
    wgmma_groups: std::collections::VecDeque<Vec<usize>>,
    /// The source buffer and line of each TMA store of this task still
    /// reading it, oldest first, until an `async_descriptor_store_wait`
    /// retires it.
    tma_stores: std::collections::VecDeque<(usize, u32)>,
    /// Barriers the `mbarriers` of this task's tensor-memory MMAs arrived on
    /// since its last `tcgen05_commit`.
    mma_signalled: Vec<usize>,
    /// The tensor-memory accumulators this task's MMAs have written.
    mma_accs: Vec<usize>,
    /// The operands (shared or tensor-memory buffers) of this task's
    /// `tcgen05` MMAs and copies, each with the barrier phases that signal
    /// their completion and the issuing line: the task itself may write one
    /// again only after waiting on one of those phases (other tasks are
    /// ordered by the clocks).
    mma_operands: Vec<MmaOperand>,
}

/// A buffer one of a task's `tcgen05` MMAs reads, until the task waits on
/// one of `completions` (barrier, phase); `line` issued it.
pub(super) struct MmaOperand {
    pub(super) buffer: usize,
    pub(super) completions: Vec<(usize, u32)>,
    pub(super) line: u32,
}

fn format_elements(data: &Data) -> String {
    fn join<T>(v: &[T], f: impl Fn(&T) -> String) -> String {
        v.iter().map(f).collect::<Vec<_>>().join(", ")
    }
    let inner = match data {
        Data::Bool(v) => join(v, |x| x.to_string()),
        Data::Int(v) => join(v, |x| x.to_string()),
        Data::Float(v) => join(v, |x| x.to_string()),
        Data::F64(v) => join(v, |x| x.to_string()),
        Data::Ptr(v) => join(v, |p| format!("{}+{}", p.buffer, p.byte_offset)),
        Data::Handle(v) => join(v, |h| format!("{h:?}")),
    };
    if data.len() == 1 {
        inner
    } else {
        format!("[{inner}]")
    }
}

impl<'k> Executor<'k> {
    pub(crate) fn new(
        kernel: &'k Kernel,
        mem: &'k HostMemory,
        check_uninit: bool,
        grid: [u32; 3],
        skeleton: Option<&'k [bool]>,
    ) -> Self {
        Executor {
            kernel,
            mem,
            check_uninit,
            env: vec![None; kernel.types.len()],
            flags: vec![None; kernel.types.len()],
            frames: Vec::new(),
            task: TaskIdentity {
                grid,
                program: [0; 3],
                name: "default".to_owned(),
                program_suffix: None,
                replica: 0,
                member: 0,
                threads: kernel.options.num_warps * 32,
            },
            in_flight: TaskInFlight::default(),
            skeleton,
            ops_run: 0,
            pending: None,
        }
    }

    /// The same, in a launch whose programs start as OS threads free up,
    /// so cluster launch control can cancel those not started.
    pub(crate) fn with_pending_clusters(self, pending: &'k PendingClusters) -> Self {
        Executor {
            pending: Some(pending),
            ..self
        }
    }

    /// One executor per replica of each task of `async_tasks`, each starting
    /// at its task's body with the values defined so far.
    fn fork(&self, tasks: &'k [TaskRegion]) -> Vec<Box<dyn Task<'k> + 'k>> {
        let mut children: Vec<Box<dyn Task<'k> + 'k>> = Vec::new();
        for (index, task) in tasks.iter().enumerate() {
            for replica in 0..task.replicate {
                let mut name = if task.default {
                    "default task".to_owned()
                } else {
                    format!("task {index}")
                };
                if task.replicate > 1 {
                    name += &format!(" replica {replica}");
                }
                if let Some(suffix) = &self.task.program_suffix {
                    name += suffix;
                }
                children.push(Box::new(Executor {
                    kernel: self.kernel,
                    mem: self.mem,
                    check_uninit: self.check_uninit,
                    env: self.env.clone(),
                    flags: self.flags.clone(),
                    frames: vec![Frame {
                        block: &task.body,
                        pc: 0,
                        cont: Continuation::Root,
                    }],
                    task: TaskIdentity {
                        grid: self.task.grid,
                        program: self.task.program,
                        name,
                        program_suffix: self.task.program_suffix.clone(),
                        replica,
                        member: self.task.member,
                        threads: task.num_warps.unwrap_or(self.kernel.options.num_warps) * 32,
                    },
                    in_flight: TaskInFlight::default(),
                    skeleton: self.skeleton,
                    ops_run: self.ops_run,
                    pending: self.pending,
                }));
            }
        }
        children
    }

    /// Names the task after its program, for clusters, whose programs are
    /// scheduled together (and after its launch, when several run
    /// together).
    pub(crate) fn name_after_program(&mut self, launch: Option<usize>) {
        let [x, y, z] = self.task.program;
        let suffix = match launch {
            Some(l) => format!(" of program ({x}, {y}, {z}) of rank {l}"),
            None => format!(" of program ({x}, {y}, {z})"),
        };
        self.task.name = format!("default{suffix}");
        self.task.program_suffix = Some(suffix);
    }

    /// The program's place among the programs scheduled together.
    pub(crate) fn set_member(&mut self, member: usize) {
        self.task.member = member;
    }

    fn site(&self, op: Option<&Op>) -> Site {
        Site {
            kernel: self.kernel.name.clone(),
            file: self.kernel.source_file.as_str().into(),
            program: self.task.program,
            op: op.map_or("kernel", |o| o.kind.code().source_name()),
            line: op.map_or(0, |o| o.loc.line),
            buffers: self.parameter_buffers().into(),
        }
    }

    /// Each pointer parameter's buffer, by the parameter's name.
    fn parameter_buffers(&self) -> Vec<(super::memory::BufferId, String)> {
        self.kernel
            .params
            .iter()
            .filter_map(|param| {
                let value = self.env.get(param.value.index())?.as_ref()?;
                match &value.data {
                    Data::Ptr(ptrs) => Some((ptrs.first()?.buffer, param.name.clone())),
                    _ => None,
                }
            })
            .collect()
    }

    /// Resets the executor to the start of `program`; `params` are the
    /// parameter values, in order. The scheduler then steps it.
    pub(crate) fn start_program(
        &mut self,
        program: [u32; 3],
        params: &[Rc<Tensor>],
    ) -> Result<(), InterpError> {
        self.start(program, params)
            .map_err(|fault| fault.at(self.site(None)))
    }

    /// Resets the state for `program` and binds the parameters.
    fn start(&mut self, program: [u32; 3], params: &[Rc<Tensor>]) -> FaultResult<()> {
        self.task.program = program;
        self.env.iter_mut().for_each(|slot| *slot = None);
        self.flags.iter_mut().for_each(|slot| *slot = None);
        self.frames.clear();
        self.in_flight.async_loads = prim::AsyncLoads::default();
        self.in_flight.wgmma_groups.clear();
        self.in_flight.tma_stores.clear();
        self.in_flight.mma_signalled.clear();
        self.in_flight.mma_accs.clear();
        for (param, value) in self.kernel.params.iter().zip(params) {
            self.set(param.value, Rc::clone(value))?;
        }
        self.frames.push(Frame {
            block: &self.kernel.body,
            pc: 0,
            cont: Continuation::Root,
        });
        Ok(())
    }

    /// The op the next step executes, if it is not a block's end.
    fn next_op(&self) -> Option<&'k Op> {
        let frame = self.frames.last()?;
        frame.block.ops.get(frame.pc)
    }

    /// Executes the next op of the innermost frame.
    fn step_op(&mut self) -> Result<StepOutcome<'k>, InterpError> {
        let Some(frame) = self.frames.last_mut() else {
            return Ok(StepOutcome::Finished);
        };
        let block = frame.block;
        let Some(op) = block.ops.get(frame.pc) else {
            let cont = frame.cont;
            self.frames.pop();
            return match cont.owner() {
                None => Ok(StepOutcome::Finished),
                Some(owner) => Err(Fault::malformed("nested block without a terminator")
                    .at(self.site(Some(owner)))),
            };
        };
        frame.pc += 1;
        self.execute(op)
            .map_err(|fault| fault.at(self.site(Some(op))))?;
        Ok(if self.frames.is_empty() {
            StepOutcome::Finished
        } else {
            StepOutcome::Ran
        })
    }

    /// The value of `v`; in a skeleton run, a value the run did not compute
    /// is `Fault::Undecidable`.
    fn get(&self, v: ValueId) -> FaultResult<&Rc<Tensor>> {
        let value = self.get_any(v)?;
        if self.skeleton.is_some() && value.is_opaque() {
            return Err(Fault::Undecidable { value: v });
        }
        Ok(value)
    }

    /// The value of `v`, opaque or not (values passed along unread).
    fn get_any(&self, v: ValueId) -> FaultResult<&Rc<Tensor>> {
        self.env
            .get(v.index())
            .and_then(Option::as_ref)
            .ok_or_else(|| Fault::malformed(format!("{v} used before it is defined")))
    }

    /// Gives every result of `op` the skeleton run's opaque stand-in.
    fn define_opaque(&mut self, op: &Op) -> FaultResult<()> {
        let opaque = Rc::new(Tensor::opaque());
        op.results
            .iter()
            .try_for_each(|&r| self.set(r, Rc::clone(&opaque)))
    }

    fn set(&mut self, v: ValueId, value: Rc<Tensor>) -> FaultResult<()> {
        let slot = self
            .env
            .get_mut(v.index())
            .ok_or_else(|| Fault::malformed(format!("{v} has no type")))?;
        *slot = Some(value);
        Ok(())
    }

    fn flags_of(&self, v: ValueId) -> &Flags {
        self.flags.get(v.index()).unwrap_or(ALL_DEFINED)
    }

    fn set_flags(&mut self, v: ValueId, flags: Flags) {
        if let Some(slot) = self.flags.get_mut(v.index()) {
            *slot = flags;
        }
    }

    fn type_of(&self, v: ValueId) -> FaultResult<&'k Type> {
        self.kernel
            .types
            .get(v.index())
            .ok_or_else(|| Fault::malformed(format!("{v} has no type")))
    }

    fn scalar_type(&self, v: ValueId) -> FaultResult<ScalarType> {
        self.type_of(v)?
            .elem()
            .scalar()
            .ok_or_else(|| Fault::malformed(format!("{v} is a pointer where a number is expected")))
    }

    fn pointee(&self, v: ValueId) -> FaultResult<ScalarType> {
        self.type_of(v)?
            .elem()
            .pointee()
            .ok_or_else(|| Fault::malformed(format!("{v} is not a pointer")))
    }

    fn result(op: &Op, i: usize) -> FaultResult<ValueId> {
        op.results
            .get(i)
            .copied()
            .ok_or_else(|| Fault::malformed("op lacks a result"))
    }

    /// Defines result `i` of `op` from `data`, shaped by the result's type.
    fn define(&mut self, op: &Op, i: usize, data: Data) -> FaultResult<()> {
        let id = Self::result(op, i)?;
        let shape = self.type_of(id)?.shape().to_vec();
        self.set(id, Rc::new(Tensor::new(shape, data)?))
    }

    fn values(&self, ids: &[ValueId]) -> FaultResult<Vec<Carried>> {
        ids.iter()
            .map(|&v| Ok((self.get_any(v)?.clone(), self.flags_of(v).clone())))
            .collect()
    }

    fn bind_all(&mut self, ids: &[ValueId], values: Vec<Carried>) -> FaultResult<()> {
        if ids.len() != values.len() {
            return Err(Fault::malformed(format!(
                "{} values for {} slots",
                values.len(),
                ids.len()
            )));
        }
        for (&id, (value, flags)) in ids.iter().zip(values) {
            self.set(id, value)?;
            self.set_flags(id, flags);
        }
        Ok(())
    }

    fn mask(&self, mask: Option<ValueId>) -> FaultResult<Option<Rc<Tensor>>> {
        mask.map(|m| self.get(m).cloned()).transpose()
    }

    /// A loop counter of the induction variable's type.
    fn counter(&self, body: &Block, iv: i64) -> FaultResult<Carried> {
        let iv_arg = body
            .args
            .first()
            .ok_or_else(|| Fault::malformed("for body without an induction variable"))?;
        let ty = self.scalar_type(*iv_arg)?;
        let tensor = Tensor::new(vec![], Data::Int(vec![wrap_int(ty, iv)]))?;
        Ok((Rc::new(tensor), None))
    }

    fn enter_for_body(
        &mut self,
        op: &'k Op,
        body: &'k Block,
        iv: i64,
        upper: i64,
        step: i64,
        carried: Vec<Carried>,
    ) -> FaultResult<()> {
        let mut args = Vec::with_capacity(carried.len() + 1);
        args.push(self.counter(body, iv)?);
        args.extend(carried);
        self.bind_all(&body.args, args)?;
        self.frames.push(Frame {
            block: body,
            pc: 0,
            cont: Continuation::ForBody {
                op,
                body,
                iv,
                upper,
                step,
            },
        });
        Ok(())
    }

    fn enter(&mut self, block: &'k Block, cont: Continuation<'k>) {
        self.frames.push(Frame { block, pc: 0, cont });
    }

    /// The innermost frame ends with `Yield(values)`.
    fn finish_block(&mut self, yielded: Vec<Carried>) -> FaultResult<()> {
        let Some(frame) = self.frames.pop() else {
            return Err(Fault::malformed("yield outside a block"));
        };
        match frame.cont {
            Continuation::Root => Err(Fault::malformed("yield in the kernel body")),
            Continuation::ForBody {
                op,
                body,
                iv,
                upper,
                step,
            } => match iv.checked_add(step) {
                Some(next) if next < upper => {
                    self.enter_for_body(op, body, next, upper, step, yielded)
                }
                _ => self.bind_all(&op.results, yielded),
            },
            Continuation::WhileBody { op, cond, body } => {
                self.bind_all(&cond.args, yielded)?;
                self.enter(cond, Continuation::WhileCond { op, cond, body });
                Ok(())
            }
            Continuation::IfArm { op } => self.bind_all(&op.results, yielded),
            Continuation::WhileCond { .. } => Err(Fault::malformed("yield ends a while condition")),
        }
    }

    /// The innermost frame (a while condition) ends with `Condition(go_on)`.
    fn finish_condition(&mut self, go_on: bool) -> FaultResult<()> {
        let Some(Frame {
            cont: Continuation::WhileCond { op, cond, body },
            ..
        }) = self.frames.pop()
        else {
            return Err(Fault::malformed("condition outside a while condition"));
        };
        let carried = self.values(&cond.args)?;
        if go_on {
            self.bind_all(&body.args, carried)?;
            self.enter(body, Continuation::WhileBody { op, cond, body });
            Ok(())
        } else {
            self.bind_all(&op.results, carried)
        }
    }

    fn execute(&mut self, op: &'k Op) -> FaultResult<()> {
        self.ops_run += 1;
        if let Some(keep) = self.skeleton {
            let terminator = matches!(op.kind, OpKind::Yield(_) | OpKind::Condition(_));
            if !terminator && !keep.get(op.id.0 as usize).copied().unwrap_or(false) {
                return self.define_opaque(op);
            }
        }
        if self.check_uninit {
            self.check_uses(op)?;
        }
        match &op.kind {
            OpKind::For {
                lower,
                upper,
                step,
                inits,
                body,
            } => {
                let lower = self.get(*lower)?.scalar_int()?;
                let upper = self.get(*upper)?.scalar_int()?;
                let step = self.get(*step)?.scalar_int()?;
                if step <= 0 {
                    return Err(Fault::NonPositiveStep { step });
                }
                let carried = self.values(inits)?;
                if lower < upper {
                    self.enter_for_body(op, body, lower, upper, step, carried)
                } else {
                    self.bind_all(&op.results, carried)
                }
            }
            OpKind::While { inits, cond, body } => {
                let carried = self.values(inits)?;
                self.bind_all(&cond.args, carried)?;
                self.enter(cond, Continuation::WhileCond { op, cond, body });
                Ok(())
            }
            OpKind::If {
                cond,
                then_block,
                else_block,
            } => {
                let arm = if self.get(*cond)?.scalar_bool()? {
                    then_block
                } else {
                    else_block
                };
                self.enter(arm, Continuation::IfArm { op });
                Ok(())
            }
            OpKind::Yield(values) => {
                let yielded = self.values(values)?;
                self.finish_block(yielded)
            }
            OpKind::Condition(v) => {
                let go_on = self.get(*v)?.scalar_bool()?;
                self.finish_condition(go_on)
            }
            _ => {
                self.execute_straight(op)?;
                if self.check_uninit {
                    self.flag_results(op)?;
                }
                Ok(())
            }
        }
    }

    /// Ops without nested blocks.
    fn execute_straight(&mut self, op: &Op) -> FaultResult<()> {
        let data = match &op.kind {
            OpKind::Constant(lit) => {
                let ty = self.type_of(Self::result(op, 0)?)?;
                ew::constant(*lit, ty.elem(), ty.numel())?
            }
            OpKind::ProgramId { axis } | OpKind::NumPrograms { axis } => {
                let source = if matches!(op.kind, OpKind::ProgramId { .. }) {
                    self.task.program
                } else {
                    self.task.grid
                };
                let v = source
                    .get(usize::from(*axis))
                    .ok_or_else(|| Fault::malformed(format!("axis {axis} of a 3-d grid")))?;
                Data::Int(vec![i64::from(*v)])
            }
            // The checker's sampled sizes need not keep the kernel's promises.
            OpKind::MultipleOf { value, .. } if self.skeleton.is_some() => {
                self.get(*value)?.data.clone()
            }
            OpKind::MultipleOf { value, factor } => {
                let v = self.get(*value)?;
                let k = i64::from(*factor);
                // A pointer's buffer starts aligned (as the GPU's allocations
                // do, to 256 bytes), so its offset decides.
                let broken = match &v.data {
                    Data::Ptr(ptrs) => ptrs
                        .iter()
                        .find(|p| k > 256 || p.byte_offset.rem_euclid(k) != 0)
                        .map(|p| format!("a pointer {} bytes into its buffer", p.byte_offset)),
                    _ => v
                        .ints()?
                        .iter()
                        .find(|i| i.rem_euclid(k) != 0)
                        .map(i64::to_string),
                };
                if let Some(value) = broken {
                    return Err(Fault::NotAMultiple {
                        value,
                        factor: *factor,
                    });
                }
                v.data.clone()
            }
            OpKind::AsyncTaskReplicaId => Data::Int(vec![i64::from(self.task.replica)]),
            OpKind::ClusterCtaRank => {
                let cluster = self.kernel.options.cluster.map(|d| d.max(1));
                let local = [0, 1, 2].map(|a| self.task.program[a] % cluster[a]);
                Data::Int(vec![super::linear_index(cluster, local) as i64])
            }
            OpKind::Arange { start, end } => {
                let ty = self.scalar_type(Self::result(op, 0)?)?;
                Data::Int((*start..*end).map(|i| wrap_int(ty, i)).collect())
            }
            OpKind::Splat(v) => {
                let ty = self.type_of(Self::result(op, 0)?)?;
                shape::splat(self.get(*v)?, ty.shape())?
            }
            OpKind::Broadcast(v) => {
                let ty = self.type_of(Self::result(op, 0)?)?;
                shape::broadcast(self.get(*v)?, ty.shape())?
            }
            OpKind::ExpandDims { value: v, .. } | OpKind::Reshape(v) => {
                let ty = self.type_of(Self::result(op, 0)?)?;
                shape::reshape(self.get(*v)?, ty.shape())?
            }
            OpKind::Trans { value, perm } => shape::trans(self.get(*value)?, perm)?,
            OpKind::Cast(v) => {
                let to: Elem = self.type_of(Self::result(op, 0)?)?.elem();
                ew::cast(self.type_of(*v)?.elem(), to, &self.get(*v)?.data)?
            }
            OpKind::Bitcast(v) => {
                let to = self.scalar_type(Self::result(op, 0)?)?;
                ew::bitcast(self.scalar_type(*v)?, to, &self.get(*v)?.data)?
            }
            OpKind::Binary { op: bin, lhs, rhs } => ew::binary(
                *bin,
                self.scalar_type(*lhs)?,
                &self.get(*lhs)?.data,
                &self.get(*rhs)?.data,
            )?,
            OpKind::Unary { op: un, value } => {
                ew::unary(*un, self.scalar_type(*value)?, &self.get(*value)?.data)?
            }
            OpKind::Compare { pred, lhs, rhs } => {
                ew::compare(*pred, &self.get(*lhs)?.data, &self.get(*rhs)?.data)?
            }
            OpKind::Select {
                cond,
                on_true,
                on_false,
            } => ew::select(
                self.get(*cond)?.bools()?,
                &self.get(*on_true)?.data,
                &self.get(*on_false)?.data,
            )?,
            OpKind::Fma { a, b, c } => ew::fma(
                self.scalar_type(*a)?,
                &self.get(*a)?.data,
                &self.get(*b)?.data,
                &self.get(*c)?.data,
            )?,
            OpKind::AddPtr { ptr, offset } => global::add_ptr(
                self.get(*ptr)?.ptrs()?,
                self.get(*offset)?.ints()?,
                self.pointee(*ptr)?,
            )?,
            OpKind::Load {
                ptr, mask, other, ..
            } => {
                let mask = self.mask(*mask)?;
                let other = other.map(|o| self.get(o).cloned()).transpose()?;
                global::load(
                    self.mem,
                    self.check_uninit,
                    self.pointee(*ptr)?,
                    self.get(*ptr)?.ptrs()?,
                    mask.as_deref().map(Tensor::bools).transpose()?,
                    other.as_deref().map(|o| &o.data),
                )?
            }
            OpKind::Store {
                ptr, value, mask, ..
            } => {
                let mask = self.mask(*mask)?;
                return global::store(
                    self.mem,
                    self.pointee(*ptr)?,
                    self.get(*ptr)?.ptrs()?,
                    &self.get(*value)?.data,
                    mask.as_deref().map(Tensor::bools).transpose()?,
                );
            }
            OpKind::Reduce { value, axis, kind } => {
                reduce::reduce(self.get(*value)?, self.scalar_type(*value)?, *axis, *kind)?
            }
            OpKind::Scan {
                value,
                axis,
                reverse,
                combine,
            } => {
                let (prefix, total) = reduce::scan_exclusive(
                    self.get(*value)?,
                    self.scalar_type(*value)?,
                    *axis,
                    *reverse,
                    *combine,
                )?;
                self.define(op, 1, total)?;
                prefix
            }
            OpKind::Dot {
                a,
                b,
                acc,
                precision,
            } => dot::dot(
                self.get(*a)?,
                self.get(*b)?,
                self.get(*acc)?,
                self.scalar_type(*a)?,
                self.scalar_type(*acc)?,
                *precision,
            )?,
            OpKind::AtomicRmw {
                op: rmw,
                ptr,
                value,
                mask,
                ..
            } => {
                let mask = self.mask(*mask)?;
                global::atomic_rmw(
                    self.mem,
                    self.check_uninit,
                    *rmw,
                    self.pointee(*ptr)?,
                    self.get(*ptr)?.ptrs()?,
                    &self.get(*value)?.data,
                    mask.as_deref().map(Tensor::bools).transpose()?,
                )?
            }
            OpKind::AtomicCas {
                ptr, cmp, value, ..
            } => global::atomic_cas(
                self.mem,
                self.check_uninit,
                self.pointee(*ptr)?,
                self.get(*ptr)?.ptrs()?,
                &self.get(*cmp)?.data,
                &self.get(*value)?.data,
            )?,
            OpKind::Join { a, b } => shape::join(&self.get(*a)?.data, &self.get(*b)?.data)?,
            OpKind::Split(value) => {
                let second = shape::split_half(self.get(*value)?, 1)?;
                self.define(op, 1, second)?;
                shape::split_half(self.get(*value)?, 0)?
            }
            OpKind::ExtractTile { value, index } => {
                let ty = self.type_of(Self::result(op, 0)?)?;
                shape::extract_tile(self.get(*value)?, ty.shape(), index)?
            }
            OpKind::InsertTile { value, tile, index } => {
                shape::insert_tile(self.get(*value)?, self.get(*tile)?, index)?
            }
            OpKind::Print { prefix, values } => return self.print(op, prefix, values),
            // The task's `step` passes the barrier; here it only has to be reached.
            OpKind::ClusterBarrier => return Ok(()),
            OpKind::Assert { cond, message } => {
                return match self.get(*cond)?.bools()?.iter().position(|&ok| !ok) {
                    Some(element) => Err(Fault::AssertFailed {
                        message: message.clone(),
                        element,
                    }),
                    None => Ok(()),
                };
            }
            OpKind::For { .. }
            | OpKind::While { .. }
            | OpKind::If { .. }
            | OpKind::AsyncTasks { .. }
            | OpKind::Prim { .. }
            | OpKind::Yield(_)
            | OpKind::Condition(_) => {
                return Err(Fault::malformed(
                    "control flow or a primitive reached the straight-line evaluator",
                ));
            }
        };
        self.define(op, 0, data)
    }

    /// Checked mode: fails if `op` observes an undefined element (see `undef`).
    fn check_uses(&self, op: &Op) -> FaultResult<()> {
        match &op.kind {
            OpKind::For {
                lower, upper, step, ..
            } => [*lower, *upper, *step]
                .into_iter()
                .try_for_each(|v| self.check_all(v, "loop bound")),
            OpKind::If { cond, .. } => self.check_all(*cond, "branch condition"),
            OpKind::Condition(v) => self.check_all(*v, "loop condition"),
            OpKind::Load { ptr, mask, .. } => self.check_access(*ptr, *mask, &[]),
            OpKind::Store {
                ptr, value, mask, ..
            } => self.check_access(*ptr, *mask, &[(*value, "stored value")]),
            OpKind::AtomicRmw {
                ptr, value, mask, ..
            } => self.check_access(*ptr, *mask, &[(*value, "atomic operand")]),
            OpKind::AtomicCas {
                ptr, cmp, value, ..
            } => self.check_access(
                *ptr,
                None,
                &[(*cmp, "atomic comparand"), (*value, "atomic operand")],
            ),
            OpKind::Print { values, .. } => values
                .iter()
                .try_for_each(|&v| self.check_all(v, "printed value")),
            OpKind::Assert { cond, .. } => self.check_all(*cond, "asserted condition"),
            _ => Ok(()),
        }
    }

    /// Fails on any undefined element of `v`.
    fn check_all(&self, v: ValueId, what: &'static str) -> FaultResult<()> {
        let numel = self.get(v)?.numel();
        undef::check_active(self.flags_of(v), numel, None, what)
    }

    /// A memory access: every mask lane must be defined (it decides whether
    /// the lane touches memory), and the pointer and `operands` in the lanes it enables.
    fn check_access(
        &self,
        ptr: ValueId,
        mask: Option<ValueId>,
        operands: &[(ValueId, &'static str)],
    ) -> FaultResult<()> {
        let numel = self.get(ptr)?.numel();
        let mask = match mask {
            Some(m) => {
                self.check_all(m, "mask")?;
                Some(self.get(m)?.bools()?)
            }
            None => None,
        };
        undef::check_active(self.flags_of(ptr), numel, mask, "pointer")?;
        operands
            .iter()
            .try_for_each(|&(v, what)| undef::check_active(self.flags_of(v), numel, mask, what))
    }

    /// Checked mode: the undefined elements of the results of a straight-line
    /// op that has just run, from its operands'.
    fn flag_results(&mut self, op: &Op) -> FaultResult<()> {
        let Some(&first) = op.results.first() else {
            return Ok(());
        };
        let shape_of = |v: ValueId| -> FaultResult<&[usize]> { Ok(&self.get(v)?.shape) };
        let result_shape = shape_of(first)?;
        let numel: usize = result_shape.iter().product();
        let flags = match &op.kind {
            OpKind::Constant(_)
            | OpKind::ProgramId { .. }
            | OpKind::NumPrograms { .. }
            | OpKind::ClusterCtaRank
            | OpKind::AsyncTaskReplicaId
            | OpKind::Arange { .. }
            // Shared memory starts poisoned rather than flagged.
            | OpKind::Prim { .. }
            // Atomics' old values come from memory; only loads make undefined lanes.
            | OpKind::AtomicRmw { .. }
            | OpKind::AtomicCas { .. } => None,
            OpKind::MultipleOf { value, .. } => self.flags_of(*value).clone(),
            OpKind::Splat(v) => undef::moved(self.flags_of(*v), shape_of(*v)?, |t| {
                shape::splat(t, result_shape)
            })?,
            OpKind::Broadcast(v) => undef::moved(self.flags_of(*v), shape_of(*v)?, |t| {
                shape::broadcast(t, result_shape)
            })?,
            OpKind::Trans { value, perm } => {
                undef::moved(self.flags_of(*value), shape_of(*value)?, |t| {
                    shape::trans(t, perm)
                })?
            }
            OpKind::Join { a, b } => undef::joined(self.flags_of(*a), self.flags_of(*b), numel)?,
            OpKind::Split(value) => {
                let flags = self.flags_of(*value);
                let halves = [0, 1].map(|which| {
                    undef::moved(flags, shape_of(*value)?, |t| shape::split_half(t, which))
                });
                let [first, second] = halves;
                let first = first?;
                self.set_flags(Self::result(op, 1)?, second?);
                first
            }
            OpKind::ExtractTile { value, index } => {
                undef::moved(self.flags_of(*value), shape_of(*value)?, |t| {
                    shape::extract_tile(t, result_shape, index)
                })?
            }
            OpKind::InsertTile { value, tile, index } => undef::inserted(
                (self.flags_of(*value), shape_of(*value)?),
                (self.flags_of(*tile), shape_of(*tile)?),
                index,
            )?,
            // Same elements in the same order.
            OpKind::ExpandDims { value: v, .. }
            | OpKind::Reshape(v)
            | OpKind::Cast(v)
            | OpKind::Bitcast(v)
            | OpKind::Unary { value: v, .. } => self.flags_of(*v).clone(),
            OpKind::Binary { op: bin, lhs, rhs } => undef::binary(
                *bin,
                (&self.get(*lhs)?.data, self.flags_of(*lhs)),
                (&self.get(*rhs)?.data, self.flags_of(*rhs)),
                numel,
            ),
            OpKind::Compare { lhs, rhs, .. } => {
                undef::elementwise(&[self.flags_of(*lhs), self.flags_of(*rhs)], numel)
            }
            OpKind::Fma { a, b, c } => undef::elementwise(
                &[self.flags_of(*a), self.flags_of(*b), self.flags_of(*c)],
                numel,
            ),
            OpKind::AddPtr { ptr, offset } => {
                undef::elementwise(&[self.flags_of(*ptr), self.flags_of(*offset)], numel)
            }
            OpKind::Select {
                cond,
                on_true,
                on_false,
            } => undef::select(
                (self.get(*cond)?.bools()?, self.flags_of(*cond)),
                self.flags_of(*on_true),
                self.flags_of(*on_false),
                numel,
            ),
            OpKind::Load { mask, other, .. } => {
                let mask = self.mask(*mask)?;
                undef::loaded(
                    numel,
                    mask.as_deref().map(Tensor::bools).transpose()?,
                    other.map(|o| self.flags_of(o)),
                    op.loc.line,
                )
            }
            OpKind::Reduce { value, axis, .. } => {
                undef::reduced(self.flags_of(*value), shape_of(*value)?, *axis)?
            }
            OpKind::Scan {
                value,
                axis,
                reverse,
                ..
            } => {
                let (prefix, total) =
                    undef::scanned(self.flags_of(*value), shape_of(*value)?, *axis, *reverse)?;
                self.set_flags(Self::result(op, 1)?, total);
                prefix
            }
            OpKind::Dot { a, b, acc, .. } => undef::dot(
                (self.flags_of(*a), shape_of(*a)?),
                (self.flags_of(*b), shape_of(*b)?),
                self.flags_of(*acc),
            )?,
            OpKind::Store { .. }
            | OpKind::Print { .. }
            | OpKind::Assert { .. }
            | OpKind::ClusterBarrier
            | OpKind::For { .. }
            | OpKind::While { .. }
            | OpKind::If { .. }
            | OpKind::AsyncTasks { .. }
            | OpKind::Yield(_)
            | OpKind::Condition(_) => {
                return Err(Fault::malformed(format!(
                    "`{}` has results the interpreter does not define",
                    op.kind.code().source_name()
                )));
            }
        };
        self.set_flags(first, flags);
        Ok(())
    }

    /// In a cooperative run, checks `op`'s global accesses against the
    /// other tasks' (see `global_race`) and records them; an atomic's
    /// acquire takes in what releases at its elements published, and its
    /// release publishes what this task has seen.
    fn track_global(&self, op: &Op, task: usize, shared: &mut ProgramShared) -> FaultResult<()> {
        let (ptr, mask, access) = match &op.kind {
            OpKind::Load { ptr, mask, .. } => (*ptr, *mask, GlobalAccess::Read),
            OpKind::Store { ptr, mask, .. } => (*ptr, *mask, GlobalAccess::Write),
            OpKind::AtomicRmw { ptr, mask, sem, .. } => (*ptr, *mask, GlobalAccess::Atomic(*sem)),
            OpKind::AtomicCas { ptr, sem, .. } => (*ptr, None, GlobalAccess::Atomic(*sem)),
            _ => return Ok(()),
        };
        let mask = self.mask(mask)?;
        let mask = mask.as_deref().map(Tensor::bools).transpose()?;
        let ptrs = self.get(ptr)?.ptrs()?;
        let Some(accesses) = shared.cooperative.as_mut() else {
            return Ok(());
        };
        let who = Accessor {
            task,
            name: &self.task.name,
            line: op.loc.line,
        };
        accesses
            .access(&mut shared.clocks, &who, access, ptrs, mask)
            .map_err(|race| Fault::GlobalRace(Box::new(race)))
    }

    fn print(&self, op: &Op, prefix: &str, values: &[ValueId]) -> FaultResult<()> {
        let data = values
            .iter()
            .map(|&v| Ok(&self.get(v)?.data))
            .collect::<FaultResult<Vec<&Data>>>()?;
        let line = print_line(self.task.program, op.loc.line, prefix, &data);
        // One write per line so lines of concurrent programs do not interleave.
        let _ = std::io::stdout().lock().write_all(line.as_bytes());
        Ok(())
    }
}

/// The kernel body, or a task of `async_tasks`, as a task. It blocks only at
/// `cluster_barrier`, where `index` is the program's rank in its cluster
/// (its task number in the cluster's schedule), and forks at `async_tasks`.
impl<'k> Task<'k> for Executor<'k> {
    fn name(&self) -> &str {
        &self.task.name
    }

    fn step(
        &mut self,
        index: usize,
        shared: &mut ProgramShared,
    ) -> Result<StepOutcome<'k>, InterpError> {
        if let Some(op) = self.next_op() {
            if let OpKind::AsyncTasks { tasks } = &op.kind {
                let tasks = self.fork(tasks);
                if let Some(frame) = self.frames.last_mut() {
                    frame.pc += 1;
                }
                let at = Wait {
                    op: "async_tasks",
                    line: op.loc.line,
                    reason: WaitReason::Tasks {
                        unfinished: tasks.len() as u32,
                    },
                };
                return Ok(StepOutcome::Forked { tasks, at });
            }
            if let OpKind::Prim { prim, args, imms } = &op.kind {
                return self.step_prim(op, *prim, args, imms, index, shared);
            }
            if matches!(op.kind, OpKind::ClusterBarrier) {
                // Arrivals commute but the one that completes the
                // generation (see `explore`).
                // Each program of a cooperative run is a cluster of one.
                let member = if shared.cooperative.is_some() {
                    0
                } else {
                    index
                };
                let access = if shared.cluster_barrier.has_arrived(member) {
                    Access::Read
                } else {
                    Access::Arrive
                };
                shared.footprint.touch(Object::ClusterBarrier, access);
                let generation = shared.cluster_barrier.generation();
                let arrived_in = shared.cluster_barrier.arrival_generation(member);
                // The barrier releases and acquires at cluster scope: what a
                // member wrote before arriving (its peers' shared memory
                // too) is ordered before what every member does after it.
                // Not between the programs of a cooperative run, which only
                // share the object.
                let ordered = shared.cooperative.is_none();
                if ordered && access == Access::Arrive {
                    shared
                        .clocks
                        .named_arrive(index, CLUSTER_BARRIER_CLOCK, arrived_in);
                }
                let passed = shared.cluster_barrier.arrive_and_wait(member);
                if shared.cluster_barrier.generation() != generation {
                    shared
                        .footprint
                        .touch(Object::ClusterBarrier, Access::Write);
                }
                if ordered && passed.is_ok() {
                    shared
                        .clocks
                        .named_acquire(index, CLUSTER_BARRIER_CLOCK, arrived_in);
                }
                if let Err(reason) = passed {
                    return Ok(StepOutcome::Blocked(Wait {
                        op: "cluster_barrier",
                        line: op.loc.line,
                        reason,
                    }));
                }
            }
        }
        // In a skeleton run, a task's local ops (index arithmetic, control
        // flow) commute with every other task's ops, so the ones that
        // follow run in this step: fewer steps, and fewer polls of blocked
        // tasks, for the same outcomes. Bounded, so that a loop of local
        // ops still spends the step budget. Not in a full run, where a
        // task's steps also stand for the time it computes, which a random
        // schedule's interleavings should keep.
        // A skeleton run moves no data, so it has no accesses to check.
        let data_moves = self.skeleton.is_none();
        if let (Some(op), Some(_), true) = (self.next_op(), &shared.cooperative, data_moves) {
            self.track_global(op, index, shared)
                .map_err(|fault| fault.at(self.site(Some(op))))?;
        }
        let mut outcome = self.step_op()?;
        let batch = if self.skeleton.is_some() {
            LOCAL_OPS_PER_STEP
        } else {
            1
        };
        for _ in 1..batch {
            match (&outcome, self.next_op()) {
                (StepOutcome::Ran, Some(op)) if op.kind.is_task_local() => {
                    outcome = self.step_op()?
                }
                _ => break,
            }
        }
        if matches!(outcome, StepOutcome::Finished) {
            let stores = self.in_flight.tma_stores.front().copied();
            let pending = stores.map(|store| (TaskCopy::TmaStore, store)).or_else(|| {
                let loads = self.in_flight.async_loads.pending();
                loads.map(|load| (TaskCopy::AsyncLoad, load))
            });
            if let Some((copy, (buffer, line))) = pending {
                let mut at = self.site(None);
                (at.op, at.line) = (copy.op(), line);
                return Err(InterpError::CopyInFlightAtTaskEnd {
                    at,
                    task: self.task.name.clone(),
                    buffer,
                    copy,
                });
            }
        }
        Ok(outcome)
    }
}

/// The most local ops one step runs (see `step`).
const LOCAL_OPS_PER_STEP: usize = 64;

/// The clocks' key for `cluster_barrier()`'s generations, beside the named
/// barriers' (`id + 16 * rank`, below 256).
const CLUSTER_BARRIER_CLOCK: u32 = u32::MAX;

/// The text `device_print` writes: `pid (x, y, z) line L: <prefix> <values>...` and a newline.
fn print_line(program: [u32; 3], line: u32, prefix: &str, values: &[&Data]) -> String {
    let [x, y, z] = program;
    let mut text = format!("pid ({x}, {y}, {z}) line {line}: {prefix}");
    for data in values {
        text.push(' ');
        text.push_str(&format_elements(data));
    }
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn print_lines_name_the_program_and_line() {
        let ids = Data::Int(vec![0, 1]);
        let flag = Data::Bool(vec![true]);
        assert_eq!(
            print_line([1, 2, 3], 7, "x =", &[&ids, &flag]),
            "pid (1, 2, 3) line 7: x = [0, 1] true\n"
        );
    }

    #[test]
    fn elements_print_as_scalars_or_lists() {
        assert_eq!(format_elements(&Data::Int(vec![3])), "3");
        assert_eq!(format_elements(&Data::Float(vec![1.5, -2.0])), "[1.5, -2]");
        assert_eq!(
            format_elements(&Data::Bool(vec![true, false])),
            "[true, false]"
        );
    }
}

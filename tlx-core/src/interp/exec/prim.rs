//! TLX primitives on the interpreter, against the state of the programs
//! scheduled together (`ProgramShared`): shared buffers, mbarriers with
//! PTX's phase and transaction-byte rules, named barriers, TMA copies and
//! wgmma. Asynchronous copies land when issued and complete their bytes on
//! their barrier at once; what makes them asynchronous is the race record:
//! a read of the buffer by a task that has not waited for the barrier phase
//! the copy completes is reported, as on the GPU it could see stale data.

use std::rc::Rc;

use crate::ir::{
    DotPrecision, Family, FlagComparison, Interp, Named, Op, Prim, ScalarType, StoreReduce, Type,
    ValueId, CLC_RESPONSE_SHAPE,
};

use super::super::error::{
    Fault, FaultResult, InterpError, PeerStore, PendingCopy, SliceWindow, UnfencedRead,
    UnreleasedRead,
};
use super::super::explore::{Access, Object};
use super::super::inflight::InFlightCopy;
use super::super::mbarrier::{MBarrier, MBarrierError};
use super::super::schedule::{ExpectSite, ProgramShared, StepOutcome};
use super::super::shared::NamedBarrierError;
use super::super::value::{Data, GlobalTensor, Handle, Ptr, Repr, Tensor};
use super::super::wait::{Wait, WaitReason};
use super::super::{dot, global};
use super::Executor;

// Families whose primitives run in a file of their own (`prim.family()`
// routes them there before the arms of `prim` below).
mod cluster;
mod tcgen05;

pub(crate) use tcgen05::PendingMma;

/// The shared buffers a task's `async_load`s (`cp.async`) are filling, by
/// buffer id: the open group, and the committed groups not yet waited for.
#[derive(Clone, Debug, Default)]
pub(super) struct AsyncLoads {
    /// Each copy's buffer and line.
    open: Vec<(usize, u32)>,
    committed: std::collections::VecDeque<Vec<(usize, u32)>>,
}

impl AsyncLoads {
    fn filling(&self, buffer: usize) -> bool {
        self.filling_at(buffer).is_some()
    }

    /// The line of an `async_load` still filling `buffer`, if any.
    fn filling_at(&self, buffer: usize) -> Option<u32> {
        std::iter::once(&self.open)
            .chain(&self.committed)
            .flatten()
            .find(|&&(b, _)| b == buffer)
            .map(|&(_, line)| line)
    }

    /// The oldest copy not waited for (buffer, line): at the task's end,
    /// one that may still be writing.
    pub(super) fn pending(&self) -> Option<(usize, u32)> {
        self.committed
            .iter()
            .chain(std::iter::once(&self.open))
            .flatten()
            .next()
            .copied()
    }
}

/// Why a primitive did not complete.
enum Stop {
    Fault(Fault),
    /// A failure that names the task (barrier misuse, a race); boxed, as
    /// an `InterpError` would make every `PrimResult` large.
    Error(Box<InterpError>),
    Wait(WaitReason),
}

impl Stop {
    fn error(e: InterpError) -> Stop {
        Stop::Error(Box::new(e))
    }
}

impl From<Fault> for Stop {
    fn from(fault: Fault) -> Stop {
        Stop::Fault(fault)
    }
}

type PrimResult<T> = Result<T, Stop>;

impl<'k> Executor<'k> {
    /// Runs the primitive `op`; a wait that cannot pass yet leaves the task
    /// blocked at it, to be polled again.
    pub(super) fn step_prim(
        &mut self,
        op: &'k Op,
        prim: Prim,
        args: &[ValueId],
        imms: &[i64],
        index: usize,
        shared: &mut ProgramShared,
    ) -> Result<StepOutcome<'k>, InterpError> {
        // A skeleton run executes only the skeleton's primitives: one it
        // dropped (a flag wait, a memory fence) gets opaque results, as
        // every other op outside the skeleton does.
        let dropped = self
            .skeleton
            .is_some_and(|keep| !keep.get(op.id.0 as usize).copied().unwrap_or(false));
        let done = if dropped {
            self.define_opaque(op).map_err(Stop::from)
        } else {
            self.prim(op, prim, args, imms, index, shared)
        };
        match done {
            Ok(()) => {
                if let Some(frame) = self.frames.last_mut() {
                    frame.pc += 1;
                }
                Ok(StepOutcome::Ran)
            }
            Err(Stop::Wait(reason)) => Ok(StepOutcome::Blocked(Wait {
                op: prim.mnemonic(),
                line: op.loc.line,
                reason,
            })),
            Err(Stop::Fault(fault)) => Err(fault.at(self.site(Some(op)))),
            Err(Stop::Error(e)) => Err(*e),
        }
    }

    fn prim(
        &mut self,
        op: &Op,
        prim: Prim,
        args: &[ValueId],
        imms: &[i64],
        task: usize,
        shared: &mut ProgramShared,
    ) -> PrimResult<()> {
        let named = Named::new(prim, args, imms);
        let arg = |name: &str| named.get(name).copied().map_err(Fault::malformed);
        let rest = |name: &str| named.rest(name).map_err(Fault::malformed);
        let imm = |name: &str| named.imm(name).map_err(Fault::malformed);
        // The definition says why nothing the interpreter models changes.
        if prim.def().interp == Interp::Nothing {
            return Ok(());
        }
        // Families with a file of their own (`prim/`) run their primitives
        // there; the others' are the arms below.
        match prim.family() {
            Family::Cluster => return self.cluster_prim(op, named, task, shared),
            Family::Tcgen05 => return self.tcgen05_prim(op, named, task, shared),
            _ => {}
        }
        match prim {
            Prim::LocalAlloc => {
                // Tensor memory is buffers like shared memory's here: only
                // the rules of its accesses differ.
                let (elem, shape, buffers) = match self.type_of(Self::result(op, 0)?)? {
                    Type::SharedMemory(m) => (m.elem(), m.shape(), m.buffers()),
                    Type::TensorMemory(m) => (m.elem(), m.shape(), m.buffers()),
                    _ => return Err(Fault::malformed("local_alloc of a non-buffer").into()),
                };
                // `reuse = other`: the same buffers, seen as this type.
                if let [other] = rest("reuse")? {
                    let view = self.buffer_view(*other)?;
                    return self.define_handle(
                        op,
                        Handle::Shared {
                            alloc: view.alloc,
                            first: 0,
                            window: None,
                        },
                    );
                }
                // A skeleton run tracks buffers' state, not their contents,
                // except a cluster-launch-control answer's: whether a
                // persistent loop goes on depends on it.
                let answer = elem == ScalarType::I32 && shape == CLC_RESPONSE_SHAPE;
                let numel = if self.skeleton.is_some() && !answer {
                    0
                } else {
                    shape.iter().product()
                };
                let alloc = shared.smem.alloc(elem, numel, buffers as usize);
                self.record_alloc(shared, alloc);
                self.define_handle(
                    op,
                    Handle::Shared {
                        alloc,
                        first: 0,
                        window: None,
                    },
                )
            }
            Prim::LocalView => {
                let index = self.get(arg("index")?)?.scalar_int()?;
                let count = match self.type_of(arg("buffers")?)? {
                    Type::SharedMemory(m) => m.buffers() as usize,
                    Type::TensorMemory(m) => m.buffers() as usize,
                    barriers => barriers.numel(),
                };
                if !(0..count as i64).contains(&index) {
                    return Err(Stop::error(InterpError::ViewIndex {
                        at: self.site(Some(op)),
                        index,
                        count,
                    }));
                }
                let view = match self.get(arg("buffers")?)?.handle()? {
                    Handle::Shared {
                        alloc,
                        first,
                        window: None,
                    } => Handle::Shared {
                        alloc: *alloc,
                        first: first + index as usize,
                        window: None,
                    },
                    Handle::Shared { .. } => {
                        return Err(Fault::malformed("a view of a slice").into())
                    }
                    Handle::Barriers { first } => Handle::Barriers {
                        first: first + index as usize,
                    },
                    Handle::Desc(_) | Handle::Opaque => {
                        return Err(Fault::malformed("a view of a descriptor").into())
                    }
                    Handle::Remote { .. } => {
                        return Err(Fault::malformed("a view of a remote view").into())
                    }
                };
                self.define_handle(op, view)
            }
            Prim::LocalSlice => {
                let view = self.buffer_view(arg("buffer")?)?;
                let from = self.type_of(arg("buffer")?)?.shape().to_vec();
                let to = self.type_of(Self::result(op, 0)?)?.shape().to_vec();
                let offsets = self.offsets(rest("offsets")?)?;
                let fits = from.len() == to.len()
                    && (0..from.len()).all(|d| {
                        offsets.get(d).is_some_and(|&o| {
                            usize::try_from(o).is_ok_and(|o| o + to[d] <= from[d])
                        })
                    });
                // A skeleton run tracks whole buffers: the view is its buffer.
                if fits && self.skeleton.is_some() {
                    return self.define_handle(op, view.narrowed(&[]));
                }
                let within = slice_indices(&from, &to, &offsets).ok_or_else(|| {
                    Stop::error(InterpError::SliceBounds {
                        at: self.site(Some(op)),
                        slice: Box::new(SliceWindow {
                            offsets: offsets.clone(),
                            shape: to.clone(),
                            of: from.clone(),
                        }),
                    })
                })?;
                self.define_handle(op, view.narrowed(&within))
            }
            Prim::LocalTrans => {
                let view = self.buffer_view(arg("buffer")?)?;
                let &[rows, cols] = self.type_of(arg("buffer")?)?.shape() else {
                    return Err(Fault::malformed("a transpose of a non-matrix").into());
                };
                if self.skeleton.is_some() {
                    return self.define_handle(op, view.narrowed(&[]));
                }
                // Element (i, j) of the `[cols, rows]` view is (j, i) of the operand.
                let within = super::super::value::strided_indices(&[cols, rows], &[1, cols], 0);
                self.define_handle(op, view.narrowed(&within))
            }
            Prim::LocalReinterpret => {
                let view = self.buffer_view(arg("buffer")?)?;
                if view.window.is_some() {
                    return Err(Fault::malformed("`local_reinterpret` of a slice").into());
                }
                self.define_handle(
                    op,
                    Handle::Shared {
                        alloc: view.alloc,
                        first: view.buffer,
                        window: None,
                    },
                )
            }
            Prim::LocalLoad => {
                let view = self.buffer_view(arg("buffer")?)?;
                if let Type::TensorMemory(_) = self.type_of(arg("buffer")?)? {
                    let id = shared.smem.buffer_id(view.alloc, view.buffer);
                    let written = shared.smem.written(view.alloc, view.buffer);
                    self.check_tensor_memory(op, shared, (id, written), task, true)?;
                }
                self.check_read(op, shared, view.alloc, view.buffer, task)?;
                if self.skeleton.is_some() {
                    return Ok(self.define_opaque(op)?);
                }
                let data = view.read(shared)?;
                self.define(op, 0, data)?;
                Ok(())
            }
            Prim::LocalStore => {
                let view = self.buffer_view(arg("buffer")?)?;
                let id = shared.smem.buffer_id(view.alloc, view.buffer);
                if let Type::TensorMemory(_) = self.type_of(arg("buffer")?)? {
                    self.check_tensor_memory(op, shared, (id, true), task, false)?;
                }
                self.check_own_mma_reads(op, id)?;
                self.check_write(op, shared, id, task)?;
                if self.skeleton.is_some() {
                    return Ok(shared.smem.mark_written(view.alloc, view.buffer)?);
                }
                let data = self.get(arg("value")?)?.data.clone();
                view.write(shared, data)?;
                Ok(())
            }
            Prim::AllocBarriers => {
                let count = self.type_of(Self::result(op, 0)?)?.numel();
                let first = shared.barriers.len();
                for _ in 0..count {
                    let bar = MBarrier::new(imm("arrive_count")? as u32)
                        .map_err(|e| self.mbarrier_error(op, e))?;
                    shared.barriers.push(bar);
                }
                self.record_barriers(shared, first, count);
                self.define_handle(op, Handle::Barriers { first })
            }
            Prim::BarrierWait => {
                if !self.predicate(arg("pred")?)? {
                    return Ok(());
                }
                let id = self.barrier_of(arg("bar")?)?;
                let parity = self.get(arg("phase")?)?.scalar_int()? as u32;
                let bar = barrier(shared, id, Access::Read)?;
                if !bar.try_wait_parity(parity) {
                    let mut reason = bar.wait_reason(id);
                    if let WaitReason::MBarrier { phase, skipped, .. } = &mut reason {
                        *skipped = shared.observations.skipped(task, id, *phase, parity);
                    }
                    return Err(Stop::Wait(reason));
                }
                // The phase that passed the wait: the latest completed one.
                let completed = bar.phase().wrapping_sub(1);
                let next_started = bar.phase_started();
                shared.clocks.acquire(task, id, completed);
                // The task's own MMAs that phase signals have completed, and
                // every one it issued before them (a completion arrival
                // tracks all of the thread's earlier MMAs).
                let operands = &mut self.in_flight.mma_operands;
                if let Some(last) = operands
                    .iter()
                    .rposition(|o| o.completions.contains(&(id, completed)))
                {
                    operands.drain(..=last);
                }
                let at = shared.clocks.tick(task);
                shared.async_writes.record_wait(task, at, id, completed);
                shared.observations.waited(task);
                let phase = i64::from(completed as i32);
                let Some(first_line) = shared.observations.observe(task, id, phase, op.loc.line)
                else {
                    return Ok(());
                };
                let stale = InterpError::StaleWait {
                    at: self.site(Some(op)),
                    task: self.task.name.clone(),
                    barrier: id,
                    phase,
                    first_line,
                };
                if next_started {
                    return Err(Stop::error(stale));
                }
                shared.observations.suspect(task, id, phase, stale);
                Ok(())
            }
            Prim::BarrierArrive => {
                if !self.predicate(arg("pred")?)? {
                    return Ok(());
                }
                let id = self.arrival_barrier(op, arg("bar")?, shared)?;
                self.arrive_on(op, id, imm("arrive_count")? as u32, task, shared)
            }
            Prim::BarrierExpectBytes => {
                if !self.predicate(arg("pred")?)? {
                    return Ok(());
                }
                let id = self.barrier_of(arg("bar")?)?;
                let bytes = self.get(arg("bytes")?)?.scalar_int()?;
                let bytes = u32::try_from(bytes)
                    .map_err(|_| Fault::malformed(format!("{bytes} expected bytes")))?;
                let bar = barrier(shared, id, Access::Arrive)?;
                let phase = bar.phase();
                let result = bar.expect_tx(bytes).and_then(|()| bar.arrive(1).map(drop));
                result.map_err(|e| self.mbarrier_error(op, e))?;
                if bar.phase() != phase {
                    shared.footprint.touch(Object::MBarrier(id), Access::Write);
                }
                shared.clocks.arrive(task, id, phase);
                let site = ExpectSite {
                    at: self.site(Some(op)),
                    phase,
                    task: self.task.name.clone(),
                };
                shared.expect_sites.insert(id, site);
                Ok(())
            }
            // Proxy fences order what the interpreter already runs in order.
            // Stores complete in order: all but the newest `pendings` are done
            // reading their buffers.
            Prim::AsyncDescriptorStoreWait => {
                let pendings = imm("pendings")? as usize;
                while self.in_flight.tma_stores.len() > pendings {
                    if let Some((retired, _)) = self.in_flight.tma_stores.pop_front() {
                        shared.clocks.end_reads(task, &[retired]);
                    }
                }
                Ok(())
            }
            Prim::AsyncDescriptorLoad => {
                let view = self.buffer_view(arg("buffer")?)?;
                let (alloc, buffer) = (view.alloc, view.buffer);
                let bar_id = self.barrier_of(arg("barrier")?)?;
                let elem = view.elem;
                // The descriptor's block: the buffer's shape, perhaps with
                // leading unit dimensions (one head of a 4-d tensor).
                let block = self.type_of(arg("desc")?)?.shape().to_vec();
                // TMA counts the whole box, clipped or not.
                let bytes = (block.iter().product::<usize>() * elem.size_bytes()) as u32;
                let data = if self.skeleton.is_some() {
                    None
                } else {
                    Some(self.read_tma_box(arg("desc")?, elem, rest("offsets")?, false)?)
                };
                let phase = barrier(shared, bar_id, Access::Read)?.phase();
                let buffer_id = shared.smem.buffer_id(alloc, buffer);
                self.check_write(op, shared, buffer_id, task)?;
                shared.async_writes.record_write(
                    buffer_id,
                    &self.task.name,
                    (op.kind.code().source_name(), op.loc.line),
                    bar_id,
                    phase,
                );
                // The copy lands later, when the scheduler says (see `inflight`).
                let seq = shared.next_copy();
                shared.in_flight.push(InFlightCopy {
                    seq,
                    alloc,
                    buffer,
                    window: view.window.clone(),
                    data,
                    elem,
                    barrier: bar_id,
                    bytes,
                    clock: shared.clocks.snapshot(task),
                    at: self.site(Some(op)),
                    task: self.task.name.clone(),
                });
                Ok(())
            }
            Prim::AsyncDescriptorStore => {
                let view = self.buffer_view(arg("buffer")?)?;
                self.check_read(op, shared, view.alloc, view.buffer, task)?;
                let id = shared.smem.buffer_id(view.alloc, view.buffer);
                self.in_flight.tma_stores.push_back((id, op.loc.line));
                if self.skeleton.is_some() {
                    return Ok(());
                }
                let data = view.read(shared)?;
                let reduce = StoreReduce::from_code(imm("store_reduce")?)
                    .ok_or_else(|| Fault::malformed("an unknown store reduction"))?;
                Ok(self.write_tma_box(arg("desc")?, view.elem, rest("offsets")?, &data, reduce)?)
            }
            Prim::AsyncDot => {
                let a = self.dot_operand(op, shared, arg("a")?, task)?;
                let b = self.dot_operand(op, shared, arg("b")?, task)?;
                let group = [arg("a")?, arg("b")?]
                    .into_iter()
                    .filter_map(|v| self.buffer_view(v).ok())
                    .map(|view| shared.smem.buffer_id(view.alloc, view.buffer))
                    .collect();
                self.in_flight.wgmma_groups.push_back(group);
                let (Some(a), Some(b)) = (a, b) else {
                    return Ok(self.define_opaque(op)?);
                };
                let acc = Rc::clone(self.get(arg("acc")?)?);
                let input = self.scalar_type(arg("b")?)?;
                let acc_ty = self.scalar_type(arg("acc")?)?;
                let data = dot::dot(&a, &b, &acc, input, acc_ty, DotPrecision::Tf32)?;
                self.define(op, 0, data)?;
                Ok(())
            }
            Prim::AsyncDotWait => {
                let pendings = imm("pendings")? as usize;
                while self.in_flight.wgmma_groups.len() > pendings {
                    if let Some(retired) = self.in_flight.wgmma_groups.pop_front() {
                        shared.clocks.end_reads(task, &retired);
                    }
                }
                let acc = Rc::clone(self.get_any(arg("acc")?)?);
                self.set(Self::result(op, 0)?, acc)?;
                Ok(())
            }
            Prim::AsyncLoad => {
                let view = self.buffer_view(arg("buffer")?)?;
                let (alloc, buffer) = (view.alloc, view.buffer);
                let id = shared.smem.buffer_id(alloc, buffer);
                self.check_write(op, shared, id, task)?;
                if self.skeleton.is_some() {
                    shared.smem.mark_written(alloc, buffer)?;
                    self.in_flight.async_loads.open.push((id, op.loc.line));
                    return Ok(());
                }
                let elem = view.elem;
                let mask = Rc::clone(self.get(arg("mask")?)?);
                let zero = zero_of(elem);
                let ptrs = Rc::clone(self.get(arg("ptrs")?)?);
                let data = global::load(
                    self.mem,
                    self.check_uninit,
                    elem,
                    ptrs.ptrs()?,
                    Some(mask.bools()?),
                    Some(&zero),
                )?;
                view.write(shared, data)?;
                self.in_flight.async_loads.open.push((id, op.loc.line));
                Ok(())
            }
            Prim::AsyncLoadCommitGroup => {
                let group = std::mem::take(&mut self.in_flight.async_loads.open);
                self.in_flight.async_loads.committed.push_back(group);
                Ok(())
            }
            Prim::AsyncLoadWaitGroup => {
                let pendings = imm("pendings")? as usize;
                while self.in_flight.async_loads.committed.len() > pendings {
                    self.in_flight.async_loads.committed.pop_front();
                }
                Ok(())
            }
            Prim::DescriptorLoad => {
                if self.skeleton.is_some() {
                    return Ok(self.define_opaque(op)?);
                }
                let elem = self.desc_elem(arg("desc")?)?;
                let data =
                    self.read_tma_box(arg("desc")?, elem, rest("offsets")?, self.check_uninit)?;
                Ok(self.define(op, 0, data)?)
            }
            Prim::DescriptorStore => {
                if self.skeleton.is_some() {
                    return Ok(());
                }
                let elem = self.desc_elem(arg("desc")?)?;
                let data = &self.get(arg("value")?)?.data;
                Ok(self.write_tma_box(
                    arg("desc")?,
                    elem,
                    rest("offsets")?,
                    data,
                    StoreReduce::None,
                )?)
            }
            Prim::MakeTensorDescriptor => {
                if self.skeleton.is_some() {
                    return Ok(self.define_opaque(op)?);
                }
                let base = match &self.get(arg("base")?)?.data {
                    Data::Ptr(p) if p.len() == 1 => p[0],
                    _ => {
                        return Err(Fault::malformed("a descriptor's base is not a pointer").into())
                    }
                };
                let Type::TensorDescriptor(d) = self.type_of(Self::result(op, 0)?)? else {
                    return Err(
                        Fault::malformed("make_tensor_descriptor of a non-descriptor").into(),
                    );
                };
                let elem = d.elem();
                let rank = d.block_shape().len();
                let values = rest("dims")?
                    .iter()
                    .map(|v| self.get(*v)?.scalar_int())
                    .collect::<FaultResult<Vec<i64>>>()?;
                let (shape, outer) = values.split_at(rank.min(values.len()));
                let strides: Vec<i64> = outer.iter().copied().chain([1]).collect();
                check_device_descriptor(base.byte_offset, shape, &strides, elem)?;
                self.define_handle(
                    op,
                    Handle::Desc(GlobalTensor {
                        base,
                        shape: shape.to_vec(),
                        strides,
                    }),
                )
            }
            // Kernels run one after another here: the grids before have
            // finished, and the next starts after this one ends.
            // The interpreter's cycles are the ops the task has run.
            Prim::SignalWaitUntil => {
                let flag = arg("flag")?;
                self.signal_wait_until(op, flag, arg("value")?, imm("cmp")?)?;
                // The wait acquires what the flag's releases published.
                if shared.cooperative.is_some() {
                    for p in self.get(flag)?.ptrs()? {
                        shared.clocks.acquire_at(task, (p.buffer, p.byte_offset));
                    }
                }
                Ok(())
            }
            Prim::Clock64 => {
                let now = i64::try_from(self.ops_run).unwrap_or(i64::MAX);
                Ok(self.define(op, 0, Data::Int(vec![now]))?)
            }
            Prim::NamedBarrierWait | Prim::NamedBarrierArrive => {
                let id = self.get(arg("bar_id")?)?.scalar_int()?;
                let Some(id) = u32::try_from(id).ok().filter(|id| *id < 16) else {
                    return Err(Stop::error(InterpError::NamedBarrier {
                        at: self.site(Some(op)),
                        task: self.task.name.clone(),
                        error: Box::new(NamedBarrierError::BadId { id }),
                    }));
                };
                let last = self.kernel.named_barriers_reserved();
                if id <= last {
                    return Err(Stop::error(InterpError::NamedBarrier {
                        at: self.site(Some(op)),
                        task: self.task.name.clone(),
                        error: Box::new(NamedBarrierError::Reserved { id, last }),
                    }));
                }
                let threads = imm("num_threads")? as u32;
                let wait = prim == Prim::NamedBarrierWait;
                if wait {
                    shared.observations.waited(task);
                }
                // Each program of a cluster has its own hardware barriers.
                // Each program has its own: keyed by its place among the
                // programs scheduled together (its cluster rank, or in a
                // cooperative run its index among every program).
                let rank = self.task.member;
                let (generation, polled) = shared.named_barriers(rank).arrival_generation(task, id);
                let access = if polled { Access::Read } else { Access::Write };
                shared.footprint.touch(Object::NamedBarriers(rank), access);
                // The clocks key barriers across the cluster: rank's own 16.
                let clock_id = id + 16 * rank as u32;
                if !polled {
                    shared.clocks.named_arrive(task, clock_id, generation);
                }
                match shared.named_barriers(rank).arrive(
                    (task, &self.task.name),
                    id,
                    self.task.threads,
                    threads,
                    wait,
                ) {
                    Ok(Ok(())) => {
                        if wait {
                            shared.clocks.named_acquire(task, clock_id, generation);
                        }
                        Ok(())
                    }
                    Ok(Err(reason)) => Err(Stop::Wait(reason)),
                    Err(error) => Err(Stop::error(InterpError::NamedBarrier {
                        at: self.site(Some(op)),
                        task: self.task.name.clone(),
                        error: Box::new(error),
                    })),
                }
            }
            // One proxy here: a fence only marks what the task had seen
            // (rule `proxy-fence`).
            Prim::FenceAsyncShared => {
                shared.clocks.proxy_fence(task);
                Ok(())
            }
            Prim::Fence => {
                if prim.signature().chosen("scope", imms) == Some("async_shared") {
                    shared.clocks.proxy_fence(task);
                }
                Ok(())
            }
            // `Interp::Nothing` primitives returned above.
            _ => Err(Fault::malformed(format!(
                "`{}` has no semantics of its own",
                prim.mnemonic()
            ))
            .into()),
        }
    }

    fn define_handle(&mut self, op: &Op, handle: Handle) -> PrimResult<()> {
        let id = Self::result(op, 0)?;
        self.set(
            id,
            Rc::new(Tensor::new(vec![], Data::Handle(vec![handle]))?),
        )?;
        Ok(())
    }

    fn predicate(&self, v: ValueId) -> FaultResult<bool> {
        self.get(v)?.scalar_bool()
    }

    fn buffer_view(&self, v: ValueId) -> FaultResult<BufferView> {
        let (elem, shape) = match self.type_of(v)? {
            Type::SharedMemory(m) => (m.elem(), m.shape()),
            Type::TensorMemory(m) => (m.elem(), m.shape()),
            _ => return Err(Fault::malformed(format!("{v} is not a shared buffer"))),
        };
        match self.get(v)?.handle()? {
            Handle::Shared {
                alloc,
                first,
                window,
            } => Ok(BufferView {
                alloc: *alloc,
                buffer: *first,
                window: window.clone(),
                elem,
                numel: shape.iter().product(),
            }),
            _ => Err(Fault::malformed(format!("{v} is not a shared buffer"))),
        }
    }

    fn barrier_of(&self, v: ValueId) -> FaultResult<usize> {
        match self.get(v)?.handle()? {
            Handle::Barriers { first } => Ok(*first),
            _ => Err(Fault::malformed(format!("{v} is not a barrier"))),
        }
    }

    fn desc_of(&self, v: ValueId) -> FaultResult<GlobalTensor> {
        match self.get(v)?.handle()? {
            Handle::Desc(desc) => Ok(desc.clone()),
            _ => Err(Fault::malformed(format!("{v} is not a tensor descriptor"))),
        }
    }

    /// The element type of descriptor `v`'s tensor.
    fn desc_elem(&self, v: ValueId) -> FaultResult<ScalarType> {
        self.type_of(v)?
            .elem()
            .scalar()
            .ok_or_else(|| Fault::malformed("a descriptor of pointers"))
    }

    /// Where the elements (of `elem`) of descriptor `desc`'s block at
    /// `offsets` are, and whether each lies inside the tensor; TMA's rules
    /// for the offsets (for a `store`, also that the box starts inside)
    /// are checked first.
    fn tma_box(
        &self,
        desc: ValueId,
        elem: ScalarType,
        offsets: &[ValueId],
        store: bool,
    ) -> FaultResult<(Vec<Ptr>, Vec<bool>)> {
        let tensor = self.desc_of(desc)?;
        let block = self.type_of(desc)?.shape().to_vec();
        let offsets = self.offsets(offsets)?;
        check_tma_offsets(elem, &offsets)?;
        if store {
            check_tma_store_offsets(&offsets)?;
        }
        Ok(box_addresses(&tensor, elem, &block, &offsets))
    }

    /// A TMA load of a block: zeros outside the tensor.
    fn read_tma_box(
        &self,
        desc: ValueId,
        elem: ScalarType,
        offsets: &[ValueId],
        check_uninit: bool,
    ) -> FaultResult<Data> {
        let (ptrs, inside) = self.tma_box(desc, elem, offsets, false)?;
        let zero = zero_of(elem);
        global::load(
            self.mem,
            check_uninit,
            elem,
            &ptrs,
            Some(&inside),
            Some(&zero),
        )
    }

    /// `signal_wait_until`: passes once the flag compares as `cmp` says.
    fn signal_wait_until(
        &self,
        op: &Op,
        flag: ValueId,
        value: ValueId,
        cmp: i64,
    ) -> PrimResult<()> {
        let ptrs = match &self.get(flag)?.data {
            Data::Ptr(ptrs) => ptrs.clone(),
            _ => return Err(Fault::malformed("a flag that is not a pointer").into()),
        };
        let loaded = global::load(
            self.mem,
            self.check_uninit,
            ScalarType::I32,
            &ptrs,
            None,
            None,
        )
        .map_err(|fault| Stop::error(fault.at(self.site(Some(op)))))?;
        let now = match loaded {
            Data::Int(v) if v.len() == 1 => v[0],
            _ => return Err(Fault::malformed("a flag of more than one element").into()),
        };
        let wanted = self.get(value)?.scalar_int()?;
        let cmp = FlagComparison::from_code(cmp)
            .ok_or_else(|| Fault::malformed(format!("comparison code {cmp}")))?;
        if cmp.holds(now, wanted) {
            Ok(())
        } else {
            Err(Stop::Wait(WaitReason::Signal {
                value: now,
                cmp: cmp.word(),
                wanted,
            }))
        }
    }

    /// A TMA store of `data` into a block, or with `reduce`, an atomic
    /// combination with it: nothing outside the tensor.
    fn write_tma_box(
        &self,
        desc: ValueId,
        elem: ScalarType,
        offsets: &[ValueId],
        data: &Data,
        reduce: StoreReduce,
    ) -> FaultResult<()> {
        let (ptrs, inside) = self.tma_box(desc, elem, offsets, true)?;
        match reduce.atomic() {
            None => global::store(self.mem, elem, &ptrs, data, Some(&inside)),
            Some(op) => global::atomic_rmw(
                self.mem,
                self.check_uninit,
                op,
                elem,
                &ptrs,
                data,
                Some(&inside),
            )
            .map(|_olds| ()),
        }
    }

    fn offsets(&self, vs: &[ValueId]) -> FaultResult<Vec<i64>> {
        vs.iter().map(|&v| self.get(v)?.scalar_int()).collect()
    }

    /// `count` arrivals of this task on mbarrier `id` (of this program or
    /// a peer's).
    fn arrive_on(
        &self,
        op: &Op,
        id: usize,
        count: u32,
        task: usize,
        shared: &mut ProgramShared,
    ) -> PrimResult<()> {
        let bar = barrier(shared, id, Access::Arrive)?;
        let phase = bar.phase();
        bar.arrive(count).map_err(|e| self.mbarrier_error(op, e))?;
        let completes = bar.phase() != phase;
        if completes {
            shared.footprint.touch(Object::MBarrier(id), Access::Write);
        }
        shared.clocks.arrive(task, id, phase);
        if let Some(earlier) = shared.observations.arrive(task, id, completes, op.loc.line) {
            return Err(Stop::error(InterpError::EarlyArrive {
                at: self.site(Some(op)),
                task: self.task.name.clone(),
                barrier: id,
                phase,
                earlier,
            }));
        }
        Ok(())
    }

    /// A read of a buffer an asynchronous copy may still be writing.
    fn check_read(
        &self,
        op: &Op,
        shared: &mut ProgramShared,
        alloc: usize,
        buffer: usize,
        task: usize,
    ) -> PrimResult<()> {
        let id = shared.smem.buffer_id(alloc, buffer);
        shared.footprint.touch(Object::Buffer(id), Access::Read);
        // The async proxy's readers: an `async_dot` operand is read until
        // its group is waited for, a TMA store's source until a store wait
        // retires it.
        let async_reader = match op.kind {
            crate::ir::OpKind::Prim { prim, .. } if prim.def().effects.async_reads => Some(prim),
            _ => None,
        };
        let open = async_reader.is_some();
        shared
            .clocks
            .read(task, &self.task.name, op.loc.line, id, open);
        if self.in_flight.async_loads.filling(id) {
            return Err(Stop::error(InterpError::AsyncLoadPending {
                at: self.site(Some(op)),
                task: self.task.name.clone(),
                buffer: id,
            }));
        }
        if !shared.smem.written(alloc, buffer) {
            return Err(Stop::error(InterpError::UnwrittenShared {
                at: self.site(Some(op)),
                task: self.task.name.clone(),
                buffer: id,
            }));
        }
        if let Some(store) = shared.clocks.unordered_store(task, id) {
            return Err(Stop::error(InterpError::UnorderedStoreRead {
                at: self.site(Some(op)),
                task: self.task.name.clone(),
                store: Box::new(PeerStore {
                    buffer: id,
                    writer: store.name.clone(),
                    line: store.line,
                }),
            }));
        }
        if let Some(reader) = async_reader {
            if let Some(store) = shared.clocks.unfenced_store(task, id) {
                return Err(Stop::error(InterpError::UnfencedProxyRead {
                    at: self.site(Some(op)),
                    task: self.task.name.clone(),
                    read: Box::new(UnfencedRead {
                        reader: reader.mnemonic(),
                        store: PeerStore {
                            buffer: id,
                            writer: store.name.clone(),
                            line: store.line,
                        },
                    }),
                }));
            }
        }
        let seen = shared.clocks.seen(task);
        shared
            .async_writes
            .check_read(id, task, seen)
            .map_err(|race| {
                // The reader waited for the phase before the one the write
                // completes on, and that phase has more bytes in than it
                // announced: the write was meant for the phase the reader
                // waited for, which completed without it (fewer bytes
                // announced than the copies bring).
                let meant = i64::from(race.phase) - 1;
                let spilled = shared.barriers.get(race.barrier).is_some_and(|bar| {
                    bar.phase() == race.phase
                        && matches!(
                            bar.wait_reason(race.barrier),
                            WaitReason::MBarrier { tx_bytes, expected_tx_bytes, .. }
                                if tx_bytes > expected_tx_bytes
                        )
                });
                // And the write's issuer announced that phase: a peer's
                // multicast into a stage not yet released is another bug.
                let short = shared.expect_sites.get(&race.barrier).filter(|expect| {
                    spilled
                        && i64::from(expect.phase) == meant
                        && expect.task == race.writer
                        && shared.observations.last_passed(task, race.barrier) == Some(meant)
                });
                if let Some(expect) = short {
                    return Stop::error(InterpError::ExpectBytesShort {
                        at: expect.at.clone(),
                        barrier: race.barrier,
                        phase: race.phase.wrapping_sub(1),
                        copy_line: race.line,
                    });
                }
                // A stale wait on the barrier that guards the buffer explains the race.
                match shared.observations.take_suspect(task, race.barrier) {
                    Some(stale) => Stop::error(stale),
                    None => Stop::error(InterpError::SharedMemoryRace {
                        at: self.site(Some(op)),
                        task: self.task.name.clone(),
                        race: Box::new(race),
                    }),
                }
            })
    }

    /// A write into buffer `id` by `task`: every read of it by another task
    /// must happen before (the reader released the buffer, the writer
    /// waited for that release).
    fn check_write(
        &self,
        op: &Op,
        shared: &mut ProgramShared,
        id: usize,
        task: usize,
    ) -> PrimResult<()> {
        shared.footprint.touch(Object::Buffer(id), Access::Write);
        self.check_write_after_copies(op, shared, id, task)?;
        // The task's own TMA store may still be reading the buffer.
        if let Some(&(_, line)) = self.in_flight.tma_stores.iter().find(|(b, _)| *b == id) {
            return Err(Stop::error(InterpError::OverwriteBeforeRelease {
                at: self.site(Some(op)),
                task: self.task.name.clone(),
                buffer: id,
                read: Box::new(UnreleasedRead {
                    reader: self.task.name.clone(),
                    line,
                    in_flight: true,
                }),
            }));
        }
        shared.clocks.write(task, id).map_err(|race| {
            if let Some(stale) = shared.observations.take_suspect_of(race.reader_task) {
                return Stop::error(stale);
            }
            Stop::error(InterpError::OverwriteBeforeRelease {
                at: self.site(Some(op)),
                task: self.task.name.clone(),
                buffer: id,
                read: Box::new(UnreleasedRead {
                    reader: race.reader,
                    line: race.line,
                    in_flight: race.open,
                }),
            })
        })
    }

    /// A store by the task's threads into a buffer one of its own `tcgen05`
    /// MMAs (or copies) reads, before it waited for their completion: the
    /// MMA runs asynchronously and may read the new values. (Its later
    /// `tcgen05` ops need no wait: one thread's run in issue order.)
    fn check_own_mma_reads(&self, op: &Op, id: usize) -> PrimResult<()> {
        let Some(line) = self
            .in_flight
            .mma_operands
            .iter()
            .find(|o| o.buffer == id)
            .map(|o| o.line)
        else {
            return Ok(());
        };
        Err(Stop::error(InterpError::OverwriteBeforeRelease {
            at: self.site(Some(op)),
            task: self.task.name.clone(),
            buffer: id,
            read: Box::new(UnreleasedRead {
                reader: self.task.name.clone(),
                line,
                in_flight: true,
            }),
        }))
    }

    /// A write by the threads themselves (`local_store`, a peer's
    /// `remote_shmem_store`, a `cp.async` issue) into a buffer an
    /// asynchronous copy may still be filling: the task's own `async_load`
    /// not yet waited for, or a TMA copy (or multicast, or asynchronous
    /// remote store) whose completion the writer has not waited for nor is
    /// ordered after. The two writes land in either order. (Tensor-core
    /// MMAs into one accumulator are ordered among themselves: not
    /// checked here.)
    fn check_write_after_copies(
        &self,
        op: &Op,
        shared: &ProgramShared,
        id: usize,
        task: usize,
    ) -> PrimResult<()> {
        if !matches!(
            op.kind,
            crate::ir::OpKind::Prim {
                prim: Prim::LocalStore | Prim::RemoteShmemStore | Prim::AsyncLoad,
                ..
            }
        ) {
            return Ok(());
        }
        let copy = match self.in_flight.async_loads.filling_at(id) {
            Some(line) => Some(PendingCopy {
                op: "async_load",
                line,
                barrier: None,
            }),
            None => shared
                .async_writes
                .check_read(id, task, shared.clocks.seen(task))
                .err()
                .map(|race| PendingCopy {
                    op: "asynchronous copy",
                    line: race.line,
                    barrier: Some((race.barrier, race.phase)),
                }),
        };
        match copy {
            Some(copy) => Err(Stop::error(InterpError::WriteDuringCopy {
                at: self.site(Some(op)),
                task: self.task.name.clone(),
                buffer: id,
                copy: Box::new(copy),
            })),
            None => Ok(()),
        }
    }

    /// An `async_dot` operand: a register tensor, or a buffer's contents
    /// (`None` in a skeleton run, which checks the read and moves no data).
    fn dot_operand(
        &self,
        op: &Op,
        shared: &mut ProgramShared,
        v: ValueId,
        task: usize,
    ) -> PrimResult<Option<Rc<Tensor>>> {
        if let Type::SharedMemory(m) = self.type_of(v)? {
            let view = self.buffer_view(v)?;
            self.check_read(op, shared, view.alloc, view.buffer, task)?;
            if self.skeleton.is_some() {
                return Ok(None);
            }
            let data = view.read(shared)?;
            return Ok(Some(Rc::new(Tensor::new(m.shape().to_vec(), data)?)));
        }
        if self.skeleton.is_some() {
            return Ok(None);
        }
        Ok(Some(Rc::clone(self.get(v)?)))
    }

    fn mbarrier_error(&self, op: &Op, error: MBarrierError) -> Stop {
        Stop::error(InterpError::MBarrier {
            at: self.site(Some(op)),
            task: self.task.name.clone(),
            error,
        })
    }
}

/// One buffer, or the elements of it a slice shows.
#[derive(Clone)]
struct BufferView {
    alloc: usize,
    buffer: usize,
    window: Option<std::sync::Arc<Vec<usize>>>,
    /// The view's element type and element count (its value's type: a
    /// `local_reinterpret` sees the buffer's bytes as other elements).
    elem: ScalarType,
    numel: usize,
}

impl BufferView {
    /// The view of this view's elements `within` (flat indices into it, in
    /// the new view's order): a slice or transpose, of a slice or not.
    fn narrowed(self, within: &[usize]) -> Handle {
        let flat = match &self.window {
            Some(parent) => within.iter().map(|&i| parent[i]).collect(),
            None => within.to_vec(),
        };
        Handle::Shared {
            alloc: self.alloc,
            first: self.buffer,
            window: Some(std::sync::Arc::new(flat)),
        }
    }

    fn read(&self, shared: &ProgramShared) -> FaultResult<Data> {
        let data = shared.smem.read_as(self.alloc, self.buffer, self.elem)?;
        Ok(match &self.window {
            Some(w) => data.gather(w),
            None if data.len() == self.numel => data,
            None => data.gather(&(0..self.numel).collect::<Vec<_>>()),
        })
    }

    fn write(&self, shared: &mut ProgramShared, data: Data) -> FaultResult<()> {
        let window = self.window.as_deref().map(Vec::as_slice);
        shared
            .smem
            .write_as(self.alloc, self.buffer, window, self.elem, data)
    }
}

/// Flat row-major indices, in a buffer of shape `from`, of the sub-tile of
/// shape `to` at `offsets`; `None` when it does not fit.
fn slice_indices(from: &[usize], to: &[usize], offsets: &[i64]) -> Option<Vec<usize>> {
    let mut base = 0usize;
    let strides = super::super::value::strides_of(from);
    for d in 0..from.len() {
        let o = usize::try_from(*offsets.get(d)?).ok()?;
        if o + to[d] > from[d] {
            return None;
        }
        base += o * strides[d];
    }
    Some(super::super::value::strided_indices(to, &strides, base))
}

/// Mbarrier `id`, for a step that reads or changes it (`access`).
fn barrier(shared: &mut ProgramShared, id: usize, access: Access) -> FaultResult<&mut MBarrier> {
    shared.footprint.touch(Object::MBarrier(id), access);
    shared
        .barriers
        .get_mut(id)
        .ok_or_else(|| Fault::malformed(format!("mbarrier #{id} does not exist")))
}

/// The value masked-off or out-of-bounds loads of `elem` give: zero.
fn zero_of(elem: ScalarType) -> Data {
    match Repr::of_scalar(elem) {
        Repr::Float => Data::Float(vec![0.0]),
        Repr::F64 => Data::F64(vec![0.0]),
        _ => Data::Int(vec![0]),
    }
}

/// The innermost offset of a TMA box must lie on a 16-byte boundary of the
/// row (measured on an H100: others stop the kernel with an illegal
/// instruction).
fn check_tma_offsets(elem: ScalarType, offsets: &[i64]) -> FaultResult<()> {
    let elem_bytes = elem.size_bytes() as u32;
    match offsets.last() {
        Some(&offset) if (offset * i64::from(elem_bytes)) % 16 != 0 => {
            Err(Fault::TmaOffset { offset, elem_bytes })
        }
        _ => Ok(()),
    }
}

/// TMA's run-time rules for a descriptor built on the device (what the
/// runtime checks for a descriptor argument): a 16-byte aligned base, 1 to
/// 2^32 elements per dimension, outer strides of whole 16-byte units below
/// 2^40 bytes.
fn check_device_descriptor(
    base_byte_offset: i64,
    shape: &[i64],
    strides: &[i64],
    elem: ScalarType,
) -> FaultResult<()> {
    let bad = |reason: String| Err(Fault::BadTensorDescriptor(reason));
    if base_byte_offset % 16 != 0 {
        return bad(format!(
            "its base is {base_byte_offset} bytes into the buffer, not on a 16-byte boundary"
        ));
    }
    if let Some((dim, size)) = shape
        .iter()
        .enumerate()
        .find(|(_, &s)| !(1..=1 << 32).contains(&s))
    {
        return bad(format!(
            "dimension {dim} has {size} elements; TMA dimensions hold 1 to 2^32"
        ));
    }
    let outer = &strides[..strides.len().saturating_sub(1)];
    for (dim, &stride) in outer.iter().enumerate() {
        let bytes = i128::from(stride) * elem.size_bytes() as i128;
        if bytes <= 0 || bytes % 16 != 0 || bytes >= 1 << 40 {
            return bad(format!(
                "the stride of dimension {dim} is {stride} elements ({bytes} bytes); TMA strides \
                 are positive multiples of 16 bytes below 2^40"
            ));
        }
    }
    Ok(())
}

/// A TMA store's block must start inside the tensor in every dimension
/// (measured on an H100: a negative offset stops the kernel with an illegal
/// instruction; loads take them and read zeros).
fn check_tma_store_offsets(offsets: &[i64]) -> FaultResult<()> {
    match offsets.iter().position(|&o| o < 0) {
        Some(dim) => Err(Fault::TmaStoreBeforeStart {
            dim,
            offset: offsets[dim],
        }),
        None => Ok(()),
    }
}

/// The global address of each element of a TMA box of `block` elements at
/// `offsets`, and whether it lies inside the tensor (TMA reads zero outside
/// and writes nothing there).
fn box_addresses(
    desc: &GlobalTensor,
    elem: ScalarType,
    block: &[usize],
    offsets: &[i64],
) -> (Vec<Ptr>, Vec<bool>) {
    let numel: usize = block.iter().product();
    let size = elem.size_bytes() as i64;
    let mut ptrs = Vec::with_capacity(numel);
    let mut inside = Vec::with_capacity(numel);
    let mut index = vec![0usize; block.len()];
    for _ in 0..numel {
        let mut byte_offset = desc.base.byte_offset;
        let mut ok = true;
        for d in 0..block.len() {
            let coord = offsets[d] + index[d] as i64;
            ok &= (0..desc.shape[d]).contains(&coord);
            byte_offset += coord * desc.strides[d] * size;
        }
        ptrs.push(Ptr {
            buffer: desc.base.buffer,
            byte_offset,
        });
        inside.push(ok);
        for d in (0..block.len()).rev() {
            index[d] += 1;
            if index[d] < block[d] {
                break;
            }
            index[d] = 0;
        }
    }
    (ptrs, inside)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::BufferId;

    #[test]
    fn a_box_at_the_edge_is_clipped() {
        let desc = GlobalTensor {
            base: Ptr {
                buffer: BufferId(0),
                byte_offset: 0,
            },
            shape: vec![3, 5],
            strides: vec![5, 1],
        };
        let (ptrs, inside) = box_addresses(&desc, ScalarType::F32, &[2, 2], &[2, 4]);
        let offsets: Vec<i64> = ptrs.iter().map(|p| p.byte_offset).collect();
        assert_eq!(offsets, vec![56, 60, 76, 80]);
        assert_eq!(inside, vec![true, false, false, false]);
    }
}

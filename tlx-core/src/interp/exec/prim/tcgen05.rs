//! Blackwell's tensor-memory MMAs on the interpreter: `async_dot` into a
//! tensor-memory accumulator computes at issue, but what it wrote is
//! published only through the barriers that track its completion (its
//! `mbarriers`, or a later `tcgen05_commit` of the issuing task), as a TMA
//! copy's bytes are through its barrier: until then its operands count as
//! being read, and a read of the accumulator is an error; after, a reader
//! that has not waited for that barrier phase races with it.

use crate::ir::{DotPrecision, Op, Type, ValueId};

use super::super::super::dot;
use super::super::super::error::{EarlyAccumulatorAccess, Fault, InterpError};
use super::super::super::explore::{Access, Object};
use super::super::super::schedule::ProgramShared;
use super::super::super::value::{Data, Tensor};
use super::super::Executor;
use super::{barrier, PrimResult, Stop};

/// A tensor-memory MMA issued and not yet tracked by a barrier.
#[derive(Clone, Debug)]
pub(crate) struct PendingMma {
    task: usize,
    /// The accumulator's buffer id, and the operands' shared buffer ids.
    acc: usize,
    operands: Vec<usize>,
    line: u32,
}

impl<'k> Executor<'k> {
    /// `async_dot(a, b, acc, use_acc, mbarriers)` into tensor memory.
    pub(super) fn tcgen05_mma(
        &mut self,
        op: &Op,
        args: &[ValueId],
        task: usize,
        shared: &mut ProgramShared,
    ) -> PrimResult<()> {
        let &[a, b, acc, use_acc, ref barriers @ ..] = args else {
            return Err(Fault::malformed("an MMA lacks an operand").into());
        };
        let a_data = self.dot_operand(op, shared, a, task)?;
        let b_data = self.dot_operand(op, shared, b, task)?;
        let operands = [a, b]
            .into_iter()
            .map(|v| {
                let view = self.buffer_view(v)?;
                Ok(shared.smem.buffer_id(view.alloc, view.buffer))
            })
            .collect::<Result<Vec<_>, Fault>>()?;
        let view = self.buffer_view(acc)?;
        let acc_id = shared.smem.buffer_id(view.alloc, view.buffer);
        let accumulate = self.predicate(use_acc)?;
        if accumulate && !shared.smem.written(view.alloc, view.buffer) {
            return Err(Stop::error(InterpError::UnwrittenShared {
                at: self.site(Some(op)),
                task: self.task.name.clone(),
                buffer: acc_id,
            }));
        }
        self.check_write(op, shared, acc_id, task)?;
        match (a_data, b_data) {
            (Some(x), Some(y)) => {
                let Type::TensorMemory(m) = self.type_of(acc)? else {
                    return Err(Fault::malformed("an MMA into a non-tensor-memory buffer").into());
                };
                let start = if accumulate {
                    view.read(shared)?
                } else {
                    Data::Float(vec![0.0; view.numel])
                };
                let start = Tensor::new(m.shape().to_vec(), start)?;
                let input = self.scalar_type(a)?;
                let data = dot::dot(&x, &y, &start, input, m.elem(), DotPrecision::Tf32)?;
                view.write(shared, data)?;
            }
            _ => shared.smem.mark_written(view.alloc, view.buffer)?,
        }
        shared
            .footprint
            .touch(Object::Buffer(acc_id), Access::Write);
        shared.mmas.push(PendingMma {
            task,
            acc: acc_id,
            operands,
            line: op.loc.line,
        });
        if barriers.is_empty() {
            return Ok(());
        }
        let ids = barriers
            .iter()
            .map(|&v| self.barrier_of(v))
            .collect::<Result<Vec<_>, Fault>>()?;
        self.in_flight.mma_signalled.extend(&ids);
        self.complete_mmas(op, &ids, task, shared)
    }

    /// `tcgen05_commit(bar)`.
    pub(super) fn tcgen05_commit(
        &mut self,
        op: &Op,
        bar: ValueId,
        task: usize,
        shared: &mut ProgramShared,
    ) -> PrimResult<()> {
        let id = self.barrier_of(bar)?;
        let tracks_new = shared.mmas.iter().any(|m| m.task == task);
        let signalled = std::mem::take(&mut self.in_flight.mma_signalled);
        if !tracks_new && signalled.contains(&id) {
            return Err(Stop::error(InterpError::DoubleMmaCompletion {
                at: self.site(Some(op)),
                task: self.task.name.clone(),
                barrier: id,
            }));
        }
        self.complete_mmas(op, &[id], task, shared)
    }

    /// The task's pending MMAs complete and each of `barriers` gets one
    /// arrival: the accumulators' writes are signalled by those phases and
    /// the operands' reads end.
    fn complete_mmas(
        &mut self,
        op: &Op,
        barriers: &[usize],
        task: usize,
        shared: &mut ProgramShared,
    ) -> PrimResult<()> {
        let phases = barriers
            .iter()
            .map(|&id| Ok((id, barrier(shared, id, Access::Read)?.phase())))
            .collect::<Result<Vec<_>, Stop>>()?;
        let (done, pending): (Vec<_>, Vec<_>) = shared.mmas.drain(..).partition(|m| m.task == task);
        shared.mmas = pending;
        // The arrival waits for every earlier MMA of the thread too, so it
        // also signals the accumulators those wrote.
        for &acc in &self.in_flight.mma_accs {
            if !done.iter().any(|m| m.acc == acc) {
                for &(id, phase) in &phases {
                    shared.async_writes.also_signalled(acc, id, phase);
                }
            }
        }
        for mma in &done {
            shared.async_writes.record_write_signalled(
                mma.acc,
                &self.task.name,
                ("async_dot", mma.line),
                &phases,
            );
            shared.clocks.end_reads(task, &mma.operands);
            if !self.in_flight.mma_accs.contains(&mma.acc) {
                self.in_flight.mma_accs.push(mma.acc);
            }
        }
        for &(id, _) in &phases {
            self.arrive_on(op, id, 1, task, shared)?;
        }
        Ok(())
    }

    /// A `local_load` or `local_store` of tensor-memory buffer `acc_id`: no
    /// MMA into it may be in flight untracked, and a read must follow a
    /// wait for the barrier phase that tracks the last one.
    pub(super) fn check_tensor_memory(
        &self,
        op: &Op,
        shared: &ProgramShared,
        (acc_id, written): (usize, bool),
        task: usize,
        read: bool,
    ) -> PrimResult<()> {
        // Another task's MMA into it may be pending: an order-dependent look.
        let access = if read { Access::Read } else { Access::Write };
        shared.footprint.touch(Object::Buffer(acc_id), access);
        let untracked = shared.mmas.iter().find(|m| m.acc == acc_id);
        let race = if read {
            let seen = shared.clocks.seen(task);
            shared.async_writes.check_read(acc_id, task, seen).err()
        } else {
            None
        };
        let (mma_line, barrier) = match (untracked, race) {
            (Some(m), _) => (Some(m.line), None),
            (None, Some(race)) => (Some(race.line), Some((race.barrier, race.phase))),
            (None, None) if read && !written => (None, None),
            (None, None) => return Ok(()),
        };
        Err(Stop::error(InterpError::AccumulatorBeforeCompletion {
            at: self.site(Some(op)),
            task: self.task.name.clone(),
            access: Box::new(EarlyAccumulatorAccess {
                buffer: acc_id,
                mma_line,
                barrier,
            }),
        }))
    }
}

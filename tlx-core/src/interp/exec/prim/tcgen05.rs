//! Blackwell's tensor-memory MMAs on the interpreter: `async_dot` into a
//! tensor-memory accumulator computes at issue, but what it wrote is
//! published only through the barriers that track its completion (its
//! `mbarriers`, or a later `tcgen05_commit` of the issuing task), as a TMA
//! copy's bytes are through its barrier: until then its operands count as
//! being read, and a read of the accumulator is an error; after, a reader
//! that has not waited for that barrier phase races with it.

use crate::ir::{DotPrecision, Named, Op, Prim, ScaledForm, TensorMemoryType, Type, ValueId};
use std::rc::Rc;

use super::super::super::dot;
use super::super::super::error::{EarlyAccumulatorAccess, Fault, InterpError};
use super::super::super::explore::{Access, Object};
use super::super::super::schedule::ProgramShared;
use super::super::super::value::{Data, Tensor};
use super::super::{Executor, MmaOperand};
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
    /// Runs one of the family's primitives.
    pub(super) fn tcgen05_prim(
        &mut self,
        op: &Op,
        named: Named<'_, ValueId>,
        task: usize,
        shared: &mut ProgramShared,
    ) -> PrimResult<()> {
        let arg = |name: &str| named.get(name).copied().map_err(Fault::malformed);
        let pair = || Ok::<bool, Fault>(named.imm("two_ctas").map_err(Fault::malformed)? == 1);
        match named.prim() {
            Prim::Tcgen05Mma => self.tcgen05_mma(op, named.operands(), None, pair()?, task, shared),
            Prim::Tcgen05MmaScaled => {
                let scales = (arg("a_scale")?, arg("b_scale")?);
                let mut operands = vec![arg("a")?, arg("b")?, arg("acc")?, arg("use_acc")?];
                operands.extend(named.rest("mbarriers").map_err(Fault::malformed)?);
                self.tcgen05_mma(op, &operands, Some(scales), false, task, shared)
            }
            Prim::Tcgen05Commit => self.tcgen05_commit(op, arg("bar")?, pair()?, task, shared),
            Prim::TmemCopy => self.tmem_copy(op, arg("src")?, arg("dst")?, task, shared),
            other => Err(Fault::malformed(format!(
                "`{}` is not a tcgen05 primitive",
                other.mnemonic()
            ))
            .into()),
        }
    }

    /// `async_dot(a, b, acc, use_acc, mbarriers, two_ctas)` into tensor
    /// memory; over a pair of programs, issued by the even one for both.
    /// With `scales` (`async_dot_scaled`'s `a_scale`, `b_scale`), A's rows
    /// and B's columns are scaled per 32 elements of K first.
    pub(super) fn tcgen05_mma(
        &mut self,
        op: &Op,
        args: &[ValueId],
        scales: Option<(ValueId, ValueId)>,
        pair: bool,
        task: usize,
        shared: &mut ProgramShared,
    ) -> PrimResult<()> {
        let &[a, b, acc, use_acc, ref barriers @ ..] = args else {
            return Err(Fault::malformed("an MMA lacks an operand").into());
        };
        let Some(members) = self.mma_members(pair) else {
            return Ok(());
        };
        let Type::TensorMemory(m) = self.type_of(acc)?.clone() else {
            return Err(Fault::malformed("an MMA into a non-tensor-memory buffer").into());
        };
        let input = self.scalar_type(a)?;
        // Each program's operands and accumulator, at the same places.
        let own = [
            self.buffer_view(a)?,
            self.buffer_view(b)?,
            self.buffer_view(acc)?,
        ];
        let mut sides = Vec::with_capacity(members.len());
        for &rank in &members {
            sides.push([
                self.member_view(op, shared, &own[0], rank)?,
                self.member_view(op, shared, &own[1], rank)?,
                self.member_view(op, shared, &own[2], rank)?,
            ]);
        }
        let mut operands = Vec::with_capacity(2 * sides.len());
        for [a_view, b_view, _] in &sides {
            for view in [a_view, b_view] {
                self.check_read(op, shared, view.alloc, view.buffer, task)?;
                operands.push(shared.smem.buffer_id(view.alloc, view.buffer));
            }
        }
        let scale_views = match scales {
            Some((sa, sb)) => {
                let views = [self.buffer_view(sa)?, self.buffer_view(sb)?];
                for view in &views {
                    let id = shared.smem.buffer_id(view.alloc, view.buffer);
                    if !shared.smem.written(view.alloc, view.buffer) {
                        return Err(Stop::error(InterpError::UnwrittenShared {
                            at: self.site(Some(op)),
                            task: self.task.name.clone(),
                            buffer: id,
                        }));
                    }
                    shared.footprint.touch(Object::Buffer(id), Access::Read);
                    operands.push(id);
                }
                Some(views)
            }
            None => None,
        };
        let accumulate = self.predicate(use_acc)?;
        for [_, _, acc_view] in &sides {
            let acc_id = shared.smem.buffer_id(acc_view.alloc, acc_view.buffer);
            if accumulate && !shared.smem.written(acc_view.alloc, acc_view.buffer) {
                return Err(Stop::error(InterpError::UnwrittenShared {
                    at: self.site(Some(op)),
                    task: self.task.name.clone(),
                    buffer: acc_id,
                }));
            }
            self.check_write(op, shared, acc_id, task)?;
        }
        // A scaled MMA's form: fp4 operands are unpacked, two per byte.
        let form = match scales {
            Some((sa, _)) => ScaledForm::of(input, self.scalar_type(sa)?),
            None => None,
        };
        let unpack = |data: Data, shape: &[usize], side: Side| match form {
            Some(f) if f.per_byte() == 2 => unpack_e2m1(&data, shape, side),
            _ => Tensor::new(shape.to_vec(), data),
        };
        // B of the whole MMA: the programs' halves side by side.
        let b_shape = self.type_of(b)?.shape().to_vec();
        let b_full = match self.skeleton {
            Some(_) => None,
            None => {
                let halves = sides
                    .iter()
                    .map(|[_, b_view, _]| unpack(b_view.read(shared)?, &b_shape, Side::Columns))
                    .collect::<Result<Vec<_>, Fault>>()?;
                let half_shape = halves.first().map(|t| t.shape.clone()).unwrap_or_default();
                Some(side_by_side(
                    halves.into_iter().map(|t| t.data).collect(),
                    &half_shape,
                )?)
            }
        };
        // Block scales: B's columns now, A's rows per program below.
        let scale_data = match (&scale_views, self.skeleton) {
            (Some([sa, sb]), None) => Some((sa.read(shared)?, sb.read(shared)?)),
            _ => None,
        };
        let block = form.map_or(32, ScaledForm::block);
        let b_full = match (b_full, &scale_data) {
            (Some(y), Some((_, sb))) => Some(Rc::new(scale_blocks(&y, sb, Side::Columns, block)?)),
            (y, _) => y,
        };
        for [a_view, _, acc_view] in &sides {
            let acc_id = shared.smem.buffer_id(acc_view.alloc, acc_view.buffer);
            match &b_full {
                Some(y) => {
                    let x = unpack(a_view.read(shared)?, self.type_of(a)?.shape(), Side::Rows)?;
                    let x = match &scale_data {
                        Some((sa, _)) => scale_blocks(&x, sa, Side::Rows, block)?,
                        None => x,
                    };
                    let start = if accumulate {
                        acc_view.read(shared)?
                    } else {
                        Data::Float(vec![0.0; acc_view.numel])
                    };
                    let start = Tensor::new(m.shape().to_vec(), start)?;
                    let data = dot::dot(&x, y, &start, input, m.elem(), DotPrecision::Tf32)?;
                    acc_view.write(shared, data)?;
                }
                None => shared.smem.mark_written(acc_view.alloc, acc_view.buffer)?,
            }
            shared
                .footprint
                .touch(Object::Buffer(acc_id), Access::Write);
            shared.mmas.push(PendingMma {
                task,
                acc: acc_id,
                operands: operands.clone(),
                line: op.loc.line,
            });
        }
        if barriers.is_empty() {
            return Ok(());
        }
        let mut ids = Vec::with_capacity(barriers.len() * members.len());
        for &v in barriers {
            let id = self.barrier_of(v)?;
            for &rank in &members {
                ids.push(self.member_barrier(op, shared, id, rank)?);
            }
        }
        self.in_flight.mma_signalled.extend(&ids);
        self.complete_mmas(op, &ids, task, shared)
    }

    /// `tmem_copy(src, dst)`: the copy lands at issue; like an MMA's write,
    /// a barrier that tracks the task's MMAs publishes it, and the source
    /// counts as read until then.
    pub(super) fn tmem_copy(
        &mut self,
        op: &Op,
        src: ValueId,
        dst: ValueId,
        task: usize,
        shared: &mut ProgramShared,
    ) -> PrimResult<()> {
        let from = self.buffer_view(src)?;
        self.check_read(op, shared, from.alloc, from.buffer, task)?;
        let to = self.buffer_view(dst)?;
        let dst_id = shared.smem.buffer_id(to.alloc, to.buffer);
        self.check_write(op, shared, dst_id, task)?;
        match self.skeleton {
            Some(_) => shared.smem.mark_written(to.alloc, to.buffer)?,
            None => {
                let data = from.read(shared)?;
                let data = match self.type_of(dst)? {
                    Type::TensorMemory(m) if m.elem().size_bytes() == 1 => {
                        unswizzle_scales(&data, m.shape())?
                    }
                    _ => data,
                };
                to.write(shared, data)?;
            }
        }
        shared
            .footprint
            .touch(Object::Buffer(dst_id), Access::Write);
        shared.mmas.push(PendingMma {
            task,
            acc: dst_id,
            operands: vec![shared.smem.buffer_id(from.alloc, from.buffer)],
            line: op.loc.line,
        });
        Ok(())
    }

    /// `tcgen05_commit(bar, two_ctas)`.
    pub(super) fn tcgen05_commit(
        &mut self,
        op: &Op,
        bar: ValueId,
        pair: bool,
        task: usize,
        shared: &mut ProgramShared,
    ) -> PrimResult<()> {
        let Some(members) = self.mma_members(pair) else {
            return Ok(());
        };
        let local = self.barrier_of(bar)?;
        let ids = members
            .iter()
            .map(|&rank| self.member_barrier(op, shared, local, rank))
            .collect::<PrimResult<Vec<_>>>()?;
        let tracks_new = shared.mmas.iter().any(|m| m.task == task);
        let signalled = std::mem::take(&mut self.in_flight.mma_signalled);
        if !tracks_new && signalled.contains(&local) {
            return Err(Stop::error(InterpError::DoubleMmaCompletion {
                at: self.site(Some(op)),
                task: self.task.name.clone(),
                barrier: local,
            }));
        }
        self.complete_mmas(op, &ids, task, shared)
    }

    /// The programs (cluster ranks) a `tcgen05` op acts for: this one, or
    /// over a pair both, when this is the pair's even program; `None` for
    /// the odd one, which issues nothing.
    fn mma_members(&self, pair: bool) -> Option<Vec<usize>> {
        let rank = self.cluster_rank();
        match (pair, rank % 2) {
            (false, _) => Some(vec![rank]),
            (true, 0) => Some(vec![rank, rank + 1]),
            (true, _) => None,
        }
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
            for &buffer in &mma.operands {
                self.in_flight.mma_operands.push(MmaOperand {
                    buffer,
                    completions: phases.clone(),
                    line: mma.line,
                });
            }
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

/// The `[K, N / members]` halves of B, each row-major, as one `[K, N]`
/// operand: row `k` is every half's row `k` in turn.
fn side_by_side(halves: Vec<Data>, half_shape: &[usize]) -> Result<Rc<Tensor>, Fault> {
    let &[k, n] = half_shape else {
        return Err(Fault::malformed("an MMA's B is not a matrix"));
    };
    let count = halves.len();
    let mut rows = Vec::with_capacity(k * n * count);
    for row in 0..k {
        for half in &halves {
            let Data::Float(values) = half else {
                return Err(Fault::malformed("an MMA's B is not floating-point"));
            };
            rows.extend_from_slice(&values[row * n..(row + 1) * n]);
        }
    }
    Ok(Rc::new(Tensor::new(vec![k, n * count], Data::Float(rows))?))
}

/// Which dimension of an operand K runs along: A's columns (a scale per
/// row) or B's rows (a scale per column).
#[derive(Clone, Copy)]
enum Side {
    Rows,
    Columns,
}

/// An e2m1 operand packed two per byte (low nibble first along K) as its
/// values: A's `[M, K / 2]` bytes as `[M, K]`, B's `[K / 2, N]` as `[K, N]`.
fn unpack_e2m1(bytes: &Data, shape: &[usize], side: Side) -> Result<Tensor, Fault> {
    let (&[r, c], Data::Int(codes)) = (shape, bytes) else {
        return Err(Fault::malformed("an fp4 operand that is not a u8 matrix"));
    };
    let value = |code: i64, high: bool| {
        let nibble = if high { code >> 4 } else { code } & 0xf;
        crate::numeric::e2m1_to_f32(nibble as u8)
    };
    let (rows, cols) = match side {
        Side::Rows => (r, 2 * c),
        Side::Columns => (2 * r, c),
    };
    let mut out = Vec::with_capacity(rows * cols);
    for i in 0..rows {
        for j in 0..cols {
            let (byte, high) = match side {
                Side::Rows => (codes[i * c + j / 2], j % 2 == 1),
                Side::Columns => (codes[(i / 2) * c + j], i % 2 == 1),
            };
            out.push(value(byte, high));
        }
    }
    Tensor::new(vec![rows, cols], Data::Float(out))
}

/// `t` with each element multiplied by the scale of its row (A) or column
/// (B) and its `block`-element block of K: `scales` is `[rows, K / block]`,
/// ue8m0 exponents (`2^(e - 127)`, 255 NaN) or ue4m3 values (read as e4m3;
/// the sign bit, which ue4m3 lacks, gives NaN). The products are exact in
/// f32 for scales within f32's range, as the tensor core's are.
fn scale_blocks(t: &Tensor, scales: &Data, side: Side, block: usize) -> Result<Tensor, Fault> {
    let (&[r, c], Data::Float(values)) = (t.shape.as_slice(), &t.data) else {
        return Err(Fault::malformed(
            "block scales of a non-matrix or non-float operand",
        ));
    };
    let blocks = match side {
        Side::Rows => c / block,
        Side::Columns => r / block,
    };
    let scale = |i: usize| -> f32 {
        match scales {
            Data::Int(e) => match e.get(i).copied() {
                Some(e @ 0..=254) => 2f64.powi(e as i32 - 127) as f32,
                _ => f32::NAN,
            },
            Data::Float(v) => v.get(i).copied().filter(|s| *s >= 0.0).unwrap_or(f32::NAN),
            _ => f32::NAN,
        }
    };
    let mut out = values.clone();
    for (i, v) in out.iter_mut().enumerate() {
        let (row, k) = match side {
            Side::Rows => (i / c, i % c),
            Side::Columns => (i % c, i / c),
        };
        *v *= scale(row * blocks + k / block);
    }
    Tensor::new(t.shape.clone(), Data::Float(out))
}

/// Block scales as `tmem_copy` reads them from shared memory
/// ([`TensorMemoryType::scale_atom_offset`]) into the buffer's `[R, KB]`
/// order.
fn unswizzle_scales(atoms: &Data, shape: &[usize]) -> Result<Data, Fault> {
    let &[rows, blocks] = shape else {
        return Err(Fault::malformed("block scales that are not a matrix"));
    };
    if atoms.len() < rows * blocks {
        return Err(Fault::malformed(
            "block scales shorter than their tensor-memory buffer",
        ));
    }
    let mut at = Vec::with_capacity(rows * blocks);
    for r in 0..rows {
        for kb in 0..blocks {
            at.push(TensorMemoryType::scale_atom_offset(r, kb, blocks));
        }
    }
    Ok(atoms.gather(&at))
}

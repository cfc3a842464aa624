//! The memory family's lowering (`local_alloc`, `local_view`,
//! `local_slice`, `local_trans`, `local_reinterpret`, `local_load`,
//! `local_store`): a shared buffer's value is its byte offset in the shared
//! array, a view or slice moves that offset, and loads and stores go
//! through the buffer's element placement. Tensor-memory buffers take the
//! `tcgen05` forms of `crate::tcgen05`.

use super::{no_lowering, Operands};
use crate::analysis::storage::{buffer_layout, buffer_stride, layout_swizzle};
use crate::error::{malformed, Result};
use crate::lower::{Lowerer, Tensor};
use crate::CodegenError;
use tlx_core::ir::{Elem, Op, OpKind, Prim, SharedMemoryType, Type, ValueId};

/// How a `local_slice` from `from` to `to` moves the base: along which
/// dimension, and bytes per unit of its offset; `None` when the slice is not
/// laid out in the buffer as a buffer of its own shape would be.
fn slice_step(from: &SharedMemoryType, to: &SharedMemoryType) -> Option<(usize, usize)> {
    let eb = from.elem().size_bytes();
    let (f, t) = (from.shape(), to.shape());
    let rest = |d: usize| f[d + 1..].iter().product::<usize>();
    let sliced: Vec<usize> = (0..f.len()).filter(|&d| f[d] != t[d]).collect();
    match (layout_swizzle(from.swizzle()), sliced.as_slice()) {
        (_, []) => Some((0, 0)),
        // Whole rows: row-major, or NVMMA with one column block.
        (None, [0]) => Some((0, rest(0) * eb)),
        (Some(s), [0]) if f.len() == 2 && f[1] * eb == s.atom_bytes() => Some((0, f[1] * eb)),
        // Whole column blocks of an NVMMA buffer (all rows).
        (Some(s), [1]) if f.len() == 2 && (t[1] * eb) % s.atom_bytes() == 0 => {
            // One atom column block spans `rows * atom` bytes.
            let atom_elems = s.atom_bytes() / eb;
            Some((1, f[0] * s.atom_bytes() / atom_elems))
        }
        _ => None,
    }
}

fn elem_of(m: &SharedMemoryType) -> Elem {
    Elem::Scalar(m.elem())
}

impl<'k> Lowerer<'k> {
    pub(super) fn lower_memory_prim(&mut self, op: &'k Op, named: &Operands<'k>) -> Result<()> {
        let arg = |name: &str| named.arg(name);
        let rest = |name: &str| named.rest(name);
        let result = || named.result();
        match named.prim() {
            Prim::LocalAlloc if matches!(self.ty(result()?), Type::TensorMemory(_)) => {
                self.tmem_alloc(op, result()?)
            }
            Prim::LocalAlloc => {
                self.define_placed(result()?)?;
                Ok(())
            }
            Prim::LocalView if matches!(self.ty(arg("buffers")?), Type::TensorMemory(_)) => {
                let Type::TensorMemory(m) = self.ty(arg("buffers")?) else {
                    return Err(malformed("a view of tensor memory"));
                };
                let (base, index) = (
                    self.register(arg("buffers")?)?,
                    self.register(arg("index")?)?,
                );
                let at = self.tmem_view(m, &base, &index);
                self.define_register(result()?, at)
            }
            Prim::LocalView => {
                let stride = match self.ty(arg("buffers")?) {
                    Type::SharedMemory(m) => buffer_stride(m),
                    _ => 8,
                };
                let base = self.register(arg("buffers")?)?;
                let index = self.register(arg("index")?)?;
                let delta = self.f.inst(format!("mul i32 {index}, {stride}"));
                let at = self.f.inst(format!("add i32 {base}, {delta}"));
                self.define_register(result()?, at)
            }
            // The same bytes: only the type (and so the placement) changes.
            Prim::LocalTrans => {
                let base = self.register(arg("buffer")?)?;
                self.define_register(result()?, base)
            }
            Prim::LocalReinterpret => {
                // A slice's elements are not the bytes after its start.
                let of_slice = self.def_of(arg("buffer")?).is_some_and(|def| {
                    matches!(
                        def.kind,
                        OpKind::Prim {
                            prim: Prim::LocalSlice,
                            ..
                        }
                    )
                });
                if of_slice {
                    return Err(CodegenError::Misuse {
                        message: "`local_reinterpret` of a `local_slice`".into(),
                        hint: "reinterpret the whole buffer (a `local_view`), then slice the \
                               reinterpreted view"
                            .into(),
                        at: Some(op.loc),
                    });
                }
                let base = self.register(arg("buffer")?)?;
                self.define_register(result()?, base)
            }
            // Rows stay (a slice keeps all 128 lanes): the column offset moves.
            Prim::LocalSlice if matches!(self.ty(arg("buffer")?), Type::TensorMemory(_)) => {
                let column = *rest("offsets")?
                    .get(1)
                    .ok_or_else(|| malformed("a 2-d slice"))?;
                let (base, column) = (self.register(arg("buffer")?)?, self.register(column)?);
                let at = self.f.inst(format!("add i32 {base}, {column}"));
                self.define_register(result()?, at)
            }
            Prim::LocalSlice => {
                let from = self.buffer_type(arg("buffer")?)?;
                let to = self.buffer_type(result()?)?;
                let (dim, step) = slice_step(&from, &to).ok_or_else(|| CodegenError::Misuse {
                    message: format!(
                        "`local_slice` of a {:?} sub-tile of a {:?} buffer",
                        to.shape(),
                        from.shape(),
                    ),
                    hint: "slices are whole rows (all columns, at a row offset that is a multiple \
                           of 8 for swizzled buffers) or whole column blocks of the swizzle atom"
                        .into(),
                    at: Some(op.loc),
                })?;
                let base = self.register(arg("buffer")?)?;
                let offset = *rest("offsets")?
                    .get(dim)
                    .ok_or_else(|| malformed("an offset"))?;
                let offset = self.register(offset)?;
                let delta = self.f.inst(format!("mul i32 {offset}, {step}"));
                let at = self.f.inst(format!("add i32 {base}, {delta}"));
                self.define_register(result()?, at)
            }
            Prim::LocalLoad if matches!(self.ty(arg("buffer")?), Type::TensorMemory(_)) => {
                self.tmem_load(op, arg("buffer")?, result()?)
            }
            Prim::LocalStore if matches!(self.ty(arg("buffer")?), Type::TensorMemory(_)) => {
                self.tmem_store(op, arg("buffer")?, arg("value")?)
            }
            Prim::LocalLoad => {
                let m = self.buffer_type(arg("buffer")?)?;
                let placement = buffer_layout(&m)?;
                let base = self.register(arg("buffer")?)?;
                self.note_load(result()?, op);
                let layout = match self.load_hint(result()?) {
                    Some(hint) => hint,
                    None => self.default_layout(m.shape())?,
                };
                let regs = self.load_placed_at(&layout, elem_of(&m), &placement, &base)?;
                self.define_value(result()?, Tensor { layout, regs });
                Ok(())
            }
            Prim::LocalStore => {
                let m = self.buffer_type(arg("buffer")?)?;
                let placement = buffer_layout(&m)?;
                let base = self.register(arg("buffer")?)?;
                let value = self.tensor(arg("value")?)?;
                // As Triton's shared-memory barrier analysis would: earlier
                // readers of the buffer are done, and later readers (other
                // threads, the async proxy) see the whole tile. A barrier
                // with nothing but pure instructions after it (the one of
                // `async_descriptor_store_wait` before a TMA store's
                // staging buffer is refilled) already orders the readers.
                if !self.barrier_stands() {
                    self.barrier();
                }
                self.store_placed_at(&value, elem_of(&m), &placement, &base)?;
                self.shared_writes_reach_async_proxy();
                Ok(())
            }
            other => Err(no_lowering(other)),
        }
    }

    /// Defines the `local_alloc` or `alloc_barriers` result `r` as the byte
    /// offset the static plan gave it, and returns that offset.
    pub(super) fn define_placed(&mut self, r: ValueId) -> Result<usize> {
        let at = self
            .facts
            .static_shared
            .offsets
            .get(&r)
            .copied()
            .ok_or_else(|| malformed("an allocation the planner did not place"))?;
        self.define_register(r, at.to_string())?;
        Ok(at)
    }
}

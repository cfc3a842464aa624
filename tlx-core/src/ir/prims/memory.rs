//! Shared- and tensor-memory buffers: allocation, views (one buffer, a
//! slice, the transpose, a reinterpretation) and register loads and stores.

use super::rules::{buffer_contents, i32_scalar, local, one_buffer, same};
use super::tma::{shared_swizzle, without_leading_ones};
use super::{Interp, Lowering, PrimDef, PrimSignature, Protocol, Surface, Typing};
use crate::ir::def::{Effects, MemorySpace, MemorySpaces};
use crate::ir::types::{SharedMemoryType, TensorMemoryType, Type};
use crate::ir::Swizzle;

/// Reads or writes a buffer of shared or tensor memory.
const SHARED_OR_TENSOR: MemorySpaces =
    MemorySpaces::only(MemorySpace::Shared).with(MemorySpace::Tensor);

/// `local_alloc(shape, dtype, num)`: `num` buffers in shared memory (or
/// tensor memory, `storage = tmem`); the result type says it all. With an
/// operand (`reuse = other`), the buffers are `other`'s bytes, buffer for
/// buffer. An allocation is an identity, not a value: two are two buffers,
/// so it must not be merged or dropped like a pure op.
pub(super) const LOCAL_ALLOC: PrimDef = PrimDef {
    name: "local_alloc",
    signature: PrimSignature::new(&["reuse"], &[], 1).variadic(),
    surface: Surface::custom(&["shape", "dtype", "num", "reuse", "storage"], 2),
    effects: Effects {
        writes: MemorySpaces::only(MemorySpace::Shared),
        ..Effects::PURE
    },
    rule: local_alloc,
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

fn local_alloc(t: &Typing) -> Result<(), String> {
    let m = match t.result()? {
        Type::SharedMemory(m) if m.buffers() >= 1 && !m.shape().is_empty() => m,
        Type::TensorMemory(m) if m.buffers() >= 1 => {
            if !t.rest("reuse")?.is_empty() {
                return Err("`reuse` of tensor memory: allocate it once and \
                            pick buffers with `local_view`"
                    .into());
            }
            return TensorMemoryType::rule(m.elem(), m.shape());
        }
        other => return Err(format!("`local_alloc` makes shared buffers, not {other}")),
    };
    match t.rest("reuse")? {
        [] => Ok(()),
        [Type::SharedMemory(other)] => reusable(other, m),
        _ => Err("`local_alloc` reuses at most one allocation (`reuse = other`)".into()),
    }
}

/// `local_view(buffers, i)`: buffer (or mbarrier) `i` of an allocation.
pub(super) const LOCAL_VIEW: PrimDef = PrimDef {
    name: "local_view",
    signature: PrimSignature::new(&["buffers", "index"], &[], 1),
    surface: Surface::custom(&["buffers", "index"], 2),
    effects: Effects::PURE,
    rule: local_view,
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

fn local_view(t: &Typing) -> Result<(), String> {
    i32_scalar(t.operand("index")?, "the index")?;
    let all = t.operand("buffers")?;
    local(all, "`local_view`")?;
    match (all, t.result()?) {
        (Type::SharedMemory(all), Type::SharedMemory(one))
            if one.buffers() == 1
                && !one.remote()
                && one.elem() == all.elem()
                && one.shape() == all.shape()
                && one.swizzle() == all.swizzle() =>
        {
            Ok(())
        }
        (Type::Barriers(_), Type::Barriers(one)) if one.count() == 1 && !one.remote() => Ok(()),
        (Type::TensorMemory(all), Type::TensorMemory(one)) if *one == all.one_buffer() => Ok(()),
        (from, to) => Err(format!("`local_view` of {from} cannot give {to}")),
    }
}

/// `local_slice(buffer, offsets, shapes)`: the sub-tile of `shapes` (the
/// result type's) at `offsets` of a buffer, as a buffer.
pub(super) const LOCAL_SLICE: PrimDef = PrimDef {
    name: "local_slice",
    signature: PrimSignature::new(&["buffer", "offsets"], &[], 1).variadic(),
    surface: Surface::custom(&["buffer", "offsets", "shapes"], 3),
    effects: Effects::PURE,
    rule: local_slice,
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

fn local_slice(t: &Typing) -> Result<(), String> {
    let (buffer, result, offsets) = (t.operand("buffer")?, t.result()?, t.rest("offsets")?);
    if let Type::TensorMemory(_) = buffer {
        return tensor_memory_slice(buffer, result, offsets);
    }
    let m = one_buffer(buffer, "`local_slice`")?;
    let Type::SharedMemory(r) = result else {
        return Err(format!("`local_slice` gives a buffer, not {result}"));
    };
    let fits = r.buffers() == 1
        && !r.remote()
        && !m.transposed()
        && !r.transposed()
        && r.elem() == m.elem()
        && r.swizzle() == m.swizzle()
        && r.shape().len() == m.shape().len()
        && r.shape()
            .iter()
            .zip(m.shape())
            .all(|(a, b)| (1..=*b).contains(a));
    if !fits {
        return Err(format!("a slice of {buffer} cannot be {result}"));
    }
    if offsets.len() != m.shape().len() {
        return Err(format!(
            "{} offsets for a {}-d buffer",
            offsets.len(),
            m.shape().len()
        ));
    }
    offsets.iter().try_for_each(|t| i32_scalar(t, "an offset"))
}

/// Whole rows (TMEM lanes), a run of columns.
fn tensor_memory_slice(buffer: &Type, result: &Type, offsets: &[&Type]) -> Result<(), String> {
    let (Type::TensorMemory(m), Type::TensorMemory(r)) = (buffer, result) else {
        return Err(format!("a slice of {buffer} cannot be {result}"));
    };
    let fits = m.buffers() == 1
        && r.buffers() == 1
        && r.elem() == m.elem()
        && r.shape().len() == 2
        && r.shape()[0] == m.shape()[0]
        && r.shape()[1] <= m.shape()[1];
    if !fits {
        return Err(format!(
            "a slice of {buffer} cannot be {result}: tensor-memory slices keep all 128 rows \
             and take a run of columns"
        ));
    }
    TensorMemoryType::rule(r.elem(), r.shape())?;
    if offsets.len() != 2 {
        return Err(format!("{} offsets for a 2-d buffer", offsets.len()));
    }
    offsets.iter().try_for_each(|t| i32_scalar(t, "an offset"))
}

/// `local_trans(buffer)`: the transposed view of a matrix buffer (same
/// bytes), e.g. a K-major `[N, K]` tile as the `[K, N]` B of `async_dot`.
pub(super) const LOCAL_TRANS: PrimDef = PrimDef {
    name: "local_trans",
    signature: PrimSignature::new(&["buffer"], &[], 1),
    surface: Surface::custom(&["buffer"], 1),
    effects: Effects::PURE,
    rule: local_trans,
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

fn local_trans(t: &Typing) -> Result<(), String> {
    let buffer = t.operand("buffer")?;
    let m = one_buffer(buffer, "`local_trans`")?;
    if m.shape().len() != 2 {
        return Err(format!("`local_trans` takes a matrix, not {buffer}"));
    }
    same(t.result()?, &Type::SharedMemory(m.transpose()), "the view")
}

/// `local_load(buffer)`: a buffer's contents (shared or tensor memory) as a
/// register tensor.
pub(super) const LOCAL_LOAD: PrimDef = PrimDef {
    name: "local_load",
    signature: PrimSignature::new(&["buffer"], &[], 1),
    surface: Surface::custom(&["buffer"], 1),
    effects: Effects {
        reads: SHARED_OR_TENSOR,
        ..Effects::PURE
    },
    rule: local_load,
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

fn local_load(t: &Typing) -> Result<(), String> {
    let (elem, shape) = buffer_contents(t.operand("buffer")?, "`local_load`")?;
    same(
        t.result()?,
        &Type::tensor(elem.into(), shape),
        "the loaded tensor",
    )
}

/// `local_store(buffer, value)`: a register tensor into a buffer.
pub(super) const LOCAL_STORE: PrimDef = PrimDef {
    name: "local_store",
    signature: PrimSignature::new(&["buffer", "value"], &[], 0),
    surface: Surface::custom(&["buffer", "value"], 2),
    effects: Effects {
        writes: SHARED_OR_TENSOR,
        ..Effects::PURE
    },
    rule: local_store,
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

fn local_store(t: &Typing) -> Result<(), String> {
    let (elem, shape) = buffer_contents(t.operand("buffer")?, "`local_store`")?;
    same(
        t.operand("value")?,
        &Type::tensor(elem.into(), shape),
        "the stored tensor",
    )
}

/// `local_reinterpret(buffer, dtype, shape)`: the bytes of one whole buffer
/// seen as a buffer of another element type and shape (the result type's),
/// which must fit in them and be laid out on the same bytes.
pub(super) const LOCAL_REINTERPRET: PrimDef = PrimDef {
    name: "local_reinterpret",
    signature: PrimSignature::new(&["buffer"], &[], 1),
    surface: Surface::custom(&["buffer", "dtype", "shape"], 3),
    effects: Effects::PURE,
    rule: local_reinterpret,
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

fn local_reinterpret(t: &Typing) -> Result<(), String> {
    let from = one_buffer(t.operand("buffer")?, "`local_reinterpret`")?;
    let to = match t.result()? {
        Type::SharedMemory(m) if m.buffers() == 1 => m,
        other => return Err(format!("`local_reinterpret` makes one buffer, not {other}")),
    };
    reinterpretable(from, to)
}

/// Whether allocation `new` may take the bytes of allocation `old`
/// (`reuse = old`): buffer `i` of `new` on buffer `i` of `old`, so each
/// buffer must have the same bytes, there may be no more of them, and the
/// start must suit `new`'s swizzle.
fn reusable(old: &SharedMemoryType, new: &SharedMemoryType) -> Result<(), String> {
    let bytes = |m: &SharedMemoryType| m.shape().iter().product::<usize>() * m.elem().size_bytes();
    if old.transposed() || old.remote() {
        return Err("`reuse` takes an allocation (the result of `local_alloc`), not a view".into());
    }
    if bytes(new) != bytes(old) {
        return Err(format!(
            "each buffer takes {} bytes ({:?} of {}), and each of the reused allocation's {} ({:?} of {}): buffers are reused one for one, so they must be the same size",
            bytes(new), new.shape(), new.elem(), bytes(old), old.shape(), old.elem()
        ));
    }
    if new.buffers() > old.buffers() {
        return Err(format!(
            "{} buffers reuse an allocation of {}: allocate at most {}",
            new.buffers(),
            old.buffers(),
            old.buffers()
        ));
    }
    if new.swizzle().alignment_bytes() > old.swizzle().alignment_bytes() {
        return Err(format!(
            "the buffers' swizzle ({:?}) needs {}-byte alignment, and the reused allocation's start is aligned for its own swizzle ({:?}) only",
            new.swizzle(),
            new.swizzle().alignment_bytes(),
            old.swizzle()
        ));
    }
    Ok(())
}

/// Whether the bytes of buffer `from` may be seen as buffer `to`: no more
/// bytes, not a transposed view, the same swizzle as `to` gets by its own
/// shape (so every consumer lays it out as the bytes are), and, when
/// swizzled, the same rows of the same width (a swizzle moves bytes within
/// rows, and wide rows are stored in atom-wide column blocks whose stride is
/// the row count).
fn reinterpretable(from: &SharedMemoryType, to: &SharedMemoryType) -> Result<(), String> {
    let bytes = |m: &SharedMemoryType| m.shape().iter().product::<usize>() * m.elem().size_bytes();
    if from.transposed() {
        return Err("`local_reinterpret` of a transposed view (`local_trans`): reinterpret the buffer itself".into());
    }
    if bytes(to) > bytes(from) {
        return Err(format!(
            "{:?} of {} take {} bytes, more than the buffer's {} ({:?} of {})",
            to.shape(),
            to.elem(),
            bytes(to),
            bytes(from),
            from.shape(),
            from.elem()
        ));
    }
    let wanted = shared_swizzle(to.elem(), to.shape());
    if to.swizzle() != wanted || from.swizzle() != wanted {
        return Err(format!(
            "the buffer is laid out with the {} swizzle and {:?} of {} would be with the {} one: the same bytes would not hold the same elements; keep the rows' width in bytes",
            from.swizzle().name(),
            to.shape(),
            to.elem(),
            wanted.name()
        ));
    }
    let row_bytes = |m: &SharedMemoryType| {
        let shape = without_leading_ones(m.shape());
        let rows: usize = shape[..shape.len() - 1].iter().product();
        (rows, shape[shape.len() - 1] * m.elem().size_bytes())
    };
    if wanted != Swizzle::None && row_bytes(from) != row_bytes(to) {
        let ((r0, b0), (r1, b1)) = (row_bytes(from), row_bytes(to));
        return Err(format!(
            "a swizzled buffer of {r0} rows of {b0} bytes seen as {r1} rows of {b1} bytes: the swizzle would put the elements elsewhere; keep the rows (e.g. [{r0}, {}] of {})",
            b0 / to.elem().size_bytes(),
            to.elem()
        ));
    }
    Ok(())
}

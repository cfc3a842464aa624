//! Blackwell's fifth-generation tensor cores: MMAs issued by one thread
//! into tensor memory, and the commit that arrives on a barrier when they
//! are done.

use super::rules::{bool_scalar, one_barrier, one_buffer};
use super::{Interp, Lowering, PrimDef, PrimSignature, Protocol, Surface, Typing};
use crate::ir::def::{AsyncRole, Effects, MemorySpace, MemorySpaces, SyncScope};
use crate::ir::types::{ScalarType, SharedMemoryType, TensorMemoryType, Type};

/// `async_dot(a, b, acc, use_acc, mbarriers, two_ctas)` with `acc` a buffer
/// in tensor memory (`tcgen05.mma`): `acc = a @ b` (`+ acc` when the i1
/// `use_acc` holds), issued by one thread and finished asynchronously; each
/// barrier after `use_acc` (zero or more) gets one arrival when it (and
/// every MMA this thread issued before) completes.
///
/// With `two_ctas = 1` (`cta_group::2`) the MMA spans the pair of programs
/// `2p, 2p + 1` of a cluster: program `2p` issues it for both, each
/// program's `acc` is its own `a` (its 128 rows of M = 256) times both
/// programs' `b` side by side (`b` is each one's half of N), and each
/// barrier gets its arrival in both programs; program `2p + 1` issues
/// nothing.
pub(super) const TCGEN05_MMA: PrimDef = PrimDef {
    name: "tcgen05_mma",
    signature: PrimSignature::new(&["a", "b", "acc", "use_acc", "mbarriers"], &["two_ctas"], 0)
        .variadic(),
    surface: Surface::custom(&["a", "b", "acc", "use_acc", "mbarriers", "two_ctas"], 3),
    effects: Effects {
        reads: MemorySpaces::only(MemorySpace::Shared).with(MemorySpace::Tensor),
        writes: MemorySpaces::only(MemorySpace::Tensor),
        async_role: Some(AsyncRole::Starts),
        ..Effects::PURE
    },
    rule: tcgen05_mma,
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

fn tcgen05_mma(t: &Typing) -> Result<(), String> {
    let acc = one_tensor_memory(t.operand("acc")?, "the accumulator")?;
    let a = one_buffer(t.operand("a")?, "`async_dot`'s a")?;
    let b = one_buffer(t.operand("b")?, "`async_dot`'s b")?;
    mma_shapes(a, b, acc, pair(t)?)?;
    bool_scalar(t.operand("use_acc")?, "`use_acc`")?;
    t.rest("mbarriers")?
        .iter()
        .try_for_each(|b| one_barrier(b, "`async_dot`'s mbarriers"))
}

/// `async_dot_scaled(a, b, acc, a_scale, b_scale, use_acc, mbarriers)`
/// (`tcgen05.mma...kind::mxf8f6f4.block_scale`): as a tensor-memory
/// `async_dot`, with fp8 operands (e4m3 or e5m2, each its own) scaled per
/// 32 elements along K: `acc += (a * 2^(a_scale - 127)) @ (b * 2^(b_scale -
/// 127))`, `a_scale` `[128, K / 32]` and `b_scale` `[N, K / 32]` ue8m0
/// exponents (u8) in tensor memory (filled by `tmem_copy`). The formats
/// come from the buffers' types (TLX passes them as words too).
pub(super) const TCGEN05_MMA_SCALED: PrimDef = PrimDef {
    name: "async_dot_scaled",
    signature: PrimSignature::new(
        &[
            "a",
            "b",
            "acc",
            "a_scale",
            "b_scale",
            "use_acc",
            "mbarriers",
        ],
        &[],
        0,
    )
    .variadic(),
    surface: Surface::custom(
        &[
            "a",
            "b",
            "acc",
            "a_scale",
            "b_scale",
            "use_acc",
            "mbarriers",
        ],
        5,
    ),
    effects: Effects {
        reads: MemorySpaces::only(MemorySpace::Shared).with(MemorySpace::Tensor),
        writes: MemorySpaces::only(MemorySpace::Tensor),
        async_role: Some(AsyncRole::Starts),
        ..Effects::PURE
    },
    rule: tcgen05_mma_scaled,
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

fn tcgen05_mma_scaled(t: &Typing) -> Result<(), String> {
    let acc = one_tensor_memory(t.operand("acc")?, "the accumulator")?;
    let a = one_buffer(t.operand("a")?, "`async_dot_scaled`'s a")?;
    let b = one_buffer(t.operand("b")?, "`async_dot_scaled`'s b")?;
    let ([m, k], [k2, n]) = (a.shape(), b.shape()) else {
        return Err("`async_dot_scaled`'s a and b are matrices".into());
    };
    let fp8 = |e: ScalarType| matches!(e, ScalarType::F8E4M3 | ScalarType::F8E5M2);
    if !fp8(a.elem()) || !fp8(b.elem()) {
        return Err(format!(
            "a holds {} and b holds {}: `async_dot_scaled` takes fp8 operands (e4m3 or e5m2, mxfp8)",
            a.elem(),
            b.elem()
        ));
    }
    if k != k2 || *m != TensorMemoryType::LANES || k % 128 != 0 || !matches!(n, 128 | 256) {
        return Err(format!(
            "`async_dot_scaled` multiplies a [128, K] by a [K, N] with K a multiple of 128 (four 32-element scale blocks per scale column) and N 128 or 256, not {:?} by {:?}",
            a.shape(),
            b.shape()
        ));
    }
    if acc.elem() != ScalarType::F32 || acc.shape() != [*m, *n] {
        return Err(format!(
            "a [{m}, {k}] x [{k}, {n}] product accumulates into an f32 [{m}, {n}] tensor-memory buffer, not {}",
            Type::TensorMemory(acc.clone())
        ));
    }
    for (name, rows) in [("a_scale", *m), ("b_scale", *n)] {
        let scale = one_tensor_memory(t.operand(name)?, &format!("`{name}`"))?;
        if scale.elem() != ScalarType::U8 || scale.shape() != [rows, k / 32] {
            return Err(format!(
                "`{name}` holds one ue8m0 exponent (u8) per row and 32 elements of K: a u8 [{rows}, {}] tensor-memory buffer, not {}",
                k / 32,
                Type::TensorMemory(scale.clone())
            ));
        }
    }
    bool_scalar(t.operand("use_acc")?, "`use_acc`")?;
    t.rest("mbarriers")?
        .iter()
        .try_for_each(|b| one_barrier(b, "`async_dot_scaled`'s mbarriers"))
}

/// One buffer of tensor memory.
fn one_tensor_memory<'t>(t: &'t Type, user: &str) -> Result<&'t TensorMemoryType, String> {
    match t {
        Type::TensorMemory(m) if m.buffers() == 1 => Ok(m),
        other => Err(format!("{user} is one tensor-memory buffer, not {other}")),
    }
}

/// `tcgen05_commit(bar, two_ctas)`: one arrival on `bar` when every
/// `tcgen05` MMA this thread issued so far has completed; with `two_ctas =
/// 1`, issued by program `2p` of the pair and arriving on `bar` of both.
pub(super) const TCGEN05_COMMIT: PrimDef = PrimDef {
    name: "tcgen05_commit",
    signature: PrimSignature::new(&["bar"], &["two_ctas"], 0),
    surface: Surface::custom(&["bar", "two_ctas"], 1),
    effects: Effects {
        async_role: Some(AsyncRole::Starts),
        sync: Some(SyncScope::Cta),
        ..Effects::PURE
    },
    rule: |t| {
        pair(t)?;
        one_barrier(t.operand("bar")?, "`tcgen05_commit`")
    },
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

/// `tmem_copy(src, dst)` (`tcgen05.cp`): copies a `[128, N]` buffer of a
/// 32-bit type from shared memory into a tensor-memory buffer of the same
/// type and shape, asynchronously, from one thread, in order with the
/// thread's MMAs (an `async_dot` issued after it sees the copy); a barrier
/// that tracks the thread's MMAs (`mbarriers`, `tcgen05_commit`) also
/// tracks it, and only after a wait on one may another task read `dst` or
/// overwrite `src`.
pub(super) const TMEM_COPY: PrimDef = PrimDef {
    name: "tmem_copy",
    signature: PrimSignature::new(&["src", "dst"], &[], 0),
    surface: Surface::generic(&["src", "dst"], super::rules::no_results),
    effects: Effects {
        reads: MemorySpaces::only(MemorySpace::Shared),
        writes: MemorySpaces::only(MemorySpace::Tensor),
        async_role: Some(AsyncRole::Starts),
        ..Effects::PURE
    },
    rule: tmem_copy,
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

fn tmem_copy(t: &Typing) -> Result<(), String> {
    let src = one_buffer(t.operand("src")?, "`tmem_copy`'s source")?;
    let dst = one_tensor_memory(t.operand("dst")?, "`tmem_copy`'s destination")?;
    if dst.elem() == ScalarType::U8 {
        return scale_copy(src, dst);
    }
    let &[128, n] = src.shape() else {
        return Err(format!(
            "`tmem_copy` copies [128, N] buffers (a row per tensor-memory lane), not {:?}",
            src.shape()
        ));
    };
    if src.elem().size_bytes() != 4 || n % 8 != 0 || src.transposed() {
        return Err(format!(
            "`tmem_copy` copies a [128, N] buffer of a 32-bit type (f32, i32) with N a multiple of 8 (256-bit columns), not a {} {:?}{} one",
            src.elem(),
            src.shape(),
            if src.transposed() { " transposed" } else { "" }
        ));
    }
    if dst.elem() != src.elem() || dst.shape() != src.shape() {
        return Err(format!(
            "`tmem_copy` copies into a tensor-memory buffer of the source's type and shape ({} {:?}), not {}",
            src.elem(),
            src.shape(),
            Type::TensorMemory(dst.clone())
        ));
    }
    Ok(())
}

/// `tmem_copy` of block scales: the source holds the `[R, KB]` exponents
/// as 512-byte atoms of 128 rows by 4 blocks (`tlx::mx::swizzle_scales`'
/// order, cuBLAS's and TLX's), unswizzled.
fn scale_copy(src: &SharedMemoryType, dst: &TensorMemoryType) -> Result<(), String> {
    let bytes: usize = src.shape().iter().product();
    let &[rows, blocks] = dst.shape() else {
        return Err("a scale buffer is a matrix".into());
    };
    if src.elem() != ScalarType::U8 || bytes != rows * blocks || src.transposed() {
        return Err(format!(
            "`tmem_copy` into the u8 [{rows}, {blocks}] scales takes a u8 shared buffer of {} bytes (its 512-byte atoms, as `tlx::mx::swizzle_scales` lays them out), not a {} {:?} one",
            rows * blocks,
            src.elem(),
            src.shape()
        ));
    }
    if src.swizzle() != crate::ir::types::Swizzle::None {
        return Err(format!(
            "the scales' shared buffer {:?} is swizzled: `tmem_copy` reads scale atoms unswizzled; give it fewer than 8 rows (e.g. [2 x atoms, 256])",
            src.shape()
        ));
    }
    Ok(())
}

/// Whether the op spans a pair of programs (`two_ctas`, 0 or 1).
fn pair(t: &Typing) -> Result<bool, String> {
    match t.imm("two_ctas")? {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(format!("`two_ctas` is 0 or 1, not {other}")),
    }
}

/// The shapes and types of a `tcgen05` MMA: `a` `[128, K]` and `b` `[K, N]`
/// of one 16-bit float type in shared memory, K a multiple of 16, into an
/// f32 `[128, N]` accumulator; over a pair of programs, `b` is each one's
/// half, `[K, N / 2]`.
fn mma_shapes(
    a: &SharedMemoryType,
    b: &SharedMemoryType,
    acc: &TensorMemoryType,
    pair: bool,
) -> Result<(), String> {
    let ([m, k], [k2, half_or_n]) = (a.shape(), b.shape()) else {
        return Err("`async_dot`'s a and b are matrices".into());
    };
    if k != k2 {
        return Err(format!(
            "inner dimensions differ: a is {:?}, b is {:?}; a's columns (K) must equal b's rows",
            a.shape(),
            b.shape()
        ));
    }
    if a.elem() != b.elem() || !matches!(a.elem(), ScalarType::F16 | ScalarType::BF16) {
        return Err(format!(
            "a holds {} and b holds {}: a tensor-memory `async_dot` takes f16 or bf16 operands of one type",
            a.elem(),
            b.elem()
        ));
    }
    if k % 16 != 0 {
        return Err(format!(
            "K = {k}: `tcgen05` MMAs step K by 16, so K must be a multiple of 16"
        ));
    }
    let n = if pair { 2 * half_or_n } else { *half_or_n };
    if acc.elem() != ScalarType::F32 || acc.shape() != [*m, n] || n % 16 != 0 {
        let halves = if pair {
            format!(" (b is this program's half of N = {n}: the pair's two b side by side)")
        } else {
            String::new()
        };
        return Err(format!(
            "a [{m}, {k}] x [{k}, {n}] product{halves} accumulates into an f32 [{m}, {n}] tensor-memory buffer with N a multiple of 16, not {}",
            Type::TensorMemory(acc.clone())
        ));
    }
    Ok(())
}

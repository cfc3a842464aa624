//! Blackwell's fifth-generation tensor cores: MMAs issued by one thread
//! into tensor memory, and the commit that arrives on a barrier when they
//! are done.

use super::rules::{bool_scalar, one_barrier, one_buffer};
use super::{Interp, Lowering, PrimDef, PrimSignature, Protocol, Surface, Typing};
use crate::ir::def::{AsyncRole, Effects, MemorySpace, MemorySpaces, SyncScope};
use crate::ir::types::{ScalarType, SharedMemoryType, Swizzle, TensorMemoryType, Type};

/// `async_dot(a, b, acc, use_acc, mbarriers, two_ctas)` with `acc` a buffer
/// in tensor memory (`tcgen05.mma`): `acc = a @ b` (`+ acc` when the i1
/// `use_acc` holds), issued by one thread and finished asynchronously; each
/// barrier after `use_acc` (zero or more) gets one arrival when it (and
/// every MMA this thread issued before) completes. `a` is a shared buffer,
/// or a 16-bit tensor-memory one (the `[a_tmem]` form: `P` of attention
/// stays in tensor memory).
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
        async_reads: true,
        ..Effects::PURE
    },
    rule: tcgen05_mma,
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

fn tcgen05_mma(t: &Typing) -> Result<(), String> {
    let acc = one_tensor_memory(t.operand("acc")?, "the accumulator")?;
    let b = one_buffer(t.operand("b")?, "`async_dot`'s b")?;
    let a = match t.operand("a")? {
        // A from tensor memory (16-bit, two per column): K-major by
        // construction, one program's.
        Type::TensorMemory(m) if m.buffers() == 1 => {
            if pair(t)? {
                return Err("a 2-CTA `async_dot` takes A from shared memory".into());
            }
            if m.shape().first() != Some(&TensorMemoryType::LANES) {
                return Err(format!(
                    "A in tensor memory is [128, K] (an M = 128 MMA's), not {:?}",
                    m.shape()
                ));
            }
            SharedMemoryType::new(m.elem(), m.shape().to_vec(), 1, Swizzle::None, false)
        }
        other => one_buffer(other, "`async_dot`'s a")?.clone(),
    };
    mma_shapes(&a, b, acc, pair(t)?)?;
    bool_scalar(t.operand("use_acc")?, "`use_acc`")?;
    t.rest("mbarriers")?
        .iter()
        .try_for_each(|b| one_barrier(b, "`async_dot`'s mbarriers"))
}

/// `async_dot_scaled(a, b, acc, a_scale, b_scale, use_acc, mbarriers)`
/// (`tcgen05.mma...block_scale`): as a tensor-memory `async_dot`, with
/// low-precision operands scaled per block of K: `acc += (a * sa) @ (b *
/// sb)`, each element times the scale of its row (A) or column (B) and its
/// block. Three forms ([`ScaledForm`]): mxfp8 (e4m3/e5m2 operands, ue8m0
/// scales per 32), mxfp4 (e2m1 operands packed two per u8 byte, low nibble
/// first, ue8m0 per 32) and nvfp4 (e2m1, ue4m3 scales per 16, f8e4m3
/// buffers); `a_scale` `[128, K / block]` and `b_scale` `[N, K / block]`
/// in tensor memory (filled by `tmem_copy`). The formats come from the
/// buffers' types (TLX passes them as words too).
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
        async_reads: true,
        ..Effects::PURE
    },
    rule: tcgen05_mma_scaled,
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

/// The block-scaled MMA forms, from the operand and scale types.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ScaledForm {
    /// e4m3/e5m2 operands, ue8m0 scales per 32 (`kind::mxf8f6f4`, 1X).
    Mxfp8,
    /// e2m1 operands (two per byte), ue8m0 scales per 32 (`kind::mxf4`, 2X).
    Mxfp4,
    /// e2m1 operands, ue4m3 scales per 16 (`kind::mxf4nvf4`, 4X).
    Nvfp4,
}

impl ScaledForm {
    /// The form of an MMA of `operand` elements (both operands') with
    /// `scale` scales, if there is one.
    pub fn of(operand: ScalarType, scale: ScalarType) -> Option<ScaledForm> {
        match (operand, scale) {
            (ScalarType::F8E4M3 | ScalarType::F8E5M2, ScalarType::U8) => Some(ScaledForm::Mxfp8),
            (ScalarType::U8, ScalarType::U8) => Some(ScaledForm::Mxfp4),
            (ScalarType::U8, ScalarType::F8E4M3) => Some(ScaledForm::Nvfp4),
            _ => None,
        }
    }

    /// Operand elements per byte of a buffer.
    pub fn per_byte(self) -> usize {
        match self {
            ScaledForm::Mxfp8 => 1,
            ScaledForm::Mxfp4 | ScaledForm::Nvfp4 => 2,
        }
    }

    /// Elements of K one scale covers.
    pub fn block(self) -> usize {
        match self {
            ScaledForm::Mxfp8 | ScaledForm::Mxfp4 => 32,
            ScaledForm::Nvfp4 => 16,
        }
    }
}

fn tcgen05_mma_scaled(t: &Typing) -> Result<(), String> {
    let acc = one_tensor_memory(t.operand("acc")?, "the accumulator")?;
    let a = one_buffer(t.operand("a")?, "`async_dot_scaled`'s a")?;
    let b = one_buffer(t.operand("b")?, "`async_dot_scaled`'s b")?;
    let a_scale = one_tensor_memory(t.operand("a_scale")?, "`a_scale`")?;
    let ([m, k_bytes], [k2, n]) = (a.shape(), b.shape()) else {
        return Err("`async_dot_scaled`'s a and b are matrices".into());
    };
    let eight_bit = |e: ScalarType| matches!(e, ScalarType::F8E4M3 | ScalarType::F8E5M2);
    let same_kind = (eight_bit(a.elem()) && eight_bit(b.elem())) || a.elem() == b.elem();
    let form = ScaledForm::of(a.elem(), a_scale.elem()).filter(|_| same_kind);
    let Some(form) = form else {
        return Err(format!(
            "a holds {} and b holds {} with {} scales: `async_dot_scaled` takes fp8 operands (e4m3 or e5m2) with u8 (ue8m0) scales (mxfp8), or e2m1 operands packed two per u8 with u8 (ue8m0, mxfp4) or f8e4m3 (ue4m3, nvfp4) scales",
            a.elem(),
            b.elem(),
            a_scale.elem()
        ));
    };
    let k = k_bytes * form.per_byte();
    if k_bytes != k2 || *m != TensorMemoryType::LANES || k % 128 != 0 || !matches!(n, 128 | 256) {
        return Err(format!(
            "`async_dot_scaled` multiplies a [128, K] by a [K, N] with K a multiple of 128 and N 128 or 256 ({} elements per byte), not {:?} by {:?}",
            form.per_byte(),
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
    let blocks = k / form.block();
    for (name, rows) in [("a_scale", *m), ("b_scale", *n)] {
        let scale = one_tensor_memory(t.operand(name)?, &format!("`{name}`"))?;
        if scale.elem() != a_scale.elem() || scale.shape() != [rows, blocks] {
            return Err(format!(
                "`{name}` holds one {} exponent per row and {} elements of K: a {} [{rows}, {blocks}] tensor-memory buffer, not {}",
                if a_scale.elem() == ScalarType::U8 { "ue8m0" } else { "ue4m3" },
                form.block(),
                a_scale.elem(),
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
    if dst.elem().size_bytes() == 1 {
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
    if src.elem() != dst.elem() || bytes != rows * blocks || src.transposed() {
        return Err(format!(
            "`tmem_copy` into the {0} [{rows}, {blocks}] scales takes a {0} shared buffer of {1} bytes (its 512-byte atoms, as `tlx::mx::swizzle_scales` lays them out), not a {2} {3:?} one",
            dst.elem(),
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
    if !matches!(m, 64 | 128) || (pair && *m != 128) {
        return Err(format!(
            "a is [{m}, {k}]: a tensor-memory MMA has M = 128 or 64 rows of A (128 over a pair of programs)"
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

//! The Tensor Memory Accelerator: descriptors (made on the device), block
//! copies between global and shared memory (loads completing on an
//! mbarrier, stores and reductions waited for by count, prefetches), and
//! Triton's block-level descriptor loads and stores; with TMA's rules for
//! blocks and the swizzle its buffers get.

use super::rules::{block_offsets, non_negative, one_barrier, one_buffer, same, scalar_of};
use super::{Interp, Lowering, PrimDef, PrimSignature, Protocol, Surface, Typing};
use crate::ir::def::{AsyncRole, Effects, MemorySpace, MemorySpaces};
use crate::ir::types::{Elem, ScalarType, Swizzle, TensorDescriptorType, Type};

/// The offsets say which block a copy moves, not when: data to the
/// protocol checker.
const OFFSETS_ARE_DATA: Protocol = Protocol::Kept { data: &["offsets"] };

/// `async_descriptor_load(desc, buffer, offsets, barrier)`: a TMA copy of
/// the descriptor's block at `offsets` (elements) into `buffer`, completing
/// its bytes on `barrier`; out-of-bounds elements read zero.
pub(super) const ASYNC_DESCRIPTOR_LOAD: PrimDef = PrimDef {
    name: "async_descriptor_load",
    signature: PrimSignature::new(&["desc", "buffer", "barrier", "offsets"], &[], 0).variadic(),
    surface: Surface::custom(
        &["desc", "buffer", "offsets", "barrier", "multicast_targets"],
        3,
    ),
    effects: Effects {
        reads: MemorySpaces::only(MemorySpace::Global),
        writes: MemorySpaces::only(MemorySpace::Shared),
        async_role: Some(AsyncRole::Starts),
        ..Effects::PURE
    },
    rule: async_descriptor_load,
    protocol: OFFSETS_ARE_DATA,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

fn async_descriptor_load(t: &Typing) -> Result<(), String> {
    let d = block_copy(t)?;
    one_barrier(t.operand("barrier")?, "`async_descriptor_load`")?;
    block_offsets(d.block_shape(), t.rest("offsets")?)
}

/// `async_descriptor_store(desc, buffer, offsets, store_reduce)`: a TMA
/// copy of `buffer` into the block at `offsets`, or with a [`StoreReduce`]
/// other than `None` (the immediate's code), an atomic combination with the
/// block's elements; out-of-bounds elements are not touched.
pub(super) const ASYNC_DESCRIPTOR_STORE: PrimDef = PrimDef {
    name: "async_descriptor_store",
    signature: PrimSignature::new(&["desc", "buffer", "offsets"], &["store_reduce"], 0).variadic(),
    surface: Surface::custom(&["desc", "buffer", "offsets", "store_reduce"], 3),
    effects: Effects {
        reads: MemorySpaces::only(MemorySpace::Shared),
        writes: MemorySpaces::only(MemorySpace::Global),
        async_role: Some(AsyncRole::Starts),
        async_reads: true,
        ..Effects::PURE
    },
    rule: async_descriptor_store,
    protocol: OFFSETS_ARE_DATA,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

fn async_descriptor_store(t: &Typing) -> Result<(), String> {
    let d = block_copy(t)?;
    let code = t.imm("store_reduce")?;
    let reduce = StoreReduce::from_code(code)
        .ok_or_else(|| format!("no store reduction has code {code}"))?;
    if !reduce.supports(d.elem()) {
        return Err(reduce.unsupported(d.elem()));
    }
    block_offsets(d.block_shape(), t.rest("offsets")?)
}

/// The rule TMA copies between a descriptor's block and a buffer share:
/// the buffer holds the block, with the swizzle TMA uses for it.
pub(super) fn block_copy<'t>(t: &Typing<'t>) -> Result<&'t TensorDescriptorType, String> {
    let (desc, buffer) = (t.operand("desc")?, t.operand("buffer")?);
    let Type::TensorDescriptor(d) = desc else {
        return Err(format!("a tensor descriptor, not {desc}"));
    };
    let m = one_buffer(buffer, &t.user())?;
    if m.elem() != d.elem() || !holds_block(m.shape(), d.block_shape()) {
        return Err(format!(
            "the buffer ({:?} {}) does not hold the descriptor's block ({:?} {}); \
             TMA moves whole blocks: allocate it as `local_alloc({:?}, {}, ..)`",
            m.shape(),
            m.elem(),
            d.block_shape(),
            d.elem(),
            without_leading_ones(d.block_shape()),
            d.elem()
        ));
    }
    if m.swizzle() != shared_swizzle(d.elem(), d.block_shape()) {
        return Err(format!(
            "the buffer ({buffer}) does not hold the descriptor's block ({desc}): \
             its swizzle is not the one TMA uses for that block"
        ));
    }
    Ok(d)
}

/// `async_descriptor_store_wait(pendings)`: until at most `pendings` TMA
/// stores of this thread are still reading their buffers (`writes = 1`:
/// until their writes are done too).
pub(super) const ASYNC_DESCRIPTOR_STORE_WAIT: PrimDef = PrimDef {
    name: "async_descriptor_store_wait",
    signature: PrimSignature::new(&[], &["pendings", "writes"], 0),
    surface: Surface::custom(&["pendings", "writes"], 0),
    effects: Effects {
        async_role: Some(AsyncRole::Completes),
        ..Effects::PURE
    },
    rule: async_descriptor_store_wait,
    protocol: Protocol::KEPT,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

fn async_descriptor_store_wait(t: &Typing) -> Result<(), String> {
    non_negative(t.imm("pendings")?, "pendings")?;
    match t.imm("writes")? {
        0 | 1 => Ok(()),
        w => Err(format!("`writes` is 0 or 1, not {w}")),
    }
}

/// `async_descriptor_prefetch(desc, offsets)`: asks TMA to bring the
/// descriptor's block at `offsets` into L2, so that a later load of it
/// waits less; a hint with no effect on any value, nothing to wait for.
/// A read as far as ordering goes: kept, and kept after the writes before
/// it.
pub(super) const ASYNC_DESCRIPTOR_PREFETCH: PrimDef = PrimDef {
    name: "async_descriptor_prefetch",
    signature: PrimSignature::new(&["desc", "offsets"], &[], 0).variadic(),
    surface: Surface::custom(&["desc", "offsets"], 2),
    effects: Effects {
        reads: MemorySpaces::only(MemorySpace::Global),
        ..Effects::PURE
    },
    rule: async_descriptor_prefetch,
    // A hint: nothing of the protocol, wherever it points.
    protocol: Protocol::Dropped,
    lowering: Lowering::Custom,
    // A cache hint: the interpreter has no cache. (Out-of-bounds blocks
    // are fine, as on the GPU, where TMA clips them.)
    interp: Interp::Nothing,
};

fn async_descriptor_prefetch(t: &Typing) -> Result<(), String> {
    let desc = t.operand("desc")?;
    let Type::TensorDescriptor(d) = desc else {
        return Err(format!("a tensor descriptor, not {desc}"));
    };
    block_offsets(d.block_shape(), t.rest("offsets")?)
}

/// `desc.load(offsets)` or `load_tensor_descriptor(desc, offsets)`
/// (Triton's block-level descriptor load): the descriptor's block at
/// `offsets` as a register tensor of the block's shape, out-of-bounds
/// elements zero; a TMA copy on the GPU. Completes within the op.
pub(super) const DESCRIPTOR_LOAD: PrimDef = PrimDef {
    name: "load_tensor_descriptor",
    signature: PrimSignature::new(&["desc", "offsets"], &[], 1).variadic(),
    surface: Surface::custom(&["desc", "offsets"], 2),
    effects: Effects {
        reads: MemorySpaces::only(MemorySpace::Global),
        ..Effects::PURE
    },
    rule: descriptor_load,
    protocol: Protocol::Dropped,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

fn descriptor_load(t: &Typing) -> Result<(), String> {
    let d = register_block(t)?;
    same(t.result()?, &block_tensor(d), "the result")
}

/// `desc.store(offsets, value)` or `store_tensor_descriptor(desc, offsets,
/// value)`: writes a register tensor of the block's shape into the block at
/// `offsets`; out-of-bounds elements are not written. A TMA copy on the
/// GPU, complete when the op is. The descriptor's 128 bytes are written to
/// the program's global scratch (where TMA reads descriptors from).
pub(super) const DESCRIPTOR_STORE: PrimDef = PrimDef {
    name: "store_tensor_descriptor",
    signature: PrimSignature::new(&["desc", "value", "offsets"], &[], 0).variadic(),
    surface: Surface::custom(&["desc", "offsets", "value"], 3),
    effects: Effects {
        writes: MemorySpaces::only(MemorySpace::Global),
        ..Effects::PURE
    },
    rule: descriptor_store,
    protocol: Protocol::Dropped,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

fn descriptor_store(t: &Typing) -> Result<(), String> {
    let d = register_block(t)?;
    same(t.operand("value")?, &block_tensor(d), "the stored value")
}

fn register_block<'t>(t: &Typing<'t>) -> Result<&'t TensorDescriptorType, String> {
    let desc = t.operand("desc")?;
    let Type::TensorDescriptor(d) = desc else {
        return Err(format!("a tensor descriptor, not {desc}"));
    };
    block_offsets(d.block_shape(), t.rest("offsets")?)?;
    Ok(d)
}

fn block_tensor(d: &TensorDescriptorType) -> Type {
    Type::tensor(Elem::Scalar(d.elem()), d.block_shape().to_vec())
}

/// `make_tensor_descriptor(base, shape, strides, block_shape)`: a
/// descriptor built on the device (Triton's and TLX's device-side form)
/// over the tensor at `base` whose dimensions and outer strides (in
/// elements, outermost first; the innermost stride is 1) are run-time
/// values (`dims`: the shape's dimensions, then the strides of all but the
/// innermost dimension), moving blocks of the result type's shape. Its 128
/// bytes are written to the program's global scratch.
pub(super) const MAKE_TENSOR_DESCRIPTOR: PrimDef = PrimDef {
    name: "make_tensor_descriptor",
    signature: PrimSignature::new(&["base", "dims"], &[], 1).variadic(),
    surface: Surface::custom(&["base", "shape", "strides", "block_shape"], 4),
    effects: Effects {
        writes: MemorySpaces::only(MemorySpace::Global),
        ..Effects::PURE
    },
    rule: make_tensor_descriptor,
    protocol: Protocol::IfResultNeeded,
    lowering: Lowering::Custom,
    interp: Interp::Custom,
};

fn make_tensor_descriptor(t: &Typing) -> Result<(), String> {
    let result = t.result()?;
    let Type::TensorDescriptor(d) = result else {
        return Err(format!(
            "`make_tensor_descriptor` makes a descriptor, not {result}"
        ));
    };
    same(t.operand("base")?, &Type::ptr(d.elem()), "the base")?;
    let rank = d.block_shape().len();
    let dims = t.rest("dims")?;
    if dims.len() != 2 * rank - 1 {
        return Err(format!(
            "{} dimensions and strides for a {rank}-d block: give {rank} dimensions \
             and {} outer strides",
            dims.len(),
            rank - 1
        ));
    }
    dims.iter()
        .try_for_each(|t| scalar_of(t, ScalarType::I64, "a dimension or stride"))?;
    tma_block_rule(d.elem(), d.block_shape())
}

/// What `async_descriptor_store` does with the elements already in its
/// block (TLX's `store_reduce`): overwrite them, or combine each with the
/// buffer's element atomically (`cp.reduce.async.bulk.tensor`), e.g. to
/// accumulate partial sums of many programs in one f32 tensor.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum StoreReduce {
    None,
    Add,
    Min,
    Max,
    And,
    Or,
    Xor,
}

impl StoreReduce {
    /// Every choice with TLX's name for it (`""` is the plain store); the
    /// position is the immediate's code.
    pub const ALL: [(StoreReduce, &'static str); 7] = [
        (StoreReduce::None, ""),
        (StoreReduce::Add, "add"),
        (StoreReduce::Min, "min"),
        (StoreReduce::Max, "max"),
        (StoreReduce::And, "and"),
        (StoreReduce::Or, "or"),
        (StoreReduce::Xor, "xor"),
    ];

    pub fn code(self) -> i64 {
        Self::ALL.iter().position(|(r, _)| *r == self).unwrap_or(0) as i64
    }

    pub fn from_code(code: i64) -> Option<StoreReduce> {
        let i = usize::try_from(code).ok()?;
        Self::ALL.get(i).map(|(r, _)| *r)
    }

    pub fn name(self) -> &'static str {
        Self::ALL[self.code() as usize].1
    }

    /// The per-element operation, `None` for the plain store.
    pub fn atomic(self) -> Option<crate::ir::AtomicOp> {
        use crate::ir::AtomicOp;
        Some(match self {
            StoreReduce::None => return None,
            StoreReduce::Add => AtomicOp::Add,
            StoreReduce::Min => AtomicOp::Min,
            StoreReduce::Max => AtomicOp::Max,
            StoreReduce::And => AtomicOp::And,
            StoreReduce::Or => AtomicOp::Or,
            StoreReduce::Xor => AtomicOp::Xor,
        })
    }

    /// Whether TMA combines elements of `elem` this way (the PTX ISA's
    /// table for `cp.reduce.async.bulk.tensor`: no f32 min/max, no 8-bit
    /// types, bitwise operations on integers only).
    pub fn supports(self, elem: ScalarType) -> bool {
        use ScalarType::*;
        match self {
            StoreReduce::None => true,
            StoreReduce::Add => matches!(elem, F16 | BF16 | F32 | I32 | U32),
            StoreReduce::Min | StoreReduce::Max => matches!(elem, F16 | BF16 | I32 | U32 | I64),
            StoreReduce::And | StoreReduce::Or | StoreReduce::Xor => {
                matches!(elem, I32 | U32 | I64)
            }
        }
    }

    /// The types this reduction takes, for a message about `elem`.
    pub fn unsupported(self, elem: ScalarType) -> String {
        let ok: Vec<String> = ScalarType::ALL
            .iter()
            .filter(|t| self.supports(**t))
            .map(|t| t.to_string())
            .collect();
        format!(
            "TMA has no `{}` reduction of {elem} elements; it reduces {} with `{}`",
            self.name(),
            ok.join(", "),
            self.name()
        )
    }
}

/// TMA's compile-time rules for a descriptor's block: rank 1 to 5, boxes
/// (see [`TmaBox`]) of 1 to 256 elements per dimension, an innermost
/// dimension of whole 16-byte chunks, and elements TMA copies (not `bool`).
pub fn tma_block_rule(elem: ScalarType, block: &[usize]) -> Result<(), String> {
    if !(1..=5).contains(&block.len()) {
        return Err(format!(
            "a {}-d block: TMA moves blocks of 1 to 5 dimensions",
            block.len()
        ));
    }
    if elem == ScalarType::Bool {
        return Err("TMA does not copy bool elements: store them as u8".into());
    }
    let tma = TmaBox::new(elem, block);
    if let Some(d) = tma.box_shape.iter().find(|d| !(1..=256).contains(*d)) {
        return Err(format!(
            "a block dimension of {d}: TMA boxes hold 1 to 256 elements per dimension \
             (only the innermost is cut into swizzle-wide pieces)"
        ));
    }
    if let Some(d) = block.iter().find(|d| !d.is_power_of_two()) {
        return Err(format!(
            "a block dimension of {d}: the tiles a TMA block lands in (shared buffers, \
             register tensors) have power-of-two shapes"
        ));
    }
    let inner = block[block.len() - 1] * elem.size_bytes();
    if inner % 16 != 0 {
        return Err(format!(
            "the block's rows are {inner} bytes: TMA moves rows of whole 16-byte chunks \
             (make the innermost dimension a multiple of {} {elem} elements)",
            16 / elem.size_bytes()
        ));
    }
    Ok(())
}

/// The swizzle TMA and wgmma want for rows of `row_bytes` bytes: the widest
/// of 128, 64 and 32 bytes that fits in a row (none for narrower rows).
pub fn nvmma_swizzle(row_bytes: usize) -> Swizzle {
    match row_bytes {
        r if r >= 128 => Swizzle::Bytes128,
        r if r >= 64 => Swizzle::Bytes64,
        r if r >= 32 => Swizzle::Bytes32,
        _ => Swizzle::None,
    }
}

/// The swizzle of a shared buffer of `shape` (TLX infers it from the
/// consumers; here every matrix of at least 8 rows of power-of-two extents
/// gets the NVMMA swizzle, which TMA, wgmma and `local_load`/`local_store`
/// all handle, so producer and consumers always agree).
pub fn shared_swizzle(elem: ScalarType, shape: &[usize]) -> Swizzle {
    match without_leading_ones(shape) {
        [rows, cols] if *rows >= 8 && rows.is_power_of_two() && cols.is_power_of_two() => {
            nvmma_swizzle(cols * elem.size_bytes())
        }
        _ => Swizzle::None,
    }
}

/// `shape` without its leading unit dimensions (all but the last): the
/// matrix that a TMA block of `[1, 1, BN, D]` (one head of a `[B, H, S, D]`
/// tensor) really moves.
pub fn without_leading_ones(shape: &[usize]) -> &[usize] {
    let first = shape
        .iter()
        .position(|&d| d != 1)
        .unwrap_or(shape.len())
        .min(shape.len().saturating_sub(1));
    &shape[first..]
}

/// Whether a buffer of `buffer` shape holds a TMA block of `block`: the
/// same extents, or the block's with leading unit dimensions left out
/// (Triton's descriptor loads of `[1, BM, D]` blocks into `[BM, D]` tiles).
pub(super) fn holds_block(buffer: &[usize], block: &[usize]) -> bool {
    buffer.len() <= block.len()
        && block[block.len() - buffer.len()..] == *buffer
        && block[..block.len() - buffer.len()].iter().all(|&d| d == 1)
}

/// How TMA moves one block of a descriptor into a buffer of
/// [`shared_swizzle`]: boxes of `box_shape` (outermost first), the inner
/// dimension cut to one swizzle atom when the block is wider, `pieces` of
/// them side by side along it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TmaBox {
    pub swizzle: Swizzle,
    pub box_shape: Vec<usize>,
    pub pieces: usize,
}

impl TmaBox {
    pub fn new(elem: ScalarType, block: &[usize]) -> TmaBox {
        let swizzle = shared_swizzle(elem, block);
        let mut box_shape = block.to_vec();
        let atom_elems = match swizzle {
            Swizzle::None => usize::MAX,
            Swizzle::Bytes32 => 32 / elem.size_bytes(),
            Swizzle::Bytes64 => 64 / elem.size_bytes(),
            Swizzle::Bytes128 => 128 / elem.size_bytes(),
        };
        let inner = block.last().copied().unwrap_or(1);
        let cut = inner.min(atom_elems);
        if let Some(last) = box_shape.last_mut() {
            *last = cut;
        }
        TmaBox {
            swizzle,
            box_shape,
            pieces: inner / cut.max(1),
        }
    }
}

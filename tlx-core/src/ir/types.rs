//! Element types and value types of the IR.
//!
//! Every IR value is a block tensor of static shape; a scalar is a tensor of
//! rank 0. Elements are numbers, booleans or global pointers to numbers, as in
//! Triton, so pointer arithmetic on tensors of pointers is ordinary IR.

use std::fmt;

/// A numeric or boolean element type.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScalarType {
    Bool,
    I8,
    U8,
    I32,
    U32,
    I64,
    F16,
    BF16,
    F32,
    F64,
    /// fp8 with 4 exponent bits, 3 mantissa bits, no infinities (`e4m3fn`).
    F8E4M3,
    /// fp8 with 5 exponent bits, 2 mantissa bits (IEEE-like).
    F8E5M2,
}

impl ScalarType {
    /// Every scalar type, in a fixed order (for tables and tests).
    pub const ALL: [ScalarType; 12] = [
        ScalarType::Bool,
        ScalarType::I8,
        ScalarType::U8,
        ScalarType::I32,
        ScalarType::U32,
        ScalarType::I64,
        ScalarType::F16,
        ScalarType::BF16,
        ScalarType::F32,
        ScalarType::F64,
        ScalarType::F8E4M3,
        ScalarType::F8E5M2,
    ];

    /// Size in bytes in global memory (`Bool` is stored as one byte).
    pub fn size_bytes(self) -> usize {
        match self {
            ScalarType::Bool
            | ScalarType::I8
            | ScalarType::U8
            | ScalarType::F8E4M3
            | ScalarType::F8E5M2 => 1,
            ScalarType::F16 | ScalarType::BF16 => 2,
            ScalarType::I32 | ScalarType::U32 | ScalarType::F32 => 4,
            ScalarType::I64 | ScalarType::F64 => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(
            self,
            ScalarType::F16
                | ScalarType::BF16
                | ScalarType::F32
                | ScalarType::F64
                | ScalarType::F8E4M3
                | ScalarType::F8E5M2
        )
    }

    pub fn is_int(self) -> bool {
        matches!(
            self,
            ScalarType::I8 | ScalarType::U8 | ScalarType::I32 | ScalarType::U32 | ScalarType::I64
        )
    }

    pub fn is_signed_int(self) -> bool {
        matches!(self, ScalarType::I8 | ScalarType::I32 | ScalarType::I64)
    }

    /// The name used in kernel source and in the IR text format.
    pub fn name(self) -> &'static str {
        match self {
            ScalarType::Bool => "bool",
            ScalarType::I8 => "i8",
            ScalarType::U8 => "u8",
            ScalarType::I32 => "i32",
            ScalarType::U32 => "u32",
            ScalarType::I64 => "i64",
            ScalarType::F16 => "f16",
            ScalarType::BF16 => "bf16",
            ScalarType::F32 => "f32",
            ScalarType::F64 => "f64",
            ScalarType::F8E4M3 => "f8e4m3",
            ScalarType::F8E5M2 => "f8e5m2",
        }
    }

    pub fn from_name(name: &str) -> Option<ScalarType> {
        ScalarType::ALL.into_iter().find(|t| t.name() == name)
    }
}

impl fmt::Display for ScalarType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The memory a pointer points into.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum AddressSpace {
    #[default]
    Global,
    /// The program's (CTA's) shared memory.
    Shared,
}

impl AddressSpace {
    pub const ALL: [AddressSpace; 2] = [AddressSpace::Global, AddressSpace::Shared];

    /// The name used in the IR text format.
    pub fn name(self) -> &'static str {
        match self {
            AddressSpace::Global => "global",
            AddressSpace::Shared => "shared",
        }
    }

    pub fn from_name(name: &str) -> Option<AddressSpace> {
        AddressSpace::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// The element of a block tensor: a scalar, or a pointer to one.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Elem {
    Scalar(ScalarType),
    /// A pointer into `AddressSpace`; offsets added to it count elements of the pointee.
    Ptr(ScalarType, AddressSpace),
}

impl Elem {
    /// A pointer into global memory (what kernel parameters pass).
    pub fn global_ptr(pointee: ScalarType) -> Elem {
        Elem::Ptr(pointee, AddressSpace::Global)
    }

    pub fn scalar(self) -> Option<ScalarType> {
        match self {
            Elem::Scalar(s) => Some(s),
            Elem::Ptr(..) => None,
        }
    }

    /// An integer or a pointer: a value with an integer address or count
    /// that divisibility facts (`multiple_of`) apply to.
    pub fn is_integral(self) -> bool {
        match self {
            Elem::Scalar(s) => s.is_int(),
            Elem::Ptr(..) => true,
        }
    }

    pub fn pointee(self) -> Option<ScalarType> {
        match self {
            Elem::Ptr(s, _) => Some(s),
            Elem::Scalar(_) => None,
        }
    }

    /// The pointee of a pointer into global memory.
    pub fn global_pointee(self) -> Option<ScalarType> {
        match self {
            Elem::Ptr(s, AddressSpace::Global) => Some(s),
            Elem::Ptr(_, AddressSpace::Shared) | Elem::Scalar(_) => None,
        }
    }
}

impl fmt::Display for Elem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Elem::Scalar(s) => write!(f, "{s}"),
            // Global is the default and goes unsaid.
            Elem::Ptr(s, AddressSpace::Global) => write!(f, "ptr<{s}>"),
            Elem::Ptr(s, space) => write!(f, "ptr<{s}, {}>", space.name()),
        }
    }
}

impl From<ScalarType> for Elem {
    fn from(s: ScalarType) -> Elem {
        Elem::Scalar(s)
    }
}

/// The type of an IR value (naga's `TypeInner` style): a register tensor,
/// which every block-tensor op takes and gives, or one of the kinds of value
/// TLX adds (shared-memory buffers, mbarriers, TMA descriptors, tokens of
/// asynchronous operations). The variants' fields are private.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    /// A block tensor of static shape in registers; a scalar is rank 0.
    Tensor(TensorType),
    /// Buffers in shared memory (TLX's `local_alloc`).
    SharedMemory(SharedMemoryType),
    /// Buffers in Blackwell's tensor memory (`local_alloc(..., storage =
    /// tmem)`): the accumulators of `tcgen05` MMAs.
    TensorMemory(TensorMemoryType),
    /// mbarriers in shared memory (TLX's `alloc_barriers`).
    Barriers(BarrierType),
    /// A TMA tensor descriptor (TLX's `make_tensor_descriptor`).
    TensorDescriptor(TensorDescriptorType),
    /// The completion of an asynchronous operation, to be waited for.
    AsyncToken,
}

/// An element type and a static shape (empty for a scalar).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    elem: Elem,
    shape: Vec<usize>,
}

/// How shared-memory rows are swizzled (the TMA and wgmma swizzle modes).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Swizzle {
    #[default]
    None,
    Bytes32,
    Bytes64,
    Bytes128,
}

impl Swizzle {
    pub const ALL: [Swizzle; 4] = [
        Swizzle::None,
        Swizzle::Bytes32,
        Swizzle::Bytes64,
        Swizzle::Bytes128,
    ];

    /// Where a buffer of this swizzle starts: on the swizzle's period
    /// (eight atoms), as TMA and wgmma apply it to absolute shared addresses;
    /// on 16 bytes without one.
    pub fn alignment_bytes(self) -> usize {
        match self {
            Swizzle::None => 16,
            Swizzle::Bytes32 => 256,
            Swizzle::Bytes64 => 512,
            Swizzle::Bytes128 => 1024,
        }
    }

    /// The name used in the IR text format.
    pub fn name(self) -> &'static str {
        match self {
            Swizzle::None => "none",
            Swizzle::Bytes32 => "32b",
            Swizzle::Bytes64 => "64b",
            Swizzle::Bytes128 => "128b",
        }
    }

    pub fn from_name(name: &str) -> Option<Swizzle> {
        Swizzle::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// `buffers` buffers of `shape` elements each, in shared memory.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SharedMemoryType {
    elem: ScalarType,
    shape: Vec<usize>,
    buffers: u32,
    swizzle: Swizzle,
    mutable: bool,
    /// A `local_trans` view: the matrix is stored as its transpose (rows of
    /// the stored matrix are this view's columns).
    transposed: bool,
    /// A `remote_view`: the buffer of another program of the cluster,
    /// addressed through the `shared::cluster` window. Only stores may reach
    /// it, so the type keeps loads and MMAs away from it.
    remote: bool,
}

impl SharedMemoryType {
    pub fn new(
        elem: ScalarType,
        shape: Vec<usize>,
        buffers: u32,
        swizzle: Swizzle,
        mutable: bool,
    ) -> Self {
        SharedMemoryType {
            elem,
            shape,
            buffers,
            swizzle,
            mutable,
            transposed: false,
            remote: false,
        }
    }

    /// The same buffer in a peer program of the cluster (TLX's `remote_view`).
    pub fn to_remote(&self) -> SharedMemoryType {
        SharedMemoryType {
            remote: true,
            ..self.clone()
        }
    }

    /// Whether this is a `remote_view` of a peer program's buffer.
    pub fn remote(&self) -> bool {
        self.remote
    }

    /// The transposed view of a matrix (TLX's `local_trans`): same bytes,
    /// dimensions swapped.
    pub fn transpose(&self) -> SharedMemoryType {
        let mut t = self.clone();
        t.shape.reverse();
        t.transposed = !t.transposed;
        t
    }

    /// One buffer of this allocation (what `local_view` gives).
    pub fn one_buffer(&self) -> SharedMemoryType {
        SharedMemoryType {
            buffers: 1,
            ..self.clone()
        }
    }

    /// The same bytes read as `elem`, a type of the same size (the 8-bit
    /// operands of a scaled MMA share one shared-memory layout).
    pub fn with_elem(&self, elem: ScalarType) -> SharedMemoryType {
        SharedMemoryType {
            elem,
            ..self.clone()
        }
    }

    /// Whether the view's matrix is stored transposed.
    pub fn transposed(&self) -> bool {
        self.transposed
    }

    pub fn elem(&self) -> ScalarType {
        self.elem
    }

    /// The shape of one buffer.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn buffers(&self) -> u32 {
        self.buffers
    }

    pub fn swizzle(&self) -> Swizzle {
        self.swizzle
    }

    /// False for a view only read through (an operand of an MMA, say).
    pub fn mutable(&self) -> bool {
        self.mutable
    }
}

/// `buffers` matrices of `shape` elements each in tensor memory (sm_100):
/// row `r` of a buffer is TMEM lane `r`, and each 32-bit element one
/// column, so an `[128, N]` f32 buffer takes `N` of the 512 columns.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorMemoryType {
    elem: ScalarType,
    shape: Vec<usize>,
    buffers: u32,
}

impl TensorMemoryType {
    /// Rows of a tensor-memory buffer: one per TMEM lane.
    pub const LANES: usize = 128;
    /// Columns of tensor memory a program may allocate.
    pub const COLUMNS: usize = 512;

    pub fn new(elem: ScalarType, shape: Vec<usize>, buffers: u32) -> Self {
        TensorMemoryType {
            elem,
            shape,
            buffers,
        }
    }

    /// Whether tensor memory holds such buffers: `[128, N]` matrices of
    /// 32-bit elements, `N` a power of two from 8 to 256 (what one `tcgen05`
    /// MMA of 128 rows writes); `Err` says what to write instead.
    /// Block scales (`async_dot_scaled`): `[R, KB]` exponents, ue8m0 (u8)
    /// or ue4m3 (f8e4m3, nvfp4's), R 128 or 256 rows of A or B, KB blocks
    /// of K (32 or 16 elements), a multiple of 4. Row `r`'s scales sit in
    /// lane `r % 32` (repeated in each quarter of the lanes), column `(kb /
    /// 4) * R / 32 + r / 32`, byte `kb % 4`: `R * KB / 128` columns.
    fn scale_rule(elem: ScalarType, shape: &[usize]) -> Result<(), String> {
        if !matches!(elem, ScalarType::U8 | ScalarType::F8E4M3) {
            return Err(format!(
                "8-bit tensor memory holds block scales, ue8m0 (u8) or ue4m3 (f8e4m3), not {elem}"
            ));
        }
        match shape {
            [128 | 256, kb] if kb % 4 == 0 && *kb > 0 => Ok(()),
            _ => Err(format!(
                "{elem} tensor memory holds block scales, [R, KB] with R 128 or 256 (rows of A or B) and KB (blocks of K) a multiple of 4, not {shape:?}"
            )),
        }
    }

    /// Where `tmem_copy` finds scale `(row, block)` of `[R, blocks]` block
    /// scales in shared memory: 512-byte atoms of 128 rows by 4 blocks,
    /// row blocks outer, and in an atom byte `(row % 32) * 16 + (row % 128)
    /// / 32 * 4 + block % 4` (cuBLAS's, TLX's and torchao's swizzled order).
    pub fn scale_atom_offset(row: usize, block: usize, blocks: usize) -> usize {
        let atom = (row / 128) * (blocks / 4) + block / 4;
        atom * 512 + (row % 32) * 16 + (row % 128) / 32 * 4 + block % 4
    }

    pub fn rule(elem: ScalarType, shape: &[usize]) -> Result<(), String> {
        if elem.size_bytes() == 1 {
            return Self::scale_rule(elem, shape);
        }
        if matches!(elem, ScalarType::F16 | ScalarType::BF16) {
            // Two values per 32-bit column: an MMA's A operand (`P` of
            // attention), read from tensor memory.
            return match shape {
                [64 | Self::LANES, n] if n.is_power_of_two() && (16..=512).contains(n) => Ok(()),
                _ => Err(format!(
                    "a 16-bit tensor-memory buffer is [128, N] (one row per TMEM lane, two values per column, N a power of two from 16 to 512), not {shape:?}"
                )),
            };
        }
        if elem.size_bytes() != 4 {
            return Err(format!(
                "tensor memory here holds 32-bit elements (f32 or i32 accumulators), 16-bit ones (f16, bf16: an MMA's A) or block scales, not {elem}"
            ));
        }
        match shape {
            // 64 rows: an M = 64 MMA's accumulator, 16 lanes of each quarter.
            [64 | Self::LANES, n] if n.is_power_of_two() && (8..=256).contains(n) => Ok(()),
            _ => Err(format!(
                "a tensor-memory buffer is [128, N] (one row per TMEM lane) or [64, N] (an M = 64 MMA's accumulator), N a power of two from 8 to 256, not {shape:?}"
            )),
        }
    }

    pub fn elem(&self) -> ScalarType {
        self.elem
    }

    /// The shape of one buffer.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn buffers(&self) -> u32 {
        self.buffers
    }

    /// The 32-bit TMEM columns one buffer takes.
    pub fn columns(&self) -> usize {
        let cols = self.shape.last().copied().unwrap_or(0) * self.elem.size_bytes() / 4;
        match self.shape.first() {
            // Block scales: a quarter of the lanes per 32 rows.
            Some(rows) if self.elem.size_bytes() == 1 => cols * rows / 32,
            _ => cols,
        }
    }

    /// One buffer of this allocation (what `local_view` gives).
    pub fn one_buffer(&self) -> TensorMemoryType {
        TensorMemoryType {
            buffers: 1,
            ..self.clone()
        }
    }
}

/// `count` mbarriers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BarrierType {
    /// As a shape, `[count]`, so that [`Type::shape`] can lend it.
    count: [usize; 1],
    /// A `remote_view` of a peer program's barrier: it may be arrived at,
    /// never waited on (PTX has no remote wait).
    remote: bool,
}

impl BarrierType {
    pub fn new(count: usize) -> Self {
        BarrierType {
            count: [count],
            remote: false,
        }
    }

    pub fn count(&self) -> usize {
        self.count[0]
    }

    /// The same barriers in a peer program of the cluster.
    pub fn to_remote(&self) -> BarrierType {
        BarrierType {
            remote: true,
            ..self.clone()
        }
    }

    pub fn remote(&self) -> bool {
        self.remote
    }
}

/// A TMA descriptor moving blocks of `block_shape` elements.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorDescriptorType {
    elem: ScalarType,
    block_shape: Vec<usize>,
}

impl TensorDescriptorType {
    pub fn new(elem: ScalarType, block_shape: Vec<usize>) -> Self {
        TensorDescriptorType { elem, block_shape }
    }

    pub fn elem(&self) -> ScalarType {
        self.elem
    }

    pub fn block_shape(&self) -> &[usize] {
        &self.block_shape
    }
}

impl Type {
    pub fn scalar(s: ScalarType) -> Type {
        Type::tensor(Elem::Scalar(s), Vec::new())
    }

    pub fn ptr(pointee: ScalarType) -> Type {
        Type::tensor(Elem::global_ptr(pointee), Vec::new())
    }

    pub fn tensor(elem: Elem, shape: Vec<usize>) -> Type {
        Type::Tensor(TensorType { elem, shape })
    }

    pub fn is_tensor(&self) -> bool {
        matches!(self, Type::Tensor(_))
    }

    /// A tensor's element; for the other kinds, the element of what the
    /// value holds or describes (a buffer's, a descriptor block's; an
    /// mbarrier is a 64-bit word, a token a flag). The verifier keeps
    /// non-tensors away from the block-tensor ops that ask.
    pub fn elem(&self) -> Elem {
        match self {
            Type::Tensor(t) => t.elem,
            Type::SharedMemory(m) => Elem::Scalar(m.elem),
            Type::TensorMemory(m) => Elem::Scalar(m.elem),
            Type::Barriers(_) => Elem::Scalar(ScalarType::I64),
            Type::TensorDescriptor(d) => Elem::Scalar(d.elem),
            Type::AsyncToken => Elem::Scalar(ScalarType::Bool),
        }
    }

    /// A tensor's dimensions, outermost first (empty for a scalar); for the
    /// other kinds, those of what the value holds or describes (one buffer,
    /// a descriptor's block, `[count]` barriers; none for a token).
    pub fn shape(&self) -> &[usize] {
        match self {
            Type::Tensor(t) => &t.shape,
            Type::SharedMemory(m) => &m.shape,
            Type::TensorMemory(m) => &m.shape,
            Type::Barriers(b) => &b.count,
            Type::TensorDescriptor(d) => &d.block_shape,
            Type::AsyncToken => &[],
        }
    }

    pub fn rank(&self) -> usize {
        self.shape().len()
    }

    pub fn is_scalar(&self) -> bool {
        self.shape().is_empty()
    }

    /// Number of elements (1 for a scalar).
    pub fn numel(&self) -> usize {
        self.shape().iter().product()
    }

    /// A `remote_view` of a buffer or barrier in a peer program.
    pub fn is_remote(&self) -> bool {
        match self {
            Type::SharedMemory(m) => m.remote,
            Type::Barriers(b) => b.remote,
            Type::Tensor(_)
            | Type::TensorMemory(_)
            | Type::TensorDescriptor(_)
            | Type::AsyncToken => false,
        }
    }

    /// A tensor of the same element type with another shape.
    pub fn with_shape(&self, shape: Vec<usize>) -> Type {
        Type::tensor(self.elem(), shape)
    }

    /// A tensor of the same shape with another element type.
    pub fn with_elem(&self, elem: Elem) -> Type {
        Type::tensor(elem, self.shape().to_vec())
    }
}

/// `64x32xf16`: dimensions, each followed by `x`, then the element.
fn write_shaped(
    f: &mut fmt::Formatter<'_>,
    shape: &[usize],
    elem: impl fmt::Display,
) -> fmt::Result {
    for d in shape {
        write!(f, "{d}x")?;
    }
    write!(f, "{elem}")
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Tensor(t) if t.shape.is_empty() => write!(f, "{}", t.elem),
            Type::Tensor(t) => {
                write!(f, "tensor<")?;
                write_shaped(f, &t.shape, t.elem)?;
                write!(f, ">")
            }
            Type::SharedMemory(m) => {
                write!(f, "smem<")?;
                write_shaped(f, &m.shape, m.elem)?;
                let access = if m.mutable { "mutable" } else { "immutable" };
                let order = if m.transposed { ", transposed" } else { "" };
                let place = if m.remote { ", remote" } else { "" };
                write!(
                    f,
                    ", buffers {}, swizzle {}, {access}{order}{place}>",
                    m.buffers,
                    m.swizzle.name()
                )
            }
            Type::TensorMemory(m) => {
                write!(f, "tmem<")?;
                write_shaped(f, &m.shape, m.elem)?;
                write!(f, ", buffers {}>", m.buffers)
            }
            Type::Barriers(b) if b.remote => write!(f, "barriers<{}, remote>", b.count()),
            Type::Barriers(b) => write!(f, "barriers<{}>", b.count()),
            Type::TensorDescriptor(d) => {
                write!(f, "tensordesc<")?;
                write_shaped(f, &d.block_shape, d.elem)?;
                write!(f, ">")
            }
            Type::AsyncToken => write!(f, "token"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for t in ScalarType::ALL {
            assert_eq!(ScalarType::from_name(t.name()), Some(t));
        }
        assert_eq!(ScalarType::from_name("f128"), None);
    }

    #[test]
    fn display_shows_shape_and_pointee() {
        let t = Type::tensor(Elem::global_ptr(ScalarType::F16), vec![64, 32]);
        assert_eq!(t.to_string(), "tensor<64x32xptr<f16>>");
        let shared = Elem::Ptr(ScalarType::F16, AddressSpace::Shared);
        assert_eq!(Type::tensor(shared, vec![]).to_string(), "ptr<f16, shared>");
        assert_eq!(shared.pointee(), Some(ScalarType::F16));
        assert_eq!(shared.global_pointee(), None);
        assert_eq!(t.numel(), 64 * 32);
        assert_eq!(Type::scalar(ScalarType::I32).to_string(), "i32");
    }

    #[test]
    fn other_kinds_of_value_display_and_describe_their_data() {
        let smem = Type::SharedMemory(SharedMemoryType::new(
            ScalarType::BF16,
            vec![64, 32],
            3,
            Swizzle::Bytes128,
            true,
        ));
        assert_eq!(
            smem.to_string(),
            "smem<64x32xbf16, buffers 3, swizzle 128b, mutable>"
        );
        assert_eq!(
            (smem.elem(), smem.shape()),
            (Elem::Scalar(ScalarType::BF16), &[64, 32][..])
        );
        assert!(!smem.is_tensor());
        let Type::SharedMemory(m) = &smem else {
            unreachable!("built as shared memory")
        };
        let peer = Type::SharedMemory(m.one_buffer().to_remote());
        assert_eq!(
            peer.to_string(),
            "smem<64x32xbf16, buffers 1, swizzle 128b, mutable, remote>"
        );
        assert!(peer.is_remote() && !smem.is_remote());
        let bars = Type::Barriers(BarrierType::new(2));
        assert_eq!(bars.to_string(), "barriers<2>");
        let remote = Type::Barriers(BarrierType::new(1).to_remote());
        assert_eq!(remote.to_string(), "barriers<1, remote>");
        assert!(remote.is_remote() && !bars.is_remote());
        assert_eq!(bars.shape(), [2]);
        let desc =
            Type::TensorDescriptor(TensorDescriptorType::new(ScalarType::F16, vec![128, 64]));
        assert_eq!(desc.to_string(), "tensordesc<128x64xf16>");
        assert_eq!(Type::AsyncToken.to_string(), "token");
        for s in Swizzle::ALL {
            assert_eq!(Swizzle::from_name(s.name()), Some(s));
        }
    }
}

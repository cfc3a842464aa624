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
    /// fp8 with 4 exponent bits, 3 mantissa bits, no infinities (`e4m3fn`).
    F8E4M3,
    /// fp8 with 5 exponent bits, 2 mantissa bits (IEEE-like).
    F8E5M2,
}

impl ScalarType {
    /// Every scalar type, in a fixed order (for tables and tests).
    pub const ALL: [ScalarType; 11] = [
        ScalarType::Bool,
        ScalarType::I8,
        ScalarType::U8,
        ScalarType::I32,
        ScalarType::U32,
        ScalarType::I64,
        ScalarType::F16,
        ScalarType::BF16,
        ScalarType::F32,
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
            ScalarType::I64 => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(
            self,
            ScalarType::F16
                | ScalarType::BF16
                | ScalarType::F32
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

/// The type of an IR value: an element type and a static shape (empty for
/// a scalar). The fields are private so that other kinds of value (memory
/// descriptors, barriers, tokens) can join without touching their users.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Type {
    elem: Elem,
    shape: Vec<usize>,
}

impl Type {
    pub fn elem(&self) -> Elem {
        self.elem
    }

    /// The dimensions, outermost first (empty for a scalar).
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn scalar(s: ScalarType) -> Type {
        Type {
            elem: Elem::Scalar(s),
            shape: Vec::new(),
        }
    }

    pub fn ptr(pointee: ScalarType) -> Type {
        Type {
            elem: Elem::global_ptr(pointee),
            shape: Vec::new(),
        }
    }

    pub fn tensor(elem: Elem, shape: Vec<usize>) -> Type {
        Type { elem, shape }
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    pub fn is_scalar(&self) -> bool {
        self.shape.is_empty()
    }

    /// Number of elements (1 for a scalar).
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// The same element type with another shape.
    pub fn with_shape(&self, shape: Vec<usize>) -> Type {
        Type {
            elem: self.elem,
            shape,
        }
    }

    /// The same shape with another element type.
    pub fn with_elem(&self, elem: Elem) -> Type {
        Type {
            elem,
            shape: self.shape.clone(),
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.shape.is_empty() {
            return write!(f, "{}", self.elem);
        }
        write!(f, "tensor<")?;
        for d in &self.shape {
            write!(f, "{d}x")?;
        }
        write!(f, "{}>", self.elem)
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
        assert_eq!(ScalarType::from_name("f64"), None);
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
}

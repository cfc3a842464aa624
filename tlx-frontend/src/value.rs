//! Values during lowering: IR values, compile-time constants (literals,
//! const generics, unrolled indices), tuples; and constant folding.

use std::rc::Rc;

use tlx_core::ir::{BinaryOp, CmpPred, Literal, ScalarType, ValueId};

/// A compile-time constant. It has no IR type until it meets a typed value
/// (it adopts that value's type) or is materialized with a default type.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum ConstVal {
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl ConstVal {
    /// The type a constant gets on its own: i32 (i64 when it does not fit), f32 or bool.
    pub fn default_type(self) -> ScalarType {
        match self {
            ConstVal::Int(i) if i32::try_from(i).is_err() => ScalarType::I64,
            ConstVal::Int(_) => ScalarType::I32,
            ConstVal::Float(_) => ScalarType::F32,
            ConstVal::Bool(_) => ScalarType::Bool,
        }
    }

    /// The literal for a constant of element type `ty` (converted as `as` would).
    pub fn literal_for(self, ty: ScalarType) -> Literal {
        if ty == ScalarType::Bool {
            Literal::Bool(match self {
                ConstVal::Int(i) => i != 0,
                ConstVal::Float(f) => f != 0.0,
                ConstVal::Bool(b) => b,
            })
        } else if ty.is_float() {
            Literal::Float(self.as_f64())
        } else {
            Literal::Int(match self {
                ConstVal::Int(i) => i,
                ConstVal::Float(f) => f as i64,
                ConstVal::Bool(b) => i64::from(b),
            })
        }
    }

    pub fn as_f64(self) -> f64 {
        match self {
            ConstVal::Int(i) => i as f64,
            ConstVal::Float(f) => f,
            ConstVal::Bool(b) => f64::from(u8::from(b)),
        }
    }

    /// The constant converted as `x as ty` would (integers wrap to the width).
    pub fn cast(self, ty: ScalarType) -> ConstVal {
        match self.literal_for(ty) {
            Literal::Bool(b) => ConstVal::Bool(b),
            Literal::Float(f) => ConstVal::Float(f),
            Literal::Int(i) => ConstVal::Int(wrap_int(i, ty)),
        }
    }
}

fn wrap_int(i: i64, ty: ScalarType) -> i64 {
    match ty {
        ScalarType::I8 => i64::from(i as i8),
        ScalarType::U8 => i64::from(i as u8),
        ScalarType::I32 => i64::from(i as i32),
        ScalarType::U32 => i64::from(i as u32),
        _ => i,
    }
}

/// A value during lowering.
#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    /// A typed IR value.
    Ir(ValueId),
    Const(ConstVal),
    Tuple(Vec<Val>),
    /// A TLE pipe, one of its endpoints, or a slot (see `lower/pipe.rs`).
    Pipe(PipeVal),
    /// Triton's block pointer (see `lower/block_ptr.rs`).
    BlockPtr(BlockPtr),
    /// A kernel's `Mesh` parameter (see `lower/mesh.rs`).
    Mesh(MeshVal),
    /// A cluster-launch-control context (see `lower/clc.rs`).
    Clc(ClcContext),
    /// What a statement-like expression (a call to `store`, a loop) gives.
    Unit,
}

/// What `clc_create_context` allocated: the answer's buffer, the barrier
/// the answer completes on (`full`) and the one its consumers release
/// (`empty`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClcContext {
    pub response: ValueId,
    pub full: ValueId,
    pub empty: ValueId,
}

/// The parameters a `Mesh` parameter became: this rank, the number of
/// ranks (both `i32`), the rank's barrier words (`Ptr<i32>`) and the table
/// of every rank's address of them (`Ptr<i64>`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MeshVal {
    /// How many axes the kernel sees (`Mesh<N>`).
    pub axes: usize,
    pub rank: ValueId,
    pub size: ValueId,
    pub sync: ValueId,
    pub sync_peers: ValueId,
}

/// A block pointer: a `block_shape` window at `offsets` of a tensor at
/// `base` with extents `shape` and element `strides`; every value an i32
/// scalar but `base`, a scalar pointer.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockPtr {
    pub base: ValueId,
    pub shape: Vec<ValueId>,
    pub strides: Vec<ValueId>,
    pub offsets: Vec<ValueId>,
    pub block_shape: Vec<usize>,
    /// Triton's dimension order, fastest first; kept for the reader (the
    /// addresses follow from the strides).
    pub order: Vec<usize>,
}

impl BlockPtr {
    /// Its IR values: the base, then the extents, strides and offsets.
    pub fn parts(&self) -> Vec<ValueId> {
        std::iter::once(self.base)
            .chain(self.shape.iter().copied())
            .chain(self.strides.iter().copied())
            .chain(self.offsets.iter().copied())
            .collect()
    }

    /// The same window with its IR values replaced, in [`BlockPtr::parts`] order.
    pub fn with_parts(&self, parts: &[ValueId]) -> BlockPtr {
        let rank = self.block_shape.len();
        BlockPtr {
            base: parts[0],
            shape: parts[1..1 + rank].to_vec(),
            strides: parts[1 + rank..1 + 2 * rank].to_vec(),
            offsets: parts[1 + 2 * rank..1 + 3 * rank].to_vec(),
            block_shape: self.block_shape.clone(),
            order: self.order.clone(),
        }
    }
}

/// A pipe value of the kernel language.
#[derive(Clone, Debug, PartialEq)]
pub enum PipeVal {
    Pipe(Rc<Pipe>),
    Writer(Rc<Pipe>),
    /// A reader endpoint, subscribed to `fields` (all when `None`).
    Reader {
        pipe: Rc<Pipe>,
        fields: Option<Vec<String>>,
    },
    /// A stage's fields, by name, as buffer views.
    Slot(Vec<(String, ValueId)>),
}

/// A pipe's fixed parts.
#[derive(Debug, PartialEq)]
pub struct Pipe {
    pub(crate) id: usize,
    pub(crate) capacity: i64,
    /// Each field's name and its `capacity` buffers.
    pub(crate) fields: Vec<(String, ValueId)>,
    pub(crate) full: ValueId,
    pub(crate) empty: ValueId,
    pub(crate) one_shot: bool,
    /// Reader names the pipe declared (`readers = ["mma", "epilogue"]`).
    pub(crate) readers: Vec<String>,
}

/// Folds a binary operator on two constants; `None` when it does not apply
/// (e.g. division by zero, bit operations on floats).
pub fn fold_binary(op: BinaryOp, a: ConstVal, b: ConstVal) -> Option<ConstVal> {
    use ConstVal::*;
    match (a, b) {
        (Int(x), Int(y)) => Some(Int(match op {
            BinaryOp::Add => x.checked_add(y)?,
            BinaryOp::Sub => x.checked_sub(y)?,
            BinaryOp::Mul => x.checked_mul(y)?,
            BinaryOp::Div => x.checked_div(y)?,
            BinaryOp::Rem => x.checked_rem(y)?,
            BinaryOp::Max => x.max(y),
            BinaryOp::Min => x.min(y),
            BinaryOp::And => x & y,
            BinaryOp::Or => x | y,
            BinaryOp::Xor => x ^ y,
            BinaryOp::Shl => x.checked_shl(u32::try_from(y).ok()?)?,
            BinaryOp::Shr => x.checked_shr(u32::try_from(y).ok()?)?,
            // Constants have no width of their own: `umulhi` of two
            // constants is left to the typed op.
            BinaryOp::MulHi | BinaryOp::DivFull => return None,
        })),
        (Bool(x), Bool(y)) => Some(Bool(match op {
            BinaryOp::And => x & y,
            BinaryOp::Or => x | y,
            BinaryOp::Xor => x ^ y,
            _ => return None,
        })),
        (Bool(_), _) | (_, Bool(_)) => None,
        _ => {
            let (x, y) = (a.as_f64(), b.as_f64());
            Some(Float(match op {
                BinaryOp::Add => x + y,
                BinaryOp::Sub => x - y,
                BinaryOp::Mul => x * y,
                BinaryOp::Div => x / y,
                BinaryOp::Rem => x % y,
                BinaryOp::Max => x.max(y),
                BinaryOp::Min => x.min(y),
                _ => return None,
            }))
        }
    }
}

pub fn fold_compare(pred: CmpPred, a: ConstVal, b: ConstVal) -> Option<bool> {
    let ord = match (a, b) {
        (ConstVal::Int(x), ConstVal::Int(y)) => x.cmp(&y),
        (ConstVal::Bool(x), ConstVal::Bool(y)) => x.cmp(&y),
        (ConstVal::Bool(_), _) | (_, ConstVal::Bool(_)) => return None,
        _ => a.as_f64().partial_cmp(&b.as_f64())?,
    };
    Some(match pred {
        CmpPred::Eq => ord.is_eq(),
        CmpPred::Ne => ord.is_ne(),
        CmpPred::Lt => ord.is_lt(),
        CmpPred::Le => ord.is_le(),
        CmpPred::Gt => ord.is_gt(),
        CmpPred::Ge => ord.is_ge(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_like_rust() {
        use ConstVal::*;
        assert_eq!(fold_binary(BinaryOp::Div, Int(-7), Int(2)), Some(Int(-3)));
        assert_eq!(fold_binary(BinaryOp::Rem, Int(-7), Int(2)), Some(Int(-1)));
        assert_eq!(fold_binary(BinaryOp::Div, Int(1), Int(0)), None);
        assert_eq!(
            fold_binary(BinaryOp::Mul, Int(2), Float(1.5)),
            Some(Float(3.0))
        );
        assert_eq!(fold_compare(CmpPred::Lt, Int(1), Float(1.5)), Some(true));
        assert_eq!(Int(300).cast(ScalarType::U8), Int(44));
        assert_eq!(Float(2.7).cast(ScalarType::I32), Int(2));
        assert_eq!(Int(1 << 40).default_type(), ScalarType::I64);
        assert_eq!(Int(-5).default_type(), ScalarType::I32);
    }
}

//! Checked global accesses: a kernel rewritten so that every global load,
//! store and atomic tests its addresses against the lengths of the buffers
//! they may point into, suppresses the lanes that fall outside, and records
//! the first such lane in a fault record the launcher reads back.
//!
//! Which buffers a pointer may point into is the set of pointer parameters
//! it is derived from (through `add_ptr`, broadcasts, selects and
//! loop-carried values); a lane is in bounds when it lies inside one of
//! them. The rewrite uses ordinary ops only (pointer-to-address casts,
//! compares, a masked atomic add and masked stores), so the interpreter and
//! every code generator run the checked kernel as they run any other.

use std::collections::HashMap;

use crate::ir::{
    AtomicOp, BinaryOp, Block, CacheModifier, CmpPred, Elem, EvictionPolicy, Kernel, Literal,
    MemScope, MemSem, Named, Op, OpId, OpKind, Param, ParamKind, Prim, ScalarType, SrcLoc, Type,
    UnaryOp, ValueId,
};

/// The fault record: `FAULT_RECORD_WORDS` i64 words the launcher zeroes
/// before a checked launch and reads after it.
pub const FAULT_RECORD_WORDS: usize = 8;
/// Word 0 counts the lanes that were out of bounds; the first of them
/// (the one that found the count at zero) fills the words below.
const COUNT: i64 = 0;
const SITE: i64 = 1;
const BYTE_OFFSET: i64 = 2;
const PROGRAM: i64 = 3;
const ELEMENT: i64 = 6;

/// The parameter names the rewrite appends, after the user's: the length in
/// bytes of each pointer parameter's buffer (from the pointer to its end), in
/// parameter order, then the fault record.
pub fn length_param_name(param: &str) -> String {
    format!("__tlx_len_{param}")
}
pub const FAULT_RECORD_PARAM: &str = "__tlx_faults";

/// One checked access: which parameters its pointer may point into, what
/// kind of access it is, and where the user wrote it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundsSite {
    /// Names of the pointer parameters the access is derived from.
    pub params: Vec<String>,
    /// `load`, `store`, `atomic` or `async_load`.
    pub access: &'static str,
    pub loc: SrcLoc,
}

/// What a fault record says, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundsFault {
    /// How many lanes were out of bounds, over the whole launch.
    pub count: i64,
    /// Index into the sites [`instrument_bounds`] returned.
    pub site: usize,
    /// Byte offset of the first such lane from its buffer's start (the
    /// site's first parameter).
    pub byte_offset: i64,
    pub program: [u32; 3],
    /// Row-major index of the lane's element in the accessed tile.
    pub element: usize,
}

impl BoundsFault {
    /// `None` when no lane was out of bounds.
    pub fn decode(record: &[i64; FAULT_RECORD_WORDS]) -> Option<BoundsFault> {
        let word = |w: i64| record[w as usize];
        (word(COUNT) != 0).then(|| BoundsFault {
            count: word(COUNT),
            site: word(SITE) as usize,
            byte_offset: word(BYTE_OFFSET),
            program: [0, 1, 2].map(|d| word(PROGRAM + d) as u32),
            element: word(ELEMENT) as usize,
        })
    }
}

/// Rewrites `kernel` in place (see the module doc) and returns its checked
/// accesses, indexed as the fault record's site word counts them.
pub fn instrument_bounds(kernel: &mut Kernel) -> Vec<BoundsSite> {
    let pointers: Vec<(usize, ValueId)> = kernel
        .params
        .iter()
        .enumerate()
        .filter(|(_, p)| matches!(p.kind, ParamKind::Ptr(_)))
        .map(|(i, p)| (i, p.value))
        .collect();
    let origins = PointerOrigins::of(kernel, &pointers);
    let mut params = Vec::with_capacity(pointers.len());
    for (index, value) in pointers {
        let name = kernel.params[index].name.clone();
        let length = add_param(
            kernel,
            length_param_name(&name),
            ParamKind::Scalar(ScalarType::I64),
        );
        params.push(PointerParam {
            bit: origin_bit(index),
            name,
            value,
            length,
        });
    }
    let record = add_param(
        kernel,
        FAULT_RECORD_PARAM.to_string(),
        ParamKind::Ptr(ScalarType::I64),
    );
    let mut body = std::mem::take(&mut kernel.body);
    let mut rewriter = Rewriter {
        origins: &origins,
        params: &params,
        record,
        sites: Vec::new(),
    };
    rewriter.block(&mut kernel.types, &mut body);
    let sites = rewriter.sites;
    kernel.body = body;
    kernel.number_ops();
    sites
}

fn add_param(kernel: &mut Kernel, name: String, kind: ParamKind) -> ValueId {
    let value = ValueId(kernel.types.len() as u32);
    kernel.types.push(kind.value_type());
    kernel.params.push(Param { name, kind, value });
    value
}

/// Parameter `index`'s bit in a set of origins. Kernels with more than 64
/// pointer parameters share the top bit (a pointer is then checked against
/// each of those that share it).
fn origin_bit(index: usize) -> u64 {
    1u64 << index.min(63)
}

/// A pointer parameter as the rewrite uses it.
struct PointerParam {
    /// Its bit in [`PointerOrigins`]' sets.
    bit: u64,
    name: String,
    value: ValueId,
    /// The parameter holding its buffer's length in bytes.
    length: ValueId,
}

/// For each global-pointer value, the pointer parameters (as a bit set of
/// parameter indices) it may be derived from.
struct PointerOrigins(HashMap<ValueId, u64>);

impl PointerOrigins {
    fn of(kernel: &Kernel, pointers: &[(usize, ValueId)]) -> PointerOrigins {
        let mut origins = HashMap::new();
        for &(index, value) in pointers {
            origins.insert(value, origin_bit(index));
        }
        let mut origins = PointerOrigins(origins);
        // Loop-carried pointers need the sets of their yields: iterate to a
        // fixed point (sets only grow, so this ends).
        while origins.propagate(kernel, &kernel.body) {}
        origins
    }

    fn get(&self, v: ValueId) -> u64 {
        self.0.get(&v).copied().unwrap_or(0)
    }

    fn widen(&mut self, v: ValueId, set: u64) -> bool {
        let old = self.get(v);
        if old | set == old {
            return false;
        }
        self.0.insert(v, old | set);
        true
    }

    /// One pass over `block`; whether any set grew.
    fn propagate(&mut self, kernel: &Kernel, block: &Block) -> bool {
        let mut changed = false;
        for op in &block.ops {
            let from: u64 = op
                .kind
                .operands()
                .iter()
                .map(|&v| self.get(v))
                .fold(0, |a, b| a | b);
            for &r in &op.results {
                if kernel.type_of(r).elem().global_pointee().is_some() {
                    changed |= self.widen(r, from);
                }
            }
            for nested in op.kind.blocks() {
                changed |= self.propagate(kernel, nested);
            }
            for group in op.kind.carried_values(&op.results) {
                let set = group.iter().map(|&v| self.get(v)).fold(0, |a, b| a | b);
                for v in group {
                    changed |= self.widen(v, set);
                }
            }
        }
        changed
    }
}

struct Rewriter<'a> {
    origins: &'a PointerOrigins,
    /// The pointer parameters, in parameter order.
    params: &'a [PointerParam],
    record: ValueId,
    sites: Vec<BoundsSite>,
}

/// A global access: its pointer operand and the mask it runs under.
struct Access {
    ptr: ValueId,
    mask: Option<ValueId>,
    name: &'static str,
}

fn access_of(op: &Op) -> Option<Access> {
    let access = |ptr: ValueId, mask: Option<ValueId>, name| Some(Access { ptr, mask, name });
    match &op.kind {
        OpKind::Load { ptr, mask, .. } => access(*ptr, *mask, "load"),
        OpKind::Store { ptr, mask, .. } => access(*ptr, *mask, "store"),
        OpKind::AtomicRmw { ptr, mask, .. } => access(*ptr, *mask, "atomic"),
        OpKind::AtomicCas { ptr, .. } => access(*ptr, None, "atomic"),
        OpKind::Prim {
            prim: prim @ Prim::AsyncLoad,
            args,
            ..
        } => {
            let named = Named::new(*prim, args, &[]);
            let mask = named.get("mask").ok().copied();
            access(*named.get("ptrs").ok()?, mask, "async_load")
        }
        _ => None,
    }
}

impl Rewriter<'_> {
    fn block(&mut self, types: &mut Vec<Type>, block: &mut Block) {
        let mut ops = Vec::with_capacity(block.ops.len());
        for mut op in std::mem::take(&mut block.ops) {
            for nested in op.kind.blocks_mut() {
                self.block(types, nested);
            }
            let access =
                access_of(&op).filter(|a| types[a.ptr.index()].elem().global_pointee().is_some());
            if let Some(access) = access {
                let origins = self.origins.get(access.ptr);
                let reach: Vec<&PointerParam> = self
                    .params
                    .iter()
                    .filter(|p| origins & p.bit != 0)
                    .collect();
                if let Some((first, others)) = reach.split_first() {
                    let mut emit = Emitter {
                        types,
                        ops: &mut ops,
                        loc: op.loc,
                    };
                    let site = self.sites.len() as i64;
                    let checked = self.check(&mut emit, &access, first, others, site);
                    apply(&mut op, &mut emit, checked);
                    self.sites.push(BoundsSite {
                        params: reach.iter().map(|p| p.name.clone()).collect(),
                        access: access.name,
                        loc: op.loc,
                    });
                }
            }
            ops.push(op);
        }
        block.ops = ops;
    }

    /// Emits the test of `access` against the buffers of `first` and
    /// `others` (the parameters its pointer may come from) and the fault
    /// recording, whose offset counts from `first`; returns the access's new
    /// mask (live and in bounds) and which lanes are in bounds.
    fn check(
        &self,
        e: &mut Emitter,
        access: &Access,
        first: &PointerParam,
        others: &[&PointerParam],
        site: i64,
    ) -> Checked {
        let ptr_type = e.types[access.ptr.index()].clone();
        let shape = ptr_type.shape().to_vec();
        let elem_bytes = ptr_type
            .elem()
            .global_pointee()
            .map_or(1, |s| s.size_bytes()) as i64;
        let address = e.push(OpKind::Cast(access.ptr), i64s(&shape));
        // Byte offsets from the parameter's pointer, and whether a whole
        // element fits between it and the end.
        let test = |e: &mut Emitter, param: &PointerParam| {
            let base = e.push(OpKind::Cast(param.value), i64s(&[]));
            let base = e.splat(base, &shape);
            let offset = e.binary(BinaryOp::Sub, address, base);
            let length = e.splat(param.length, &shape);
            let size = e.int(elem_bytes, ScalarType::I64, &shape);
            let last = e.binary(BinaryOp::Sub, length, size);
            let zero = e.int(0, ScalarType::I64, &shape);
            let after_start = e.compare(CmpPred::Ge, offset, zero);
            let before_end = e.compare(CmpPred::Le, offset, last);
            (offset, e.binary(BinaryOp::And, after_start, before_end))
        };
        let (offset, mut in_bounds) = test(e, first);
        for param in others {
            let (_, inside) = test(e, param);
            in_bounds = e.binary(BinaryOp::Or, in_bounds, inside);
        }
        let live = match access.mask {
            Some(mask) => mask,
            None => e.push(OpKind::Constant(Literal::Bool(true)), bools(&shape)),
        };
        let mask = e.binary(BinaryOp::And, live, in_bounds);
        let outside = e.push(
            OpKind::Unary {
                op: UnaryOp::Not,
                value: in_bounds,
            },
            bools(&shape),
        );
        let bad = e.binary(BinaryOp::And, live, outside);
        self.record_first(e, bad, &shape, offset, site);
        Checked {
            mask,
            in_bounds,
            redirect: first.value,
        }
    }

    /// The first out-of-bounds lane of the launch writes the record.
    fn record_first(
        &self,
        e: &mut Emitter,
        bad: ValueId,
        shape: &[usize],
        offset: ValueId,
        site: i64,
    ) {
        let record = e.splat(self.record, shape);
        let one = e.int(1, ScalarType::I64, shape);
        let count = e.push(
            OpKind::AtomicRmw {
                op: AtomicOp::Add,
                ptr: record,
                value: one,
                mask: Some(bad),
                sem: MemSem::Relaxed,
                scope: MemScope::Gpu,
            },
            i64s(shape),
        );
        let zero = e.int(0, ScalarType::I64, shape);
        let was_zero = e.compare(CmpPred::Eq, count, zero);
        let first = e.binary(BinaryOp::And, bad, was_zero);
        let site = e.int(site, ScalarType::I64, shape);
        let mut words = vec![(SITE, site), (BYTE_OFFSET, offset)];
        for axis in 0..3u8 {
            let pid = e.push(OpKind::ProgramId { axis }, Type::scalar(ScalarType::I32));
            let pid = e.push(OpKind::Cast(pid), i64s(&[]));
            words.push((PROGRAM + i64::from(axis), e.splat(pid, shape)));
        }
        let element = e.flat_index(shape);
        words.push((ELEMENT, element));
        for (word, value) in words {
            let at = e.int(word, ScalarType::I32, shape);
            let ptr = e.push(
                OpKind::AddPtr {
                    ptr: record,
                    offset: at,
                },
                Type::tensor(Elem::global_ptr(ScalarType::I64), shape.to_vec()),
            );
            e.ops.push(e.op(
                OpKind::Store {
                    ptr,
                    value,
                    mask: Some(first),
                    cache: CacheModifier::None,
                    eviction: EvictionPolicy::Normal,
                },
                vec![],
            ));
        }
    }
}

/// The values a checked access runs under.
struct Checked {
    mask: ValueId,
    in_bounds: ValueId,
    /// An in-bounds address of the right type, for lanes of an access that
    /// has no mask (a compare-and-swap).
    redirect: ValueId,
}

/// Puts the checked mask on `op`. A compare-and-swap has no mask: its
/// out-of-bounds lanes go to the buffer's first element with the compare
/// value as the new one, which leaves memory as it was.
fn apply(op: &mut Op, e: &mut Emitter, checked: Checked) {
    match &mut op.kind {
        OpKind::Load { mask, .. } | OpKind::Store { mask, .. } | OpKind::AtomicRmw { mask, .. } => {
            *mask = Some(checked.mask)
        }
        // `async_load`'s mask is its third operand (the verifier sees to it).
        OpKind::Prim { args, .. } => {
            if let Some(mask) = args.get_mut(2) {
                *mask = checked.mask;
            }
        }
        OpKind::AtomicCas {
            ptr, cmp, value, ..
        } => {
            let ptr_type = e.types[ptr.index()].clone();
            let shape = ptr_type.shape().to_vec();
            let base = e.splat(checked.redirect, &shape);
            *ptr = e.push(
                OpKind::Select {
                    cond: checked.in_bounds,
                    on_true: *ptr,
                    on_false: base,
                },
                ptr_type,
            );
            let value_type = e.types[value.index()].clone();
            *value = e.push(
                OpKind::Select {
                    cond: checked.in_bounds,
                    on_true: *value,
                    on_false: *cmp,
                },
                value_type,
            );
        }
        _ => {}
    }
}

fn i64s(shape: &[usize]) -> Type {
    Type::tensor(Elem::Scalar(ScalarType::I64), shape.to_vec())
}

fn bools(shape: &[usize]) -> Type {
    Type::tensor(Elem::Scalar(ScalarType::Bool), shape.to_vec())
}

/// Appends ops at one source location.
struct Emitter<'a> {
    types: &'a mut Vec<Type>,
    ops: &'a mut Vec<Op>,
    loc: SrcLoc,
}

impl Emitter<'_> {
    fn op(&self, kind: OpKind, results: Vec<ValueId>) -> Op {
        Op {
            id: OpId::default(),
            kind,
            results,
            loc: self.loc,
        }
    }

    fn push(&mut self, kind: OpKind, ty: Type) -> ValueId {
        let value = ValueId(self.types.len() as u32);
        self.types.push(ty);
        self.ops.push(self.op(kind, vec![value]));
        value
    }

    /// A scalar repeated to `shape` (itself for a scalar access).
    fn splat(&mut self, scalar: ValueId, shape: &[usize]) -> ValueId {
        if shape.is_empty() {
            return scalar;
        }
        let ty = self.types[scalar.index()].with_shape(shape.to_vec());
        self.push(OpKind::Splat(scalar), ty)
    }

    fn int(&mut self, value: i64, ty: ScalarType, shape: &[usize]) -> ValueId {
        self.push(
            OpKind::Constant(Literal::Int(value)),
            Type::tensor(Elem::Scalar(ty), shape.to_vec()),
        )
    }

    fn binary(&mut self, op: BinaryOp, lhs: ValueId, rhs: ValueId) -> ValueId {
        let ty = self.types[lhs.index()].clone();
        self.push(OpKind::Binary { op, lhs, rhs }, ty)
    }

    fn compare(&mut self, pred: CmpPred, lhs: ValueId, rhs: ValueId) -> ValueId {
        let shape = self.types[lhs.index()].shape().to_vec();
        self.push(OpKind::Compare { pred, lhs, rhs }, bools(&shape))
    }

    /// Each element's row-major index in a tile of `shape`, as i64.
    fn flat_index(&mut self, shape: &[usize]) -> ValueId {
        let mut index = self.int(0, ScalarType::I64, shape);
        let mut stride = 1i64;
        for axis in (0..shape.len()).rev() {
            let along = self.push(
                OpKind::Arange {
                    start: 0,
                    end: shape[axis] as i64,
                },
                Type::tensor(Elem::Scalar(ScalarType::I32), vec![shape[axis]]),
            );
            let mut along = self.push(OpKind::Cast(along), i64s(&[shape[axis]]));
            // Size-1 dimensions before and after the axis, then broadcast.
            let mut dims = vec![shape[axis]];
            for at in std::iter::repeat_n(0, axis).chain(axis + 1..shape.len()) {
                dims.insert(at, 1);
                along = self.push(
                    OpKind::ExpandDims {
                        value: along,
                        axis: at,
                    },
                    i64s(&dims),
                );
            }
            if dims != shape {
                along = self.push(OpKind::Broadcast(along), i64s(shape));
            }
            let scale = self.int(stride, ScalarType::I64, shape);
            let scaled = self.binary(BinaryOp::Mul, along, scale);
            index = self.binary(BinaryOp::Add, index, scaled);
            stride *= shape[axis] as i64;
        }
        index
    }
}

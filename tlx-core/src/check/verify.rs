//! The IR verifier: every operand defined before use and in scope, every
//! value defined once, each op's operand and result types as `ir::ops`
//! documents them, terminators exactly at the end of nested blocks, op ids
//! unique, and task regions by the rules of `check::tasks`.

use super::tasks::{check_task_region, TaskRuleError};
use crate::ir::{
    Block, CmpPred, Elem, Kernel, Literal, Op, OpId, OpKind, ReduceKind, ScalarType, SrcLoc, Type,
    UnaryOp, ValueId, INDEX_TYPE,
};
use std::collections::HashSet;

/// Why a kernel's IR is malformed, and where.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{line}:{col}: {kind}", line = loc.line, col = loc.col)]
pub struct VerifyError {
    pub kind: VerifyErrorKind,
    pub loc: SrcLoc,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VerifyErrorKind {
    /// Structure or typing, described.
    #[error("{0}")]
    Malformed(String),
    #[error(transparent)]
    TaskRule(#[from] TaskRuleError),
}

impl VerifyError {
    fn at(loc: SrcLoc) -> impl Fn(String) -> VerifyError {
        move |message| VerifyError {
            kind: VerifyErrorKind::Malformed(message),
            loc,
        }
    }

    fn task_rule(rule: TaskRuleError, loc: SrcLoc) -> VerifyError {
        VerifyError {
            kind: rule.into(),
            loc,
        }
    }
}

type V = Result<(), String>;

/// Checks `kernel`'s structure and types.
pub fn verify(kernel: &Kernel) -> Result<(), VerifyError> {
    let mut checker = Checker {
        kernel,
        defined: HashSet::new(),
        scopes: vec![HashSet::new()],
        ids: HashSet::new(),
        depth: 0,
        in_task: false,
    };
    for p in &kernel.params {
        if kernel.types.get(p.value.index()) != Some(&p.kind.value_type()) {
            return Err(VerifyError::at(SrcLoc::default())(format!(
                "parameter `{}` has the wrong type",
                p.name
            )));
        }
        checker
            .define(p.value)
            .map_err(VerifyError::at(SrcLoc::default()))?;
    }
    checker.block(&kernel.body, BlockEnd::None)
}

/// What a block must end with.
#[derive(Clone)]
enum BlockEnd {
    /// The kernel body: no terminator.
    None,
    /// A task of `async_tasks`: no args, no terminator.
    Task,
    /// `Yield` of values of these types.
    Yield(Vec<Type>),
    /// `Condition` of a scalar bool.
    Condition,
}

struct Checker<'k> {
    kernel: &'k Kernel,
    /// Every value defined so far (each may be defined once).
    defined: HashSet<ValueId>,
    /// Values visible in each open block.
    scopes: Vec<HashSet<ValueId>>,
    /// The ids of the ops seen so far (each may be used once).
    ids: HashSet<OpId>,
    /// Blocks open around the current op (0: the kernel body).
    depth: usize,
    /// Whether the current op is inside a task of `async_tasks`.
    in_task: bool,
}

fn fail<T>(message: impl Into<String>) -> Result<T, String> {
    Err(message.into())
}

fn ensure(cond: bool, message: impl FnOnce() -> String) -> V {
    if cond {
        Ok(())
    } else {
        Err(message())
    }
}

impl<'k> Checker<'k> {
    fn ty(&self, v: ValueId) -> Result<&'k Type, String> {
        self.kernel
            .types
            .get(v.index())
            .ok_or_else(|| format!("{v} has no type"))
    }

    fn define(&mut self, v: ValueId) -> V {
        self.ty(v)?;
        ensure(self.defined.insert(v), || format!("{v} is defined twice"))?;
        if let Some(scope) = self.scopes.last_mut() {
            scope.insert(v);
        }
        Ok(())
    }

    fn visible(&self, v: ValueId) -> V {
        ensure(self.scopes.iter().any(|s| s.contains(&v)), || {
            format!("{v} is used where it is not defined")
        })
    }

    fn block(&mut self, block: &Block, end: BlockEnd) -> Result<(), VerifyError> {
        let nested = !matches!(end, BlockEnd::None | BlockEnd::Task);
        let at = VerifyError::at;
        if matches!(end, BlockEnd::Task) && !block.args.is_empty() {
            return Err(at(SrcLoc::default())("a task takes no block args".into()));
        }
        for &a in &block.args {
            self.define(a).map_err(at(SrcLoc::default()))?;
        }
        for (i, op) in block.ops.iter().enumerate() {
            let last = i + 1 == block.ops.len();
            if op.kind.is_terminator() && !(last && nested) {
                return Err(at(op.loc)(
                    "a terminator is not at the end of a nested block".into(),
                ));
            }
            self.op(op)?;
        }
        let last = block.ops.last();
        let result = match (&end, last.map(|o| &o.kind)) {
            (BlockEnd::None | BlockEnd::Task, _) => Ok(()),
            (BlockEnd::Yield(types), Some(OpKind::Yield(vs))) => {
                self.types_are(vs, types, "yielded values")
            }
            (BlockEnd::Condition, Some(OpKind::Condition(c))) => self.is_bool_scalar(*c),
            (BlockEnd::Yield(_), _) => fail("a nested block does not end with `Yield`"),
            (BlockEnd::Condition, _) => {
                fail("a `while` condition block does not end with `Condition`")
            }
        };
        result.map_err(at(last.map(|o| o.loc).unwrap_or_default()))
    }

    fn types_are(&self, vs: &[ValueId], types: &[Type], what: &str) -> V {
        ensure(vs.len() == types.len(), || {
            format!("{what}: {} values for {} types", vs.len(), types.len())
        })?;
        for (v, t) in vs.iter().zip(types) {
            let got = self.ty(*v)?;
            ensure(got == t, || format!("{what}: {v} is {got}, expected {t}"))?;
        }
        Ok(())
    }

    fn is_bool_scalar(&self, v: ValueId) -> V {
        let t = self.ty(v)?;
        ensure(*t == Type::scalar(ScalarType::Bool), || {
            format!("{v} must be a scalar bool, found {t}")
        })
    }

    fn op(&mut self, op: &Op) -> Result<(), VerifyError> {
        let err =
            |message: String| VerifyError::at(op.loc)(format!("{}: {message}", op.kind.mnemonic()));
        let rule = |rule: TaskRuleError| VerifyError::task_rule(rule, op.loc);
        ensure(self.ids.insert(op.id), || {
            format!("{} is the id of two ops", op.id)
        })
        .map_err(err)?;
        for v in op.kind.operands() {
            self.visible(v).map_err(err)?;
        }
        // Block-tensor ops compute on register tensors; a TLX primitive's
        // row says which buffers, barriers and descriptors it takes.
        if !matches!(op.kind, OpKind::Prim { .. }) {
            for &v in op.kind.operands().iter().chain(&op.results) {
                let t = self.ty(v).map_err(err)?;
                ensure(t.is_tensor(), || format!("{v} is {t}, not a tensor")).map_err(err)?;
            }
        }
        match &op.kind {
            OpKind::AsyncTasks { tasks } => {
                if self.depth > 0 {
                    return Err(rule(TaskRuleError::NestedTasks));
                }
                check_task_region(tasks, &self.kernel.options).map_err(rule)?;
            }
            OpKind::Prim {
                prim: prim @ (crate::ir::Prim::LocalAlloc | crate::ir::Prim::AllocBarriers),
                ..
            } if self.depth > 0 => {
                return Err(err(format!(
                    "`{}` is allowed only at the top level of the kernel body",
                    prim.mnemonic()
                )));
            }
            OpKind::AsyncTaskReplicaId if !self.in_task => {
                return Err(rule(TaskRuleError::ReplicaIdOutsideTask));
            }
            _ => {}
        }
        let in_task = self.in_task;
        for (block, end) in self.nested(op).map_err(err)? {
            self.scopes.push(HashSet::new());
            self.depth += 1;
            self.in_task = in_task || matches!(end, BlockEnd::Task);
            let r = self.block(block, end);
            self.in_task = in_task;
            self.depth -= 1;
            self.scopes.pop();
            r?;
        }
        self.typing(op).map_err(err)?;
        for &r in &op.results {
            self.define(r).map_err(err)?;
        }
        Ok(())
    }

    /// The nested blocks of a control-flow op with what each must end with.
    fn nested<'o>(&self, op: &'o Op) -> Result<Vec<(&'o Block, BlockEnd)>, String> {
        Ok(match &op.kind {
            OpKind::For { inits, body, .. } => vec![(body, BlockEnd::Yield(self.types_of(inits)?))],
            OpKind::While { inits, cond, body } => {
                let carried = self.types_of(inits)?;
                vec![
                    (cond, BlockEnd::Condition),
                    (body, BlockEnd::Yield(carried)),
                ]
            }
            OpKind::If {
                then_block,
                else_block,
                ..
            } => {
                let results: Vec<Type> = self.result_types(op)?.into_iter().cloned().collect();
                vec![
                    (then_block, BlockEnd::Yield(results.clone())),
                    (else_block, BlockEnd::Yield(results)),
                ]
            }
            OpKind::AsyncTasks { tasks } => {
                tasks.iter().map(|t| (&t.body, BlockEnd::Task)).collect()
            }
            _ => Vec::new(),
        })
    }

    fn result_types(&self, op: &Op) -> Result<Vec<&'k Type>, String> {
        op.results.iter().map(|r| self.ty(*r)).collect()
    }

    fn one_result(&self, op: &Op) -> Result<&'k Type, String> {
        match self.result_types(op)?.as_slice() {
            [t] => Ok(t),
            other => fail(format!("expected 1 result, found {}", other.len())),
        }
    }

    fn typing(&self, op: &Op) -> V {
        use OpKind::*;
        let scalar = |t: &Type| t.elem().scalar();
        match &op.kind {
            Constant(lit) => {
                let r = self.one_result(op)?;
                let ok = match (scalar(r), lit) {
                    (Some(ScalarType::Bool), Literal::Bool(_)) => true,
                    (Some(s), Literal::Int(_)) => s.is_int() || s.is_float(),
                    (Some(s), Literal::Float(_)) => s.is_float(),
                    _ => false,
                };
                ensure(ok, || format!("literal {lit:?} does not fit {r}"))
            }
            ProgramId { axis } | NumPrograms { axis } => {
                ensure(*axis < 3, || format!("axis {axis} out of range"))?;
                self.result_is(op, &Type::scalar(INDEX_TYPE))
            }
            ClusterCtaRank | AsyncTaskReplicaId => self.result_is(op, &Type::scalar(INDEX_TYPE)),
            MultipleOf { value, factor } => {
                let t = self.ty(*value)?;
                ensure(t.is_scalar() && t.elem().is_integral(), || {
                    format!("multiple_of takes an integer or pointer scalar, not {t}")
                })?;
                ensure(factor.is_power_of_two(), || {
                    format!("multiple_of factor {factor} is not a power of two")
                })?;
                self.result_is(op, t)
            }
            ClusterBarrier => ensure(op.results.is_empty(), || {
                "cluster_barrier has no results".into()
            }),
            Arange { start, end } => {
                ensure(end > start, || "empty range".into())?;
                self.result_is(
                    op,
                    &Type::tensor(Elem::Scalar(INDEX_TYPE), vec![(end - start) as usize]),
                )
            }
            Splat(v) => {
                let (t, r) = (self.ty(*v)?, self.one_result(op)?);
                ensure(t.is_scalar() && t.elem() == r.elem(), || {
                    format!("cannot splat {t} to {r}")
                })
            }
            Broadcast(v) => {
                let (t, r) = (self.ty(*v)?, self.one_result(op)?);
                let ok = t.elem() == r.elem()
                    && t.rank() == r.rank()
                    && t.shape()
                        .iter()
                        .zip(r.shape())
                        .all(|(a, b)| a == b || *a == 1);
                ensure(ok, || format!("cannot broadcast {t} to {r}"))
            }
            ExpandDims { value, axis } => {
                let t = self.ty(*value)?;
                ensure(*axis <= t.rank(), || {
                    format!("axis {axis} out of range for {t}")
                })?;
                let mut shape = t.shape().to_vec();
                shape.insert(*axis, 1);
                self.result_is(op, &t.with_shape(shape))
            }
            Reshape(v) => {
                let (t, r) = (self.ty(*v)?, self.one_result(op)?);
                ensure(t.elem() == r.elem() && t.numel() == r.numel(), || {
                    format!("cannot reshape {t} to {r}")
                })
            }
            Trans { value, perm } => {
                let t = self.ty(*value)?;
                let mut sorted = perm.clone();
                sorted.sort_unstable();
                ensure(sorted == (0..t.rank()).collect::<Vec<_>>(), || {
                    format!("{perm:?} is not a permutation of {t}")
                })?;
                self.result_is(
                    op,
                    &t.with_shape(perm.iter().map(|&p| t.shape()[p]).collect()),
                )
            }
            Cast(v) => {
                let (t, r) = (self.ty(*v)?, self.one_result(op)?);
                // A global pointer may be cast to its i64 address (Triton's
                // `ptr.to(tl.int64)`; the bounds-check instrumentation uses it),
                // and an i64 address back to a global pointer (`remote`
                // turns a peer's address from its table into a pointer).
                let i64 = Elem::Scalar(ScalarType::I64);
                let address = t.elem().global_pointee().is_some() && r.elem() == i64
                    || t.elem() == i64 && r.elem().global_pointee().is_some();
                ensure(
                    t.shape() == r.shape()
                        && (scalar(t).is_some() && scalar(r).is_some() || address),
                    || format!("cannot cast {t} to {r}"),
                )
            }
            Bitcast(v) => {
                let (t, r) = (self.ty(*v)?, self.one_result(op)?);
                let same_size = matches!((scalar(t), scalar(r)), (Some(a), Some(b)) if a.size_bytes() == b.size_bytes());
                ensure(t.shape() == r.shape() && same_size, || {
                    format!("cannot bitcast {t} to {r}")
                })
            }
            Binary { op: bop, lhs, rhs } => {
                let (l, r) = (self.ty(*lhs)?, self.ty(*rhs)?);
                ensure(l == r, || format!("operands differ: {l} and {r}"))?;
                let s = scalar(l).ok_or_else(|| format!("operands are pointers: {l}"))?;
                use crate::ir::BinaryOp as B;
                let ok = match bop {
                    B::And | B::Or | B::Xor => !s.is_float(),
                    B::Shl | B::Shr | B::MulHi => s.is_int(),
                    B::DivFull => s == ScalarType::F32,
                    _ => s != ScalarType::Bool,
                };
                ensure(ok, || format!("{bop:?} does not apply to {s}"))?;
                self.result_is(op, l)
            }
            Unary { op: uop, value } => {
                let t = self.ty(*value)?;
                let s = scalar(t).ok_or_else(|| format!("operand is a pointer: {t}"))?;
                let ok = match uop {
                    UnaryOp::Neg => s != ScalarType::Bool,
                    UnaryOp::Not => !s.is_float(),
                    UnaryOp::Abs => s.is_int() || s.is_float(),
                    // PTX has exact f64 instructions only.
                    _ => s.is_float() && (uop.is_exact() || s != ScalarType::F64),
                };
                ensure(ok, || format!("{uop:?} does not apply to {s}"))?;
                self.result_is(op, t)
            }
            Compare { pred, lhs, rhs } => {
                let (l, r) = (self.ty(*lhs)?, self.ty(*rhs)?);
                ensure(l == r, || format!("operands differ: {l} and {r}"))?;
                let _: CmpPred = *pred;
                self.result_is(op, &l.with_elem(Elem::Scalar(ScalarType::Bool)))
            }
            Select {
                cond,
                on_true,
                on_false,
            } => {
                let (c, t, f) = (self.ty(*cond)?, self.ty(*on_true)?, self.ty(*on_false)?);
                ensure(t == f, || format!("branches differ: {t} and {f}"))?;
                ensure(*c == t.with_elem(Elem::Scalar(ScalarType::Bool)), || {
                    format!("condition {c} does not fit {t}")
                })?;
                self.result_is(op, t)
            }
            Fma { a, b, c } => {
                let (x, y, z) = (self.ty(*a)?, self.ty(*b)?, self.ty(*c)?);
                ensure(
                    x == y && y == z && scalar(x).is_some_and(|s| s.is_float()),
                    || format!("operands must be equal float types: {x}, {y}, {z}"),
                )?;
                self.result_is(op, x)
            }
            AddPtr { ptr, offset } => {
                let (p, o) = (self.ty(*ptr)?, self.ty(*offset)?);
                ensure(p.elem().pointee().is_some(), || {
                    format!("{p} is not a pointer")
                })?;
                ensure(
                    o.shape() == p.shape() && scalar(o).is_some_and(|s| s.is_int()),
                    || format!("offset {o} does not fit {p}"),
                )?;
                self.result_is(op, p)
            }
            Load {
                ptr, mask, other, ..
            } => {
                let p = self.ty(*ptr)?;
                let pointee = global_pointee(p)?;
                let value = p.with_elem(Elem::Scalar(pointee));
                self.mask_fits(*mask, p)?;
                if let Some(o) = other {
                    let t = self.ty(*o)?;
                    ensure(*t == value, || format!("`other` is {t}, expected {value}"))?;
                }
                self.result_is(op, &value)
            }
            Store {
                ptr, value, mask, ..
            } => {
                self.stored_value_fits(*ptr, *value, *mask)?;
                ensure(op.results.is_empty(), || "a store has no results".into())
            }
            Reduce { value, axis, kind } => {
                let t = self.ty(*value)?;
                ensure(*axis < t.rank(), || {
                    format!("axis {axis} out of range for {t}")
                })?;
                let mut shape = t.shape().to_vec();
                shape.remove(*axis);
                let elem = match kind {
                    ReduceKind::Argmax | ReduceKind::Argmin => Elem::Scalar(INDEX_TYPE),
                    _ => t.elem(),
                };
                ensure(scalar(t).is_some(), || "cannot reduce pointers".into())?;
                self.result_is(op, &Type::tensor(elem, shape))
            }
            Scan {
                value,
                axis,
                combine,
                ..
            } => {
                let t = self.ty(*value)?;
                use crate::ir::BinaryOp as B;
                ensure(matches!(combine, B::Add | B::Mul | B::Max | B::Min), || {
                    format!("a scan cannot combine by {combine:?}")
                })?;
                ensure(scalar(t).is_some_and(|s| s != ScalarType::Bool), || {
                    format!("cannot scan {t}")
                })?;
                ensure(*axis < t.rank(), || {
                    format!("axis {axis} out of range for {t}")
                })?;
                let mut shape = t.shape().to_vec();
                shape.remove(*axis);
                let expected = [t.clone(), t.with_shape(shape)];
                let got = self.result_types(op)?;
                ensure(
                    got.len() == 2 && *got[0] == expected[0] && *got[1] == expected[1],
                    || format!("results must be {} and {}", expected[0], expected[1]),
                )
            }
            Dot { a, b, acc, .. } => {
                let (x, y, c) = (self.ty(*a)?, self.ty(*b)?, self.ty(*acc)?);
                ensure(x.rank() == 2 && y.rank() == 2 && c.rank() == 2, || {
                    "operands must be 2-D".into()
                })?;
                ensure(
                    x.shape()[1] == y.shape()[0] && c.shape() == [x.shape()[0], y.shape()[1]],
                    || format!("shapes do not fit: {x} x {y} + {c}"),
                )?;
                ensure(x.elem() == y.elem(), || {
                    format!("operand types differ: {x}, {y}")
                })?;
                let expected_acc = match scalar(x) {
                    Some(ScalarType::I8) => ScalarType::I32,
                    Some(s) if s.is_float() && s != ScalarType::F64 => ScalarType::F32,
                    _ => return fail(format!("unsupported operand type {x}")),
                };
                ensure(c.elem() == Elem::Scalar(expected_acc), || {
                    format!("accumulator must be {expected_acc}, found {c}")
                })?;
                self.result_is(op, c)
            }
            AtomicRmw {
                ptr, value, mask, ..
            } => {
                let (_, v) = self.stored_value_fits(*ptr, *value, *mask)?;
                self.result_is(op, v)
            }
            AtomicCas {
                ptr, cmp, value, ..
            } => {
                let (p, c, v) = (self.ty(*ptr)?, self.ty(*cmp)?, self.ty(*value)?);
                let pointee = global_pointee(p)?;
                let expected = p.with_elem(Elem::Scalar(pointee));
                ensure(*c == expected && *v == expected, || {
                    format!("operands {c}, {v} do not fit pointer {p}")
                })?;
                self.result_is(op, v)
            }
            Join { a, b } => {
                let (x, y) = (self.ty(*a)?, self.ty(*b)?);
                ensure(x == y, || format!("operands differ: {x} and {y}"))?;
                let mut shape = x.shape().to_vec();
                shape.push(2);
                self.result_is(op, &x.with_shape(shape))
            }
            Split(value) => {
                let t = self.ty(*value)?;
                ensure(t.shape().last() == Some(&2), || {
                    format!("the last dimension of {t} is not 2")
                })?;
                let half = t.with_shape(t.shape()[..t.rank() - 1].to_vec());
                let got = self.result_types(op)?;
                ensure(got.len() == 2 && got.iter().all(|r| **r == half), || {
                    format!("results must be two {half}")
                })
            }
            ExtractTile { value, index } => {
                let (t, r) = (self.ty(*value)?, self.one_result(op)?);
                ensure(t.elem() == r.elem(), || "element types differ".into())?;
                tile_fits(t.shape(), r.shape(), index)
            }
            InsertTile { value, tile, index } => {
                let (t, s) = (self.ty(*value)?, self.ty(*tile)?);
                ensure(t.elem() == s.elem(), || "element types differ".into())?;
                tile_fits(t.shape(), s.shape(), index)?;
                self.result_is(op, t)
            }
            For {
                lower,
                upper,
                step,
                inits,
                body,
            } => {
                let l = self.ty(*lower)?;
                ensure(
                    l.is_scalar() && scalar(l).is_some_and(|s| s.is_int()),
                    || format!("bounds must be scalar ints, found {l}"),
                )?;
                ensure(self.ty(*upper)? == l && self.ty(*step)? == l, || {
                    "bounds have different types".into()
                })?;
                let carried = self.types_of(inits)?;
                ensure(body.args.len() == inits.len() + 1, || {
                    "body args must be the index and the carried values".into()
                })?;
                ensure(self.ty(body.args[0])? == l, || {
                    "the index arg must have the bounds' type".into()
                })?;
                self.types_are(&body.args[1..], &carried, "body args")?;
                self.types_are(&op.results, &carried, "results")
            }
            While { inits, cond, body } => {
                let carried = self.types_of(inits)?;
                self.types_are(&cond.args, &carried, "condition args")?;
                self.types_are(&body.args, &carried, "body args")?;
                self.types_are(&op.results, &carried, "results")
            }
            If {
                cond,
                then_block,
                else_block,
            } => {
                self.is_bool_scalar(*cond)?;
                ensure(
                    then_block.args.is_empty() && else_block.args.is_empty(),
                    || "`if` blocks take no args".into(),
                )
            }
            Yield(_) | Condition(_) => Ok(()),
            Prim { prim, args, imms } => {
                let operands = args
                    .iter()
                    .map(|v| self.ty(*v))
                    .collect::<Result<Vec<_>, _>>()?;
                prim.check(imms, &operands, &self.result_types(op)?)
            }
            Print { .. } => ensure(op.results.is_empty(), || "print has no results".into()),
            AsyncTasks { .. } => ensure(op.results.is_empty(), || {
                "async_tasks has no results".into()
            }),
            Assert { cond, .. } => {
                let t = self.ty(*cond)?;
                ensure(t.elem() == Elem::Scalar(ScalarType::Bool), || {
                    format!("condition must be bool, found {t}")
                })
            }
        }
    }

    fn types_of(&self, vs: &[ValueId]) -> Result<Vec<Type>, String> {
        vs.iter().map(|v| self.ty(*v).cloned()).collect()
    }

    fn result_is(&self, op: &Op, expected: &Type) -> V {
        let r = self.one_result(op)?;
        ensure(r == expected, || {
            format!("result is {r}, expected {expected}")
        })
    }

    /// The pointer and value types of a store or atomic, checked to agree
    /// with each other and with the mask.
    fn stored_value_fits(
        &self,
        ptr: ValueId,
        value: ValueId,
        mask: Option<ValueId>,
    ) -> Result<(&'k Type, &'k Type), String> {
        let (p, v) = (self.ty(ptr)?, self.ty(value)?);
        let pointee = global_pointee(p)?;
        ensure(*v == p.with_elem(Elem::Scalar(pointee)), || {
            format!("value {v} does not fit pointer {p}")
        })?;
        self.mask_fits(mask, p)?;
        Ok((p, v))
    }

    fn mask_fits(&self, mask: Option<ValueId>, ptr: &Type) -> V {
        let Some(m) = mask else { return Ok(()) };
        let t = self.ty(m)?;
        ensure(*t == ptr.with_elem(Elem::Scalar(ScalarType::Bool)), || {
            format!("mask {t} does not fit {ptr}")
        })
    }
}

/// What a global memory access (load, store, atomic) goes through.
fn global_pointee(p: &Type) -> Result<ScalarType, String> {
    p.elem()
        .global_pointee()
        .ok_or_else(|| format!("{p} is not a pointer into global memory"))
}

fn tile_fits(shape: &[usize], tile: &[usize], index: &[usize]) -> V {
    ensure(
        shape.len() == tile.len() && index.len() == shape.len(),
        || "tile rank mismatch".into(),
    )?;
    for ((&d, &t), &i) in shape.iter().zip(tile).zip(index) {
        ensure(t > 0 && d % t == 0 && i < d / t, || {
            format!("tile {tile:?} at {index:?} does not fit {shape:?}")
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{AddressSpace, BinaryOp, Builder, KernelOptions, ParamKind};

    fn i32t() -> Type {
        Type::scalar(ScalarType::I32)
    }

    #[test]
    fn accepts_a_well_formed_loop() {
        let mut b = Builder::new("k", KernelOptions::default());
        let out = b.add_param("out", ParamKind::Ptr(ScalarType::I32));
        let zero = b.push1(OpKind::Constant(Literal::Int(0)), i32t());
        let args = b.begin_block(vec![i32t(), i32t()]);
        let next = b.push1(
            OpKind::Binary {
                op: BinaryOp::Add,
                lhs: args[0],
                rhs: args[1],
            },
            i32t(),
        );
        b.push(OpKind::Yield(vec![next]), vec![]);
        let body = b.end_block();
        let sum = b.push1(
            OpKind::For {
                lower: zero,
                upper: zero,
                step: zero,
                inits: vec![zero],
                body,
            },
            i32t(),
        );
        b.push(
            OpKind::Store {
                ptr: out,
                value: sum,
                mask: None,
                cache: Default::default(),
                eviction: Default::default(),
            },
            vec![],
        );
        assert_eq!(verify(&b.finish()), Ok(()));
    }

    #[test]
    fn rejects_a_value_used_outside_its_block() {
        let mut b = Builder::new("k", KernelOptions::default());
        let zero = b.push1(OpKind::Constant(Literal::Int(0)), i32t());
        let args = b.begin_block(vec![i32t()]);
        let inner = b.push1(
            OpKind::Binary {
                op: BinaryOp::Add,
                lhs: args[0],
                rhs: args[0],
            },
            i32t(),
        );
        b.push(OpKind::Yield(vec![]), vec![]);
        let body = b.end_block();
        b.push(
            OpKind::For {
                lower: zero,
                upper: zero,
                step: zero,
                inits: vec![],
                body,
            },
            vec![],
        );
        b.push1(
            OpKind::Binary {
                op: BinaryOp::Add,
                lhs: inner,
                rhs: zero,
            },
            i32t(),
        );
        let err = verify(&b.finish()).expect_err("inner value escapes");
        assert!(
            err.to_string().contains("used where it is not defined"),
            "{err}"
        );
    }

    #[test]
    fn rejects_mismatched_operand_types() {
        let mut b = Builder::new("k", KernelOptions::default());
        let x = b.push1(OpKind::Constant(Literal::Int(0)), i32t());
        let y = b.push1(
            OpKind::Constant(Literal::Float(1.0)),
            Type::scalar(ScalarType::F32),
        );
        b.push1(
            OpKind::Binary {
                op: BinaryOp::Add,
                lhs: x,
                rhs: y,
            },
            i32t(),
        );
        let err = verify(&b.finish()).expect_err("i32 + f32");
        assert!(err.to_string().contains("operands differ"), "{err}");
    }

    #[test]
    fn rejects_a_block_without_yield_and_a_stray_terminator() {
        let mut b = Builder::new("k", KernelOptions::default());
        let c = b.push1(
            OpKind::Constant(Literal::Bool(true)),
            Type::scalar(ScalarType::Bool),
        );
        b.begin_block(vec![]);
        let then_block = b.end_block();
        b.begin_block(vec![]);
        b.push(OpKind::Yield(vec![]), vec![]);
        let else_block = b.end_block();
        b.push(
            OpKind::If {
                cond: c,
                then_block,
                else_block,
            },
            vec![],
        );
        let err = verify(&b.finish()).expect_err("missing yield");
        assert!(
            err.to_string().contains("does not end with `Yield`"),
            "{err}"
        );

        let mut b = Builder::new("k", KernelOptions::default());
        b.push(OpKind::Yield(vec![]), vec![]);
        let err = verify(&b.finish()).expect_err("yield in the kernel body");
        assert!(err.to_string().contains("terminator"), "{err}");
    }

    #[test]
    fn rejects_two_ops_with_one_id() {
        let mut b = Builder::new("k", KernelOptions::default());
        let c = b.push1(OpKind::Constant(Literal::Int(0)), i32t());
        b.begin_block(vec![]);
        b.push1(OpKind::Constant(Literal::Int(1)), i32t());
        b.push(OpKind::Yield(vec![]), vec![]);
        let then_block = b.end_block();
        b.begin_block(vec![]);
        b.push(OpKind::Yield(vec![]), vec![]);
        let else_block = b.end_block();
        let flag = b.push1(
            OpKind::Compare {
                pred: CmpPred::Eq,
                lhs: c,
                rhs: c,
            },
            Type::scalar(ScalarType::Bool),
        );
        b.push(
            OpKind::If {
                cond: flag,
                then_block,
                else_block,
            },
            vec![],
        );
        let mut k = b.finish();
        assert_eq!(verify(&k), Ok(()));
        // A nested op that claims the id of one at the top level.
        if let OpKind::If { then_block, .. } = &mut k.body.ops[2].kind {
            then_block.ops[0].id = OpId(0);
        }
        let err = verify(&k).expect_err("two ops share op#0");
        assert!(
            err.to_string().contains("op#0 is the id of two ops"),
            "{err}"
        );
    }

    #[test]
    fn tensor_ops_take_tensors() {
        let mut b = Builder::new("k", KernelOptions::default());
        let token = b.new_value(Type::AsyncToken);
        b.push1(OpKind::Splat(token), Type::scalar(ScalarType::Bool));
        let mut k = b.finish();
        // The token needs a definition in scope: a block arg of the kernel body.
        k.body.args.push(token);
        let err = verify(&k).expect_err("splat of a token");
        assert!(
            err.to_string().contains("%0 is token, not a tensor"),
            "{err}"
        );
    }

    /// No op makes shared pointers yet, so the rule is checked on its own.
    #[test]
    fn global_accesses_take_global_pointers() {
        let global = Type::ptr(ScalarType::F16);
        assert_eq!(global_pointee(&global), Ok(ScalarType::F16));
        let shared = Type::tensor(Elem::Ptr(ScalarType::F16, AddressSpace::Shared), vec![4]);
        let err = global_pointee(&shared).expect_err("shared");
        assert_eq!(
            err,
            "tensor<4xptr<f16, shared>> is not a pointer into global memory"
        );
    }

    #[test]
    fn rejects_a_wrong_load_result() {
        let mut b = Builder::new("k", KernelOptions::default());
        let p = b.add_param("p", ParamKind::Ptr(ScalarType::F16));
        b.push1(
            OpKind::Load {
                ptr: p,
                mask: None,
                other: None,
                cache: Default::default(),
                eviction: Default::default(),
                volatile: false,
            },
            Type::scalar(ScalarType::F32),
        );
        let err = verify(&b.finish()).expect_err("f16 pointer loads f16");
        assert!(err.to_string().contains("expected f16"), "{err}");
    }
}

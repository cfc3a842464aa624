//! The kernel language across GPUs (TLE's device mesh, docs/distributed.md):
//! `shard_id(mesh, axis)` and `shard_count(mesh, axis)` read a `Mesh`
//! parameter, `remote(x, rank)` turns a `SymPtr` parameter into rank
//! `rank`'s pointer of the same buffer, and `distributed_barrier(mesh)`
//! waits until every program of every rank has reached it. Each lowers to
//! ordinary IR (loads, a cast of an address, atomics and
//! `signal_wait_until`), so the interpreter, the checker and the code
//! generator need nothing of their own for them.

use super::calls::CallArgs;
use super::{Lowerer, R};
use crate::diag::Diagnostic;
use crate::value::{ConstVal, MeshVal, Val};
use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::Expr;
use tlx_core::ir::{
    AtomicOp, BinaryOp, CacheModifier, CmpPred, Elem, EvictionPolicy, MemScope, MemSem, OpKind,
    Prim, ScalarType, Type, ValueId,
};

/// The functions this file lowers.
pub(super) const FUNCTIONS: &[&str] = &[
    "shard_id",
    "shard_count",
    "remote",
    "distributed_barrier",
    "signal_set",
    "signal_add",
];

use tlx_core::ir::{mesh_words, MAX_MESH_AXES, MAX_MESH_RANKS as MAX_RANKS};

impl<'a> Lowerer<'a> {
    pub(super) fn mesh_function(&mut self, args: &CallArgs<'a>) -> R<Val> {
        match args.name.as_str() {
            "shard_id" | "shard_count" => {
                let a = args.bind(&["mesh", "axis"], 2)?;
                let mesh = self.mesh_arg(a[0])?;
                let axis = self.mesh_axis(&mesh, a[1])?;
                let (coordinate, extent) = self.mesh_coordinate(&mesh, axis);
                Ok(Val::Ir(if args.name == "shard_id" {
                    coordinate
                } else {
                    extent
                }))
            }
            "remote" => {
                let a = args.bind(&["buffer", "rank"], 2)?;
                self.remote(a[0], a[1], args.span)
            }
            "signal_set" | "signal_add" => {
                let a = args.bind(&["flag", "value"], 2)?;
                let op = if args.name == "signal_set" {
                    AtomicOp::Exchange
                } else {
                    AtomicOp::Add
                };
                self.signal(op, a[0], a[1], args.span)
            }
            _ => {
                let a = args.bind(&["mesh", "axis"], 1)?;
                let mesh = self.mesh_arg(a[0])?;
                let along = match a[1] {
                    Some(_) => Some(self.mesh_axis(&mesh, a[1])?),
                    None => None,
                };
                self.distributed_barrier(mesh, along);
                Ok(Val::Unit)
            }
        }
    }

    fn mesh_arg(&mut self, e: Option<&'a Expr>) -> R<MeshVal> {
        let e = self.expr_arg(e)?;
        match self.lower_expr(e)? {
            Val::Mesh(m) => Ok(m),
            _ => Err(
                Diagnostic::new(e.span(), "expected the kernel's `Mesh` parameter")
                    .with_hint("declare it as `mesh: Mesh`; a launch passes the `MeshRank` that `Mesh::run` hands its closure"),
            ),
        }
    }

    /// A constant axis of the kernel's `Mesh<N>` (`Mesh`: one axis, 0).
    fn mesh_axis(&mut self, mesh: &MeshVal, e: Option<&'a Expr>) -> R<usize> {
        let e = self.expr_arg(e)?;
        let axis = self.const_int(e, "a mesh axis")?;
        if !(0..mesh.axes as i64).contains(&axis) {
            let hint = if mesh.axes == 1 {
                "a `Mesh` has one axis, 0: its ranks; declare `mesh: Mesh<2>` (or 3) for a \
                 mesh of several axes (`Mesh::reshape`)"
                    .to_string()
            } else {
                format!("this `Mesh<{}>` has axes 0 to {}", mesh.axes, mesh.axes - 1)
            };
            return Err(
                Diagnostic::new(e.span(), format!("mesh axis {axis} is out of range"))
                    .with_hint(hint),
            );
        }
        Ok(axis as usize)
    }

    /// This rank's coordinate on `axis` and the axis's extent, with the
    /// stride of the axis (ranks between neighbours along it). A `Mesh`
    /// of one axis has them as parameters; a `Mesh<N>` reads the extents
    /// from its barrier words (the last axis varying fastest; the mesh's
    /// axes past `N` count into the strides).
    fn mesh_axis_geometry(&mut self, mesh: &MeshVal, axis: usize) -> (ValueId, ValueId, ValueId) {
        let i32s = Type::tensor(Elem::Scalar(ScalarType::I32), vec![]);
        let one = self.constant(ConstVal::Int(1), i32s.clone());
        if mesh.axes == 1 {
            return (mesh.rank, mesh.size, one);
        }
        let extent = |lowerer: &mut Self, a: usize| {
            let at = lowerer.constant(ConstVal::Int((mesh_words::DIMS + a) as i64), i32s.clone());
            let word = lowerer.b.push1(
                OpKind::AddPtr {
                    ptr: mesh.sync,
                    offset: at,
                },
                Type::tensor(Elem::global_ptr(ScalarType::I32), vec![]),
            );
            lowerer.plain_load(word, None, i32s.clone())
        };
        let size = extent(self, axis);
        // Every axis inside this one, declared or not: a `Mesh<2>` on a
        // mesh of three axes sees its first two, each rank's coordinates
        // on them consistent with the whole.
        let mut stride = one;
        for inner in axis + 1..MAX_MESH_AXES {
            let d = extent(self, inner);
            stride = self.int_op(BinaryOp::Mul, stride, d, i32s.clone());
        }
        let step = self.int_op(BinaryOp::Div, mesh.rank, stride, i32s.clone());
        let coordinate = self.int_op(BinaryOp::Rem, step, size, i32s);
        (coordinate, size, stride)
    }

    fn mesh_coordinate(&mut self, mesh: &MeshVal, axis: usize) -> (ValueId, ValueId) {
        let (coordinate, size, _) = self.mesh_axis_geometry(mesh, axis);
        (coordinate, size)
    }

    /// `remote(x, rank)`: rank `rank`'s address of the symmetric buffer `x`,
    /// read from `x`'s table of peers and cast to a pointer.
    fn remote(&mut self, buffer: Option<&'a Expr>, rank: Option<&'a Expr>, span: Span) -> R<Val> {
        let buffer_expr = self.expr_arg(buffer)?;
        let local = self.ir_arg(buffer)?;
        let Some(&peers) = self.symmetric.get(&local) else {
            return Err(Diagnostic::new(
                buffer_expr.span(),
                "`remote` takes a `SymPtr` parameter of the kernel",
            )
            .with_hint(
                "declare the buffer as `x: SymPtr<f32>`, allocate it with `mesh.alloc`, and \
                 offset the pointer `remote` gives: `remote(x, peer) + offs`",
            ));
        };
        let rank_expr = self.expr_arg(rank)?;
        let rank_val = self.lower_expr(rank_expr)?;
        let rank = self.materialize(&rank_val, rank_expr.span())?;
        let rank = self.scalar_i32(rank, rank_expr.span())?;
        let pointee = self
            .ty(local)
            .elem()
            .global_pointee()
            .ok_or_else(|| Diagnostic::new(span, "`remote` takes a pointer"))?;
        let at = self.b.push1(
            OpKind::AddPtr {
                ptr: peers,
                offset: rank,
            },
            Type::tensor(Elem::global_ptr(ScalarType::I64), vec![]),
        );
        let address = self.plain_load(at, None, Type::scalar(ScalarType::I64));
        Ok(Val::Ir(self.b.push1(
            OpKind::Cast(address),
            Type::tensor(Elem::global_ptr(pointee), vec![]),
        )))
    }

    /// `signal_set(flag, v)` / `signal_add(flag, v)`: TLE's names for a
    /// system-scope release exchange or add on `i32` flags (what
    /// `signal_wait_until` waits for).
    fn signal(
        &mut self,
        op: AtomicOp,
        flag: Option<&'a Expr>,
        value: Option<&'a Expr>,
        span: Span,
    ) -> R<Val> {
        let ptr = self.ir_arg(flag)?;
        if self.pointee(ptr, span)? != ScalarType::I32 {
            return Err(Diagnostic::new(span, "a signal is an i32 flag")
                .with_hint("keep flags in a `Ptr<i32>` or `SymPtr<i32>` buffer, as `signal_wait_until` reads them"));
        }
        let value = self.val_arg(value)?;
        let (ptr, value, mask) = self.ptr_value_mask(ptr, value, None, ScalarType::I32, span)?;
        let ty = self.ty(value);
        self.b.push1(
            OpKind::AtomicRmw {
                op,
                ptr,
                value,
                mask,
                sem: MemSem::Release,
                scope: MemScope::System,
            },
            ty,
        );
        Ok(Val::Unit)
    }

    fn scalar_i32(&mut self, v: ValueId, span: Span) -> R<ValueId> {
        let ty = self.ty(v);
        if !ty.is_scalar() || !ty.elem().scalar().is_some_and(|s| s.is_int()) {
            return Err(
                Diagnostic::new(span, format!("a rank is an integer scalar, not {ty}"))
                    .with_hint("e.g. `(shard_id(mesh, 0) + 1) % shard_count(mesh, 0)`"),
            );
        }
        self.cast(v, ScalarType::I32, span)
    }

    fn plain_load(&mut self, ptr: ValueId, mask: Option<ValueId>, ty: Type) -> ValueId {
        let other = mask.map(|_| self.constant(ConstVal::Int(0), ty.clone()));
        self.b.push1(
            OpKind::Load {
                ptr,
                mask,
                other,
                cache: CacheModifier::None,
                eviction: EvictionPolicy::Normal,
                volatile: false,
            },
            ty,
        )
    }

    /// Every program of this rank adds one to the rank's count; the last
    /// of a round (its count's old value says which round and whether it
    /// is last) adds one to every rank's arrivals, and every program waits
    /// until its rank's arrivals hold every rank's for its round. A rank
    /// cannot start round `g + 1` before all have finished round `g`, so
    /// counts never mix rounds. The mesh zeroes the words before each run;
    /// every program must be resident at once (a persistent grid). `along`:
    /// the same among the ranks along that axis through this one (those
    /// sharing its other coordinates), on that axis's own pair of words.
    fn distributed_barrier(&mut self, mesh: MeshVal, along: Option<usize>) {
        let i32s = |shape: Vec<usize>| Type::tensor(Elem::Scalar(ScalarType::I32), shape);
        let one = self.constant(ConstVal::Int(1), i32s(vec![]));
        let word_ptr = Type::tensor(Elem::global_ptr(ScalarType::I32), vec![]);
        // The group's size, this rank's count word, the offset of the
        // arrivals word from a rank's words, and (along an axis) the first
        // rank of the group and the step between its ranks.
        let (size, count, arrivals_at, walk) = match along {
            None => (mesh.size, mesh.sync, one, None),
            Some(axis) => {
                let (coordinate, extent, stride) = self.mesh_axis_geometry(&mesh, axis);
                let back = self.int_op(BinaryOp::Mul, coordinate, stride, i32s(vec![]));
                let first = self.int_op(BinaryOp::Sub, mesh.rank, back, i32s(vec![]));
                let words = (mesh_words::AXIS_BARRIERS + 2 * axis) as i64;
                let at = self.constant(ConstVal::Int(words), i32s(vec![]));
                let count = self.b.push1(
                    OpKind::AddPtr {
                        ptr: mesh.sync,
                        offset: at,
                    },
                    word_ptr.clone(),
                );
                let arrivals_at = self.constant(ConstVal::Int(words + 1), i32s(vec![]));
                (extent, count, arrivals_at, Some((first, stride)))
            }
        };
        let old = self.b.push1(
            OpKind::AtomicRmw {
                op: AtomicOp::Add,
                ptr: count,
                value: one,
                mask: None,
                sem: MemSem::AcqRel,
                scope: MemScope::System,
            },
            i32s(vec![]),
        );
        let mut programs = one;
        for axis in 0..3 {
            let n = self.b.push1(OpKind::NumPrograms { axis }, i32s(vec![]));
            programs = self.int_op(BinaryOp::Mul, programs, n, i32s(vec![]));
        }
        let round = self.int_op(BinaryOp::Div, old, programs, i32s(vec![]));
        let place = self.int_op(BinaryOp::Rem, old, programs, i32s(vec![]));
        let last_place = self.int_op(BinaryOp::Sub, programs, one, i32s(vec![]));
        let bool_ty = |shape| Type::tensor(Elem::Scalar(ScalarType::Bool), shape);
        let is_last = self.b.push1(
            OpKind::Compare {
                pred: CmpPred::Eq,
                lhs: place,
                rhs: last_place,
            },
            bool_ty(vec![]),
        );
        let lanes = self.b.push1(
            OpKind::Arange {
                start: 0,
                end: MAX_RANKS as i64,
            },
            i32s(vec![MAX_RANKS]),
        );
        // Lane j stands for the group's j-th rank.
        let peers = match walk {
            None => lanes,
            Some((first, stride)) => {
                let strides = self.b.push1(OpKind::Splat(stride), i32s(vec![MAX_RANKS]));
                let steps = self.int_op(BinaryOp::Mul, lanes, strides, i32s(vec![MAX_RANKS]));
                let firsts = self.b.push1(OpKind::Splat(first), i32s(vec![MAX_RANKS]));
                self.int_op(BinaryOp::Add, firsts, steps, i32s(vec![MAX_RANKS]))
            }
        };
        let sizes = self.b.push1(OpKind::Splat(size), i32s(vec![MAX_RANKS]));
        let in_group = self.b.push1(
            OpKind::Compare {
                pred: CmpPred::Lt,
                lhs: lanes,
                rhs: sizes,
            },
            bool_ty(vec![MAX_RANKS]),
        );
        let table_ty = Type::tensor(Elem::global_ptr(ScalarType::I64), vec![MAX_RANKS]);
        let table = self
            .b
            .push1(OpKind::Splat(mesh.sync_peers), table_ty.clone());
        let entries = self.b.push1(
            OpKind::AddPtr {
                ptr: table,
                offset: peers,
            },
            table_ty,
        );
        let addresses = self.plain_load(
            entries,
            Some(in_group),
            Type::tensor(Elem::Scalar(ScalarType::I64), vec![MAX_RANKS]),
        );
        let words_ty = Type::tensor(Elem::global_ptr(ScalarType::I32), vec![MAX_RANKS]);
        let counts = self.b.push1(OpKind::Cast(addresses), words_ty.clone());
        let ones = self.b.push1(OpKind::Splat(one), i32s(vec![MAX_RANKS]));
        let offsets = if along.is_none() {
            ones
        } else {
            self.b
                .push1(OpKind::Splat(arrivals_at), i32s(vec![MAX_RANKS]))
        };
        let arrivals = self.b.push1(
            OpKind::AddPtr {
                ptr: counts,
                offset: offsets,
            },
            words_ty,
        );
        let last = self
            .b
            .push1(OpKind::Splat(is_last), bool_ty(vec![MAX_RANKS]));
        let signal = self.int_op(BinaryOp::And, in_group, last, bool_ty(vec![MAX_RANKS]));
        self.b.push1(
            OpKind::AtomicRmw {
                op: AtomicOp::Add,
                ptr: arrivals,
                value: ones,
                mask: Some(signal),
                sem: MemSem::Release,
                scope: MemScope::System,
            },
            i32s(vec![MAX_RANKS]),
        );
        let rounds = self.int_op(BinaryOp::Add, round, one, i32s(vec![]));
        let target = self.int_op(BinaryOp::Mul, size, rounds, i32s(vec![]));
        let own_arrivals = self.b.push1(
            OpKind::AddPtr {
                ptr: mesh.sync,
                offset: arrivals_at,
            },
            word_ptr,
        );
        let wait = Prim::SignalWaitUntil;
        let ge = wait
            .signature()
            .choices
            .iter()
            .flat_map(|c| c.options.iter())
            .position(|(word, _)| *word == "ge")
            .unwrap_or(0) as i64;
        self.b.push(
            OpKind::Prim {
                prim: wait,
                args: vec![own_arrivals, target],
                imms: vec![ge],
            },
            Vec::new(),
        );
    }

    fn int_op(&mut self, op: BinaryOp, lhs: ValueId, rhs: ValueId, ty: Type) -> ValueId {
        self.b.push1(OpKind::Binary { op, lhs, rhs }, ty)
    }
}

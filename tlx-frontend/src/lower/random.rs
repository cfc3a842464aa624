//! Triton's counter-based random numbers (`tl.rand` and friends): Philox
//! 4x32 with `n_rounds` rounds (10 by default), keyed by a scalar seed and
//! counted by an integer offset tensor, built from integer ops (`umulhi`,
//! `*`, `^`, `+` on `u32`). Same seed and offsets give the same bits as
//! Triton, on the GPU and in the interpreter; `rand` is exact on both,
//! `randn` agrees as closely as `log`, `sqrt`, `sin` and `cos` do.

use proc_macro2::Span;
use syn::spanned::Spanned;

use super::calls::CallArgs;
use super::{Lowerer, R};
use crate::diag::Diagnostic;
use crate::value::{ConstVal, Val};
use tlx_core::ir::{BinaryOp, Elem, OpKind, ScalarType, UnaryOp};

/// The functions this module builds.
pub(super) const FUNCTIONS: &[&str] = &[
    "philox",
    "randint",
    "randint4x",
    "rand",
    "rand4x",
    "randn",
    "randn4x",
    "uint_to_uniform_float",
    "pair_uniform_to_normal",
];

/// Philox-4x32's Weyl key increments and round multipliers (Salmon et al.,
/// SC'11), as Triton uses them.
const KEY_A: u32 = 0x9E37_79B9;
const KEY_B: u32 = 0xBB67_AE85;
const ROUND_A: u32 = 0xD251_1F53;
const ROUND_B: u32 = 0xCD9E_8D57;

/// Triton's default round count.
const DEFAULT_ROUNDS: i64 = 10;

/// `1 / 2^31` rounded so that `i32::MAX * scale < 1.0` in f32 (Triton's).
const UNIFORM_SCALE: f64 = 4.656_612_734_2e-10;

fn int(x: u32) -> Val {
    Val::Const(ConstVal::Int(i64::from(x)))
}

impl<'a> Lowerer<'a> {
    /// One of [`FUNCTIONS`], by name.
    pub(super) fn random(&mut self, args: &CallArgs<'a>) -> R<Val> {
        let span = args.span;
        let name = args.name.as_str();
        match name {
            "uint_to_uniform_float" => {
                let a = args.bind(&["x"], 1)?;
                let x = self.val_arg(a[0])?;
                return self.uint_to_uniform(x, span);
            }
            "pair_uniform_to_normal" => {
                let a = args.bind(&["u1", "u2"], 2)?;
                let (u1, u2) = (self.val_arg(a[0])?, self.val_arg(a[1])?);
                let (n1, n2) = self.uniform_pair_to_normal(u1, u2, span)?;
                return Ok(Val::Tuple(vec![n1, n2]));
            }
            _ => {}
        }
        let counters = if name == "philox" {
            let a = args.bind(&["seed", "c0", "c1", "c2", "c3", "n_rounds"], 5)?;
            let seed = self.seed_key(a[0], span)?;
            let mut c = Vec::with_capacity(4);
            for e in &a[1..5] {
                let v = self.val_arg(*e)?;
                c.push(self.counter(v, e.map_or(span, |e| e.span()))?);
            }
            let rounds = self.rounds(a[5])?;
            self.philox_rounds(
                [c[0].clone(), c[1].clone(), c[2].clone(), c[3].clone()],
                seed,
                rounds,
                span,
            )?
        } else {
            let a = args.bind(&["seed", "offset", "n_rounds"], 2)?;
            let seed = self.seed_key(a[0], span)?;
            let offset = self.val_arg(a[1])?;
            let c0 = self.counter(offset, a[1].map_or(span, |e| e.span()))?;
            let rounds = self.rounds(a[2])?;
            // Triton's `randint4x`: counter (offset, 0, 0, 0).
            self.philox_rounds([c0, int(0), int(0), int(0)], seed, rounds, span)?
        };
        let [c0, c1, c2, c3] = counters;
        match name {
            "philox" | "randint4x" => Ok(Val::Tuple(vec![c0, c1, c2, c3])),
            "randint" => Ok(c0),
            "rand" => self.uint_to_uniform(c0, span),
            "rand4x" => {
                let mut out = Vec::with_capacity(4);
                for c in [c0, c1, c2, c3] {
                    out.push(self.uint_to_uniform(c, span)?);
                }
                Ok(Val::Tuple(out))
            }
            "randn" => {
                let (u1, u2) = (
                    self.uint_to_uniform(c0, span)?,
                    self.uint_to_uniform(c1, span)?,
                );
                Ok(self.uniform_pair_to_normal(u1, u2, span)?.0)
            }
            _ => {
                let u: Vec<Val> = [c0, c1, c2, c3]
                    .into_iter()
                    .map(|c| self.uint_to_uniform(c, span))
                    .collect::<R<_>>()?;
                let (n1, n2) = self.uniform_pair_to_normal(u[0].clone(), u[1].clone(), span)?;
                let (n3, n4) = self.uniform_pair_to_normal(u[2].clone(), u[3].clone(), span)?;
                Ok(Val::Tuple(vec![n1, n2, n3, n4]))
            }
        }
    }

    /// `n_rounds`: a compile-time count, 10 when left out.
    fn rounds(&mut self, e: Option<&'a syn::Expr>) -> R<u32> {
        let Some(e) = e else {
            return Ok(DEFAULT_ROUNDS as u32);
        };
        match self.eval_const(e, "`n_rounds`")? {
            ConstVal::Int(n) if (1..=64).contains(&n) => Ok(n as u32),
            _ => Err(Diagnostic::new(e.span(), "`n_rounds` must be an integer from 1 to 64")
                .with_hint("Philox's usual count is 10 (the default); 7 is the fewest Random123 calls safe")),
        }
    }

    /// The Philox key from a scalar seed, as Triton takes it: the seed widened
    /// to 64 bits (sign-extended when signed), low word first.
    fn seed_key(&mut self, e: Option<&'a syn::Expr>, span: Span) -> R<[Val; 2]> {
        let seed = self.val_arg(e)?;
        let at = e.map_or(span, |e| e.span());
        match seed {
            Val::Const(ConstVal::Int(s)) => {
                let s = s as u64;
                Ok([int(s as u32), int((s >> 32) as u32)])
            }
            Val::Ir(id) => {
                let elem = self.scalar_elem(id, at, "a seed")?;
                if !elem.is_int() || self.ty(id).rank() != 0 {
                    return Err(Diagnostic::new(
                        at,
                        format!(
                            "the seed must be an integer scalar, found `{}`",
                            self.ty(id)
                        ),
                    )
                    .with_hint(
                        "pass the seed as an `i32`, `u32` or `i64` kernel parameter or constant",
                    ));
                }
                let wide = self.cast(id, ScalarType::I64, at)?;
                let low = self.cast(wide, ScalarType::U32, at)?;
                let shift = self.constant(ConstVal::Int(32), self.ty(wide));
                let high = self.binary_op(BinaryOp::Shr, wide, shift);
                let high = self.cast(high, ScalarType::U32, at)?;
                Ok([Val::Ir(low), Val::Ir(high)])
            }
            _ => Err(
                Diagnostic::new(at, "the seed must be an integer scalar").with_hint(
                    "pass the seed as an `i32`, `u32` or `i64` kernel parameter or constant",
                ),
            ),
        }
    }

    /// A 32-bit counter word: `i32` or `u32`, reinterpreted as `u32`.
    fn counter(&mut self, v: Val, at: Span) -> R<Val> {
        if let Val::Const(ConstVal::Int(c)) = v {
            return Ok(int(c as u32));
        }
        let id = self.materialize(&v, at)?;
        match self.scalar_elem(id, at, "a Philox counter")? {
            ScalarType::U32 => Ok(Val::Ir(id)),
            ScalarType::I32 => {
                let ty = self.ty(id).with_elem(Elem::Scalar(ScalarType::U32));
                Ok(Val::Ir(self.b.push1(OpKind::Bitcast(id), ty)))
            }
            other => Err(Diagnostic::new(
                at,
                format!("random offsets must be 32-bit integers, found `{other}`"),
            )
            .with_hint("build offsets with `arange` (i32), or cast them: `offsets.to(i32)`")),
        }
    }

    /// `rounds` rounds of Philox-4x32 on `c` with key `k`.
    fn philox_rounds(&mut self, c: [Val; 4], k: [Val; 2], rounds: u32, span: Span) -> R<[Val; 4]> {
        let [mut c0, mut c1, mut c2, mut c3] = c;
        let [mut k0, mut k1] = k;
        for _ in 0..rounds {
            let (prev0, prev2) = (c0, c2);
            let hi_b = self.u32_op(BinaryOp::MulHi, int(ROUND_B), prev2.clone(), span)?;
            let hi_a = self.u32_op(BinaryOp::MulHi, int(ROUND_A), prev0.clone(), span)?;
            let x = self.u32_op(BinaryOp::Xor, hi_b, c1, span)?;
            c0 = self.u32_op(BinaryOp::Xor, x, k0.clone(), span)?;
            let x = self.u32_op(BinaryOp::Xor, hi_a, c3, span)?;
            c2 = self.u32_op(BinaryOp::Xor, x, k1.clone(), span)?;
            c1 = self.u32_op(BinaryOp::Mul, int(ROUND_B), prev2, span)?;
            c3 = self.u32_op(BinaryOp::Mul, int(ROUND_A), prev0, span)?;
            k0 = self.u32_add(k0, KEY_A, span)?;
            k1 = self.u32_add(k1, KEY_B, span)?;
        }
        Ok([c0, c1, c2, c3])
    }

    /// `a op b` on `u32` (constants take the type, shapes broadcast).
    fn u32_op(&mut self, op: BinaryOp, a: Val, b: Val, span: Span) -> R<Val> {
        let ids = self.unify_as(&[&a, &b], ScalarType::U32, span)?;
        Ok(Val::Ir(self.binary_op(op, ids[0], ids[1])))
    }

    /// A key word plus its Weyl increment, folded when the key is a constant.
    fn u32_add(&mut self, k: Val, step: u32, span: Span) -> R<Val> {
        if let Val::Const(ConstVal::Int(x)) = k {
            return Ok(int((x as u32).wrapping_add(step)));
        }
        self.u32_op(BinaryOp::Add, k, int(step), span)
    }

    /// Triton's `uint_to_uniform_float` for 32-bit words: the bits as `i32`,
    /// negatives folded onto `-x - 1`, times 2^-31 (in f32): `[0, 1)`.
    fn uint_to_uniform(&mut self, x: Val, span: Span) -> R<Val> {
        let id = self.materialize(&x, span)?;
        let id = match self.scalar_elem(id, span, "a random word")? {
            ScalarType::I32 => id,
            ScalarType::U32 => {
                let ty = self.ty(id).with_elem(Elem::Scalar(ScalarType::I32));
                self.b.push1(OpKind::Bitcast(id), ty)
            }
            other => {
                return Err(Diagnostic::new(
                    span,
                    format!("`uint_to_uniform_float` takes `u32` or `i32` words, found `{other}`"),
                )
                .with_hint("pass what `randint` or `randint4x` returns"))
            }
        };
        let x = Val::Ir(id);
        let lt = syn::BinOp::Lt(Default::default());
        let sub = syn::BinOp::Sub(Default::default());
        let negative = self.binary(&lt, x.clone(), Val::Const(ConstVal::Int(0)), span)?;
        let minus = Val::Ir(self.unary(UnaryOp::Neg, id));
        let folded = self.binary(&sub, minus, Val::Const(ConstVal::Int(1)), span)?;
        let magnitude = self.select_val(negative, folded, x, span)?;
        let magnitude = self.materialize(&magnitude, span)?;
        let magnitude = self.cast(magnitude, ScalarType::F32, span)?;
        let scale = Val::Const(ConstVal::Float(UNIFORM_SCALE));
        let ids = self.unify_as(&[&Val::Ir(magnitude), &scale], ScalarType::F32, span)?;
        Ok(Val::Ir(self.binary_op(BinaryOp::Mul, ids[0], ids[1])))
    }

    /// Box-Muller, as Triton's `pair_uniform_to_normal`: `u1` kept above
    /// 1e-7, `r = sqrt(-2 log u1)`, `(r cos 2πu2, r sin 2πu2)`.
    fn uniform_pair_to_normal(&mut self, u1: Val, u2: Val, span: Span) -> R<(Val, Val)> {
        let f32s = self.unify_as(&[&u1, &u2], ScalarType::F32, span)?;
        let floor = Val::Const(ConstVal::Float(1.0e-7));
        let u1 = self.extremum(BinaryOp::Max, floor, Val::Ir(f32s[0]), span)?;
        let tau = Val::Const(ConstVal::Float(std::f64::consts::TAU));
        let th = self.unify_as(&[&tau, &Val::Ir(f32s[1])], ScalarType::F32, span)?;
        let th = self.binary_op(BinaryOp::Mul, th[0], th[1]);
        let u1 = self.materialize(&u1, span)?;
        let log = self.unary(UnaryOp::Log, u1);
        let minus_two = Val::Const(ConstVal::Float(-2.0));
        let scaled = self.unify_as(&[&minus_two, &Val::Ir(log)], ScalarType::F32, span)?;
        let scaled = self.binary_op(BinaryOp::Mul, scaled[0], scaled[1]);
        let r = self.unary(UnaryOp::Sqrt, scaled);
        let cos = self.unary(UnaryOp::Cos, th);
        let sin = self.unary(UnaryOp::Sin, th);
        Ok((
            Val::Ir(self.binary_op(BinaryOp::Mul, r, cos)),
            Val::Ir(self.binary_op(BinaryOp::Mul, r, sin)),
        ))
    }
}

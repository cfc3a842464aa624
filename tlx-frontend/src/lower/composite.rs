//! Math functions built from other ops rather than given ops of their own:
//! activations (`sigmoid`, `softplus`), `log1p`, `expm1`, `erf` and `pow`.
//! Each is written for f32 accuracy where the naive formula loses it (tiny
//! arguments, overflow); GPU and interpreter agree on them as closely as
//! on the `exp`, `log` and arithmetic they are made of.

use proc_macro2::Span;

use super::calls::CallArgs;
use super::typing::broadcast_shapes;
use super::{Lowerer, R};
use crate::diag::Diagnostic;
use crate::value::{ConstVal, Val};
use tlx_core::ir::{BinaryOp, OpKind, ScalarType, UnaryOp};

/// The functions this module builds.
pub(super) const FUNCTIONS: &[&str] = &["sigmoid", "softplus", "log1p", "expm1", "erf", "pow"];

fn float(x: f64) -> Val {
    Val::Const(ConstVal::Float(x))
}

impl<'a> Lowerer<'a> {
    /// One of [`FUNCTIONS`], by name.
    pub(super) fn composite_math(&mut self, args: &CallArgs<'a>) -> R<Val> {
        let span = args.span;
        let name = args.name.as_str();
        if name == "pow" {
            // `exp2(y * log2(x))`: x > 0 (0 gives 0 for y > 0; negative x NaN).
            let a = args.bind(&["x", "y"], 2)?;
            let x = self.ir_arg(a[0])?;
            let x = self.math_operand(UnaryOp::Log2, x, span)?;
            self.refuse_f64(name, x, span)?;
            let y = self.val_arg(a[1])?;
            if let Val::Ir(exponent) = y {
                // An f64 exponent would promote `exp2` to f64, which PTX lacks.
                if self.scalar_elem(exponent, span, "an exponent")? == ScalarType::F64 {
                    return Err(Diagnostic::new(span, "`pow` with an f64 exponent is not available")
                        .with_hint("PTX approximates `pow` in f32 only: pass the exponent as f32, `pow(x, y.to(f32))`"));
                }
            }
            let log = Val::Ir(self.unary(UnaryOp::Log2, x));
            let scaled = self.arith("*", y, log, span)?;
            return self.unary_val(UnaryOp::Exp2, scaled, span);
        }
        let a = args.bind(&["x"], 1)?;
        let x = self.ir_arg(a[0])?;
        let x = self.math_operand(UnaryOp::Exp, x, span)?;
        self.refuse_f64(name, x, span)?;
        // 16-bit inputs are computed in f32 and rounded once, as `exp` is.
        let elem = self.scalar_elem(x, span, "a math operand")?;
        let x = Val::Ir(self.cast(x, ScalarType::F32, span)?);
        let result = self.composite_f32(name, x, span)?;
        let result = self.materialize(&result, span)?;
        Ok(Val::Ir(self.cast(result, elem, span)?))
    }

    fn composite_f32(&mut self, name: &str, x: Val, span: Span) -> R<Val> {
        match name {
            "sigmoid" => {
                let neg = self.unary_val(UnaryOp::Neg, x, span)?;
                let e = self.unary_val(UnaryOp::Exp, neg, span)?;
                let denom = self.arith("+", float(1.0), e, span)?;
                self.arith("/", float(1.0), denom, span)
            }
            "softplus" => {
                // `max(x, 0) + log1p(exp(-|x|))`: no overflow for large x,
                // nothing lost for large negative x.
                let abs = self.unary_val(UnaryOp::Abs, x.clone(), span)?;
                let neg = self.unary_val(UnaryOp::Neg, abs, span)?;
                let e = self.unary_val(UnaryOp::Exp, neg, span)?;
                let log1p = self.log1p(e, span)?;
                let positive = self.extremum(BinaryOp::Max, x, float(0.0), span)?;
                self.arith("+", positive, log1p, span)
            }
            "log1p" => self.log1p(x, span),
            "expm1" => self.expm1(x, span),
            _ => self.erf(x, span),
        }
    }

    /// `log(1 + x)` for `x > -1`, accurate when `x` is tiny (where `1 + x`
    /// rounds to 1): `log(u) * x / (u - 1)` with `u = 1 + x`, and `x`
    /// itself when `u` is 1 (Goldberg's correction).
    fn log1p(&mut self, x: Val, span: Span) -> R<Val> {
        let u = self.arith("+", float(1.0), x.clone(), span)?;
        let log_u = self.unary_val(UnaryOp::Log, u.clone(), span)?;
        let scaled = self.arith("*", log_u, x.clone(), span)?;
        let spread = self.arith("-", u.clone(), float(1.0), span)?;
        let ratio = self.arith("/", scaled, spread, span)?;
        let exact = self.arith("==", u, float(1.0), span)?;
        self.select_val(exact, x, ratio, span)
    }

    /// `exp(x) - 1`, accurate for tiny `x` (Kahan): `(u - 1) * x / log(u)`
    /// with `u = exp(x)`; `x` where `u` is 1, -1 where `u - 1` is, and
    /// `u - 1` itself above 20 (where the -1 no longer shows, and `u` may
    /// overflow).
    fn expm1(&mut self, x: Val, span: Span) -> R<Val> {
        let u = self.unary_val(UnaryOp::Exp, x.clone(), span)?;
        let um1 = self.arith("-", u.clone(), float(1.0), span)?;
        let log_u = self.unary_val(UnaryOp::Log, u.clone(), span)?;
        let scaled = self.arith("*", um1.clone(), x.clone(), span)?;
        let ratio = self.arith("/", scaled, log_u, span)?;
        let large = self.arith(">", x.clone(), float(20.0), span)?;
        let ratio = self.select_val(large, um1.clone(), ratio, span)?;
        let saturated = self.arith("==", um1, float(-1.0), span)?;
        let ratio = self.select_val(saturated, float(-1.0), ratio, span)?;
        let exact = self.arith("==", u, float(1.0), span)?;
        self.select_val(exact, x, ratio, span)
    }

    /// `erf(x)`: its Taylor series below |x| = 0.5 (truncation under 1e-9,
    /// so relative accuracy near 0), Abramowitz and Stegun 7.1.26 above
    /// (absolute error under 1.5e-7), odd in `x`.
    fn erf(&mut self, x: Val, span: Span) -> R<Val> {
        let abs = self.unary_val(UnaryOp::Abs, x.clone(), span)?;
        // Series: 2/sqrt(pi) * sum of (-1)^n x^(2n+1) / (n! (2n+1)), n <= 6.
        let x2 = self.arith("*", x.clone(), x.clone(), span)?;
        let mut series = float(1.0 / 9360.0);
        for c in [
            -1.0 / 1320.0,
            1.0 / 216.0,
            -1.0 / 42.0,
            1.0 / 10.0,
            -1.0 / 3.0,
            1.0,
        ] {
            let scaled = self.arith("*", series, x2.clone(), span)?;
            series = self.arith("+", scaled, float(c), span)?;
        }
        let series = self.arith("*", series, x.clone(), span)?;
        let series = self.arith("*", series, float(std::f64::consts::FRAC_2_SQRT_PI), span)?;
        // A&S 7.1.26 on |x|, then the sign of x.
        let pt = self.arith("*", abs.clone(), float(0.327_591_1), span)?;
        let denom = self.arith("+", float(1.0), pt, span)?;
        let t = self.arith("/", float(1.0), denom, span)?;
        let mut poly = float(1.061_405_429);
        for c in [-1.453_152_027, 1.421_413_741, -0.284_496_736, 0.254_829_592] {
            let scaled = self.arith("*", poly, t.clone(), span)?;
            poly = self.arith("+", scaled, float(c), span)?;
        }
        let poly = self.arith("*", poly, t, span)?;
        let neg_x2 = self.unary_val(UnaryOp::Neg, x2, span)?;
        let gauss = self.unary_val(UnaryOp::Exp, neg_x2, span)?;
        let tail = self.arith("*", poly, gauss, span)?;
        let magnitude = self.arith("-", float(1.0), tail, span)?;
        let negative = self.arith("<", x, float(0.0), span)?;
        let minus = self.unary_val(UnaryOp::Neg, magnitude.clone(), span)?;
        let far = self.select_val(negative, minus, magnitude, span)?;
        let near = self.arith("<", abs, float(0.5), span)?;
        self.select_val(near, series, far, span)
    }

    /// `a op b` for the operators the functions above use.
    fn arith(&mut self, op: &str, a: Val, b: Val, span: Span) -> R<Val> {
        let op = match op {
            "+" => syn::BinOp::Add(Default::default()),
            "-" => syn::BinOp::Sub(Default::default()),
            "*" => syn::BinOp::Mul(Default::default()),
            "/" => syn::BinOp::Div(Default::default()),
            "==" => syn::BinOp::Eq(Default::default()),
            "<" => syn::BinOp::Lt(Default::default()),
            ">" => syn::BinOp::Gt(Default::default()),
            other => {
                return Err(Diagnostic::new(
                    span,
                    format!("internal: no operator `{other}` in composite math"),
                ))
            }
        };
        self.binary(&op, a, b, span)
    }

    fn unary_val(&mut self, op: UnaryOp, x: Val, span: Span) -> R<Val> {
        let x = self.materialize(&x, span)?;
        Ok(Val::Ir(self.unary(op, x)))
    }

    /// `select(cond, a, b)`, all three broadcast to one shape.
    pub(super) fn select_val(&mut self, cond: Val, a: Val, b: Val, span: Span) -> R<Val> {
        let cond = self.materialize(&cond, span)?;
        let ids = self.unify(&[&a, &b], span)?;
        let shape = broadcast_shapes(self.ty(cond).shape(), self.ty(ids[0]).shape(), span)?;
        let cond = self.broadcast_to(cond, &shape, span)?;
        let on_true = self.broadcast_to(ids[0], &shape, span)?;
        let on_false = self.broadcast_to(ids[1], &shape, span)?;
        let ty = self.ty(on_true);
        Ok(Val::Ir(self.b.push1(
            OpKind::Select {
                cond,
                on_true,
                on_false,
            },
            ty,
        )))
    }
}

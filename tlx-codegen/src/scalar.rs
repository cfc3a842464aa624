//! Elementwise lowering of one register: literals, arithmetic, comparisons,
//! math functions, casts and bitcasts, for every scalar type.

use super::emit::{
    bits_type, f32_literal, float_literal, is_llvm_float, llvm_type, scalar_type, FuncText,
};
use super::error::refused_upstream;
use super::CodegenError;
use tlx_core::ir::{BinaryOp, CmpPred, Elem, Literal, ScalarType, UnaryOp};

type Result<T> = std::result::Result<T, CodegenError>;

/// The LLVM intrinsic suffix of a float type.
fn float_suffix(s: ScalarType) -> &'static str {
    match s {
        ScalarType::F16 => "f16",
        ScalarType::BF16 => "bf16",
        ScalarType::F64 => "f64",
        _ => "f32",
    }
}

/// The LLVM literal of `lit` as an element of type `elem`.
pub fn literal(f: &mut FuncText, elem: Elem, lit: Literal) -> Result<String> {
    let s = match elem {
        Elem::Ptr(..) => return Ok("null".into()),
        Elem::Scalar(s) => s,
    };
    let as_f64 = match lit {
        Literal::Bool(b) => f64::from(u8::from(b)),
        Literal::Int(i) => i as f64,
        Literal::Float(x) => x,
    };
    Ok(match s {
        ScalarType::Bool => match lit {
            Literal::Bool(b) => b.to_string(),
            Literal::Int(i) => (i != 0).to_string(),
            Literal::Float(x) => (x != 0.0).to_string(),
        },
        _ if is_llvm_float(s) => float_literal(s, as_f64),
        ScalarType::F8E4M3 | ScalarType::F8E5M2 => {
            let wide = f32_literal(as_f64 as f32);
            cast(f, ScalarType::F32, s, &wide)?
        }
        _ => {
            let int = match lit {
                Literal::Float(x) => saturate_to_int(x, s),
                Literal::Bool(b) => i64::from(b),
                Literal::Int(i) => i,
            };
            // LLVM wants the value in the type's signed range.
            match s.size_bytes() {
                1 => (int as i8).to_string(),
                4 => (int as i32).to_string(),
                _ => int.to_string(),
            }
        }
    })
}

/// Float-to-int literal conversion with the same rule as `Cast`.
fn saturate_to_int(x: f64, s: ScalarType) -> i64 {
    match s {
        ScalarType::I8 => x as i8 as i64,
        ScalarType::U8 => x as u8 as i64,
        ScalarType::I32 => x as i32 as i64,
        ScalarType::U32 => x as u32 as i64,
        _ => x as i64,
    }
}

/// fp8 has no arithmetic of its own: `body` runs on the fp8 `operands`
/// widened to f32 (exactly) and its result rounds back to `s`, as the
/// interpreter computes it.
fn fp8_in_f32(
    f: &mut FuncText,
    s: ScalarType,
    operands: &[&str],
    body: impl FnOnce(&mut FuncText, &[String]) -> Result<String>,
) -> Result<String> {
    let wide = operands
        .iter()
        .map(|x| cast(f, s, ScalarType::F32, x))
        .collect::<Result<Vec<_>>>()?;
    let r = body(f, &wide)?;
    cast(f, ScalarType::F32, s, &r)
}

/// Run `body` on `x` widened to f32, rounding the result back to `s`.
fn in_f32(
    f: &mut FuncText,
    s: ScalarType,
    x: &str,
    body: impl FnOnce(&mut FuncText, &str) -> String,
) -> String {
    if s == ScalarType::F32 {
        return body(f, x);
    }
    let ty = scalar_type(s);
    let wide = f.inst(format!("fpext {ty} {x} to float"));
    let r = body(f, &wide);
    f.inst(format!("fptrunc float {r} to {ty}"))
}

fn approx(f: &mut FuncText, instr: &str, x: &str) -> String {
    f.pure_asm(
        "float",
        &format!("{instr}.f32 $0, $1;"),
        "=f,f",
        &[("float", x)],
    )
}

pub fn binary(f: &mut FuncText, op: BinaryOp, s: ScalarType, a: &str, b: &str) -> Result<String> {
    let ty = scalar_type(s);
    if is_llvm_float(s) {
        let inst = match op {
            BinaryOp::Add => "fadd",
            BinaryOp::Sub => "fsub",
            BinaryOp::Mul => "fmul",
            BinaryOp::Div => "fdiv",
            BinaryOp::DivFull if s == ScalarType::F32 => {
                return Ok(f.pure_asm(
                    "float",
                    "div.full.f32 $0, $1, $2;",
                    "=f,f,f",
                    &[("float", a), ("float", b)],
                ));
            }
            BinaryOp::Rem => "frem",
            BinaryOp::Max | BinaryOp::Min => {
                let name = if op == BinaryOp::Max {
                    "maximum"
                } else {
                    "minimum"
                };
                if s == ScalarType::F64 {
                    return Ok(f.call(ty, &format!("llvm.{name}.f64"), &[(ty, a), (ty, b)]));
                }
                return Ok(in_f32(f, s, a, |f, wa| {
                    let wb = if s == ScalarType::F32 {
                        b.to_string()
                    } else {
                        f.inst(format!("fpext {ty} {b} to float"))
                    };
                    f.call(
                        "float",
                        &format!("llvm.{name}.f32"),
                        &[("float", wa), ("float", &wb)],
                    )
                }));
            }
            _ => {
                return Err(refused_upstream(format!(
                    "bit operation {op:?} on float {s}"
                )))
            }
        };
        return Ok(f.inst(format!("{inst} {ty} {a}, {b}")));
    }
    if is_fp8(s) {
        return fp8_in_f32(f, s, &[a, b], |f, w| {
            binary(f, op, ScalarType::F32, &w[0], &w[1])
        });
    }
    let signed = s.is_signed_int();
    if s == ScalarType::Bool
        && !matches!(
            op,
            BinaryOp::And | BinaryOp::Or | BinaryOp::Xor | BinaryOp::Max | BinaryOp::Min
        )
    {
        return Err(refused_upstream(format!("{op:?} on bool")));
    }
    let inst = match op {
        BinaryOp::Add => "add",
        BinaryOp::Sub => "sub",
        BinaryOp::Mul => "mul",
        BinaryOp::Div if signed => "sdiv",
        BinaryOp::Div => "udiv",
        BinaryOp::DivFull => return Err(refused_upstream(format!("fast division of {s}"))),
        BinaryOp::Rem if signed => "srem",
        BinaryOp::Rem => "urem",
        BinaryOp::And => "and",
        BinaryOp::Or => "or",
        BinaryOp::Xor => "xor",
        BinaryOp::Shl => "shl",
        BinaryOp::Shr if signed => "ashr",
        BinaryOp::Shr => "lshr",
        BinaryOp::MulHi => {
            // The double-width product's high half: NVPTX selects `mul.hi`.
            let bits = s.size_bytes() * 8;
            let wide = format!("i{}", 2 * bits);
            let extend = if signed { "sext" } else { "zext" };
            let wa = f.inst(format!("{extend} {ty} {a} to {wide}"));
            let wb = f.inst(format!("{extend} {ty} {b} to {wide}"));
            let product = f.inst(format!("mul {wide} {wa}, {wb}"));
            let high = f.inst(format!("lshr {wide} {product}, {bits}"));
            return Ok(f.inst(format!("trunc {wide} {high} to {ty}")));
        }
        BinaryOp::Max | BinaryOp::Min => {
            let name = match (op == BinaryOp::Max, signed) {
                (true, true) => "smax",
                (true, false) => "umax",
                (false, true) => "smin",
                (false, false) => "umin",
            };
            return Ok(f.call(ty, &format!("llvm.{name}.{ty}"), &[(ty, a), (ty, b)]));
        }
    };
    Ok(f.inst(format!("{inst} {ty} {a}, {b}")))
}

pub fn unary(f: &mut FuncText, op: UnaryOp, s: ScalarType, x: &str) -> Result<String> {
    if is_fp8(s) {
        return fp8_in_f32(f, s, &[x], |f, w| unary(f, op, ScalarType::F32, &w[0]));
    }
    let ty = scalar_type(s);
    let float = is_llvm_float(s);
    let int = s.is_int() || s == ScalarType::Bool;
    if s == ScalarType::F64 {
        // Exact operations only: PTX has no f64 approximations of the
        // transcendental functions (the verifier refuses them).
        let name = match op {
            UnaryOp::Floor => "floor",
            UnaryOp::Ceil => "ceil",
            UnaryOp::Round => "roundeven",
            UnaryOp::Trunc => "trunc",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Abs => "fabs",
            UnaryOp::Neg => return Ok(f.inst(format!("fneg double {x}"))),
            _ => {
                return Err(refused_upstream(format!(
                    "{op:?} on f64 (PTX approximates it in f32 only)"
                )))
            }
        };
        return Ok(f.call(ty, &format!("llvm.{name}.f64"), &[(ty, x)]));
    }
    Ok(match op {
        UnaryOp::Neg if float => f.inst(format!("fneg {ty} {x}")),
        UnaryOp::Neg if s.is_int() => f.inst(format!("sub {ty} 0, {x}")),
        UnaryOp::Not if int => f.inst(format!("xor {ty} {x}, -1")),
        UnaryOp::Abs if float => f.call(ty, &format!("llvm.fabs.{}", float_suffix(s)), &[(ty, x)]),
        UnaryOp::Abs if s.is_signed_int() => {
            f.call(ty, &format!("llvm.abs.{ty}"), &[(ty, x), ("i1", "false")])
        }
        UnaryOp::Abs | UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round | UnaryOp::Trunc
            if s.is_int() =>
        {
            x.to_string()
        }
        UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Round | UnaryOp::Trunc if float => {
            let name = match op {
                UnaryOp::Floor => "floor",
                UnaryOp::Ceil => "ceil",
                UnaryOp::Round => "roundeven",
                _ => "trunc",
            };
            in_f32(f, s, x, |f, w| {
                f.call("float", &format!("llvm.{name}.f32"), &[("float", w)])
            })
        }
        UnaryOp::Exp if float => in_f32(f, s, x, |f, w| {
            let scaled = f.inst(format!(
                "fmul float {w}, {}",
                f32_literal(std::f32::consts::LOG2_E)
            ));
            approx(f, "ex2.approx.ftz", &scaled)
        }),
        // `.ftz`: one MUFU instruction; without it ptxas adds a range test
        // and two multiplies to keep subnormal results (which the
        // interpreter flushes too).
        UnaryOp::Exp2 if float => in_f32(f, s, x, |f, w| approx(f, "ex2.approx.ftz", w)),
        UnaryOp::Log if float => in_f32(f, s, x, |f, w| {
            let l2 = approx(f, "lg2.approx", w);
            f.inst(format!(
                "fmul float {l2}, {}",
                f32_literal(std::f32::consts::LN_2)
            ))
        }),
        UnaryOp::Log2 if float => in_f32(f, s, x, |f, w| approx(f, "lg2.approx", w)),
        UnaryOp::Sqrt if float => in_f32(f, s, x, |f, w| {
            f.call("float", "llvm.sqrt.f32", &[("float", w)])
        }),
        UnaryOp::Rsqrt if float => in_f32(f, s, x, |f, w| approx(f, "rsqrt.approx", w)),
        UnaryOp::Sin if float => in_f32(f, s, x, |f, w| approx(f, "sin.approx", w)),
        UnaryOp::Cos if float => in_f32(f, s, x, |f, w| approx(f, "cos.approx", w)),
        UnaryOp::Tanh if float => in_f32(f, s, x, |f, w| approx(f, "tanh.approx", w)),
        _ => return Err(refused_upstream(format!("unary {op:?} on {s}"))),
    })
}

pub fn compare(f: &mut FuncText, pred: CmpPred, elem: Elem, a: &str, b: &str) -> Result<String> {
    let ty = super::emit::llvm_type(elem);
    let s = elem.scalar();
    if let Some(s) = s.filter(|s| is_llvm_float(*s)) {
        let p = match pred {
            CmpPred::Eq => "oeq",
            CmpPred::Ne => "une",
            CmpPred::Lt => "olt",
            CmpPred::Le => "ole",
            CmpPred::Gt => "ogt",
            CmpPred::Ge => "oge",
        };
        return Ok(f.inst(format!("fcmp {p} {} {a}, {b}", scalar_type(s))));
    }
    if let Some(s) = s.filter(|s| is_fp8(*s)) {
        // Widened exactly: the comparison is the same in f32.
        let (wa, wb) = (
            cast(f, s, ScalarType::F32, a)?,
            cast(f, s, ScalarType::F32, b)?,
        );
        return compare(f, pred, Elem::Scalar(ScalarType::F32), &wa, &wb);
    }
    let signed = s.is_some_and(|s| s.is_signed_int());
    let p = match (pred, signed) {
        (CmpPred::Eq, _) => "eq",
        (CmpPred::Ne, _) => "ne",
        (CmpPred::Lt, true) => "slt",
        (CmpPred::Le, true) => "sle",
        (CmpPred::Gt, true) => "sgt",
        (CmpPred::Ge, true) => "sge",
        (CmpPred::Lt, false) => "ult",
        (CmpPred::Le, false) => "ule",
        (CmpPred::Gt, false) => "ugt",
        (CmpPred::Ge, false) => "uge",
    };
    Ok(f.inst(format!("icmp {p} {ty} {a}, {b}")))
}

pub fn fma(f: &mut FuncText, s: ScalarType, a: &str, b: &str, c: &str) -> Result<String> {
    if is_llvm_float(s) {
        let ty = scalar_type(s);
        return Ok(f.call(
            ty,
            &format!("llvm.fma.{}", float_suffix(s)),
            &[(ty, a), (ty, b), (ty, c)],
        ));
    }
    if is_fp8(s) {
        return fp8_in_f32(f, s, &[a, b, c], |f, w| {
            fma(f, ScalarType::F32, &w[0], &w[1], &w[2])
        });
    }
    let p = binary(f, BinaryOp::Mul, s, a, b)?;
    binary(f, BinaryOp::Add, s, &p, c)
}

fn is_fp8(s: ScalarType) -> bool {
    matches!(s, ScalarType::F8E4M3 | ScalarType::F8E5M2)
}

fn fp8_name(s: ScalarType) -> &'static str {
    if s == ScalarType::F8E4M3 {
        "e4m3"
    } else {
        "e5m2"
    }
}

/// fp8 byte to f32 (exact): the hardware widens pairs to f16x2.
fn fp8_to_f32(f: &mut FuncText, s: ScalarType, x: &str) -> String {
    let pair = f.inst(format!("zext i8 {x} to i16"));
    let halves = f.pure_asm(
        "i32",
        &format!("cvt.rn.f16x2.{}x2 $0, $1;", fp8_name(s)),
        "=r,h",
        &[("i16", &pair)],
    );
    let low = f.inst(format!("trunc i32 {halves} to i16"));
    let h = f.inst(format!("bitcast i16 {low} to half"));
    f.inst(format!("fpext half {h} to float"))
}

/// f32 to an fp8 byte: round to nearest even, saturating to the largest finite value.
fn f32_to_fp8(f: &mut FuncText, s: ScalarType, x: &str) -> String {
    let pair = f.pure_asm(
        "i16",
        &format!("cvt.rn.satfinite.{}x2.f32 $0, $1, $2;", fp8_name(s)),
        "=h,f,f",
        &[("float", "0.0"), ("float", x)],
    );
    f.inst(format!("trunc i16 {pair} to i8"))
}

/// Element conversion with the rules of `OpKind::Cast`.
pub fn cast(f: &mut FuncText, from: ScalarType, to: ScalarType, x: &str) -> Result<String> {
    if from == to {
        return Ok(x.to_string());
    }
    let (ft, tt) = (scalar_type(from), scalar_type(to));
    if is_fp8(from) {
        let wide = fp8_to_f32(f, from, x);
        return cast(f, ScalarType::F32, to, &wide);
    }
    if is_fp8(to) {
        let wide = cast(f, from, ScalarType::F32, x)?;
        return Ok(f32_to_fp8(f, to, &wide));
    }
    let from_int = from.is_int() || from == ScalarType::Bool;
    Ok(match (from_int, to) {
        (_, ScalarType::Bool) if is_llvm_float(from) => {
            f.inst(format!("fcmp une {ft} {x}, {}", float_literal(from, 0.0)))
        }
        (true, ScalarType::Bool) => f.inst(format!("icmp ne {ft} {x}, 0")),
        (true, _) if is_llvm_float(to) => {
            let op = if from.is_signed_int() {
                "sitofp"
            } else {
                "uitofp"
            };
            f.inst(format!("{op} {ft} {x} to {tt}"))
        }
        (true, _) => {
            let (fb, tb) = (int_bits(from), int_bits(to));
            if fb == tb {
                x.to_string()
            } else if fb > tb {
                f.inst(format!("trunc {ft} {x} to {tt}"))
            } else if from.is_signed_int() {
                f.inst(format!("sext {ft} {x} to {tt}"))
            } else {
                f.inst(format!("zext {ft} {x} to {tt}"))
            }
        }
        (false, _) if to.is_int() && from == ScalarType::F64 => {
            let op = if to.is_signed_int() {
                "fptosi"
            } else {
                "fptoui"
            };
            f.call(tt, &format!("llvm.{op}.sat.{tt}.f64"), &[("double", x)])
        }
        (false, _) if to.is_int() => {
            let wide = cast(f, from, ScalarType::F32, x)?;
            let op = if to.is_signed_int() {
                "fptosi"
            } else {
                "fptoui"
            };
            f.call(tt, &format!("llvm.{op}.sat.{tt}.f32"), &[("float", &wide)])
        }
        (false, _) => {
            if from == ScalarType::BF16 {
                let wide = bf16_to_f32(f, x);
                return cast(f, ScalarType::F32, to, &wide);
            }
            // One rounding between f64 and every narrower float.
            if from == ScalarType::F64 {
                return Ok(f.inst(format!("fptrunc double {x} to {tt}")));
            }
            if to == ScalarType::F64 {
                return Ok(f.inst(format!("fpext {ft} {x} to double")));
            }
            if from == ScalarType::F32 {
                f.inst(format!("fptrunc float {x} to {tt}"))
            } else if to == ScalarType::F32 {
                f.inst(format!("fpext {ft} {x} to float"))
            } else {
                let wide = f.inst(format!("fpext {ft} {x} to float"));
                f.inst(format!("fptrunc float {wide} to {tt}"))
            }
        }
    })
}

/// bf16 is the high half of an f32, so widening is a 16-bit shift of the bits:
/// when the bf16 came out of a packed word, LLVM folds the unpacking into it
/// (one `and` or `shl` per element instead of an extract and a `cvt`).
fn bf16_to_f32(f: &mut FuncText, x: &str) -> String {
    let bits = f.inst(format!("bitcast bfloat {x} to i16"));
    let wide = f.inst(format!("zext i16 {bits} to i32"));
    let high = f.inst(format!("shl i32 {wide}, 16"));
    f.inst(format!("bitcast i32 {high} to float"))
}

fn int_bits(s: ScalarType) -> usize {
    if s == ScalarType::Bool {
        1
    } else {
        s.size_bytes() * 8
    }
}

/// Reinterpret the bits of `x` as another type of the same size.
pub fn bitcast(f: &mut FuncText, from: ScalarType, to: ScalarType, x: &str) -> Result<String> {
    if from.size_bytes() != to.size_bytes() || from == ScalarType::Bool || to == ScalarType::Bool {
        return Err(refused_upstream(format!("bitcast from {from} to {to}")));
    }
    let (ft, tt) = (scalar_type(from), scalar_type(to));
    if ft == tt {
        return Ok(x.to_string());
    }
    Ok(f.inst(format!("bitcast {ft} {x} to {tt}")))
}

/// `x` as an integer of its own width (floats bitcast, bool widened to a byte).
pub fn to_bits(f: &mut FuncText, elem: Elem, x: &str) -> String {
    match elem {
        Elem::Ptr(..) => f.inst(format!("ptrtoint {} {x} to i64", llvm_type(elem))),
        Elem::Scalar(ScalarType::Bool) => f.inst(format!("zext i1 {x} to i8")),
        Elem::Scalar(s) if is_llvm_float(s) => f.inst(format!(
            "bitcast {} {x} to {}",
            scalar_type(s),
            bits_type(s)
        )),
        Elem::Scalar(_) => x.to_string(),
    }
}

/// The inverse of [`to_bits`].
pub fn from_bits(f: &mut FuncText, elem: Elem, x: &str) -> String {
    match elem {
        Elem::Ptr(..) => f.inst(format!("inttoptr i64 {x} to {}", llvm_type(elem))),
        Elem::Scalar(ScalarType::Bool) => f.inst(format!("icmp ne i8 {x}, 0")),
        Elem::Scalar(s) if is_llvm_float(s) => f.inst(format!(
            "bitcast {} {x} to {}",
            bits_type(s),
            scalar_type(s)
        )),
        Elem::Scalar(_) => x.to_string(),
    }
}

/// Bytes one element takes in memory (pointers are 8).
pub fn mem_bytes(elem: Elem) -> usize {
    match elem {
        Elem::Ptr(..) => 8,
        Elem::Scalar(s) => s.size_bytes(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_to_int_casts_saturate_and_narrow_floats_go_through_f32() {
        let mut f = FuncText::default();
        let r = cast(&mut f, ScalarType::F16, ScalarType::I8, "%x").unwrap();
        assert!(f.body.contains("fpext half %x to float"));
        assert!(f
            .body
            .contains(&format!("{r} = call i8 @llvm.fptosi.sat.i8.f32")));
        let mut f = FuncText::default();
        cast(&mut f, ScalarType::F32, ScalarType::F8E4M3, "%x").unwrap();
        assert!(f.body.contains("cvt.rn.satfinite.e4m3x2.f32"));
    }

    #[test]
    fn unsigned_ops_pick_unsigned_instructions() {
        let mut f = FuncText::default();
        binary(&mut f, BinaryOp::Div, ScalarType::U32, "%a", "%b").unwrap();
        binary(&mut f, BinaryOp::Shr, ScalarType::U32, "%a", "%b").unwrap();
        compare(
            &mut f,
            CmpPred::Lt,
            Elem::Scalar(ScalarType::U32),
            "%a",
            "%b",
        )
        .unwrap();
        assert!(
            f.body.contains("udiv i32")
                && f.body.contains("lshr i32")
                && f.body.contains("icmp ult")
        );
    }

    #[test]
    fn fp8_arithmetic_runs_in_f32() {
        let mut f = FuncText::default();
        binary(&mut f, BinaryOp::Add, ScalarType::F8E5M2, "%a", "%b").unwrap();
        assert!(f.body.contains("fadd float"), "{}", f.body);
        assert!(binary(&mut f, BinaryOp::Shl, ScalarType::F8E5M2, "%a", "%b").is_err());
    }

    #[test]
    fn literals_wrap_to_the_signed_range() {
        let mut f = FuncText::default();
        let u = literal(
            &mut f,
            Elem::Scalar(ScalarType::U32),
            Literal::Int(u32::MAX as i64),
        )
        .unwrap();
        assert_eq!(u, "-1");
        let b = literal(&mut f, Elem::Scalar(ScalarType::Bool), Literal::Int(2)).unwrap();
        assert_eq!(b, "true");
    }
}

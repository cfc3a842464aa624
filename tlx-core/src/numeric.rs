//! Exact low-precision numerics shared by the interpreter and the tests of
//! the code generator: correctly rounded conversions to f16, bf16, fp8
//! (e4m3fn, e5m2) and tf32, saturating float-to-int casts, and the encoding
//! of element values to and from their bytes in global memory.
//!
//! Values of the small float types travel as f32 (every f16, bf16 and fp8
//! value is exactly an f32); `round_f32` brings an f32 result back to the
//! element type, so one f32 op followed by one rounding is the GPU's op.

use crate::ir::ScalarType;

/// What a conversion does with finite values beyond the format's largest.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Overflow {
    /// Round to infinity (IEEE formats).
    Infinity,
    /// Clamp to the largest finite value (PTX `cvt.rn.satfinite` for fp8).
    Saturate,
}

/// A binary floating-point format narrower than f64.
#[derive(Copy, Clone, Debug)]
struct Format {
    mantissa_bits: i32,
    min_normal_exp: i32,
    max_finite: f64,
    overflow: Overflow,
}

const F16_FORMAT: Format = Format {
    mantissa_bits: 10,
    min_normal_exp: -14,
    max_finite: 65504.0,
    overflow: Overflow::Infinity,
};
const BF16_FORMAT: Format = Format {
    mantissa_bits: 7,
    min_normal_exp: -126,
    // (2 - 2^-7) * 2^127
    max_finite: 3.3895313892515355e38,
    overflow: Overflow::Infinity,
};
const E4M3_FORMAT: Format = Format {
    mantissa_bits: 3,
    min_normal_exp: -6,
    max_finite: 448.0,
    overflow: Overflow::Saturate,
};
const E5M2_FORMAT: Format = Format {
    mantissa_bits: 2,
    min_normal_exp: -14,
    max_finite: 57344.0,
    overflow: Overflow::Saturate,
};

/// The unbiased binary exponent of a finite, nonzero f64 (subnormals report
/// the minimum, which is far below every format handled here).
fn exponent_of(a: f64) -> i32 {
    ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023
}

/// `x` rounded to nearest-even in `fmt`, as an f64.
fn quantize(x: f64, fmt: Format) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x.is_infinite() {
        return match fmt.overflow {
            Overflow::Infinity => x,
            Overflow::Saturate => fmt.max_finite.copysign(x),
        };
    }
    if x == 0.0 {
        return x;
    }
    let magnitude = x.abs();
    let exp = exponent_of(magnitude).max(fmt.min_normal_exp);
    // Scaling by a power of two is exact, so the only rounding is the one below.
    let quantum = 2f64.powi(exp - fmt.mantissa_bits);
    let rounded = (magnitude / quantum).round_ties_even() * quantum;
    let result = if rounded > fmt.max_finite {
        match fmt.overflow {
            Overflow::Infinity => f64::INFINITY,
            Overflow::Saturate => fmt.max_finite,
        }
    } else {
        rounded
    };
    result.copysign(x)
}

fn format_of(ty: ScalarType) -> Option<Format> {
    match ty {
        ScalarType::F16 => Some(F16_FORMAT),
        ScalarType::BF16 => Some(BF16_FORMAT),
        ScalarType::F8E4M3 => Some(E4M3_FORMAT),
        ScalarType::F8E5M2 => Some(E5M2_FORMAT),
        _ => None,
    }
}

/// `x` correctly rounded (nearest even) to the float type `ty`, returned as
/// f32 (exact for every type narrower than f32). Non-float types give `x as f32`.
pub fn round_f64(ty: ScalarType, x: f64) -> f32 {
    match format_of(ty) {
        Some(fmt) => quantize(x, fmt) as f32,
        None => x as f32,
    }
}

/// An f32 result rounded to the float type `ty` (identity for f32).
#[inline]
pub fn round_f32(ty: ScalarType, x: f32) -> f32 {
    match ty {
        ScalarType::F16 => half::f16::from_f32(x).to_f32(),
        ScalarType::BF16 => half::bf16::from_f32(x).to_f32(),
        ScalarType::F8E4M3 | ScalarType::F8E5M2 => round_f64(ty, f64::from(x)),
        _ => x,
    }
}

/// f32 rounded to tf32 (10 mantissa bits) to nearest, ties away from zero,
/// as the GPU's `cvt.rna.tf32.f32` does before a tensor-core product.
pub fn round_tf32_rna(x: f32) -> f32 {
    if !x.is_finite() {
        return x;
    }
    const DROPPED_BITS: u32 = 13;
    let half_ulp = 1u32 << (DROPPED_BITS - 1);
    let mask = !((1u32 << DROPPED_BITS) - 1);
    // Sign-magnitude bits: adding half an ulp to the magnitude rounds ties away from zero.
    f32::from_bits((x.to_bits().wrapping_add(half_ulp)) & mask)
}

/// The value of an e4m3fn code (bias 7, no infinities, 0x7f/0xff are NaN).
pub fn e4m3_to_f32(code: u8) -> f32 {
    let sign = if code & 0x80 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((code >> 3) & 0xf);
    let mant = f32::from(code & 0x7);
    if exp == 0xf && code & 0x7 == 0x7 {
        return f32::NAN;
    }
    let magnitude = if exp == 0 {
        mant * 2f32.powi(-9)
    } else {
        (1.0 + mant / 8.0) * 2f32.powi(exp - 7)
    };
    sign * magnitude
}

/// The value of an e2m1 (fp4) code, the low nibble of `code`: 1 sign bit,
/// 2 exponent bits (bias 1), 1 mantissa bit, no infinities or NaN.
pub fn e2m1_to_f32(code: u8) -> f32 {
    const MAGNITUDES: [f32; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
    let magnitude = MAGNITUDES[usize::from(code & 7)];
    if code & 8 != 0 {
        -magnitude
    } else {
        magnitude
    }
}

/// The value of an e5m2 code (bias 15, IEEE-like with infinities and NaNs).
pub fn e5m2_to_f32(code: u8) -> f32 {
    let sign = if code & 0x80 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((code >> 2) & 0x1f);
    let mant = f32::from(code & 0x3);
    if exp == 0x1f {
        return if code & 0x3 == 0 {
            sign * f32::INFINITY
        } else {
            f32::NAN
        };
    }
    let magnitude = if exp == 0 {
        mant * 2f32.powi(-16)
    } else {
        (1.0 + mant / 4.0) * 2f32.powi(exp - 15)
    };
    sign * magnitude
}

/// The code of an fp8 value after rounding `x` into `fmt`.
fn encode_fp8(x: f64, fmt: Format, nan_code: u8, inf_code: u8) -> u8 {
    let sign = if x.is_sign_negative() { 0x80u8 } else { 0 };
    let q = quantize(x, fmt);
    if q.is_nan() {
        return nan_code | sign;
    }
    if q.is_infinite() {
        return inf_code | sign;
    }
    let magnitude = q.abs();
    if magnitude == 0.0 {
        return sign;
    }
    let m = fmt.mantissa_bits;
    let exp = exponent_of(magnitude);
    let code = if exp < fmt.min_normal_exp {
        // Subnormal: the code is the count of subnormal quanta.
        magnitude / 2f64.powi(fmt.min_normal_exp - m)
    } else {
        let biased = f64::from(exp - fmt.min_normal_exp + 1);
        biased * 2f64.powi(m) + (magnitude / 2f64.powi(exp - m) - 2f64.powi(m))
    };
    code as u8 | sign
}

/// `x` rounded to nearest-even e4m3fn, finite overflow and infinities
/// saturating to ±448, NaN staying NaN.
pub fn f64_to_e4m3(x: f64) -> u8 {
    encode_fp8(x, E4M3_FORMAT, 0x7f, 0x7e)
}

/// `x` rounded to nearest-even e5m2, saturating to ±57344 like the GPU's
/// `cvt.rn.satfinite.e5m2x2.f32`, NaN staying NaN.
pub fn f64_to_e5m2(x: f64) -> u8 {
    encode_fp8(x, E5M2_FORMAT, 0x7f, 0x7c)
}

/// An i64 correctly rounded to the float type `ty` (one rounding, even for
/// magnitudes beyond f64's 53 bits: those go through round-to-odd first).
pub fn i64_to_float(ty: ScalarType, x: i64) -> f32 {
    if ty == ScalarType::F32 {
        return x as f32;
    }
    let mut wide = x as f64;
    let wide_exact = wide as i128;
    let exact = i128::from(x);
    let bits = wide.to_bits();
    if wide_exact != exact && bits & 1 == 0 {
        // Round to odd: of the two f64 neighbours of x exactly one is odd, and
        // rounding that once more to a format of <= 51 bits is correct.
        let rounded_up = wide_exact > exact;
        let shrink_magnitude = rounded_up == (wide > 0.0);
        wide = f64::from_bits(if shrink_magnitude { bits - 1 } else { bits + 1 });
    }
    round_f64(ty, wide)
}

/// The smallest and largest value of an integer type.
pub fn int_range(ty: ScalarType) -> (i64, i64) {
    match ty {
        ScalarType::Bool => (0, 1),
        ScalarType::I8 => (i64::from(i8::MIN), i64::from(i8::MAX)),
        ScalarType::U8 => (0, i64::from(u8::MAX)),
        ScalarType::I32 => (i64::from(i32::MIN), i64::from(i32::MAX)),
        ScalarType::U32 => (0, i64::from(u32::MAX)),
        _ => (i64::MIN, i64::MAX),
    }
}

/// A float truncated toward zero and saturated to the integer type; NaN gives 0
/// (PTX `cvt.rzi.sat`).
#[inline]
pub fn float_to_int_sat(ty: ScalarType, x: f32) -> i64 {
    f64_to_int_sat(ty, f64::from(x))
}

/// [`float_to_int_sat`] for an f64 (integer literals written as floats).
#[inline]
pub fn f64_to_int_sat(ty: ScalarType, x: f64) -> i64 {
    // `as` truncates, saturates at i64's range and maps NaN to 0.
    let (lo, hi) = int_range(ty);
    (x as i64).clamp(lo, hi)
}

/// An i64 wrapped (two's complement) to the integer type's width, sign- or
/// zero-extended back to i64: the canonical form the interpreter keeps.
#[inline]
pub fn wrap_int(ty: ScalarType, x: i64) -> i64 {
    match ty {
        ScalarType::I8 => i64::from(x as i8),
        ScalarType::U8 => i64::from(x as u8),
        ScalarType::I32 => i64::from(x as i32),
        ScalarType::U32 => i64::from(x as u32),
        ScalarType::Bool => x & 1,
        _ => x,
    }
}

/// The stored bit pattern (little-endian low bytes) of a float value already
/// rounded to `ty`. 16-bit NaNs keep their payload and their quiet bit (see
/// [`float_from_bits`]), so bytes moved through a reinterpreted view come
/// back as they went.
#[inline]
pub fn float_to_bits(ty: ScalarType, x: f32) -> u64 {
    let bits = x.to_bits();
    match ty {
        ScalarType::F16 if x.is_nan() => {
            // A payload only in the bits f16 drops stays a NaN: quiet.
            let payload = match (bits & 0x7f_ffff) >> 13 {
                0 => 0x200,
                p => p,
            };
            u64::from((bits >> 16) & 0x8000 | 0x7c00 | payload)
        }
        ScalarType::F16 => u64::from(half::f16::from_f32(x).to_bits()),
        ScalarType::BF16 if x.is_nan() => u64::from(bits >> 16),
        ScalarType::BF16 => u64::from(half::bf16::from_f32(x).to_bits()),
        ScalarType::F8E4M3 => u64::from(f64_to_e4m3(f64::from(x))),
        ScalarType::F8E5M2 => u64::from(f64_to_e5m2(f64::from(x))),
        ScalarType::F64 => f64::from(x).to_bits(),
        _ => u64::from(x.to_bits()),
    }
}

/// The float value of a stored bit pattern of type `ty`. 16-bit NaNs are
/// widened bit for bit (a signalling one stays signalling, its payload
/// shifted into the f32's), so [`float_to_bits`] gives the pattern back.
#[inline]
pub fn float_from_bits(ty: ScalarType, bits: u64) -> f32 {
    let half_bits = bits as u16;
    match ty {
        ScalarType::F16 if half_bits & 0x7c00 == 0x7c00 && half_bits & 0x3ff != 0 => {
            let sign = u32::from(half_bits & 0x8000) << 16;
            f32::from_bits(sign | 0x7f80_0000 | u32::from(half_bits & 0x3ff) << 13)
        }
        ScalarType::F16 => half::f16::from_bits(half_bits).to_f32(),
        ScalarType::BF16 => f32::from_bits(u32::from(half_bits) << 16),
        ScalarType::F8E4M3 => e4m3_to_f32(bits as u8),
        ScalarType::F8E5M2 => e5m2_to_f32(bits as u8),
        // Rounded to f32: the interpreter keeps f64 values as f64 instead.
        ScalarType::F64 => f64::from_bits(bits) as f32,
        _ => f32::from_bits(bits as u32),
    }
}

/// The integer value (canonical i64) of a stored bit pattern of type `ty`.
#[inline]
pub fn int_from_bits(ty: ScalarType, bits: u64) -> i64 {
    wrap_int(ty, bits as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_e4m3() -> Vec<(u8, f32)> {
        (0..=255u8).map(|c| (c, e4m3_to_f32(c))).collect()
    }

    fn all_e5m2() -> Vec<(u8, f32)> {
        (0..=255u8).map(|c| (c, e5m2_to_f32(c))).collect()
    }

    /// Round to nearest by brute force over the decoded table; ties go to the even code.
    fn nearest(table: &[(u8, f32)], x: f64) -> u8 {
        let mut best: Option<(u8, f64)> = None;
        for &(code, v) in table {
            if !v.is_finite() {
                continue;
            }
            let d = (f64::from(v) - x).abs();
            let better = match best {
                None => true,
                Some((bc, bd)) => d < bd || (d == bd && code & 1 == 0 && bc & 1 == 1),
            };
            // Keep the sign of zero: prefer the code whose sign matches x.
            let zero_tie = matches!(best, Some((_, bd)) if d == bd && v == 0.0
                && (code & 0x80 != 0) == x.is_sign_negative());
            if better || zero_tie {
                best = Some((code, d));
            }
        }
        best.map(|b| b.0).unwrap_or(0)
    }

    #[test]
    fn e4m3_decode_known_values() {
        assert_eq!(e4m3_to_f32(0x7e), 448.0);
        assert_eq!(e4m3_to_f32(0x01), 2f32.powi(-9));
        assert_eq!(e4m3_to_f32(0x38), 1.0);
        assert!(e4m3_to_f32(0x7f).is_nan() && e4m3_to_f32(0xff).is_nan());
        assert_eq!(e4m3_to_f32(0xfe), -448.0);
    }

    #[test]
    fn e5m2_decode_known_values() {
        assert_eq!(e5m2_to_f32(0x7b), 57344.0);
        assert_eq!(e5m2_to_f32(0x3c), 1.0);
        assert_eq!(e5m2_to_f32(0x01), 2f32.powi(-16));
        assert_eq!(e5m2_to_f32(0x7c), f32::INFINITY);
        assert!(e5m2_to_f32(0x7d).is_nan());
    }

    #[test]
    fn fp8_codes_round_trip_exhaustively() {
        for (code, v) in all_e4m3() {
            if v.is_nan() {
                assert_eq!(f64_to_e4m3(f64::from(v)) & 0x7f, 0x7f);
            } else {
                assert_eq!(f64_to_e4m3(f64::from(v)), code, "e4m3 {code:#x}");
            }
        }
        for (code, v) in all_e5m2() {
            if v.is_nan() {
                assert!(e5m2_to_f32(f64_to_e5m2(f64::from(v))).is_nan());
            } else if v.is_infinite() {
                // satfinite: infinities clamp to the largest finite value.
                assert_eq!(f64_to_e5m2(f64::from(v)), (code & 0x80) | 0x7b);
            } else {
                assert_eq!(f64_to_e5m2(f64::from(v)), code, "e5m2 {code:#x}");
            }
        }
    }

    #[test]
    fn fp8_rounding_matches_brute_force_nearest_even() {
        let e4 = all_e4m3();
        let e5 = all_e5m2();
        // Every midpoint between neighbouring codes, and points just beside it.
        for table in [&e4, &e5] {
            let mut finite: Vec<f64> = table
                .iter()
                .filter(|(_, v)| v.is_finite())
                .map(|&(_, v)| f64::from(v))
                .collect();
            finite.sort_by(f64::total_cmp);
            finite.dedup();
            for pair in finite.windows(2) {
                let mid = (pair[0] + pair[1]) / 2.0;
                for x in [mid, mid * (1.0 + 1e-9), mid * (1.0 - 1e-9), pair[0] * 1.01] {
                    let is_e4 = std::ptr::eq(table, &e4);
                    let got = if is_e4 {
                        f64_to_e4m3(x)
                    } else {
                        f64_to_e5m2(x)
                    };
                    assert_eq!(got, nearest(table, x), "x = {x}, e4m3 = {is_e4}");
                }
            }
        }
    }

    #[test]
    fn fp8_saturates_and_keeps_nan() {
        assert_eq!(f64_to_e4m3(1e6), 0x7e);
        assert_eq!(f64_to_e4m3(-500.0), 0xfe);
        assert_eq!(f64_to_e4m3(f64::INFINITY), 0x7e);
        assert_eq!(f64_to_e4m3(f64::NAN) & 0x7f, 0x7f);
        assert_eq!(f64_to_e5m2(1e9), 0x7b);
        assert_eq!(f64_to_e4m3(-0.0), 0x80);
        assert_eq!(f64_to_e4m3(2f64.powi(-11)), 0x00);
        assert_eq!(f64_to_e4m3(3.0 * 2f64.powi(-11)), 0x01);
    }

    #[test]
    fn f16_and_bf16_round_to_nearest_even() {
        // 1 + 2^-11 is a tie between 1 and 1 + 2^-10: goes to the even 1.
        assert_eq!(round_f32(ScalarType::F16, 1.0 + 2f32.powi(-11)), 1.0);
        assert_eq!(
            round_f32(ScalarType::F16, 1.0 + 3.0 * 2f32.powi(-11)),
            1.0 + 2.0 * 2f32.powi(-10)
        );
        assert_eq!(round_f32(ScalarType::F16, 65520.0), f32::INFINITY);
        assert_eq!(round_f32(ScalarType::F16, 65519.0), 65504.0);
        assert_eq!(round_f32(ScalarType::BF16, 1.0 + 2f32.powi(-8)), 1.0);
        // A value whose f32 rounding would create a false tie rounds once here.
        let x = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
        assert_eq!(round_f64(ScalarType::F16, x), 1.0 + 2f32.powi(-10));
        for bits in (0..=u16::MAX).step_by(7) {
            let v = half::f16::from_bits(bits).to_f32();
            if v.is_finite() {
                assert_eq!(round_f64(ScalarType::F16, f64::from(v)), v);
            }
        }
    }

    #[test]
    fn tf32_rounds_ties_away_from_zero() {
        let ulp = 2f32.powi(-10);
        assert_eq!(round_tf32_rna(1.0 + ulp / 2.0), 1.0 + ulp);
        assert_eq!(round_tf32_rna(-(1.0 + ulp / 2.0)), -(1.0 + ulp));
        assert_eq!(round_tf32_rna(1.0 + ulp * 0.49), 1.0);
        assert_eq!(round_tf32_rna(1.0 + 1.5 * ulp), 1.0 + 2.0 * ulp);
        assert!(round_tf32_rna(f32::NAN).is_nan());
    }

    #[test]
    fn float_to_int_truncates_and_saturates() {
        assert_eq!(float_to_int_sat(ScalarType::I32, -2.9), -2);
        assert_eq!(float_to_int_sat(ScalarType::I32, 1e20), i64::from(i32::MAX));
        assert_eq!(float_to_int_sat(ScalarType::U8, -3.0), 0);
        assert_eq!(float_to_int_sat(ScalarType::U8, 300.0), 255);
        assert_eq!(float_to_int_sat(ScalarType::I8, f32::NAN), 0);
        assert_eq!(
            float_to_int_sat(ScalarType::I64, f32::NEG_INFINITY),
            i64::MIN
        );
    }

    #[test]
    fn wide_ints_round_once() {
        // 2^60 + 2^52 + 1 is just above the bf16 tie... and f64 alone would
        // round it to the tie 2^60 + 2^52 and then to even 2^60.
        let x = (1i64 << 60) + (1i64 << 52) + 1;
        assert_eq!(
            i64_to_float(ScalarType::BF16, x),
            2f32.powi(60) * (1.0 + 2f32.powi(-7))
        );
        let y = (1i64 << 60) + (1i64 << 52);
        assert_eq!(i64_to_float(ScalarType::BF16, y), 2f32.powi(60));
        assert_eq!(i64_to_float(ScalarType::F16, 70000), f32::INFINITY);
        assert_eq!(i64_to_float(ScalarType::F16, -2049), -2048.0);
    }

    #[test]
    fn bits_round_trip_for_each_float_type() {
        for ty in [
            ScalarType::F16,
            ScalarType::BF16,
            ScalarType::F32,
            ScalarType::F8E4M3,
            ScalarType::F8E5M2,
        ] {
            let v = round_f32(ty, 1.375);
            assert_eq!(float_from_bits(ty, float_to_bits(ty, v)), v, "{ty}");
        }
        assert_eq!(int_from_bits(ScalarType::I8, 0xff), -1);
        assert_eq!(int_from_bits(ScalarType::U32, 0xffff_ffff), 4294967295);
        assert_eq!(
            wrap_int(ScalarType::I32, i64::from(i32::MAX) + 1),
            i64::from(i32::MIN)
        );
    }
}

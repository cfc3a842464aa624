//! Element types buffers can hold, and the two fp8 formats as host types.

use std::fmt::Debug;

use cudarc::driver::{DeviceRepr, ValidAsZeroBits};
use half::{bf16, f16};
use tlx_core::ir::ScalarType;
// The interpreter's conversions, so host and kernel round fp8 identically.
use tlx_core::numeric;

mod sealed {
    pub trait Sealed {}
}

/// A plain-old-data number that can live in a [`crate::Buffer`]: every bit
/// pattern is a valid value, and its size is [`ScalarType::size_bytes`].
/// Sealed: the runtime copies these as raw bytes.
pub trait Element:
    sealed::Sealed + DeviceRepr + ValidAsZeroBits + Copy + Default + Debug + Send + Sync + 'static
{
    /// The IR's name for this element type.
    const SCALAR: ScalarType;
}

macro_rules! element {
    ($t:ty, $scalar:ident) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const SCALAR: ScalarType = ScalarType::$scalar;
        }
    };
}

element!(f32, F32);
element!(f64, F64);
element!(f16, F16);
element!(bf16, BF16);
element!(i8, I8);
element!(u8, U8);
element!(i32, I32);
element!(u32, U32);
element!(i64, I64);
element!(F8E4M3, F8E4M3);
element!(F8E5M2, F8E5M2);

/// The bytes of a slice of elements (what a copy to a device moves).
pub(crate) fn as_bytes<T: Element>(data: &[T]) -> &[u8] {
    // SAFETY: `Element` is sealed to padding-free plain-old-data types.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) }
}

/// The bytes of a mutable slice of elements (what a copy from a device fills).
pub(crate) fn as_bytes_mut<T: Element>(data: &mut [T]) -> &mut [u8] {
    // SAFETY: as in `as_bytes`, and every bit pattern is a valid `T`.
    unsafe {
        std::slice::from_raw_parts_mut(data.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(data))
    }
}

/// fp8 with 4 exponent bits and 3 mantissa bits, no infinities (`e4m3fn`),
/// stored as its bit pattern.
#[repr(transparent)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct F8E4M3(pub u8);

/// fp8 with 5 exponent bits and 2 mantissa bits (IEEE-like, with infinities),
/// stored as its bit pattern.
#[repr(transparent)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct F8E5M2(pub u8);

// SAFETY: one byte, no padding, any bit pattern (0 included) is a valid value.
unsafe impl DeviceRepr for F8E4M3 {}
unsafe impl ValidAsZeroBits for F8E4M3 {}
unsafe impl DeviceRepr for F8E5M2 {}
unsafe impl ValidAsZeroBits for F8E5M2 {}

impl F8E4M3 {
    /// The nearest value (ties to even), saturating to ±448; NaN stays NaN.
    pub fn from_f32(value: f32) -> F8E4M3 {
        F8E4M3(numeric::f64_to_e4m3(f64::from(value)))
    }

    /// The same value as an `f32`, exactly (NaN stays NaN).
    pub fn to_f32(self) -> f32 {
        numeric::e4m3_to_f32(self.0)
    }
}

impl F8E5M2 {
    /// The nearest value (ties to even), saturating to ±57344; NaN stays NaN.
    pub fn from_f32(value: f32) -> F8E5M2 {
        F8E5M2(numeric::f64_to_e5m2(f64::from(value)))
    }

    /// The same value as an `f32`, exactly (NaN stays NaN).
    pub fn to_f32(self) -> f32 {
        numeric::e5m2_to_f32(self.0)
    }
}

impl From<F8E4M3> for f32 {
    fn from(v: F8E4M3) -> f32 {
        v.to_f32()
    }
}

impl From<F8E5M2> for f32 {
    fn from(v: F8E5M2) -> f32 {
        v.to_f32()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn element_sizes_match_the_ir() {
        fn check<T: Element>() {
            assert_eq!(
                std::mem::size_of::<T>(),
                T::SCALAR.size_bytes(),
                "{:?}",
                T::SCALAR
            );
        }
        check::<f32>();
        check::<f16>();
        check::<bf16>();
        check::<i8>();
        check::<u8>();
        check::<i32>();
        check::<u32>();
        check::<i64>();
        check::<F8E4M3>();
        check::<F8E5M2>();
    }

    #[test]
    fn fp8_known_values() {
        assert_eq!(F8E4M3::from_f32(1.0), F8E4M3(0x38));
        assert_eq!(F8E5M2::from_f32(1.0), F8E5M2(0x3c));
        assert_eq!(F8E4M3::from_f32(-2.0), F8E4M3(0xc0));
        assert_eq!(F8E4M3(0x7e).to_f32(), 448.0);
        assert_eq!(F8E5M2(0x7b).to_f32(), 57344.0);
        assert_eq!(F8E4M3(0x01).to_f32(), 2f32.powi(-9));
        assert_eq!(F8E5M2(0x01).to_f32(), 2f32.powi(-16));
        assert_eq!(F8E5M2(0x7c).to_f32(), f32::INFINITY);
        assert!(F8E4M3(0x7f).to_f32().is_nan());
        assert!(F8E4M3(0xff).to_f32().is_nan());
        assert!(F8E5M2(0x7d).to_f32().is_nan());
    }

    #[test]
    fn fp8_rounds_to_nearest_even_and_saturates() {
        // Halfway between 1.0 (mantissa 0) and 1.125 (mantissa 1): to even.
        assert_eq!(F8E4M3::from_f32(1.0625), F8E4M3(0x38));
        // Halfway between 1.125 and 1.25 (mantissa 2): to even.
        assert_eq!(F8E4M3::from_f32(1.1875), F8E4M3(0x3a));
        assert_eq!(F8E4M3::from_f32(1.07), F8E4M3(0x39));
        assert_eq!(F8E4M3::from_f32(1000.0), F8E4M3(0x7e));
        assert_eq!(F8E4M3::from_f32(f32::NEG_INFINITY), F8E4M3(0xfe));
        assert_eq!(F8E5M2::from_f32(1e9), F8E5M2(0x7b));
        assert_eq!(F8E4M3::from_f32(2f32.powi(-11)), F8E4M3(0x00));
        assert_eq!(F8E4M3::from_f32(3.0 * 2f32.powi(-11)), F8E4M3(0x01));
        assert_eq!(F8E4M3::from_f32(-0.0), F8E4M3(0x80));
        assert!(F8E4M3::from_f32(f32::NAN).to_f32().is_nan());
        assert!(F8E5M2::from_f32(f32::NAN).to_f32().is_nan());
    }

    #[test]
    fn fp8_every_finite_pattern_round_trips() {
        for bits in 0..=255u8 {
            let v = F8E4M3(bits).to_f32();
            if v.is_finite() {
                assert_eq!(F8E4M3::from_f32(v), F8E4M3(bits), "e4m3 {bits:#04x} = {v}");
            }
            let v = F8E5M2(bits).to_f32();
            if v.is_finite() {
                assert_eq!(F8E5M2::from_f32(v), F8E5M2(bits), "e5m2 {bits:#04x} = {v}");
            }
        }
    }

    #[test]
    fn bytes_views_cover_the_whole_slice() {
        let mut values = [1.0f32, -2.0];
        assert_eq!(as_bytes(&values).len(), 8);
        as_bytes_mut(&mut values)[..4].copy_from_slice(&3.0f32.to_ne_bytes());
        assert_eq!(values, [3.0, -2.0]);
    }
}

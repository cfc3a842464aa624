//! How a `dot` maps onto the tensor cores, decided from types and shapes
//! alone: [`WgmmaPlan`] (instruction shape, each operand's swizzled
//! placement in shared memory and the constant part of its matrix
//! descriptor), which Hopper's wgmma and Blackwell's `tcgen05.mma` both
//! follow, and which the pipeline planner asks before it gives a `dot`
//! operand a ring in the placement the instruction reads.

use crate::error::Result;
use crate::layout::{wgmma_accumulator, LinearLayout, SharedLayout, Swizzle};
use tlx_core::ir::{Arch, ScalarType};

/// Bytes of K one instruction takes (k16 for 16-bit inputs, k32 for fp8 and
/// 8-bit integers, k8 for tf32).
const K_STEP_BYTES: usize = 32;

/// How one `acc + a @ b` maps onto wgmma instructions.
#[derive(Clone, Debug, PartialEq)]
pub struct WgmmaPlan {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// The input type (both operands): f16, bf16, fp8, f32 (read as tf32),
    /// s8 or u8.
    pub input: ScalarType,
    /// The accumulator type: f32, or i32 for 8-bit integer inputs.
    pub acc: ScalarType,
    pub a: SharedLayout,
    pub a_swizzle: Swizzle,
    pub b: SharedLayout,
    pub b_swizzle: Swizzle,
    /// A stored M-major (a `local_trans` view of a `[K, M]` tile) rather
    /// than K-major; f16/bf16 only.
    pub a_m_major: bool,
    /// B stored K-major (a `local_trans` view of an `[N, K]` tile) rather
    /// than N-major; every input but f16/bf16 needs it.
    pub b_k_major: bool,
    pub num_warps: u32,
}

impl WgmmaPlan {
    /// The plan for `[m, k] x [k, n]` accumulated in `acc`, or `None` when
    /// wgmma does not apply (another arch or type, a shape the warp groups
    /// cannot split, or operand rows narrower than a 32-byte swizzle).
    pub fn new(
        arch: Arch,
        types: (ScalarType, ScalarType, ScalarType),
        dims: (usize, usize, usize),
        num_warps: u32,
    ) -> Option<WgmmaPlan> {
        WgmmaPlan::with_orders(arch, types, dims, num_warps, OperandOrders::default())
    }

    /// [`WgmmaPlan::new`] with the operands stored in `orders`.
    pub fn with_orders(
        arch: Arch,
        types: (ScalarType, ScalarType, ScalarType),
        dims: (usize, usize, usize),
        num_warps: u32,
        orders: OperandOrders,
    ) -> Option<WgmmaPlan> {
        if arch != Arch::Sm90a {
            return None;
        }
        WgmmaPlan::operands(types, dims, num_warps, orders)
    }

    /// How the operands of `[m, k] x [k, n]` lie in swizzled shared memory
    /// and which descriptors name them, whatever the instruction (Hopper's
    /// wgmma, or Blackwell's `tcgen05.mma`, whose descriptors only add a
    /// version field); `None` when the types or shapes do not fit.
    pub(crate) fn operands(
        (a, b, acc): (ScalarType, ScalarType, ScalarType),
        (m, n, k): (usize, usize, usize),
        num_warps: u32,
        OperandOrders {
            a_m_major,
            b_k_major,
        }: OperandOrders,
    ) -> Option<WgmmaPlan> {
        let sixteen_bit = is_16_bit_float(a);
        let k_major_only = matches!(
            a,
            ScalarType::F8E4M3
                | ScalarType::F8E5M2
                | ScalarType::F32
                | ScalarType::I8
                | ScalarType::U8
        );
        let input_ok = sixteen_bit || (k_major_only && b_k_major && !a_m_major);
        let integer = matches!(a, ScalarType::I8 | ScalarType::U8);
        let acc_ok = acc
            == if integer {
                ScalarType::I32
            } else {
                ScalarType::F32
            };
        if a != b || !input_ok || !acc_ok {
            return None;
        }
        wgmma_accumulator(m, n, num_warps).ok()?;
        let eb = a.size_bytes();
        // An N-major B's 64-element column blocks are what its descriptor
        // steps over; narrower rows would need the other swizzles' forms.
        if k % (K_STEP_BYTES / eb) != 0 || (!b_k_major && n < 64) || n % 8 != 0 {
            return None;
        }
        // Integer wgmma has N = 8, 16, 24, 32, then multiples of 16 only.
        if integer && n > 32 && n % 16 != 0 {
            return None;
        }
        let (a_layout, a_swizzle) = if a_m_major {
            // Each warp group's 64 rows are 128 bytes of a stored row: one
            // column block of the 128-byte swizzle, so LBO never matters.
            let s = Swizzle::widest_for(m * eb)?;
            let stored = SharedLayout::nvmma(&[k, m], eb, s).ok()?;
            (stored.transposed().ok()?, s)
        } else {
            let s = Swizzle::widest_for(k * eb)?;
            (SharedLayout::nvmma(&[m, k], eb, s).ok()?, s)
        };
        let (b, b_swizzle) = if b_k_major {
            let s = Swizzle::widest_for(k * eb)?;
            (
                SharedLayout::nvmma(&[n, k], eb, s)
                    .ok()?
                    .transposed()
                    .ok()?,
                s,
            )
        } else {
            let s = Swizzle::widest_for(n * eb)?;
            (SharedLayout::nvmma(&[k, n], eb, s).ok()?, s)
        };
        Some(WgmmaPlan {
            m,
            n,
            k,
            input: a,
            acc,
            a: a_layout,
            a_swizzle,
            b,
            b_swizzle,
            a_m_major,
            b_k_major,
            num_warps,
        })
    }

    /// K of one instruction.
    pub(crate) fn k_step(&self) -> usize {
        K_STEP_BYTES / self.input.size_bytes()
    }

    /// The accumulator's register layout.
    pub fn acc_layout(&self) -> Result<LinearLayout> {
        Ok(wgmma_accumulator(self.m, self.n, self.num_warps)?)
    }

    pub(crate) fn groups(&self) -> usize {
        self.num_warps as usize / 4
    }

    /// Instructions each warp group issues along M per K step.
    pub(crate) fn m_blocks(&self) -> usize {
        self.m / (64 * self.groups())
    }

    /// The constant part of A's descriptor. K-major and swizzled, one
    /// instruction's 16 columns lie in one atom row, so only the stride
    /// between 8-row core groups (SBO) matters. M-major, as an N-major B:
    /// the leading offset steps between 64-row blocks along M, the stride
    /// between 8-row groups of the stored tile along K.
    pub(crate) fn a_descriptor_bits(&self) -> u64 {
        let atom = self.a_swizzle.atom_bytes() as u64;
        let lbo = if self.a_m_major {
            self.k as u64 * atom
        } else {
            1
        };
        descriptor_bits(lbo, 8 * atom, self.a_swizzle)
    }

    /// The constant part of B's descriptor: N-major, the leading offset
    /// steps between 64-column blocks along N and the stride between 8-row
    /// groups along K.
    pub(crate) fn b_descriptor_bits(&self) -> u64 {
        let atom = self.b_swizzle.atom_bytes();
        if self.b_k_major {
            // Like A: 8-row core groups of the stored [N, K] tile, SBO apart.
            return descriptor_bits(1, 8 * atom as u64, self.b_swizzle);
        }
        let lbo = (self.k * atom) as u64;
        let sbo = 8 * atom as u64;
        descriptor_bits(lbo, sbo, self.b_swizzle)
    }

    /// Bytes of the A tile, padded so that B starts on a swizzle period.
    pub fn a_bytes_aligned(&self) -> usize {
        self.a.bytes.div_ceil(1024) * 1024
    }

    /// Bytes A and B take together in one buffer (A first).
    pub fn operand_bytes(&self) -> usize {
        self.a_bytes_aligned() + self.b.bytes
    }
}

/// How `async_dot`'s shared operands are stored: the defaults are A
/// K-major and B N-major (row-major `[M, K]` and `[K, N]` tiles).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OperandOrders {
    /// A is a `local_trans` view of a `[K, M]` tile.
    pub a_m_major: bool,
    /// B is a `local_trans` view of an `[N, K]` tile.
    pub b_k_major: bool,
}

/// f16 or bf16: the inputs wgmma reads A of from registers, and the only
/// ones it transposes.
pub fn is_16_bit_float(t: ScalarType) -> bool {
    matches!(t, ScalarType::F16 | ScalarType::BF16)
}

/// A descriptor without its start address: offsets in 16-byte units, the
/// swizzle mode in bits 62-63, base offset 0 (buffers start on a period).
fn descriptor_bits(lbo: u64, sbo: u64, swizzle: Swizzle) -> u64 {
    ((lbo >> 4) & 0x3fff) << 16 | ((sbo >> 4) & 0x3fff) << 32 | swizzle.descriptor_mode() << 62
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(m: usize, n: usize, k: usize, w: u32) -> Option<WgmmaPlan> {
        let t = ScalarType::BF16;
        WgmmaPlan::new(Arch::Sm90a, (t, t, ScalarType::F32), (m, n, k), w)
    }

    #[test]
    fn applies_to_warp_group_shapes_only() {
        assert!(plan(128, 128, 64, 8).is_some());
        assert!(plan(128, 256, 64, 8).is_some());
        assert!(plan(64, 128, 32, 4).is_some());
        // Rows a warp group cannot split, too-narrow B, K not a multiple of 16.
        assert!(plan(32, 128, 64, 4).is_none());
        assert!(plan(64, 32, 64, 4).is_none());
        assert!(plan(64, 128, 8, 4).is_none());
        let f32 = ScalarType::F32;
        assert!(WgmmaPlan::new(Arch::Sm90a, (f32, f32, f32), (64, 64, 64), 4).is_none());
        let t = ScalarType::F16;
        assert!(WgmmaPlan::new(Arch::Sm100a, (t, t, f32), (64, 64, 64), 4).is_none());
    }

    #[test]
    fn descriptors_encode_offsets_and_swizzle() {
        let p = plan(128, 128, 64, 8).unwrap();
        assert_eq!(p.a_swizzle, Swizzle::B128);
        // A: SBO 1024 bytes (64 units) in bits 32-45, mode 1 in bits 62-63.
        assert_eq!(p.a_descriptor_bits() >> 32 & 0x3fff, 64);
        assert_eq!(p.a_descriptor_bits() >> 62, 1);
        // B: LBO = one 64-column block of 64 rows of 128 bytes.
        assert_eq!(p.b_descriptor_bits() >> 16 & 0x3fff, (64 * 128) >> 4);
        assert_eq!(p.operand_bytes(), 128 * 64 * 2 + 64 * 128 * 2);
    }
}

//! Block-scaled data on the host, as Blackwell's block-scaled MMAs
//! (`async_dot_scaled`) take it: mxfp8, fp8 values with one ue8m0 exponent
//! per 32 consecutive elements along K ([`quantize_mxfp8`]); nvfp4, e2m1
//! values packed two per byte with one ue4m3 scale per 16
//! ([`quantize_nvfp4`]); and scales in the 512-byte atoms that `tmem_copy`
//! moves into tensor memory ([`swizzle_scales`], or
//! [`swizzle_scales_padded`] for any shape; cuBLAS's, TLX's and torchao's
//! "swizzled" order).

use tlx_core::ir::TensorMemoryType;
use tlx_core::numeric;

use crate::{Error, F8E4M3};

/// The value of an e2m1 code (the low nibble of `code`).
pub fn e2m1_to_f32(code: u8) -> f32 {
    numeric::e2m1_to_f32(code)
}

/// The nearest e2m1 code of `v` (ties to the even code), saturating at ±6;
/// NaN gives 0.
pub fn f32_to_e2m1(v: f32) -> u8 {
    let a = v.abs();
    let mut best = 0u8;
    for code in 0..8u8 {
        let (d, e) = ((a - e2m1_to_f32(code)).abs(), (a - e2m1_to_f32(best)).abs());
        if d < e || (d == e && code % 2 == 0) {
            best = code;
        }
    }
    if v.is_sign_negative() && best != 0 {
        best | 8
    } else {
        best
    }
}

/// `[rows, k]` values (row-major) as nvfp4: e2m1 codes packed two per byte
/// (low nibble first: `[rows, k / 2]` bytes) and `[rows, k / 16]` ue4m3
/// scales, each block's scale its largest magnitude over 6 (e2m1's largest)
/// rounded to e4m3.
pub fn quantize_nvfp4(
    values: &[f32],
    rows: usize,
    k: usize,
) -> Result<(Vec<u8>, Vec<F8E4M3>), Error> {
    if k % 16 != 0 || values.len() != rows * k {
        return Err(Error::InvalidShape {
            op: "quantize_nvfp4",
            reason: format!(
                "{} values for [{rows}, {k}]: K must be a multiple of 16 and the values rows x K",
                values.len()
            ),
        });
    }
    let mut packed = Vec::with_capacity(values.len() / 2);
    let mut scales = Vec::with_capacity(values.len() / 16);
    for block in values.chunks(16) {
        let amax = block.iter().fold(0f32, |m, v| m.max(v.abs()));
        let scale = F8E4M3::from_f32(amax / 6.0);
        let s = scale.to_f32();
        let code = |v: f32| if s > 0.0 { f32_to_e2m1(v / s) } else { 0 };
        packed.extend(block.chunks(2).map(|p| code(p[0]) | code(p[1]) << 4));
        scales.push(scale);
    }
    Ok((packed, scales))
}

/// Elements along K that share one scale.
pub const BLOCK: usize = 32;

/// The value of a ue8m0 exponent: `2^(e - 127)`; 255 is NaN.
pub fn ue8m0_to_f32(e: u8) -> f32 {
    if e == 255 {
        f32::NAN
    } else {
        2f64.powi(i32::from(e) - 127) as f32
    }
}

/// `[rows, k]` values (row-major) as e4m3 values and `[rows, k / 32]`
/// ue8m0 exponents, the OCP MX way: each block's exponent is
/// `floor(log2(amax)) - 8` (e4m3's largest exponent), so the block's largest
/// value lands in `[256, 512)` and rounds to at most 448; a block of zeros
/// gets exponent 0 (`2^-127`).
pub fn quantize_mxfp8(
    values: &[f32],
    rows: usize,
    k: usize,
) -> Result<(Vec<F8E4M3>, Vec<u8>), Error> {
    if k % BLOCK != 0 || values.len() != rows * k {
        return Err(Error::InvalidShape {
            op: "quantize_mxfp8",
            reason: format!(
                "{} values for [{rows}, {k}]: K must be a multiple of {BLOCK} and the values rows x K",
                values.len()
            ),
        });
    }
    let mut codes = Vec::with_capacity(values.len());
    let mut scales = Vec::with_capacity(values.len() / BLOCK);
    for block in values.chunks(BLOCK) {
        let amax = block.iter().fold(0f32, |m, v| m.max(v.abs()));
        let e = if amax > 0.0 && amax.is_finite() {
            (amax.log2().floor() as i32 - 8 + 127).clamp(0, 254) as u8
        } else {
            0
        };
        let inv = 1.0 / f64::from(ue8m0_to_f32(e));
        codes.extend(
            block
                .iter()
                .map(|&v| F8E4M3::from_f32((f64::from(v) * inv) as f32)),
        );
        scales.push(e);
    }
    Ok((codes, scales))
}

/// `[rows, blocks]` scales (row-major) in `tmem_copy`'s order: 512-byte
/// atoms of 128 rows by 4 blocks, row blocks outer, K blocks inner; within
/// an atom, row `r`'s four scales at byte `(r % 32) * 16 + (r % 128) / 32 *
/// 4`. `rows` must be a multiple of 128 and `blocks` of 4.
pub fn swizzle_scales<T: Copy + Default>(
    scales: &[T],
    rows: usize,
    blocks: usize,
) -> Result<Vec<T>, Error> {
    if rows % 128 != 0 || blocks % 4 != 0 || scales.len() != rows * blocks {
        return Err(Error::InvalidShape {
            op: "swizzle_scales",
            reason: format!(
                "{} scales for [{rows}, {blocks}]: rows must be a multiple of 128, blocks of 4, and the scales rows x blocks",
                scales.len()
            ),
        });
    }
    let mut atoms = vec![T::default(); scales.len()];
    for r in 0..rows {
        for kb in 0..blocks {
            atoms[TensorMemoryType::scale_atom_offset(r, kb, blocks)] = scales[r * blocks + kb];
        }
    }
    Ok(atoms)
}

/// [`swizzle_scales`] of `[rows, blocks]` scales of any shape, first padded
/// with `one` (a scale of 1) to whole tiles of 128 rows and
/// `blocks_per_tile` blocks (a multiple of 4: the blocks of a kernel's K
/// tile), as `tlx::ops::gemm_mxfp8` (4 per tile) and `gemm_nvfp4` (8) take
/// them: rows and blocks past the matrix scale the zeros TMA fills in.
pub fn swizzle_scales_padded<T: Copy + Default>(
    scales: &[T],
    (rows, blocks): (usize, usize),
    blocks_per_tile: usize,
    one: T,
) -> Result<Vec<T>, Error> {
    if blocks_per_tile == 0 || blocks_per_tile % 4 != 0 || scales.len() != rows * blocks {
        return Err(Error::InvalidShape {
            op: "swizzle_scales_padded",
            reason: format!(
                "{} scales for [{rows}, {blocks}] in tiles of {blocks_per_tile} blocks: the scales must be rows x blocks and the tile a multiple of 4 blocks",
                scales.len()
            ),
        });
    }
    let padded_rows = rows.div_ceil(128) * 128;
    let padded_blocks = blocks.div_ceil(blocks_per_tile) * blocks_per_tile;
    let mut padded = vec![one; padded_rows * padded_blocks];
    for (r, row) in scales.chunks(blocks.max(1)).take(rows).enumerate() {
        padded[r * padded_blocks..][..blocks].copy_from_slice(row);
    }
    swizzle_scales(&padded, padded_rows, padded_blocks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantized_blocks_come_back_within_e4m3s_rounding() {
        let values: Vec<f32> = (0..4 * 64)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.37 * (1 + i / 32) as f32)
            .collect();
        let (codes, scales) = quantize_mxfp8(&values, 4, 64).expect("shape");
        assert_eq!(scales.len(), 8);
        for (i, (&v, c)) in values.iter().zip(&codes).enumerate() {
            let back = c.to_f32() * ue8m0_to_f32(scales[i / BLOCK]);
            // e4m3 keeps 3 mantissa bits: within 1/16 relative, or a
            // subnormal step of the block's scale.
            let step = ue8m0_to_f32(scales[i / BLOCK]) * 2f32.powi(-9);
            assert!(
                (back - v).abs() <= v.abs() / 16.0 + step,
                "{i}: {v} -> {back}"
            );
        }
    }

    #[test]
    fn a_block_of_zeros_gets_the_smallest_scale() {
        let (codes, scales) = quantize_mxfp8(&[0.0; 32], 1, 32).expect("shape");
        assert_eq!(scales, [0]);
        assert!(codes.iter().all(|c| c.to_f32() == 0.0));
    }

    #[test]
    fn scales_swizzle_into_atoms_of_128_rows_by_4_blocks() {
        let (rows, blocks) = (256, 8);
        let scales: Vec<u8> = (0..rows * blocks).map(|i| (i % 251) as u8).collect();
        let atoms = swizzle_scales(&scales, rows, blocks).expect("shape");
        // Row 161, block 6: atom (1, 1) = 3, row 161 % 32 = 1, quarter 1, byte 2.
        assert_eq!(atoms[3 * 512 + 16 + 4 + 2], scales[161 * blocks + 6]);
        let mut sorted = atoms.clone();
        sorted.sort_unstable();
        let mut want = scales.clone();
        want.sort_unstable();
        assert_eq!(sorted, want, "a permutation");
    }

    #[test]
    fn e2m1_codes_round_to_nearest_even_and_saturate() {
        for code in 0..16u8 {
            assert_eq!(
                f32_to_e2m1(e2m1_to_f32(code)),
                if code == 8 { 0 } else { code }
            );
        }
        assert_eq!(e2m1_to_f32(f32_to_e2m1(1.25)), 1.0, "tie to the even code");
        assert_eq!(e2m1_to_f32(f32_to_e2m1(2.5)), 2.0);
        assert_eq!(e2m1_to_f32(f32_to_e2m1(-100.0)), -6.0);
    }

    #[test]
    fn nvfp4_blocks_come_back_within_e2m1s_rounding() {
        let values: Vec<f32> = (0..2 * 32)
            .map(|i| ((i * 29 % 23) as f32 - 11.0) * 0.3)
            .collect();
        let (packed, scales) = quantize_nvfp4(&values, 2, 32).expect("shape");
        assert_eq!((packed.len(), scales.len()), (32, 4));
        for (i, &v) in values.iter().enumerate() {
            let code = packed[i / 2] >> (4 * (i % 2));
            let s = scales[i / 16].to_f32();
            let back = e2m1_to_f32(code) * s;
            // e2m1 steps are at most a third of the value (4 to 6), or s / 2.
            assert!(
                (back - v).abs() <= v.abs() / 3.0 + s / 2.0,
                "{i}: {v} -> {back}"
            );
        }
    }

    #[test]
    fn padded_scales_fill_whole_tiles_with_ones() {
        let scales: Vec<u8> = (0..3 * 5).map(|i| i as u8).collect();
        let atoms = swizzle_scales_padded(&scales, (3, 5), 8, 127).expect("shape");
        assert_eq!(atoms.len(), 128 * 8);
        assert_eq!(atoms[TensorMemoryType::scale_atom_offset(2, 4, 8)], 14);
        assert_eq!(
            atoms[TensorMemoryType::scale_atom_offset(2, 5, 8)],
            127,
            "padded block"
        );
        assert_eq!(
            atoms[TensorMemoryType::scale_atom_offset(3, 0, 8)],
            127,
            "padded row"
        );
    }

    #[test]
    fn bad_shapes_are_typed_errors() {
        assert!(matches!(
            swizzle_scales(&[0; 64], 64, 1),
            Err(Error::InvalidShape { .. })
        ));
        assert!(matches!(
            quantize_mxfp8(&[0.0; 48], 1, 48),
            Err(Error::InvalidShape { .. })
        ));
        assert!(matches!(
            quantize_nvfp4(&[0.0; 24], 1, 24),
            Err(Error::InvalidShape { .. })
        ));
        assert!(matches!(
            swizzle_scales_padded(&[0u8; 4], (1, 4), 6, 127),
            Err(Error::InvalidShape { .. })
        ));
    }
}

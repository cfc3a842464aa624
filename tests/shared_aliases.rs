//! Shared memory seen twice. TLX's `local_reinterpret`: one buffer's bytes
//! as another element type and shape (a `[64, 64]` f32 buffer, rows of 256
//! bytes with the 128-byte swizzle, read as `[64, 128]` bf16 and written
//! back through that view), checked against the bytes computed on the CPU.
//! And `local_alloc(.., reuse = other)`: a second allocation on the first
//! one's bytes, used after it, taking no shared memory of its own. On the
//! interpreter and, where there is a GPU, on the GPU.

use tlx::prelude::*;

#[path = "common/rng.rs"]
mod rng;

use rng::fresh_rng;

#[tlx::kernel(arch = "sm_90a", configs = [(R = 64)])]
fn reinterpret_rows<const R: usize>(
    x: Ptr<f32>,
    y: Ptr<bf16>,
    halves: Ptr<bf16>,
    joined: Ptr<f32>,
) {
    let words = local_alloc([R, 64], f32, 1);
    let as_words = local_view(words, 0);
    let as_halves = local_reinterpret(as_words, bf16, [R, 128]);
    let r = arange(0, R);
    let c = arange(0, 64);
    let c2 = arange(0, 128);
    local_store(as_words, load(x + r[(.., None)] * 64 + c[(None, ..)]));
    store(
        halves + r[(.., None)] * 128 + c2[(None, ..)],
        local_load(as_halves),
    );
    local_store(as_halves, load(y + r[(.., None)] * 128 + c2[(None, ..)]));
    store(
        joined + r[(.., None)] * 64 + c[(None, ..)],
        local_load(as_words),
    );
}

/// Two phases on the same bytes: bf16 tiles staged through `tiles`, then
/// f32 tiles through `words`, which reuses them.
#[tlx::kernel(arch = "sm_90a", configs = [(R = 64)])]
fn reuse_phases<const R: usize>(x: Ptr<bf16>, y: Ptr<f32>, out_x: Ptr<bf16>, out_y: Ptr<f32>) {
    let tiles = local_alloc([R, 64], bf16, 2);
    let words = local_alloc([R, 32], f32, 2, reuse = tiles);
    let r = arange(0, R);
    let c = arange(0, 64);
    let c2 = arange(0, 32);
    for i in 0..2 {
        let t = local_view(tiles, i);
        local_store(t, load(x + i * R * 64 + r[(.., None)] * 64 + c[(None, ..)]));
        let back = local_load(t);
        store(
            out_x + i * R * 64 + r[(.., None)] * 64 + c[(None, ..)],
            back * 2.0,
        );
    }
    for i in 0..2 {
        let w = local_view(words, i);
        local_store(
            w,
            load(y + i * R * 32 + r[(.., None)] * 32 + c2[(None, ..)]),
        );
        let back = local_load(w);
        store(
            out_y + i * R * 32 + r[(.., None)] * 32 + c2[(None, ..)],
            back + 1.0,
        );
    }
}

fn reuse_agrees(dev: &Device) {
    let mut rng = fresh_rng();
    let x: Vec<bf16> = rng
        .vec(2 * 64 * 64, 2.0)
        .into_iter()
        .map(bf16::from_f32)
        .collect();
    let y = rng.vec(2 * 64 * 32, 2.0);
    let (xb, yb) = (
        dev.upload(&x).expect("upload"),
        dev.upload(&y).expect("upload"),
    );
    let out_x = dev.upload(&vec![bf16::NAN; x.len()]).expect("upload");
    let out_y = dev.upload(&vec![f32::NAN; y.len()]).expect("upload");
    reuse_phases::<64>::launch(dev, 1, &xb, &yb, &out_x, &out_y).expect("launch");
    let (got_x, got_y) = (
        out_x.download().expect("download"),
        out_y.download().expect("download"),
    );
    for (i, (g, v)) in got_x.iter().zip(&x).enumerate() {
        assert_eq!(g.to_f32(), v.to_f32() * 2.0, "x element {i}");
    }
    for (i, (g, v)) in got_y.iter().zip(&y).enumerate() {
        assert_eq!(*g, v + 1.0, "y element {i}");
    }
}

fn same_bits_or_both_nan(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

fn reinterpret_agrees(dev: &Device) {
    let mut rng = fresh_rng();
    let x = rng.vec(64 * 64, 3.0);
    let y: Vec<bf16> = rng
        .vec(64 * 128, 3.0)
        .into_iter()
        .map(bf16::from_f32)
        .collect();
    let (xb, yb) = (
        dev.upload(&x).expect("upload"),
        dev.upload(&y).expect("upload"),
    );
    let halves = dev.upload(&vec![bf16::NAN; 64 * 128]).expect("upload");
    let joined = dev.upload(&vec![f32::NAN; 64 * 64]).expect("upload");
    reinterpret_rows::<64>::launch(dev, 1, &xb, &yb, &halves, &joined).expect("launch");
    let (got_halves, got_joined) = (
        halves.download().expect("download"),
        joined.download().expect("download"),
    );
    for (i, &w) in x.iter().enumerate() {
        // Little-endian: the low half of each word is the even element.
        let bits = w.to_bits();
        for (k, half) in [bits & 0xffff, bits >> 16].into_iter().enumerate() {
            let want = bf16::from_bits(half as u16).to_f32();
            let got = got_halves[2 * i + k].to_f32();
            assert!(
                same_bits_or_both_nan(got, want),
                "half {}: {got} vs {want}",
                2 * i + k
            );
        }
        let word = u32::from(y[2 * i].to_bits()) | u32::from(y[2 * i + 1].to_bits()) << 16;
        let want = f32::from_bits(word);
        assert!(
            same_bits_or_both_nan(got_joined[i], want),
            "word {i}: {} vs {want}",
            got_joined[i]
        );
    }
}

#[test]
fn aliases_on_the_interpreter() {
    reinterpret_agrees(&Device::cpu());
    reuse_agrees(&Device::cpu());
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn aliases_on_the_gpu() {
    if let Some(dev) = tlx::testing::gpu_or_skip() {
        reinterpret_agrees(&dev);
        reuse_agrees(&dev);
    }
}

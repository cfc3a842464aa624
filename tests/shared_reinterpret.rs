//! TLX's `local_reinterpret`: one shared buffer's bytes seen as another
//! element type and shape. A `[64, 64]` f32 buffer (rows of 256 bytes,
//! 128-byte swizzle) is read as `[64, 128]` bf16 (the same rows), and bf16
//! pairs written through that view are read back as f32, on the
//! interpreter and, where there is a GPU, on the GPU, against the bytes
//! computed on the CPU.

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
fn reinterpret_on_the_interpreter() {
    reinterpret_agrees(&Device::cpu());
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn reinterpret_on_the_gpu() {
    match Device::cuda(0) {
        Ok(dev) => reinterpret_agrees(&dev),
        Err(e) => println!("skipped: needs a GPU ({e})"),
    }
}

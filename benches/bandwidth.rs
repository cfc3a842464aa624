//! Memory-bound kernels against the device-to-device copy bandwidth measured
//! in the same run: vector_add, softmax and layernorm (issue 2's targets).
//!
//! `cargo bench --bench bandwidth` (prints a table; skips without a GPU).
//! Bytes counted are the minimum each kernel must move (inputs read once,
//! outputs written once), as the copy's read+write bytes are.

use tlx::prelude::*;

#[tlx::kernel(num_warps = 4, configs = [(BLOCK = 1024), (BLOCK = 4096, num_warps = 8)])]
fn vector_add<const BLOCK: usize>(x: Ptr<f32>, y: Ptr<f32>, out: Ptr<f32>, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    let a = load(x + offs, mask = mask, other = 0.0);
    let b = load(y + offs, mask = mask, other = 0.0);
    store(out + offs, a + b, mask = mask);
}

#[tlx::kernel(configs = [(BLOCK = 4096, num_warps = 8), (BLOCK = 8192, num_warps = 16)])]
fn softmax<const BLOCK: usize>(out: Ptr<f32>, inp: Ptr<f32>, stride: i32, n_cols: i32) {
    let row = program_id(0);
    let cols = arange(0, BLOCK);
    let mask = cols < n_cols;
    let x = load(inp + row * stride + cols, mask = mask, other = f32::NEG_INFINITY);
    let shifted = x - max(x, axis = 0);
    let num = exp(shifted);
    let den = sum(num, axis = 0);
    store(out + row * stride + cols, num / den, mask = mask);
}

#[tlx::kernel(configs = [(BLOCK = 4096, num_warps = 8), (BLOCK = 8192, num_warps = 16)])]
fn layernorm<const BLOCK: usize>(
    x: Ptr<bf16>,
    y: Ptr<bf16>,
    weight: Ptr<bf16>,
    bias: Ptr<bf16>,
    stride: i32,
    n: i32,
    eps: f32,
) {
    let row = program_id(0);
    let x_row = x + row * stride;
    let y_row = y + row * stride;
    let shift = load(x_row).to(f32);
    let mut sum1 = zeros([BLOCK], f32);
    let mut sum2 = zeros([BLOCK], f32);
    for off in (0..n).step_by(BLOCK) {
        let cols = off + arange(0, BLOCK);
        let mask = cols < n;
        let v = select(mask, load(x_row + cols, mask = mask).to(f32) - shift, 0.0);
        sum1 += v;
        sum2 += v * v;
    }
    let count = n.to(f32);
    let mean_shifted = sum(sum1, axis = 0) / count;
    let var = sum(sum2, axis = 0) / count - mean_shifted * mean_shifted;
    let mean = mean_shifted + shift;
    let rstd = rsqrt(maximum(var, 0.0) + eps);
    for off in (0..n).step_by(BLOCK) {
        let cols = off + arange(0, BLOCK);
        let mask = cols < n;
        let w = load(weight + cols, mask = mask, eviction_policy = "evict_last").to(f32);
        let b = load(bias + cols, mask = mask, eviction_policy = "evict_last").to(f32);
        let v = load(x_row + cols, mask = mask, eviction_policy = "evict_first").to(f32);
        store(y_row + cols, ((v - mean) * rstd * w + b).to(bf16), mask = mask);
    }
}

/// Median milliseconds of `f` over `reps` timed runs after warm-up.
fn median_ms(dev: &Device, reps: usize, mut f: impl FnMut() -> Result<(), Error>) -> Result<f64, Error> {
    for _ in 0..3 {
        f()?;
    }
    dev.synchronize()?;
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        times.push(dev.time(&mut f)? as f64);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[reps / 2])
}

struct Row {
    name: String,
    ms: f64,
    tbps: f64,
    ratio: f64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = match Device::cuda(0) {
        Ok(d) => d,
        Err(e) => {
            println!("skipped: the bandwidth benchmark needs a GPU ({e})");
            return Ok(());
        }
    };
    println!("device: {}", dev.name());
    let tb = |bytes: f64, ms: f64| bytes / (ms * 1e-3) / 1e12;

    // The reference: a device-to-device copy of 1 GiB.
    let n_copy = 1usize << 28;
    let src = dev.upload(&vec![1.0f32; n_copy])?;
    let mut dst = dev.alloc::<f32>(n_copy)?;
    let copy_ms = median_ms(&dev, 20, || dst.copy_from_device(&src))?;
    let copy = tb(2.0 * 4.0 * n_copy as f64, copy_ms);
    let mut rows = vec![Row { name: "copy 1 GiB (reference)".into(), ms: copy_ms, tbps: copy, ratio: 1.0 }];
    drop((src, dst));

    let n = 1usize << 28;
    let (x, y, out) = (dev.upload(&vec![1.0f32; n])?, dev.upload(&vec![2.0f32; n])?, dev.alloc::<f32>(n)?);
    for (name, ms) in [
        ("vector_add f32 2^28, BLOCK=1024", median_ms(&dev, 20, || vector_add::<1024>::launch(&dev, (n / 1024) as u32, &x, &y, &out, n as i32))?),
        ("vector_add f32 2^28, BLOCK=4096", median_ms(&dev, 20, || vector_add::<4096>::launch(&dev, (n / 4096) as u32, &x, &y, &out, n as i32))?),
    ] {
        let t = tb(3.0 * 4.0 * n as f64, ms);
        rows.push(Row { name: name.into(), ms, tbps: t, ratio: t / copy });
    }
    drop((x, y, out));

    for cols in [4096usize, 8192] {
        let rows_n = (1usize << 28) / cols;
        let (inp, outp) = (dev.upload(&vec![0.5f32; rows_n * cols])?, dev.alloc::<f32>(rows_n * cols)?);
        let ms = if cols == 4096 {
            median_ms(&dev, 20, || softmax::<4096>::launch(&dev, rows_n as u32, &outp, &inp, cols as i32, cols as i32))?
        } else {
            median_ms(&dev, 20, || softmax::<8192>::launch(&dev, rows_n as u32, &outp, &inp, cols as i32, cols as i32))?
        };
        let t = tb(2.0 * 4.0 * (rows_n * cols) as f64, ms);
        rows.push(Row { name: format!("softmax f32 {rows_n}x{cols}"), ms, tbps: t, ratio: t / copy });
    }

    let ln_rows = 1152usize;
    for cols in [16384usize, 32768, 65536, 131072] {
        let x = dev.upload(&vec![bf16::from_f32(0.25); ln_rows * cols])?;
        let y = dev.alloc::<bf16>(ln_rows * cols)?;
        let w = dev.upload(&vec![bf16::ONE; cols])?;
        let b = dev.upload(&vec![bf16::ZERO; cols])?;
        for block in [4096usize, 8192] {
            let ms = if block == 4096 {
                median_ms(&dev, 20, || layernorm::<4096>::launch(&dev, ln_rows as u32, &x, &y, &w, &b, cols as i32, cols as i32, 1e-5))?
            } else {
                median_ms(&dev, 20, || layernorm::<8192>::launch(&dev, ln_rows as u32, &x, &y, &w, &b, cols as i32, cols as i32, 1e-5))?
            };
            let t = tb(2.0 * 2.0 * (ln_rows * cols) as f64, ms);
            rows.push(Row { name: format!("layernorm bf16 {ln_rows}x{cols}, BLOCK={block}"), ms, tbps: t, ratio: t / copy });
        }
    }

    println!("\n| kernel | ms | TB/s | x copy |\n| --- | --- | --- | --- |");
    for r in rows {
        println!("| {} | {:.3} | {:.3} | {:.2} |", r.name, r.ms, r.tbps, r.ratio);
    }
    Ok(())
}

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

// `NW` only selects the warp count of a configuration (the sweep below).
#[tlx::kernel(configs = [
    (BLOCK = 4096, NW = 4, num_warps = 4),
    (BLOCK = 4096, NW = 8, num_warps = 8),
    (BLOCK = 4096, NW = 16, num_warps = 16),
    (BLOCK = 8192, NW = 8, num_warps = 8),
    (BLOCK = 8192, NW = 16, num_warps = 16),
    (BLOCK = 8192, NW = 32, num_warps = 32),
])]
fn softmax<const BLOCK: usize, const NW: usize>(
    out: Ptr<f32>,
    inp: Ptr<f32>,
    stride: i32,
    n_cols: i32,
) {
    let row = program_id(0);
    let cols = arange(0, BLOCK);
    let mask = cols < n_cols;
    let x = load(
        inp + row * stride + cols,
        mask = mask,
        other = f32::NEG_INFINITY,
        eviction_policy = "evict_first",
    );
    let shifted = x - max(x, axis = 0);
    let num = exp(shifted);
    let den = sum(num, axis = 0);
    store(
        out + row * stride + cols,
        num / den,
        mask = mask,
        cache_modifier = ".cs",
    );
}

/// LayerNorm for rows that fit in one block: the row is read once into
/// registers, both moments come from it, and it is normalized in place.
#[tlx::kernel(configs = [
    (BLOCK = 16384, NW = 8, num_warps = 8),
    (BLOCK = 16384, NW = 16, num_warps = 16),
    (BLOCK = 16384, NW = 32, num_warps = 32),
    (BLOCK = 32768, NW = 16, num_warps = 16),
    (BLOCK = 32768, NW = 32, num_warps = 32),
])]
fn layernorm_in_registers<const BLOCK: usize, const NW: usize>(
    x: Ptr<bf16>,
    y: Ptr<bf16>,
    weight: Ptr<bf16>,
    bias: Ptr<bf16>,
    stride: i32,
    n: i32,
    eps: f32,
) {
    let row = program_id(0);
    let cols = arange(0, BLOCK);
    let mask = cols < n;
    let v = load(
        x + row * stride + cols,
        mask = mask,
        other = 0.0,
        eviction_policy = "evict_first",
    )
    .to(f32);
    let count = n.to(f32);
    let mean = sum(v, axis = 0) / count;
    let d = select(mask, v - mean, 0.0);
    let rstd = rsqrt(sum(d * d, axis = 0) / count + eps);
    let w = load(weight + cols, mask = mask, eviction_policy = "evict_last").to(f32);
    let b = load(bias + cols, mask = mask, eviction_policy = "evict_last").to(f32);
    store(
        y + row * stride + cols,
        (d * rstd * w + b).to(bf16),
        mask = mask,
        cache_modifier = ".cs",
    );
}

#[tlx::kernel(configs = [
    (BLOCK = 2048, NW = 4, num_warps = 4),
    (BLOCK = 4096, NW = 8, num_warps = 8),
    (BLOCK = 8192, NW = 16, num_warps = 16),
    (BLOCK = 8192, NW = 32, num_warps = 32),
])]
fn layernorm<const BLOCK: usize, const NW: usize>(
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
        store(
            y_row + cols,
            ((v - mean) * rstd * w + b).to(bf16),
            mask = mask,
        );
    }
}

/// The last kernel's first output row against a CPU reference (weight 1,
/// bias 0), so that a fast but wrong kernel cannot enter the table.
fn check_layernorm_row0(x: &[bf16], y: &[bf16]) -> Result<(), Box<dyn std::error::Error>> {
    let v: Vec<f64> = x.iter().map(|e| e.to_f64()).collect();
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let var = v.iter().map(|e| (e - mean) * (e - mean)).sum::<f64>() / v.len() as f64;
    let rstd = 1.0 / (var + 1e-5).sqrt();
    for (i, (e, got)) in v.iter().zip(y).enumerate() {
        let want = (e - mean) * rstd;
        if (got.to_f64() - want).abs() > 1.0 / 64.0 * want.abs().max(1.0) {
            return Err(format!("layernorm output {i} is {got}, expected {want}").into());
        }
    }
    Ok(())
}

/// Median milliseconds of `f` over `reps` timed runs after warm-up.
fn median_ms(
    dev: &Device,
    reps: usize,
    mut f: impl FnMut() -> Result<(), Error>,
) -> Result<f64, Error> {
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
    let mut rows = vec![Row {
        name: "copy 1 GiB (reference)".into(),
        ms: copy_ms,
        tbps: copy,
        ratio: 1.0,
    }];
    drop((src, dst));

    let n = 1usize << 28;
    let (x, y, out) = (
        dev.upload(&vec![1.0f32; n])?,
        dev.upload(&vec![2.0f32; n])?,
        dev.alloc::<f32>(n)?,
    );
    for (name, ms) in [
        (
            "vector_add f32 2^28, BLOCK=1024",
            median_ms(&dev, 20, || {
                vector_add::<1024>::launch(&dev, (n / 1024) as u32, &x, &y, &out, n as i32)
            })?,
        ),
        (
            "vector_add f32 2^28, BLOCK=4096",
            median_ms(&dev, 20, || {
                vector_add::<4096>::launch(&dev, (n / 4096) as u32, &x, &y, &out, n as i32)
            })?,
        ),
    ] {
        let t = tb(3.0 * 4.0 * n as f64, ms);
        rows.push(Row {
            name: name.into(),
            ms,
            tbps: t,
            ratio: t / copy,
        });
    }
    drop((x, y, out));

    // Each sweep entry: a label and a launch closure over prepared buffers.
    macro_rules! sweep {
        ($label:expr, $bytes:expr, [$(($name:expr, $launch:expr)),* $(,)?]) => {$(
            let ms = median_ms(&dev, 20, || $launch)?;
            let t = tb($bytes, ms);
            rows.push(Row { name: format!("{} {}", $label, $name), ms, tbps: t, ratio: t / copy });
        )*};
    }

    for cols in [4096usize, 8192] {
        let rows_n = (1usize << 28) / cols;
        let (inp, outp) = (
            dev.upload(&vec![0.5f32; rows_n * cols])?,
            dev.alloc::<f32>(rows_n * cols)?,
        );
        let (g, c) = (rows_n as u32, cols as i32);
        let label = format!("softmax f32 {rows_n}x{cols}");
        let bytes = 2.0 * 4.0 * (rows_n * cols) as f64;
        if cols == 4096 {
            sweep!(
                label,
                bytes,
                [
                    (
                        "BLOCK=4096 w4",
                        softmax::<4096, 4>::launch(&dev, g, &outp, &inp, c, c)
                    ),
                    (
                        "BLOCK=4096 w8",
                        softmax::<4096, 8>::launch(&dev, g, &outp, &inp, c, c)
                    ),
                    (
                        "BLOCK=4096 w16",
                        softmax::<4096, 16>::launch(&dev, g, &outp, &inp, c, c)
                    ),
                ]
            );
        } else {
            sweep!(
                label,
                bytes,
                [
                    (
                        "BLOCK=8192 w8",
                        softmax::<8192, 8>::launch(&dev, g, &outp, &inp, c, c)
                    ),
                    (
                        "BLOCK=8192 w16",
                        softmax::<8192, 16>::launch(&dev, g, &outp, &inp, c, c)
                    ),
                    (
                        "BLOCK=8192 w32",
                        softmax::<8192, 32>::launch(&dev, g, &outp, &inp, c, c)
                    ),
                ]
            );
        }
    }

    let ln_rows = 1152usize;
    for cols in [16384usize, 32768, 65536, 131072] {
        let host_x: Vec<bf16> = (0..ln_rows * cols)
            .map(|i| bf16::from_f32(((i * 7919) % 1000) as f32 / 500.0 - 1.0))
            .collect();
        let x = dev.upload(&host_x)?;
        let y = dev.alloc::<bf16>(ln_rows * cols)?;
        let w = dev.upload(&vec![bf16::ONE; cols])?;
        let b = dev.upload(&vec![bf16::ZERO; cols])?;
        let (g, c) = (ln_rows as u32, cols as i32);
        let label = format!("layernorm bf16 {ln_rows}x{cols}");
        let bytes = 2.0 * 2.0 * (ln_rows * cols) as f64;
        sweep!(
            label,
            bytes,
            [
                (
                    "stream BLOCK=2048 w4",
                    layernorm::<2048, 4>::launch(&dev, g, &x, &y, &w, &b, c, c, 1e-5)
                ),
                (
                    "stream BLOCK=4096 w8",
                    layernorm::<4096, 8>::launch(&dev, g, &x, &y, &w, &b, c, c, 1e-5)
                ),
                (
                    "stream BLOCK=8192 w16",
                    layernorm::<8192, 16>::launch(&dev, g, &x, &y, &w, &b, c, c, 1e-5)
                ),
                (
                    "stream BLOCK=8192 w32",
                    layernorm::<8192, 32>::launch(&dev, g, &x, &y, &w, &b, c, c, 1e-5)
                ),
            ]
        );
        check_layernorm_row0(&host_x[..cols], &y.download()?[..cols])?;
        check_layernorm_row0(&host_x[..cols], &y.download()?[..cols])?;
        if cols == 16384 {
            sweep!(
                label,
                bytes,
                [
                    (
                        "registers BLOCK=16384 w8",
                        layernorm_in_registers::<16384, 8>::launch(
                            &dev, g, &x, &y, &w, &b, c, c, 1e-5
                        )
                    ),
                    (
                        "registers BLOCK=16384 w16",
                        layernorm_in_registers::<16384, 16>::launch(
                            &dev, g, &x, &y, &w, &b, c, c, 1e-5
                        )
                    ),
                    (
                        "registers BLOCK=16384 w32",
                        layernorm_in_registers::<16384, 32>::launch(
                            &dev, g, &x, &y, &w, &b, c, c, 1e-5
                        )
                    ),
                ]
            );
        }
        if cols == 32768 {
            sweep!(
                label,
                bytes,
                [
                    (
                        "registers BLOCK=32768 w16",
                        layernorm_in_registers::<32768, 16>::launch(
                            &dev, g, &x, &y, &w, &b, c, c, 1e-5
                        )
                    ),
                    (
                        "registers BLOCK=32768 w32",
                        layernorm_in_registers::<32768, 32>::launch(
                            &dev, g, &x, &y, &w, &b, c, c, 1e-5
                        )
                    ),
                ]
            );
        }
        check_layernorm_row0(&host_x[..cols], &y.download()?[..cols])?;
    }

    println!("\n| kernel | ms | TB/s | x copy |\n| --- | --- | --- | --- |");
    for r in rows {
        println!(
            "| {} | {:.3} | {:.3} | {:.2} |",
            r.name, r.ms, r.tbps, r.ratio
        );
    }
    Ok(())
}

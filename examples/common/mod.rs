//! What every example shares: fresh random inputs (seeded, reproducible with
//! `TLX_SEED`), poisoned outputs, relative-error checks against a CPU
//! reference, and the PASS/FAIL line.

// Each example compiles this module on its own and uses only part of it.
#![allow(dead_code)]

use std::time::{SystemTime, UNIX_EPOCH};

#[cfg(feature = "ops")]
pub mod attention;

/// How big an example's problem is: full size for a GPU, smaller for the
/// CPU interpreter (CI runs every example there).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Size {
    Gpu,
    Interpreter,
}

impl Size {
    /// The device's size; `TLX_EXAMPLE_SIZE=small` picks the interpreter's
    /// problems on a GPU too, for tools that run kernels hundreds of times
    /// slower (compute-sanitizer's racecheck), and `full` the GPU's.
    pub fn for_device(device: &tlx::Device) -> Size {
        let native = if device.is_gpu() {
            Size::Gpu
        } else {
            Size::Interpreter
        };
        match std::env::var("TLX_EXAMPLE_SIZE").as_deref() {
            Err(_) => native,
            Ok("small") => Size::Interpreter,
            Ok("full") => Size::Gpu,
            Ok(other) => {
                eprintln!("TLX_EXAMPLE_SIZE={other:?} is neither `small` nor `full`: using the device's size");
                native
            }
        }
    }
}

/// The device an sm_100a-only example runs on: this one if it is a
/// Blackwell GPU (or the interpreter), else the interpreter, saying why.
pub fn blackwell_or_interpreter(device: &tlx::Device, example: &str) -> tlx::Device {
    match device.compute_capability() {
        Some((major, _)) if major != 10 => {
            println!(
                "{example}: {} is not a Blackwell GPU (sm_100a); running on the CPU \
                 interpreter instead",
                device.name()
            );
            tlx::Device::cpu()
        }
        _ => device.clone(),
    }
}

/// SplitMix64: small, fast and good enough for test inputs.
pub struct Rng(u64);

impl Rng {
    /// Seeded from `TLX_SEED` when set, else from the clock; prints the seed.
    pub fn fresh(example: &str) -> Rng {
        let seed = std::env::var("TLX_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(0x5eed)
            });
        println!("{example}: seed {seed} (set TLX_SEED={seed} to reproduce)");
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [lo, hi).
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let unit = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * unit
    }

    pub fn uniform_vec(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }

    /// Approximately standard normal (sum of uniforms), never exactly zero-filled.
    pub fn normal_vec(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| (0..4).map(|_| self.uniform(-1.0, 1.0)).sum::<f32>() * 0.866)
            .collect()
    }
}

/// The largest relative error of `got` against `want` (f64 reference), with
/// `floor` keeping near-zero references from dominating. NaN anywhere is infinite error.
pub fn max_rel_error(got: &[f32], want: &[f64], floor: f64) -> f64 {
    assert_eq!(got.len(), want.len(), "length mismatch");
    got.iter()
        .zip(want)
        .map(|(&g, &w)| {
            let g = g as f64;
            if g.is_nan() || w.is_nan() {
                return f64::INFINITY;
            }
            (g - w).abs() / w.abs().max(floor)
        })
        .fold(0.0, f64::max)
}

/// What an example's `run` returns: `Err` on a failed check or a device error.
pub type Outcome = Result<(), Box<dyn std::error::Error>>;

/// Prints the verdict line and turns it into a result.
pub fn verdict(example: &str, what: &str, error: f64, tolerance: f64) -> Outcome {
    if error <= tolerance {
        println!(
            "PASS {example}: {what} max relative error {error:.2e} (tolerance {tolerance:.0e})"
        );
        Ok(())
    } else {
        println!("FAIL {example}: {what} max relative error {error:.2e} exceeds {tolerance:.0e}");
        Err(
            format!("{example}: {what} max relative error {error:.2e} exceeds {tolerance:.0e}")
                .into(),
        )
    }
}

/// The usual `main`: a device (GPU or interpreter), the example, an exit code.
pub fn main_with(example: &str, run: fn(&tlx::Device) -> Outcome) -> std::process::ExitCode {
    let device = tlx::Device::new();
    println!("{example}: running on {}", device.name());
    match run(&device) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("FAIL {example}: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// `A @ B` in f64 for an `[m, k]` A and a `[k, n]` B read through `a(i, p)`
/// and `b(p, j)`: the reference every matmul example checks against.
pub fn matmul_f64(
    (m, n, k): (usize, usize, usize),
    a: impl Fn(usize, usize) -> f64,
    b: impl Fn(usize, usize) -> f64,
) -> Vec<f64> {
    let mut c = vec![0.0f64; m * n];
    for i in 0..m {
        for p in 0..k {
            let av = a(i, p);
            for j in 0..n {
                c[i * n + j] += av * b(p, j);
            }
        }
    }
    c
}

/// A row-major bf16 GEMM `C = A @ B` on a device, as the Hopper examples
/// expose theirs.
pub type Bf16Gemm = fn(
    &tlx::Device,
    &tlx::Buffer<tlx::half::bf16>,
    &tlx::Buffer<tlx::half::bf16>,
    &tlx::Buffer<tlx::half::bf16>,
    (usize, usize, usize),
) -> Result<(), tlx::Error>;

/// Checks each of `gemms` (labelled) on fresh `[m, k]` and `[k, n]` inputs
/// in [-1, 1) against the f64 reference, C poisoned with NaN first; bf16
/// output, so half an ulp is 2^-8 relative (floor 1.0 for sums near zero).
pub fn check_bf16_gemms(
    device: &tlx::Device,
    example: &str,
    (m, n, k): (usize, usize, usize),
    gemms: &[(&str, Bf16Gemm)],
) -> Outcome {
    use tlx::half::bf16;
    let mut rng = Rng::fresh(example);
    let mut random = |len: usize| -> Vec<bf16> {
        rng.uniform_vec(len, -1.0, 1.0)
            .into_iter()
            .map(bf16::from_f32)
            .collect()
    };
    let (a, b) = (random(m * k), random(k * n));
    let (da, db) = (device.upload(&a)?, device.upload(&b)?);
    let want = matmul_f64(
        (m, n, k),
        |i, p| a[i * k + p].to_f64(),
        |p, j| b[p * n + j].to_f64(),
    );
    for (label, gemm) in gemms {
        let dc = device.upload(&vec![bf16::NAN; m * n])?;
        gemm(device, &da, &db, &dc, (m, n, k))?;
        let got: Vec<f32> = dc.download()?.iter().map(|v| v.to_f32()).collect();
        let what = format!("{label}{m}x{n}x{k}:");
        verdict(example, &what, max_rel_error(&got, &want, 1.0), 8e-3)?;
    }
    Ok(())
}

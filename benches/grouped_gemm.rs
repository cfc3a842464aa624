//! Grouped GEMM for mixture-of-experts layers (`tlx::ops::grouped_gemm` and
//! `grouped_gemm_fp8`, issue 55) against a loop of per-expert calls (cuBLAS
//! for bf16, `tlx::ops::gemm_fp8` for fp8) and against our own dense GEMM
//! (`gemm`, `gemm_fp8`) of the same FLOPs, measured in the same process on
//! the same buffers; PyTorch's grouped kernels (`torch._grouped_mm`) are
//! timed by `scripts/torch_grouped_gemm.py` on the cases this bench writes.
//!
//! `cargo bench --bench grouped_gemm --features ops-grouped,ops-gemm`
//! (prints a table; skips without a GPU). Shapes (the issue's): DeepSeek-V3
//! (E = 256; gate+up K = 7168, N = 4096; down K = 2048, N = 7168) and
//! Qwen3-30B-A3B (E = 128; K = 2048, N = 1536; K = 768, N = 2048), 4096 and
//! 32768 tokens routed top-8, balanced (every expert the same rows) and
//! Zipf-skewed (multinomial over experts with weight 1/rank, seeded: the
//! same sizes every run); decode: the masked layout, E = 256, 1 to 64
//! tokens per expert. `TLX_BENCH_ONLY=DSV3` runs the cases whose name
//! starts with that; `TLX_GROUPED_CASES=path` writes the cases (sizes
//! included) as JSON for the PyTorch script. Inputs are random on the
//! device; outputs are poisoned (NaN) before the first run and compared
//! with cuBLAS's on four groups (first, largest, smallest, last non-empty).
//! Timing as every bench here (`timing`: 25 ms warm-up, 200 ms of runs).

mod timing;

use cudarc::cublas::{sys::cublasOperation_t, CudaBlas, Gemm, GemmConfig};
use half::bf16;
use timing::median_ms;
use tlx::ops::GroupedKernel;
use tlx::prelude::*;

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

/// `x[i]` uniform in `[-1, 1)` from Philox (`seed`, `i`), or `value` where
/// `seed < 0`: inputs and poison made on the device (tens of GB would take
/// minutes from the host).
#[tlx::kernel(configs = [(BLOCK = 1024, num_warps = 4)])]
fn fill<const BLOCK: usize>(x: Ptr<bf16>, n: i32, seed: i32, value: f32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let random = rand(seed, offs) * 2.0 - 1.0;
    let v = select(seed < 0, full([BLOCK], value, f32), random);
    store(x + offs, v.to(bf16), mask = offs < n);
}

/// `x[i]` uniform in `[-4, 4)` as e4m3 (Philox), as [`fill`] does for bf16.
#[tlx::kernel(configs = [(BLOCK = 1024, num_warps = 4)])]
fn fill_fp8<const BLOCK: usize>(x: Ptr<f8e4m3>, n: i32, seed: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(
        x + offs,
        ((rand(seed, offs) * 2.0 - 1.0) * 4.0).to(f8e4m3),
        mask = offs < n,
    );
}

/// Fills `x` chunk by chunk (each within the kernel's 32-bit indexing).
fn fill_buffer(dev: &Device, x: &Buffer<bf16>, seed: i32, value: f32) -> BenchResult<()> {
    for_chunks(x, seed, |view, seed| {
        let len = view.len();
        fill::<1024>::launch(
            dev,
            len.div_ceil(1024) as u32,
            view,
            len as i32,
            seed,
            value,
        )
    })
}

fn fill_fp8_buffer(dev: &Device, x: &Buffer<F8E4M3>, seed: i32) -> BenchResult<()> {
    for_chunks(x, seed, |view, seed| {
        let len = view.len();
        fill_fp8::<1024>::launch(dev, len.div_ceil(1024) as u32, view, len as i32, seed)
    })
}

/// `f` on each chunk of at most 2^30 elements, with a seed per chunk
/// (negative seeds kept: they mean a constant).
fn for_chunks<T: tlx::Element>(
    x: &Buffer<T>,
    seed: i32,
    mut f: impl FnMut(&tlx::BufferView<'_, T>, i32) -> Result<(), Error>,
) -> BenchResult<()> {
    const CHUNK: usize = 1 << 30;
    for (i, start) in (0..x.len()).step_by(CHUNK).enumerate() {
        let view = x.slice(start..(start + CHUNK).min(x.len()))?;
        f(&view, if seed < 0 { seed } else { seed + i as i32 })?;
    }
    Ok(())
}

/// SplitMix64, seeded: the group sizes are the same in every run (and in
/// the PyTorch script, which reads them from this bench's JSON).
struct Rng(u64);

impl Rng {
    fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// How the routed rows fall on the experts.
#[derive(Clone, Copy, PartialEq)]
enum Routing {
    Balanced,
    Zipf,
}

/// Rows per expert: `rows` split evenly, or drawn one by one with weight
/// `1 / rank` over a shuffled ranking of the experts.
fn group_sizes(rows: usize, experts: usize, routing: Routing, seed: u64) -> Vec<usize> {
    if routing == Routing::Balanced {
        return (0..experts)
            .map(|e| rows / experts + usize::from(e < rows % experts))
            .collect();
    }
    let mut rng = Rng(seed);
    let mut rank: Vec<usize> = (0..experts).collect();
    for i in (1..experts).rev() {
        rank.swap(i, (rng.next_f64() * (i + 1) as f64) as usize);
    }
    let mut cdf = Vec::with_capacity(experts);
    let mut total = 0.0;
    for r in &rank {
        total += 1.0 / (*r + 1) as f64;
        cdf.push(total);
    }
    let mut sizes = vec![0; experts];
    for _ in 0..rows {
        let u = rng.next_f64() * total;
        sizes[cdf.partition_point(|c| *c <= u).min(experts - 1)] += 1;
    }
    sizes
}

/// One benchmark case.
struct Case {
    name: String,
    k: usize,
    n: usize,
    sizes: Vec<usize>,
    /// `Some(m_max)`: the masked layout, `[experts, m_max, k]`.
    m_max: Option<usize>,
}

impl Case {
    fn rows(&self) -> usize {
        self.sizes.iter().sum()
    }

    /// TFLOP/s of one run taking `ms` (the routed rows' FLOPs).
    fn tflops(&self, ms: f64) -> f64 {
        2.0 * (self.rows() * self.n * self.k) as f64 / (ms * 1e-3) / 1e12
    }

    /// Contiguous with every expert the same rows: comparable with one
    /// dense GEMM of the same FLOPs.
    fn balanced(&self) -> bool {
        self.m_max.is_none() && self.sizes.iter().all(|s| *s == self.sizes[0])
    }

    /// The sizes as the ops read them on the device: the counts (masked)
    /// or the `experts + 1` row offsets (contiguous).
    fn device_table(&self) -> Vec<i32> {
        match self.m_max {
            Some(_) => self.sizes.iter().map(|s| *s as i32).collect(),
            None => std::iter::once(0)
                .chain(
                    self.starts()
                        .iter()
                        .zip(&self.sizes)
                        .map(|(s, r)| (s + r) as i32),
                )
                .collect(),
        }
    }

    /// Where each group's rows start in A and C.
    fn starts(&self) -> Vec<usize> {
        match self.m_max {
            Some(m_max) => (0..self.sizes.len()).map(|e| e * m_max).collect(),
            None => self
                .sizes
                .iter()
                .scan(0, |at, s| {
                    let start = *at;
                    *at += s;
                    Some(start)
                })
                .collect(),
        }
    }

    /// A's and C's rows: every routed row, or every expert's `m_max`.
    fn stored_rows(&self) -> usize {
        self.m_max
            .map_or(self.rows(), |m_max| m_max * self.sizes.len())
    }

    fn json(&self) -> String {
        let sizes: Vec<String> = self.sizes.iter().map(usize::to_string).collect();
        format!(
            "{{\"name\": \"{}\", \"k\": {}, \"n\": {}, \"m_max\": {}, \"sizes\": [{}]}}",
            self.name,
            self.k,
            self.n,
            self.m_max.map_or("null".into(), |m| m.to_string()),
            sizes.join(", ")
        )
    }
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    let models = [
        ("DSV3-gate", 256, 7168, 4096),
        ("DSV3-down", 256, 2048, 7168),
        ("Qwen3-up", 128, 2048, 1536),
        ("Qwen3-down", 128, 768, 2048),
    ];
    for (model, experts, k, n) in models {
        for tokens in [4096, 32768] {
            for (routing, label) in [(Routing::Balanced, "bal"), (Routing::Zipf, "zipf")] {
                cases.push(Case {
                    name: format!("{model} {tokens}x8 {label}"),
                    k,
                    n,
                    sizes: group_sizes(tokens * 8, experts, routing, 0x9e0 + tokens as u64),
                    m_max: None,
                });
            }
        }
    }
    let mut rng = Rng(0xdec0de);
    for (model, k, n) in [("DSV3-gate", 7168, 4096), ("DSV3-down", 2048, 7168)] {
        cases.push(Case {
            name: format!("{model} decode"),
            k,
            n,
            sizes: (0..256)
                .map(|_| 1 + (rng.next_f64() * 64.0) as usize)
                .collect(),
            m_max: Some(64),
        });
    }
    cases
}

/// One case in one element type, in TFLOP/s.
struct Row {
    name: String,
    dtype: &'static str,
    /// bf16: the per-tile and persistent kernels alone; fp8: the kernel of
    /// 128-block scales; in TFLOP/s.
    kernels: String,
    rows: usize,
    ours: f64,
    /// A loop of one call per expert: cuBLAS (bf16) or `tlx::ops::gemm_fp8`.
    per_expert: f64,
    /// Our dense GEMM over the same rows (balanced contiguous cases).
    dense: Option<f64>,
    error: f64,
}

/// `C[rows] = A[rows] @ B_e` by cuBLAS for one expert (row-major, as
/// column-major `C^T = B^T A^T`).
fn cublas_group(
    blas: &CudaBlas,
    (a, b, c): (&Buffer<bf16>, &Buffer<bf16>, &mut Buffer<bf16>),
    (e, start, rows): (usize, usize, usize),
    (n, k): (usize, usize),
) -> Result<(), cudarc::cublas::result::CublasError> {
    let cfg = GemmConfig {
        transa: cublasOperation_t::CUBLAS_OP_N,
        transb: cublasOperation_t::CUBLAS_OP_N,
        m: n as i32,
        n: rows as i32,
        k: k as i32,
        alpha: bf16::ONE,
        lda: n as i32,
        ldb: k as i32,
        beta: bf16::ZERO,
        ldc: n as i32,
    };
    let (Ok(sa), Ok(sb), Ok(sc)) = (a.cuda_slice(), b.cuda_slice(), c.cuda_slice_mut()) else {
        return Ok(());
    };
    let sb = sb.slice(e * k * n..(e + 1) * k * n);
    let sa = sa.slice(start * k..(start + rows) * k);
    let mut sc = sc.slice_mut(start * n..(start + rows) * n);
    // SAFETY: the views hold exactly k*n, rows*k and rows*n elements, as the
    // configuration's dimensions and leading dimensions describe.
    unsafe { blas.gemm(cfg, &sb, &sa, &mut sc) }
}

/// Largest difference between ours and the per-expert loop's rows of four
/// groups, relative to the root mean square of the loop's.
fn compare(case: &Case, ours: &Buffer<bf16>, theirs: &Buffer<bf16>) -> BenchResult<f64> {
    let starts = case.starts();
    let nonempty: Vec<usize> = (0..case.sizes.len())
        .filter(|e| case.sizes[*e] > 0)
        .collect();
    let (Some(&first), Some(&last)) = (nonempty.first(), nonempty.last()) else {
        return Ok(0.0);
    };
    let largest = nonempty
        .iter()
        .copied()
        .max_by_key(|e| case.sizes[*e])
        .unwrap_or(first);
    let smallest = nonempty
        .iter()
        .copied()
        .min_by_key(|e| case.sizes[*e])
        .unwrap_or(first);
    let (mut worst, mut square, mut count) = (0.0f64, 0.0f64, 0usize);
    let mut diffs = Vec::new();
    for e in [first, largest, smallest, last] {
        let range = starts[e] * case.n..(starts[e] + case.sizes[e]) * case.n;
        let got = ours.slice(range.clone())?.download()?;
        let want = theirs.slice(range)?.download()?;
        for (g, w) in got.iter().zip(&want) {
            let (g, w) = (f64::from(g.to_f32()), f64::from(w.to_f32()));
            diffs.push(if g.is_nan() {
                f64::INFINITY
            } else {
                (g - w).abs()
            });
            square += w * w;
            count += 1;
        }
    }
    let rms = (square / count.max(1) as f64).sqrt().max(1e-30);
    for d in diffs {
        worst = worst.max(d / rms);
    }
    Ok(worst)
}

fn run_bf16(dev: &Device, blas: &CudaBlas, case: &Case, seed: i32) -> BenchResult<Row> {
    let (k, n, experts) = (case.k, case.n, case.sizes.len());
    let stored = case.stored_rows();
    let a = dev.alloc::<bf16>(stored * k)?;
    let b = dev.alloc::<bf16>(experts * k * n)?;
    let c = dev.alloc::<bf16>(stored * n)?;
    let mut reference = dev.alloc::<bf16>(stored * n)?;
    fill_buffer(dev, &a, seed, 0.0)?;
    fill_buffer(dev, &b, seed + 1000, 0.0)?;
    fill_buffer(dev, &c, -1, f32::NAN)?;
    let starts = case.starts();
    let tflops = |ms: f64| case.tflops(ms);

    // The device tables are uploaded once, outside the timed runs.
    let table = dev.upload(&case.device_table())?;
    let run = |kernel: GroupedKernel| match case.m_max {
        Some(m_max) => {
            let shape = (m_max, n, k, experts);
            tlx::ops::grouped_gemm_masked_with(dev, (&a, &b, &c), &table, shape, kernel)
        }
        None => {
            let shape = (stored, n, k, experts);
            tlx::ops::grouped_gemm_with(dev, (&a, &b, &c), &table, shape, kernel)
        }
    };
    run(GroupedKernel::Auto)?;

    let mut blas_error = None;
    let mut cublas_loop = |c: &mut Buffer<bf16>| -> Result<(), Error> {
        for (e, (&start, &rows)) in starts.iter().zip(&case.sizes).enumerate() {
            if rows == 0 {
                continue;
            }
            if let Err(err) = cublas_group(blas, (&a, &b, c), (e, start, rows), (n, k)) {
                blas_error = Some(err);
            }
        }
        Ok(())
    };
    cublas_loop(&mut reference)?;
    let error = compare(case, &c, &reference)?;
    let cublas_ms = median_ms(dev, || cublas_loop(&mut reference))?;
    if let Some(e) = blas_error {
        return Err(format!("cuBLAS failed on {}: {e}", case.name).into());
    }
    let ours_ms = median_ms(dev, || run(GroupedKernel::Auto))?;
    // Each kernel alone, its output checked too (poisoned before its runs).
    let mut kernels = Vec::new();
    let mut error = error;
    for kernel in [GroupedKernel::PerTile, GroupedKernel::Persistent] {
        fill_buffer(dev, &c, -1, f32::NAN)?;
        kernels.push(format!("{:.0}", tflops(median_ms(dev, || run(kernel))?)));
        error = error.max(compare(case, &c, &reference)?);
    }
    // The same FLOPs as one dense GEMM: every row against expert 0's B.
    let dense = if case.balanced() {
        let rows = case.rows();
        let b0 = b.slice(0..k * n)?;
        let ms = median_ms(dev, || tlx::ops::gemm(dev, &a, &b0, &c, (rows, n, k)))?;
        Some(tflops(ms))
    } else {
        None
    };
    Ok(Row {
        name: case.name.clone(),
        dtype: "bf16",
        kernels: kernels.join(" / "),
        rows: case.rows(),
        ours: tflops(ours_ms),
        per_expert: tflops(cublas_ms),
        dense,
        error,
    })
}

/// The fp8 form: e4m3 in (B transposed, `[experts, n, k]`), bf16 out,
/// rowwise scales of 1 (their values cost nothing), against a loop of
/// `tlx::ops::gemm_fp8` per expert and, balanced, one dense `gemm_fp8`.
fn run_fp8(dev: &Device, case: &Case, seed: i32) -> BenchResult<Row> {
    let (k, n, experts) = (case.k, case.n, case.sizes.len());
    let stored = case.stored_rows();
    let a = dev.alloc::<F8E4M3>(stored * k)?;
    let b_t = dev.alloc::<F8E4M3>(experts * n * k)?;
    let c = dev.alloc::<bf16>(stored * n)?;
    let reference = dev.alloc::<bf16>(stored * n)?;
    fill_fp8_buffer(dev, &a, seed)?;
    fill_fp8_buffer(dev, &b_t, seed + 1000)?;
    fill_buffer(dev, &c, -1, f32::NAN)?;
    let sa = dev.upload(&vec![1.0f32; stored])?;
    let sb = dev.upload(&vec![1.0f32; experts * n])?;
    let starts = case.starts();
    let tflops = |ms: f64| case.tflops(ms);
    let table = dev.upload(&case.device_table())?;
    let ours = || match case.m_max {
        Some(m_max) => tlx::ops::grouped_gemm_fp8_masked(
            dev,
            (&a, &sa),
            (&b_t, &sb),
            &c,
            &table,
            (m_max, n, k, experts),
        ),
        None => {
            let shape = (stored, n, k, experts);
            tlx::ops::grouped_gemm_fp8(dev, (&a, &sa), (&b_t, &sb), &c, &table, shape)
        }
    };
    ours()?;
    let per_expert = || -> Result<(), Error> {
        for (e, (&start, &rows)) in starts.iter().zip(&case.sizes).enumerate() {
            if rows == 0 {
                continue;
            }
            let a_e = a.slice(start * k..(start + rows) * k)?;
            let b_e = b_t.slice(e * n * k..(e + 1) * n * k)?;
            let c_e = reference.slice(start * n..(start + rows) * n)?;
            tlx::ops::gemm_fp8(dev, &a_e, &b_e, &c_e, (rows, n, k), 1.0)?;
        }
        Ok(())
    };
    per_expert()?;
    let error = compare(case, &c, &reference)?;
    let loop_ms = median_ms(dev, per_expert)?;
    let ours_ms = median_ms(dev, ours)?;
    // DeepGEMM's 128-block scales (ones too), timed beside the rowwise.
    let k_blocks = k / 128;
    let sa_blocks = dev.upload(&vec![1.0f32; stored * k_blocks])?;
    let sb_blocks = dev.upload(&vec![1.0f32; experts * n.div_ceil(128) * k_blocks])?;
    let blockwise = || {
        let (a, b) = ((&a, &sa_blocks), (&b_t, &sb_blocks));
        let scales = tlx::ops::Fp8Scales::Blockwise;
        match case.m_max {
            Some(m_max) => {
                let shape = (m_max, n, k, experts);
                tlx::ops::grouped_gemm_fp8_masked_with(dev, a, b, &c, &table, shape, scales)
            }
            None => {
                let shape = (stored, n, k, experts);
                tlx::ops::grouped_gemm_fp8_with(dev, a, b, &c, &table, shape, scales)
            }
        }
    };
    fill_buffer(dev, &c, -1, f32::NAN)?;
    let blockwise_ms = median_ms(dev, blockwise)?;
    // With unit scales the blockwise output is the rowwise one.
    let error = error.max(compare(case, &c, &reference)?);
    let dense = if case.balanced() {
        let rows = case.rows();
        let b0 = b_t.slice(0..n * k)?;
        let ms = median_ms(dev, || {
            tlx::ops::gemm_fp8(dev, &a, &b0, &c, (rows, n, k), 1.0)
        })?;
        Some(tflops(ms))
    } else {
        None
    };
    Ok(Row {
        name: case.name.clone(),
        dtype: "fp8",
        kernels: format!("blockwise {:.0}", tflops(blockwise_ms)),
        rows: case.rows(),
        ours: tflops(ours_ms),
        per_expert: tflops(loop_ms),
        dense,
        error,
    })
}

fn main() -> BenchResult<()> {
    let dev = match Device::cuda(0) {
        Ok(d) => d,
        Err(e) => {
            println!("skipped: the grouped GEMM benchmark needs a GPU ({e})");
            return Ok(());
        }
    };
    println!("device: {}", dev.name());
    let blas = CudaBlas::new(dev.cuda_stream()?.clone())?;
    let only = std::env::var("TLX_BENCH_ONLY").unwrap_or_default();
    let cases: Vec<Case> = cases()
        .into_iter()
        .filter(|c| c.name.starts_with(&only))
        .collect();
    if let Ok(path) = std::env::var("TLX_GROUPED_CASES") {
        let body: Vec<String> = cases.iter().map(Case::json).collect();
        std::fs::write(&path, format!("[\n{}\n]\n", body.join(",\n")))?;
        println!("cases written to {path}");
    }
    let mut rows = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let seed = 17 * i as i32;
        for row in [
            run_bf16(&dev, &blas, case, seed)?,
            run_fp8(&dev, case, seed)?,
        ] {
            println!(
                "  {} {}: ours {:.0} TFLOP/s, per-expert loop {:.0}, max diff {:.1e} of rms",
                row.name, row.dtype, row.ours, row.per_expert, row.error
            );
            rows.push(row);
        }
    }
    println!();
    println!("per-expert loop: cuBLAS (bf16) or tlx::ops::gemm_fp8 (fp8), one call per non-empty expert; dense: tlx::ops::gemm / gemm_fp8 over all rows (balanced cases)");
    println!("| case | dtype | rows | tlx grouped TFLOP/s | bf16: per-tile / persistent; fp8: blockwise | per-expert loop | ratio | tlx dense, same FLOPs | grouped / dense | max diff / rms |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for r in &rows {
        let (dense, vs_dense) = match r.dense {
            Some(d) => (format!("{d:.0}"), format!("{:.2}x", r.ours / d)),
            None => ("-".into(), "-".into()),
        };
        println!(
            "| {} | {} | {} | {:.0} | {} | {:.0} | {:.2}x | {} | {} | {:.1e} |",
            r.name,
            r.dtype,
            r.rows,
            r.ours,
            r.kernels,
            r.per_expert,
            r.ours / r.per_expert,
            dense,
            vs_dense,
            r.error
        );
    }
    Ok(())
}

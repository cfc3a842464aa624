//! Memory-bound kernels against the device-to-device copy bandwidth measured
//! in the same run: vector_add, softmax and layernorm (issue 2's targets).
//!
//! `cargo bench --bench bandwidth` (prints a table; skips without a GPU).
//! Bytes counted are the minimum each kernel must move (inputs read once,
//! outputs written once), as the copy's read+write bytes are. Each run
//! starts with a cold, clean L2 (see `Timer`; `TLX_BENCH_FLUSH=dirty` flushes
//! by writing, as `triton.testing.do_bench` does).
//! `TLX_BENCH_ONLY=<start of a row name>` runs only those rows, e.g. under ncu.

use tlx::prelude::*;

#[tlx::kernel(num_warps = 4, configs = [(BLOCK = 1024), (BLOCK = 4096, num_warps = 8)])]
fn vector_add<const BLOCK: usize>(x: Ptr<f32>, y: Ptr<f32>, out: Ptr<f32>, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    let a = load(x + offs, mask = mask, other = 0.0);
    let b = load(y + offs, mask = mask, other = 0.0);
    store(out + offs, a + b, mask = mask);
}

/// Reads a buffer and writes one value per program: leaves L2 full of clean
/// lines of the buffer, so that the next kernel meets a cold but clean L2.
#[tlx::kernel(num_warps = 8, configs = [(BLOCK = 8192)])]
fn read_flush<const BLOCK: usize>(src: Ptr<f32>, sink: Ptr<f32>) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let v = load(src + offs);
    store(sink + program_id(0), sum(v, axis = 0));
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

/// The LayerNorm of examples/layernorm.rs (without the mean/rstd outputs):
/// one program per row, the row streamed in blocks twice, L2 asked to keep it
/// between the passes. `NW` and `NS` only select the warp and stage counts
/// (`num_stages = 3` prefetches through shared memory; see BENCHMARKS.md).
#[tlx::kernel(configs = [
    (BLOCK = 4096, NW = 8, NS = 1, num_warps = 8),
    (BLOCK = 4096, NW = 8, NS = 3, num_warps = 8, num_stages = 3),
    (BLOCK = 4096, NW = 16, NS = 1, num_warps = 16),
])]
fn layernorm<const BLOCK: usize, const NW: usize, const NS: usize>(
    x: Ptr<bf16>,
    y: Ptr<bf16>,
    weight: Ptr<bf16>,
    bias: Ptr<bf16>,
    stride: i32,
    n: i32,
    eps: f32,
) {
    // Rows start 16-byte aligned (the bench's widths are multiples of 8):
    // the vector accesses need no run-time alignment test.
    let (x, y) = (multiple_of(x, 16), multiple_of(y, 16));
    let (weight, bias) = (multiple_of(weight, 16), multiple_of(bias, 16));
    let stride = multiple_of(stride, 8);
    // Whole vectors are in or out of the row: the masks need no run-time test.
    let n = multiple_of(n, 8);
    let row = program_id(0);
    let x_row = x + row * stride;
    let y_row = y + row * stride;
    let shift = load(x_row).to(f32);
    let mut sum1 = zeros([BLOCK], f32);
    let mut sum2 = zeros([BLOCK], f32);
    for off in (0..n).step_by(BLOCK) {
        let cols = off + arange(0, BLOCK);
        let mask = cols < n;
        let v = load(x_row + cols, mask = mask, eviction_policy = "evict_last").to(f32);
        let v = select(mask, v - shift, 0.0);
        sum1 += v;
        sum2 += v * v;
    }
    let count = n.to(f32);
    let mean_shifted = sum(sum1, axis = 0) / count;
    let var = sum(sum2, axis = 0) / count - mean_shifted * mean_shifted;
    let mean = mean_shifted + shift;
    let rstd = rsqrt(maximum(var, 0.0) + eps);
    let blocks = cdiv(n, BLOCK);
    for i in 0..blocks {
        let cols = (blocks - 1 - i) * BLOCK + arange(0, BLOCK);
        let mask = cols < n;
        let w = load(weight + cols, mask = mask, eviction_policy = "evict_last").to(f32);
        let b = load(bias + cols, mask = mask, eviction_policy = "evict_last").to(f32);
        let v = load(x_row + cols, mask = mask, eviction_policy = "evict_first").to(f32);
        store(
            y_row + cols,
            ((v - mean) * rstd * w + b).to(bf16),
            mask = mask,
            cache_modifier = ".cs",
        );
    }
}

/// Streaming LayerNorm two blocks per iteration, twice the loads in flight;
/// the second pass runs backwards. `n` must be a multiple of `2 * BLOCK`.
#[tlx::kernel(configs = [
    (BLOCK = 2048, NW = 8, num_warps = 8),
    (BLOCK = 4096, NW = 16, num_warps = 16),
])]
fn layernorm_x2<const BLOCK: usize, const NW: usize>(
    x: Ptr<bf16>,
    y: Ptr<bf16>,
    weight: Ptr<bf16>,
    bias: Ptr<bf16>,
    stride: i32,
    n: i32,
    eps: f32,
) {
    // Rows start 16-byte aligned (the bench's widths are multiples of 8):
    // the vector accesses need no run-time alignment test.
    let (x, y) = (multiple_of(x, 16), multiple_of(y, 16));
    let (weight, bias) = (multiple_of(weight, 16), multiple_of(bias, 16));
    let stride = multiple_of(stride, 8);
    let row = program_id(0);
    let x_row = x + row * stride;
    let y_row = y + row * stride;
    let shift = load(x_row).to(f32);
    let mut sum1 = zeros([BLOCK], f32);
    let mut sum2 = zeros([BLOCK], f32);
    for off in (0..n).step_by(2 * BLOCK) {
        let cols = off + arange(0, BLOCK);
        let a = load(x_row + cols, eviction_policy = "evict_last");
        let b = load(x_row + cols + BLOCK, eviction_policy = "evict_last");
        let a = a.to(f32) - shift;
        let b = b.to(f32) - shift;
        sum1 += a + b;
        sum2 += a * a + b * b;
    }
    let count = n.to(f32);
    let mean_shifted = sum(sum1, axis = 0) / count;
    let var = sum(sum2, axis = 0) / count - mean_shifted * mean_shifted;
    let mean = mean_shifted + shift;
    let rstd = rsqrt(maximum(var, 0.0) + eps);
    let pairs = n / (2 * BLOCK);
    for i in 0..pairs {
        let cols = (pairs - 1 - i) * (2 * BLOCK) + arange(0, BLOCK);
        let v0 = load(x_row + cols + BLOCK, eviction_policy = "evict_first");
        let v1 = load(x_row + cols, eviction_policy = "evict_first");
        let w0 = load(weight + cols + BLOCK, eviction_policy = "evict_last").to(f32);
        let b0 = load(bias + cols + BLOCK, eviction_policy = "evict_last").to(f32);
        let w1 = load(weight + cols, eviction_policy = "evict_last").to(f32);
        let b1 = load(bias + cols, eviction_policy = "evict_last").to(f32);
        store(
            y_row + cols + BLOCK,
            ((v0.to(f32) - mean) * rstd * w0 + b0).to(bf16),
            cache_modifier = ".cs",
        );
        store(
            y_row + cols,
            ((v1.to(f32) - mean) * rstd * w1 + b1).to(bf16),
            cache_modifier = ".cs",
        );
    }
}

/// Two-pass LayerNorm with each row split over a cluster of `K` programs:
/// every program streams its slice of `n / K` columns for the partial sums,
/// the programs exchange them through `partial` at one `cluster_barrier()`,
/// and the second pass (backwards, most recently read first) finds the slice
/// in L2. A slice is small enough that the slices of every resident program
/// fit in L2 together, which whole rows of 64K+ columns do not.
#[tlx::kernel(configs = [
    (BLOCK = 2048, K = 4, NW = 8, num_warps = NW, ctas_per_cga = K),
    (BLOCK = 2048, K = 8, NW = 8, num_warps = NW, ctas_per_cga = K),
    (BLOCK = 2048, K = 16, NW = 8, num_warps = NW, ctas_per_cga = K),
])]
fn layernorm_cluster_x2<const BLOCK: usize, const K: usize, const NW: usize>(
    x: Ptr<bf16>,
    y: Ptr<bf16>,
    weight: Ptr<bf16>,
    bias: Ptr<bf16>,
    partial: Ptr<f32>,
    stride: i32,
    n: i32,
    eps: f32,
) {
    let (x, y) = (multiple_of(x, 16), multiple_of(y, 16));
    let (weight, bias) = (multiple_of(weight, 16), multiple_of(bias, 16));
    let stride = multiple_of(stride, 8);
    let row = program_id(0) / K;
    let x_row = x + row * stride;
    let y_row = y + row * stride;
    let slice = multiple_of(n / K, 8);
    let start = cluster_cta_rank() * slice;
    let shift = load(x_row).to(f32);
    let mut sum1 = zeros([BLOCK], f32);
    let mut sum2 = zeros([BLOCK], f32);
    for off in (start..start + slice).step_by(2 * BLOCK) {
        let cols = off + arange(0, BLOCK);
        let a = load(x_row + cols, eviction_policy = "evict_last").to(f32) - shift;
        let b = load(x_row + cols + BLOCK, eviction_policy = "evict_last").to(f32) - shift;
        sum1 += a + b;
        sum2 += a * a + b * b;
    }
    let slot = partial + 2 * program_id(0);
    store(slot, sum(sum1, axis = 0));
    store(slot + 1, sum(sum2, axis = 0));
    cluster_barrier();
    let peers = partial + 2 * (row * K + arange(0, K));
    let count = n.to(f32);
    let mean_shifted = sum(load(peers), axis = 0) / count;
    let var = sum(load(peers + 1), axis = 0) / count - mean_shifted * mean_shifted;
    let mean = mean_shifted + shift;
    let rstd = rsqrt(maximum(var, 0.0) + eps);
    let pairs = slice / (2 * BLOCK);
    for i in 0..pairs {
        let cols = start + (pairs - 1 - i) * (2 * BLOCK) + arange(0, BLOCK);
        let v0 = load(x_row + cols + BLOCK, eviction_policy = "evict_first");
        let v1 = load(x_row + cols, eviction_policy = "evict_first");
        let w0 = load(weight + cols + BLOCK, eviction_policy = "evict_last").to(f32);
        let b0 = load(bias + cols + BLOCK, eviction_policy = "evict_last").to(f32);
        let w1 = load(weight + cols, eviction_policy = "evict_last").to(f32);
        let b1 = load(bias + cols, eviction_policy = "evict_last").to(f32);
        store(
            y_row + cols + BLOCK,
            ((v0.to(f32) - mean) * rstd * w0 + b0).to(bf16),
            cache_modifier = ".cs",
        );
        store(
            y_row + cols,
            ((v1.to(f32) - mean) * rstd * w1 + b1).to(bf16),
            cache_modifier = ".cs",
        );
    }
}

/// LayerNorm with each row split over a cluster of `K` programs, every
/// program's slice held in registers, so x is read once: the programs
/// publish their partial sums to `partial` (two floats each) and meet at one
/// `cluster_barrier()` before normalizing. `n` must be `SLICE * K` (no masks:
/// a masked tile keeps a run-time uniformity test and its fallback path).
/// The slice is converted to f32 again after the barrier, so only its packed
/// bf16 words stay live across it (half the registers). `maxnreg` lets
/// ptxas use 128 registers where one program per 16384 columns leaves room
/// (two programs per SM either way), and caps the 16384-column slices of a
/// cluster of 8 at 80, three programs per SM.
#[tlx::kernel(configs = [
    (SLICE = 16384, K = 1, NW = 8, num_warps = NW, maxnreg = 128),
    (SLICE = 8192, K = 2, NW = 4, num_warps = NW, ctas_per_cga = K),
    (SLICE = 8192, K = 4, NW = 4, num_warps = NW, ctas_per_cga = K),
    (SLICE = 8192, K = 8, NW = 4, num_warps = NW, ctas_per_cga = K),
    (SLICE = 16384, K = 8, NW = 8, num_warps = NW, ctas_per_cga = K, maxnreg = 80),
    (SLICE = 8192, K = 16, NW = 4, num_warps = NW, ctas_per_cga = K),
])]
fn layernorm_cluster<const SLICE: usize, const K: usize, const NW: usize>(
    x: Ptr<bf16>,
    y: Ptr<bf16>,
    weight: Ptr<bf16>,
    bias: Ptr<bf16>,
    partial: Ptr<f32>,
    stride: i32,
    n: i32,
    eps: f32,
) {
    // Rows start 16-byte aligned (the bench's widths are multiples of 8):
    // the vector accesses need no run-time alignment test.
    let (x, y) = (multiple_of(x, 16), multiple_of(y, 16));
    let (weight, bias) = (multiple_of(weight, 16), multiple_of(bias, 16));
    let stride = multiple_of(stride, 8);
    let row = program_id(0) / K;
    let x_row = x + row * stride;
    let cols = cluster_cta_rank() * SLICE + arange(0, SLICE);
    let shift = load(x_row).to(f32);
    let v = load(x_row + cols, eviction_policy = "evict_first");
    let d = v.to(f32) - shift;
    let slot = partial + 2 * program_id(0);
    store(slot, sum(d, axis = 0));
    store(slot + 1, sum(d * d, axis = 0));
    cluster_barrier();
    let peers = partial + 2 * (row * K + arange(0, K));
    let count = n.to(f32);
    let mean_shifted = sum(load(peers), axis = 0) / count;
    let var = sum(load(peers + 1), axis = 0) / count - mean_shifted * mean_shifted;
    let rstd = rsqrt(maximum(var, 0.0) + eps);
    let w = load(weight + cols, eviction_policy = "evict_last").to(f32);
    let b = load(bias + cols, eviction_policy = "evict_last").to(f32);
    store(
        y + row * stride + cols,
        ((v.to(f32) - (shift + mean_shifted)) * rstd * w + b).to(bf16),
        cache_modifier = ".cs",
    );
}

/// Rows 0, middle and last of a LayerNorm output against a CPU reference
/// (weight 1, bias 0), so that a fast but wrong kernel cannot enter the table.
fn check_layernorm(
    x: &[bf16],
    y: &[bf16],
    cols: usize,
    label: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let rows = x.len() / cols;
    for row in [0, rows / 2, rows - 1] {
        let span = row * cols..(row + 1) * cols;
        let v: Vec<f64> = x[span.clone()].iter().map(|e| e.to_f64()).collect();
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|e| (e - mean) * (e - mean)).sum::<f64>() / v.len() as f64;
        let rstd = 1.0 / (var + 1e-5).sqrt();
        for (i, (e, got)) in v.iter().zip(&y[span]).enumerate() {
            let want = (e - mean) * rstd;
            let error = (got.to_f64() - want).abs();
            // NaN (an unwritten, poisoned element) fails too.
            if error.is_nan() || error > 1.0 / 64.0 * want.abs().max(1.0) {
                return Err(
                    format!("{label}: row {row} column {i} is {got}, expected {want}").into(),
                );
            }
        }
    }
    Ok(())
}

/// Every LayerNorm variant on 1152 rows of `cols` bf16, each checked after
/// its timed runs on an output poisoned with NaN first.
fn layernorm_sweep(
    dev: &Device,
    timer: &mut Timer,
    cols: usize,
    copy: f64,
    rows: &mut Vec<Row>,
) -> Result<(), Box<dyn std::error::Error>> {
    let ln_rows = 1152usize;
    let host_x: Vec<bf16> = (0..ln_rows * cols)
        .map(|i| bf16::from_f32(((i * 7919) % 1000) as f32 / 500.0 - 1.0))
        .collect();
    let x = dev.upload(&host_x)?;
    let mut y = dev.alloc::<bf16>(ln_rows * cols)?;
    let poison = vec![bf16::NAN; ln_rows * cols];
    let w = dev.upload(&vec![bf16::ONE; cols])?;
    let b = dev.upload(&vec![bf16::ZERO; cols])?;
    let (g, c) = (ln_rows as u32, cols as i32);
    // Two partial sums per program of the largest cluster.
    let partial = dev.alloc::<f32>(ln_rows * 2 * 16)?;
    let (x, w, b, partial) = (&x, &w, &b, &partial);
    let bytes = 2.0 * 2.0 * (ln_rows * cols) as f64;
    let only = std::env::var("TLX_BENCH_ONLY").unwrap_or_default();
    // Each entry launches into `y`, passed in so that it can be poisoned
    // between entries.
    type Entry<'a> = (String, Box<dyn Fn(&Buffer<bf16>) -> Result<(), Error> + 'a>);
    let mut entries: Vec<Entry> = Vec::new();
    macro_rules! entry {
        ($name:expr, |$y:ident| $launch:expr) => {
            entries.push((
                $name.to_string(),
                Box::new(move |$y: &Buffer<bf16>| $launch),
            ));
        };
    }
    entry!("stream BLOCK=4096 w8 s1", |y| {
        layernorm::<4096, 8, 1>::launch(dev, g, x, y, w, b, c, c, 1e-5)
    });
    entry!("stream BLOCK=4096 w8 s3", |y| {
        layernorm::<4096, 8, 3>::launch(dev, g, x, y, w, b, c, c, 1e-5)
    });
    entry!("stream BLOCK=4096 w16 s1", |y| {
        layernorm::<4096, 16, 1>::launch(dev, g, x, y, w, b, c, c, 1e-5)
    });
    entry!("x2 BLOCK=2048 w8", |y| layernorm_x2::<2048, 8>::launch(
        dev, g, x, y, w, b, c, c, 1e-5
    ));
    entry!("x2 BLOCK=4096 w16", |y| layernorm_x2::<4096, 16>::launch(
        dev, g, x, y, w, b, c, c, 1e-5
    ));
    // Each cluster kernel runs at the widths its configuration divides.
    macro_rules! cluster_entry {
        ($kernel:ident, $label:literal, $width:expr, [$($c:literal),*], $k:literal) => {
            if $width == cols {
                let grid = g * $k;
                entry!(format!($label, $($c),*), |y| {
                    $kernel::<$($c),*>::launch(dev, grid, x, y, w, b, partial, c, c, 1e-5)
                });
            }
        };
    }
    cluster_entry!(
        layernorm_cluster,
        "cluster K={1} SLICE={0} w{2} maxnreg=128",
        16384,
        [16384, 1, 8],
        1
    );
    cluster_entry!(
        layernorm_cluster,
        "cluster K={1} SLICE={0} w{2}",
        16384,
        [8192, 2, 4],
        2
    );
    cluster_entry!(
        layernorm_cluster,
        "cluster K={1} SLICE={0} w{2}",
        32768,
        [8192, 4, 4],
        4
    );
    cluster_entry!(
        layernorm_cluster,
        "cluster K={1} SLICE={0} w{2}",
        65536,
        [8192, 8, 4],
        8
    );
    cluster_entry!(
        layernorm_cluster,
        "cluster K={1} SLICE={0} w{2} maxnreg=80",
        131072,
        [16384, 8, 8],
        8
    );
    cluster_entry!(
        layernorm_cluster,
        "cluster K={1} SLICE={0} w{2}",
        131072,
        [8192, 16, 4],
        16
    );
    cluster_entry!(
        layernorm_cluster_x2,
        "cluster x2 K={1} BLOCK={0} w{2}",
        32768,
        [2048, 4, 8],
        4
    );
    cluster_entry!(
        layernorm_cluster_x2,
        "cluster x2 K={1} BLOCK={0} w{2}",
        65536,
        [2048, 8, 8],
        8
    );
    cluster_entry!(
        layernorm_cluster_x2,
        "cluster x2 K={1} BLOCK={0} w{2}",
        131072,
        [2048, 16, 8],
        16
    );
    for (name, launch) in entries {
        let name = format!("layernorm bf16 {ln_rows}x{cols} {name}");
        if !name.starts_with(&only) {
            continue;
        }
        y.copy_from(&poison)?;
        let ms = timer.median_ms(20, || launch(&y))?;
        check_layernorm(&host_x, &y.download()?, cols, &name)?;
        let t = bytes / (ms * 1e-3) / 1e12;
        rows.push(Row {
            name,
            ms,
            tbps: t,
            ratio: t / copy,
        });
    }
    Ok(())
}

/// Times kernels with a cold L2: before each timed run the GPU reads a
/// buffer larger than L2 (`read_flush`), so none of the kernel's data is
/// cached and the host's launch overhead hides behind that work. The flush
/// only reads: a flush that writes (`TLX_BENCH_FLUSH=dirty`, what
/// `triton.testing.do_bench` and so the PyTorch anchors do) leaves L2 full of
/// dirty lines that the timed kernel must write back first, about 20 MB and 5
/// us on H100, which charges a 30 us kernel for work that is not its own.
struct Timer {
    dev: Device,
    flush_src: Buffer<u8>,
    flush_dst: Buffer<u8>,
    read_src: Buffer<f32>,
    read_sink: Buffer<f32>,
    clean: bool,
}

impl Timer {
    fn new(dev: &Device) -> Result<Timer, Error> {
        let bytes = 256 << 20;
        Ok(Timer {
            dev: dev.clone(),
            flush_src: dev.alloc_zeros::<u8>(bytes)?,
            flush_dst: dev.alloc::<u8>(bytes)?,
            read_src: dev.alloc_zeros::<f32>(bytes / 4)?,
            read_sink: dev.alloc::<f32>(bytes / 4 / 8192)?,
            clean: std::env::var("TLX_BENCH_FLUSH").as_deref() != Ok("dirty"),
        })
    }

    /// Median milliseconds of `f` over `reps` timed runs after warm-up.
    fn median_ms(
        &mut self,
        reps: usize,
        mut f: impl FnMut() -> Result<(), Error>,
    ) -> Result<f64, Error> {
        for _ in 0..3 {
            f()?;
        }
        let mut times = Vec::with_capacity(reps);
        for _ in 0..reps {
            if self.clean {
                let n = self.read_sink.len() as u32;
                read_flush::<8192>::launch(&self.dev, n, &self.read_src, &self.read_sink)?;
            } else {
                self.flush_dst.copy_from_device(&self.flush_src)?;
            }
            times.push(self.dev.time(&mut f)? as f64);
        }
        times.sort_by(f64::total_cmp);
        Ok(times[reps / 2])
    }
}

/// The three `tlx::ops` row-wise kernels on `[rows, cols]` of `T`, each run's
/// output poisoned first and its first row checked after the timing.
fn ops_rows<T: tlx::ops::RowElement + ToF64>(
    dev: &Device,
    timer: &mut Timer,
    (rows_n, cols): (usize, usize),
    copy: f64,
    rows: &mut Vec<Row>,
) -> Result<(), Box<dyn std::error::Error>> {
    let elems = rows_n * cols;
    let host: Vec<T> = (0..elems)
        .map(|i| T::from_f64(((i * 7919) % 1000) as f64 / 500.0 - 1.0))
        .collect();
    let x = dev.upload(&host)?;
    let w = dev.upload(&vec![T::from_f64(1.0); cols])?;
    let b = dev.upload(&vec![T::from_f64(0.0); cols])?;
    let poison = vec![T::from_f64(f64::NAN); elems];
    let bytes = 2.0 * std::mem::size_of::<T>() as f64 * elems as f64;
    let dtype = std::any::type_name::<T>()
        .rsplit("::")
        .next()
        .unwrap_or("?");
    let shape = (rows_n, cols);
    let run = |name: &str, y: &Buffer<T>| match name {
        "softmax" => tlx::ops::softmax(dev, &x, y, rows_n, cols),
        "rms_norm" => tlx::ops::rms_norm(dev, &x, &w, y, shape, 1e-6),
        _ => tlx::ops::layer_norm(dev, &x, (&w, &b), y, shape, 1e-5),
    };
    let mut y = dev.alloc::<T>(elems)?;
    for name in ["softmax", "rms_norm", "layer_norm"] {
        y.copy_from(&poison)?;
        let ms = timer.median_ms(20, || run(name, &y))?;
        let first: Vec<f64> = y.download()?[..cols].iter().map(|v| v.to_f64()).collect();
        let row: Vec<f64> = host[..cols].iter().map(|v| v.to_f64()).collect();
        check_row(name, &row, &first)?;
        let t = bytes / (ms * 1e-3) / 1e12;
        rows.push(Row {
            name: format!("tlx::ops {dtype} {rows_n}x{cols} {name}"),
            ms,
            tbps: t,
            ratio: t / copy,
        });
    }
    Ok(())
}

/// One row of a row-wise op (weight 1, bias 0) against f64, within bf16's
/// rounding; NaN (an unwritten element) fails.
fn check_row(op: &str, x: &[f64], got: &[f64]) -> Result<(), Box<dyn std::error::Error>> {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    let ms = x.iter().map(|v| v * v).sum::<f64>() / n;
    let top = x.iter().copied().fold(f64::MIN, f64::max);
    let total: f64 = x.iter().map(|v| (v - top).exp()).sum();
    for (i, (v, g)) in x.iter().zip(got).enumerate() {
        let want = match op {
            "softmax" => (v - top).exp() / total,
            "rms_norm" => v / (ms + 1e-6).sqrt(),
            _ => (v - mean) / (var + 1e-5).sqrt(),
        };
        // Softmax's values are small: relative to each; the norms' are
        // near 1: relative to 1 at least.
        let scale = if op == "softmax" {
            want
        } else {
            want.abs().max(1.0)
        };
        let error = (g - want).abs();
        if error.is_nan() || error > scale / 64.0 {
            return Err(format!("{op}: column {i} is {g}, expected {want}").into());
        }
    }
    Ok(())
}

/// The element types the ops rows are measured in.
trait ToF64: Copy {
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
}

impl ToF64 for f32 {
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn from_f64(v: f64) -> Self {
        v as f32
    }
}

impl ToF64 for half::bf16 {
    fn to_f64(self) -> f64 {
        half::bf16::to_f64(self)
    }
    fn from_f64(v: f64) -> Self {
        half::bf16::from_f64(v)
    }
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
    let mut timer = Timer::new(&dev)?;
    let tb = |bytes: f64, ms: f64| bytes / (ms * 1e-3) / 1e12;

    // The reference: a device-to-device copy of 1 GiB.
    let n_copy = 1usize << 28;
    let src = dev.upload(&vec![1.0f32; n_copy])?;
    let mut dst = dev.alloc::<f32>(n_copy)?;
    let copy_ms = timer.median_ms(20, || dst.copy_from_device(&src))?;
    let copy = tb(2.0 * 4.0 * n_copy as f64, copy_ms);
    let mut rows = vec![Row {
        name: "copy 1 GiB (reference)".into(),
        ms: copy_ms,
        tbps: copy,
        ratio: 1.0,
    }];
    drop((src, dst));

    // `TLX_BENCH_ONLY=<start of a row name>` runs only those rows (for ncu).
    let only = std::env::var("TLX_BENCH_ONLY").unwrap_or_default();
    let wanted = |section: &str| only.starts_with(section) || section.starts_with(&only);

    let n = 1usize << 28;
    let (x, y, out) = (
        dev.upload(&vec![1.0f32; n])?,
        dev.upload(&vec![2.0f32; n])?,
        dev.alloc::<f32>(n)?,
    );
    let timed = if wanted("vector_add") {
        vec![
            (
                "vector_add f32 2^28, BLOCK=1024",
                timer.median_ms(20, || {
                    vector_add::<1024>::launch(&dev, (n / 1024) as u32, &x, &y, &out, n as i32)
                })?,
            ),
            (
                "vector_add f32 2^28, BLOCK=4096",
                timer.median_ms(20, || {
                    vector_add::<4096>::launch(&dev, (n / 4096) as u32, &x, &y, &out, n as i32)
                })?,
            ),
        ]
    } else {
        Vec::new()
    };
    for (name, ms) in timed {
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
            let ms = timer.median_ms(20, || $launch)?;
            let t = tb($bytes, ms);
            rows.push(Row { name: format!("{} {}", $label, $name), ms, tbps: t, ratio: t / copy });
        )*};
    }

    for cols in [4096usize, 8192] {
        if !wanted("softmax") {
            break;
        }
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

    for cols in [16384usize, 32768, 65536, 131072] {
        if !wanted("layernorm") {
            break;
        }
        layernorm_sweep(&dev, &mut timer, cols, copy, &mut rows)?;
    }

    // `tlx::ops`: the ready-made row-wise kernels (autotuned on the first
    // call, which `median_ms`'s warm-up makes; `TLX_AUTOTUNE_LOG=1` prints
    // every candidate), bytes moved once each way. The shapes: many short
    // rows, few long ones, the LayerNorm sweep's 1152 rows, and the paper's
    // small-batch LayerNorm (4 rows, LN1-LN3).
    if wanted("ops") {
        let shapes = [
            (1usize << 16, 4096usize),
            (1 << 12, 65536),
            (1152, 16384),
            (1152, 65536),
            (4, 16384),
            (4, 32768),
            (4, 65536),
        ];
        for (rows_n, cols) in shapes {
            ops_rows::<half::bf16>(&dev, &mut timer, (rows_n, cols), copy, &mut rows)?;
        }
        for (rows_n, cols) in [(1usize << 16, 4096usize), (1 << 12, 65536), (4, 65536)] {
            ops_rows::<f32>(&dev, &mut timer, (rows_n, cols), copy, &mut rows)?;
        }
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

//! The all-gather + GEMM across the ranks of a mesh (`tlx::ops::dist`,
//! communication and compute in one kernel per rank) against the same work
//! done one step after the other (and against its copy-engine form: the
//! gather on a copy stream, `tlx::ops::gemm` split by split as the splits
//! arrive): the peers' row splits gathered by NCCL
//! (one GPU per rank; the copy engine where the ranks share a GPU, which
//! NCCL refuses, or NCCL is missing), then one GEMM per rank by
//! `tlx::ops::gemm` or by cuBLAS,
//! measured in the same process on the same buffers. Shapes: the TLX
//! paper's GD1-GD5 (`M x N x K`, A split by rows across the ranks) and a
//! small one (M = 1024) per rank count.
//!
//! `cargo bench --bench dist --features ops-dist,ops-gemm` (prints a table;
//! skips without a GPU). With fewer GPUs than ranks, the ranks share GPU 0
//! and the table says so: the transport is then local memory and the
//! timing is not a multi-GPU result. `TLX_BENCH_ONLY=GD1` runs the shapes
//! whose name starts with that. Each time is the median of 5 runs after
//! one warm-up, from the first launch to the last rank's end (host wall
//! time: the ranks run on several streams or GPUs).

use std::time::Instant;

use cudarc::cublas::{sys::cublasOperation_t, CudaBlas, Gemm, GemmConfig};
use cudarc::driver::{result, DevicePtr};
use half::bf16;
use tlx::ops::dist::{AllGatherGemm, Overlap};
use tlx::prelude::*;
use tlx::Placement;

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Median wall milliseconds of `f` over 5 runs after a warm-up one.
fn median_wall_ms(mut f: impl FnMut() -> BenchResult<()>) -> BenchResult<f64> {
    f()?;
    let mut times = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        f()?;
        times.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// How the baselines gather the splits: NCCL's all-gather where every rank
/// has a GPU and NCCL loads, else the copy engine.
enum Gather {
    Nccl(tlx::Collectives),
    Copies,
}

impl Gather {
    fn new(mesh: &Mesh) -> Gather {
        if mesh.placement() != Placement::Gpus {
            return Gather::Copies;
        }
        match tlx::Collectives::new(mesh) {
            Ok(nccl) => Gather::Nccl(nccl),
            Err(e) => {
                println!("note: {e}; the baselines gather with the copy engine");
                Gather::Copies
            }
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Gather::Nccl(_) => "NCCL",
            Gather::Copies => "copies",
        }
    }

    fn run(&self, mesh: &Mesh, a: &SymBuffer<bf16>, full: &mut [Buffer<bf16>]) -> BenchResult<()> {
        match self {
            Gather::Nccl(nccl) => Ok(nccl.all_gather(a.buffers(), full, a.len())?),
            Gather::Copies => gather_by_copies(mesh, a, full),
        }
    }
}

/// The copy engine's all-gather: rank `r`'s `full` gets every rank's split.
fn gather_by_copies(mesh: &Mesh, a: &SymBuffer<bf16>, full: &[Buffer<bf16>]) -> BenchResult<()> {
    let split = a.len();
    let bytes = split * std::mem::size_of::<bf16>();
    for (r, dst) in full.iter().enumerate() {
        let stream = mesh.device(r)?.cuda_stream()?;
        let (to, _) = dst.cuda_slice()?.device_ptr(stream);
        for src in 0..mesh.ranks() {
            let (from, _) = a.on(src)?.cuda_slice()?.device_ptr(stream);
            let at = to + (src * bytes) as u64;
            // SAFETY: both ranges lie inside live allocations of `bytes`
            // bytes (a split, and split `src` of `full`), ordered on `stream`.
            unsafe { result::memcpy_dtod_async(at, from, bytes, stream.cu_stream()) }?;
        }
    }
    Ok(())
}

struct Row {
    name: String,
    gather: &'static str,
    ranks: usize,
    placement: Placement,
    ours_ms: f64,
    copies_ms: f64,
    tlx_ms: f64,
    cublas_ms: f64,
    rel_err: f64,
}

fn run_shape(name: &str, ranks: usize, (m, n, k): (usize, usize, usize)) -> BenchResult<Row> {
    let mut mesh = if Device::count() >= ranks {
        Mesh::gpus(ranks)?
    } else {
        Mesh::shared_gpu(ranks)?
    };
    let rows = m / ranks;
    let mut a = mesh.alloc::<bf16>(rows * k)?;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        bf16::from_f32((seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5)
    };
    for r in 0..ranks {
        let split: Vec<bf16> = (0..rows * k).map(|_| next()).collect();
        a.upload(r, &split)?;
    }
    let b_host: Vec<bf16> = (0..k * n).map(|_| next()).collect();
    let b = mesh.upload_each(&vec![b_host; ranks])?;
    let mut full = mesh.alloc_each::<bf16>(m * k)?;
    let gather = Gather::new(&mesh);
    let mut c_base = mesh.alloc_each::<bf16>(m * n)?;
    let c_ours = mesh.alloc_each::<bf16>(m * n)?;
    let c_copies = mesh.alloc_each::<bf16>(m * n)?;
    let mut op = AllGatherGemm::new(&mesh, rows, n, k)?;
    let ours_ms = median_wall_ms(|| Ok(op.run(&mut mesh, &a, &b, &c_ours)?))?;
    let mut op = op.with_overlap(Overlap::CopyEngine);
    let copies_ms = median_wall_ms(|| Ok(op.run(&mut mesh, &a, &b, &c_copies)?))?;

    let sync_all = |mesh: &Mesh| -> BenchResult<()> {
        for dev in mesh.devices() {
            dev.synchronize()?;
        }
        Ok(())
    };
    let tlx_ms = median_wall_ms(|| {
        gather.run(&mesh, &a, &mut full)?;
        for r in 0..ranks {
            tlx::ops::gemm(mesh.device(r)?, &full[r], &b[r], &c_base[r], (m, n, k))?;
        }
        sync_all(&mesh)
    })?;
    let blases: Vec<CudaBlas> = (0..ranks)
        .map(|r| Ok(CudaBlas::new(mesh.device(r)?.cuda_stream()?.clone())?))
        .collect::<BenchResult<_>>()?;
    let cfg = GemmConfig {
        transa: cublasOperation_t::CUBLAS_OP_N,
        transb: cublasOperation_t::CUBLAS_OP_N,
        m: n as i32,
        n: m as i32,
        k: k as i32,
        alpha: bf16::from_f32(1.0),
        lda: n as i32,
        ldb: k as i32,
        beta: bf16::from_f32(0.0),
        ldc: n as i32,
    };
    let cublas_ms = median_wall_ms(|| {
        gather.run(&mesh, &a, &mut full)?;
        for r in 0..ranks {
            let (sa, sb) = (full[r].cuda_slice()?, b[r].cuda_slice()?);
            // SAFETY: the dimensions and leading dimensions describe buffers
            // of exactly m*k, k*n and m*n elements (row-major as column-major
            // transposes: C^T = B^T A^T).
            unsafe { blases[r].gemm(cfg, sb, sa, c_base[r].cuda_slice_mut()?) }?;
        }
        sync_all(&mesh)
    })?;
    // Ours (both ways) against cuBLAS's on every rank, relative to C's
    // largest element.
    let mut rel_err = 0.0f64;
    for r in 0..ranks {
        let base = c_base[r].download()?;
        let peak = base
            .iter()
            .map(|v| f64::from(v.to_f32()).abs())
            .fold(1e-6, f64::max);
        for ours in [c_ours[r].download()?, c_copies[r].download()?] {
            for (o, w) in ours.iter().zip(&base) {
                let diff = f64::from(o.to_f32()) - f64::from(w.to_f32());
                rel_err = rel_err.max(diff.abs() / peak);
            }
        }
    }
    Ok(Row {
        name: name.to_string(),
        gather: gather.name(),
        ranks,
        placement: mesh.placement(),
        ours_ms,
        copies_ms,
        tlx_ms,
        cublas_ms,
        rel_err,
    })
}

fn main() -> BenchResult<()> {
    if Device::count() == 0 {
        println!("dist bench: skipped, no CUDA GPU");
        return Ok(());
    }
    let only = std::env::var("TLX_BENCH_ONLY").unwrap_or_default();
    let shapes = [
        ("GD1", 2, (8192, 2048, 16384)),
        ("GD2", 4, (8192, 2048, 16384)),
        ("GD3", 4, (8192, 8192, 16384)),
        ("GD4", 4, (4096, 8192, 16384)),
        ("GD5", 4, (16384, 4096, 8192)),
        ("small-2", 2, (1024, 2048, 16384)),
        ("small-4", 4, (1024, 2048, 16384)),
    ];
    let mut rows = Vec::new();
    for (name, ranks, shape) in shapes {
        if name.starts_with(&only) {
            rows.push(run_shape(name, ranks, shape)?);
        }
    }
    println!("device: {}", Device::nth(0)?.name());
    if rows.iter().any(|r| r.placement == Placement::SharedGpu) {
        println!(
            "note: ranks marked 'shared' ran on one GPU (local memory as the transport): \
             a correctness and overhead check, not a multi-GPU timing"
        );
    }
    println!("| shape | ranks | where | M x N x K | ours, one kernel ms | ours, copy engine + tlx::ops::gemm ms | gather | gather + tlx::ops::gemm ms | gather + cuBLAS ms | one kernel vs faster baseline | copy engine vs faster baseline | max rel err vs cuBLAS |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for (row, (_, _, (m, n, k))) in rows
        .iter()
        .zip(shapes.iter().filter(|s| s.0.starts_with(&only)))
    {
        let best = row.tlx_ms.min(row.cublas_ms);
        println!(
            "| {} | {} | {} | {m} x {n} x {k} | {:.3} | {:.3} | {} | {:.3} | {:.3} | {:.2}x | {:.2}x | {:.1e} |",
            row.name,
            row.ranks,
            if row.placement == Placement::Gpus {
                "GPUs"
            } else {
                "shared"
            },
            row.ours_ms,
            row.copies_ms,
            row.gather,
            row.tlx_ms,
            row.cublas_ms,
            best / row.ours_ms,
            best / row.copies_ms,
            row.rel_err
        );
    }
    Ok(())
}

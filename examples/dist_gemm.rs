//! GEMMs across the ranks of a mesh with `tlx::ops::dist`: `C =
//! allgather(A) @ B` (A split by rows, each rank's kernel copying peers'
//! splits while it multiplies those that have arrived) and `C_r = (sum over
//! ranks of A_q @ B_q)[rows of r]` (partial tiles pushed to their owners
//! while the next are computed), on 2 ranks: two GPUs when the machine has
//! them, else both on one, else the CPU interpreter. Each is checked
//! against an f64 reference.
//!
//! `cargo run --release --features ops-dist --example dist_gemm`

mod common;

use common::{Outcome, Rng, Size};
use tlx::ops::dist::{AllGatherGemm, GemmReduceScatter};
use tlx::prelude::*;

fn bf16_vec(rng: &mut Rng, n: usize) -> Vec<bf16> {
    rng.uniform_vec(n, -1.0, 1.0)
        .into_iter()
        .map(bf16::from_f32)
        .collect()
}

/// `a @ b` in f64 for row-major `[m, k]` and `[k, n]` bf16 matrices.
fn reference(a: &[bf16], b: &[bf16], (m, n, k): (usize, usize, usize)) -> Vec<f64> {
    common::matmul_f64(
        (m, n, k),
        |i, p| f64::from(a[i * k + p].to_f32()),
        |p, j| f64::from(b[p * n + j].to_f32()),
    )
}

/// Checks both ops against their references on fresh random inputs.
pub fn run(device: &Device) -> Outcome {
    let mut mesh = if device.is_gpu() {
        Mesh::new(2)?
    } else {
        Mesh::interpreter(2)?
    };
    let ranks = mesh.ranks();
    // Rows per rank, N, K: rows a multiple of the reduce-scatter's tile.
    let (rows, n, k) = match Size::for_device(device) {
        Size::Gpu => (1024, 1000, 520),
        Size::Interpreter => (64, 40, 48),
    };
    let mut rng = Rng::fresh("dist_gemm");

    // All-gather + GEMM: every rank gets the whole C.
    let splits: Vec<Vec<bf16>> = (0..ranks).map(|_| bf16_vec(&mut rng, rows * k)).collect();
    let mut a = mesh.alloc::<bf16>(rows * k)?;
    for (r, split) in splits.iter().enumerate() {
        a.upload(r, split)?;
    }
    let b_host = bf16_vec(&mut rng, k * n);
    let b = mesh.upload_each(&vec![b_host.clone(); ranks])?;
    let c = mesh.upload_each(&vec![vec![bf16::NAN; ranks * rows * n]; ranks])?;
    AllGatherGemm::new(&mesh, rows, n, k)?.run(&mut mesh, &a, &b, &c)?;
    let want = reference(&splits.concat(), &b_host, (ranks * rows, n, k));
    let mut error = 0.0f64;
    for out in &c {
        let got: Vec<f32> = out.download()?.iter().map(|v| v.to_f32()).collect();
        error = error.max(common::max_rel_error(&got, &want, 1.0));
    }
    // bf16 output: half an ulp is up to 2^-8 of the value; floor 1.0 for sums near zero.
    common::verdict(
        "dist_gemm",
        &format!("all-gather + GEMM, {ranks} ranks, {rows} rows each x {n} x {k}:"),
        error,
        8e-3,
    )?;

    // GEMM + reduce-scatter: rank r gets its rows of the sum of the ranks' products.
    let a_host: Vec<Vec<bf16>> = (0..ranks)
        .map(|_| bf16_vec(&mut rng, ranks * rows * k))
        .collect();
    let b_host: Vec<Vec<bf16>> = (0..ranks).map(|_| bf16_vec(&mut rng, k * n)).collect();
    let (a, b) = (mesh.upload_each(&a_host)?, mesh.upload_each(&b_host)?);
    let c = mesh.upload_each(&vec![vec![f32::NAN; rows * n]; ranks])?;
    GemmReduceScatter::new(&mesh, rows, n, k)?.run(&mut mesh, &a, &b, &c)?;
    let mut sum = vec![0.0f64; ranks * rows * n];
    for q in 0..ranks {
        for (s, p) in sum
            .iter_mut()
            .zip(reference(&a_host[q], &b_host[q], (ranks * rows, n, k)))
        {
            *s += p;
        }
    }
    let mut error = 0.0f64;
    for (r, out) in c.iter().enumerate() {
        let mine = &sum[r * rows * n..(r + 1) * rows * n];
        error = error.max(common::max_rel_error(&out.download()?, mine, 1.0));
    }
    common::verdict(
        "dist_gemm",
        &format!("GEMM + reduce-scatter, {ranks} ranks, {rows} rows each x {n} x {k}:"),
        error,
        1e-4,
    )
}

#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    common::main_with("dist_gemm", run)
}

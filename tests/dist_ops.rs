//! `tlx::ops::dist` against CPU references in f64 on fresh random inputs:
//! the all-reduce, all-gather + GEMM and GEMM + reduce-scatter, each with 2
//! and 4 ranks on the interpreter (CI) and on the GPU where there is one
//! (the ranks sharing it unless the machine has one per rank), and each run
//! twice so that the flags' epochs are exercised.

use tlx::ops::dist::{AllGatherGemm, AllReduce, GemmReduceScatter, Overlap};
use tlx::prelude::*;
use tlx::Placement;

#[path = "common/rng.rs"]
mod rng;

use rng::fresh_rng;

/// One buffer per rank, on its device.
fn upload<T: tlx::Element>(mesh: &Mesh, data: &[Vec<T>]) -> Vec<Buffer<T>> {
    mesh.upload_each(data).expect("upload")
}

fn bf16s(v: Vec<f32>) -> Vec<bf16> {
    v.into_iter().map(bf16::from_f32).collect()
}

/// `got` against `want` with `scale` the sum of the terms' magnitudes.
fn assert_close(what: &str, got: &[f32], want: &[f64], scale: &[f64], tol: f64) {
    for (i, ((&g, &w), &s)) in got.iter().zip(want).zip(scale).enumerate() {
        let err = (f64::from(g) - w).abs();
        assert!(
            err <= tol * s.max(1e-3),
            "{what} element {i}: got {g}, want {w}"
        );
    }
}

fn all_reduce(mesh: &mut Mesh, n: usize) {
    let ranks = mesh.ranks();
    let mut op = AllReduce::new(mesh, n).expect("all_reduce");
    let mut rng = fresh_rng();
    for _ in 0..2 {
        let inputs: Vec<Vec<f32>> = (0..ranks).map(|_| rng.vec(n, 1.0)).collect();
        let x = upload(mesh, &inputs);
        let out = upload(mesh, &vec![vec![f32::NAN; n]; ranks]);
        op.run(mesh, &x, &out).expect("run");
        let want: Vec<f64> = (0..n)
            .map(|i| inputs.iter().map(|v| f64::from(v[i])).sum())
            .collect();
        let scale: Vec<f64> = (0..n)
            .map(|i| inputs.iter().map(|v| f64::from(v[i]).abs()).sum())
            .collect();
        for (r, o) in out.iter().enumerate() {
            let got = o.download().expect("download");
            assert_close(&format!("all-reduce rank {r}"), &got, &want, &scale, 1e-6);
        }
    }
}

/// `C[i][j]` = sum over `l` of `A[i][l] * B[l][j]` in f64, with the sum of
/// the products' magnitudes.
fn matmul_f64(a: &[bf16], b: &[bf16], (m, n, k): (usize, usize, usize)) -> (Vec<f64>, Vec<f64>) {
    let mut c = vec![0.0; m * n];
    let mut s = vec![0.0; m * n];
    for i in 0..m {
        for l in 0..k {
            let x = f64::from(a[i * k + l].to_f32());
            for j in 0..n {
                let p = x * f64::from(b[l * n + j].to_f32());
                c[i * n + j] += p;
                s[i * n + j] += p.abs();
            }
        }
    }
    (c, s)
}

fn all_gather_gemm(mesh: &mut Mesh, (rows, n, k): (usize, usize, usize), overlap: Overlap) {
    let ranks = mesh.ranks();
    let mut op = AllGatherGemm::new(mesh, rows, n, k)
        .expect("all_gather_gemm")
        .with_overlap(overlap);
    let mut a = mesh.alloc::<bf16>(rows * k).expect("a");
    let mut rng = fresh_rng();
    for _ in 0..2 {
        let splits: Vec<Vec<bf16>> = (0..ranks).map(|_| bf16s(rng.vec(rows * k, 1.0))).collect();
        for (r, split) in splits.iter().enumerate() {
            a.upload(r, split).expect("upload");
        }
        let bs: Vec<Vec<bf16>> = (0..ranks).map(|_| bf16s(rng.vec(k * n, 1.0))).collect();
        let b = upload(mesh, &bs);
        let c = upload(mesh, &vec![vec![bf16::NAN; ranks * rows * n]; ranks]);
        op.run(mesh, &a, &b, &c).expect("run");
        let full: Vec<bf16> = splits.concat();
        for (r, out) in c.iter().enumerate() {
            let (want, scale) = matmul_f64(&full, &bs[r], (ranks * rows, n, k));
            let got: Vec<f32> = out
                .download()
                .expect("download")
                .iter()
                .map(|v| v.to_f32())
                .collect();
            // bf16 output: half an ulp is up to 2^-8 of the value.
            let what = format!("all-gather GEMM ({overlap:?}) rank {r}");
            assert_close(&what, &got, &want, &scale, 8e-3);
        }
    }
}

fn gemm_reduce_scatter(mesh: &mut Mesh, rows: usize, n: usize, k: usize) {
    let ranks = mesh.ranks();
    let m = ranks * rows;
    let mut op = GemmReduceScatter::new(mesh, rows, n, k).expect("gemm_reduce_scatter");
    let mut rng = fresh_rng();
    for _ in 0..2 {
        let a_host: Vec<Vec<bf16>> = (0..ranks).map(|_| bf16s(rng.vec(m * k, 1.0))).collect();
        let b_host: Vec<Vec<bf16>> = (0..ranks).map(|_| bf16s(rng.vec(k * n, 1.0))).collect();
        let (a, b) = (upload(mesh, &a_host), upload(mesh, &b_host));
        let c = upload(mesh, &vec![vec![f32::NAN; rows * n]; ranks]);
        op.run(mesh, &a, &b, &c).expect("run");
        let mut want = vec![0.0; m * n];
        let mut scale = vec![0.0; m * n];
        for q in 0..ranks {
            let (part, s) = matmul_f64(&a_host[q], &b_host[q], (m, n, k));
            for i in 0..m * n {
                want[i] += part[i];
                scale[i] += s[i];
            }
        }
        for (r, out) in c.iter().enumerate() {
            let rows_of = r * rows * n..(r + 1) * rows * n;
            let got = out.download().expect("download");
            assert_close(
                &format!("GEMM reduce-scatter rank {r}"),
                &got,
                &want[rows_of.clone()],
                &scale[rows_of],
                1e-5,
            );
        }
    }
}

/// Every transition `reshard` takes, on a `[rows, cols]` tensor of fresh
/// random values (a different one per rank where the sharding is
/// `Partial`), against the host's answer; outputs poisoned first. Sums
/// are of `ranks` f32 terms (bf16 rounds the answer once).
fn reshard_all<T: tlx::ops::dist::ReshardElement>(
    mesh: &mut Mesh,
    (rows, cols): (usize, usize),
    to_t: fn(f32) -> T,
    of_t: fn(T) -> f32,
) {
    use tlx::ops::dist::{reshard, Sharding::*};
    let ranks = mesh.ranks();
    let whole = rows * cols;
    let split = whole / ranks;
    let mut rng = fresh_rng();
    // Per rank, the whole tensor's values; the logical tensor is rank 0's
    // (Replicated), the sum over ranks (Partial) or made of each rank's own
    // rows (Split).
    let values: Vec<Vec<T>> = (0..ranks)
        .map(|_| rng.vec(whole, 1.0).into_iter().map(to_t).collect())
        .collect();
    let f = |r: usize, i: usize| f64::from(of_t(values[r][i]));
    let len = |s| if s == Split { split } else { whole };
    for (from, to) in [
        (Split, Replicated),
        (Partial, Replicated),
        (Partial, Split),
        (Replicated, Split),
        (Split, Split),
        (Partial, Partial),
    ] {
        let mut x = mesh.alloc::<T>(len(from)).expect("x");
        for r in 0..ranks {
            let part = if from == Split {
                &values[r][r * split..(r + 1) * split]
            } else {
                &values[r][..]
            };
            x.upload(r, part).expect("upload");
        }
        let out = upload(mesh, &vec![vec![to_t(f32::NAN); len(to)]; ranks]);
        reshard(mesh, &x, from, &out, to, (rows, cols)).expect("reshard");
        for (r, buffer) in out.iter().enumerate() {
            let got = buffer.download().expect("download");
            for (j, g) in got.iter().enumerate() {
                // Element j of this rank's output is element i of the tensor.
                let i = if to == Split { r * split + j } else { j };
                let want = match from {
                    Partial if to == Partial => f(r, i),
                    Partial => (0..ranks).map(|q| f(q, i)).sum(),
                    Split => f(i / split, i),
                    Replicated => f(r, i),
                };
                let g = f64::from(of_t(*g));
                assert!(
                    (g - want).abs() <= 1e-2 * (want.abs() + 1e-3),
                    "{from:?} -> {to:?}, rank {r} element {j}: got {g}, want {want}"
                );
            }
        }
    }
    // What no communication can do, and rows that do not split.
    let x = mesh.alloc::<T>(whole).expect("x");
    let out = upload(mesh, &vec![vec![to_t(0.0); whole]; ranks]);
    let refused = reshard(mesh, &x, Replicated, &out, Partial, (rows, cols)).expect_err("B -> P");
    assert!(refused.to_string().contains("partial"), "{refused}");
    let uneven = reshard(mesh, &x, Replicated, &out, Split, (rows + 1, cols)).expect_err("uneven");
    assert!(uneven.to_string().contains("split evenly"), "{uneven}");
}

#[test]
fn reshard_on_the_interpreter() {
    for ranks in [2, 3, 4] {
        let mut mesh = Mesh::interpreter(ranks).expect("mesh");
        reshard_all::<f32>(&mut mesh, (12, 70), |v| v, |v| v);
        reshard_all::<bf16>(&mut mesh, (24, 33), bf16::from_f32, bf16::to_f32);
    }
}

#[test]
fn the_ops_match_their_references_on_the_interpreter() {
    for ranks in [2, 4] {
        let mut mesh = Mesh::interpreter(ranks).expect("mesh");
        all_reduce(&mut mesh, 3000);
        all_gather_gemm(&mut mesh, (40, 48, 40), Overlap::OneKernel);
        gemm_reduce_scatter(&mut mesh, 32, 40, 48);
    }
}

#[test]
fn the_ops_match_their_references_on_the_gpu() {
    if Device::count() == 0 {
        eprintln!("skipped: no CUDA GPU");
        return;
    }
    for ranks in [2, 4] {
        let mut mesh = Mesh::new(ranks).expect("mesh");
        assert_ne!(mesh.placement(), Placement::Interpreter);
        all_reduce(&mut mesh, (1 << 20) + 3);
        all_gather_gemm(&mut mesh, (300, 520, 264), Overlap::OneKernel);
        all_gather_gemm(&mut mesh, (300, 520, 264), Overlap::CopyEngine);
        gemm_reduce_scatter(&mut mesh, 256, 520, 264);
        reshard_all::<f32>(&mut mesh, (1024, 1000), |v| v, |v| v);
        reshard_all::<bf16>(&mut mesh, (512, 333), bf16::from_f32, bf16::to_f32);
    }
}

/// NCCL's collectives on a mesh with one GPU per rank (as many as the
/// machine has, up to 4; a mesh of one GPU still runs each call through
/// NCCL), against the same sums on the host; skipped with the reason when
/// there is no GPU or no NCCL.
#[test]
fn nccl_collectives_on_gpus() {
    let ranks = Device::count().min(4);
    if ranks == 0 {
        eprintln!("skipped: no CUDA GPU");
        return;
    }
    let mesh = Mesh::gpus(ranks).expect("mesh");
    let nccl = match tlx::Collectives::new(&mesh) {
        Ok(nccl) => nccl,
        Err(e @ tlx::Error::NoNccl(_)) => {
            eprintln!("skipped: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let len = 1000;
    let mut rng = fresh_rng();
    let inputs: Vec<Vec<f32>> = (0..ranks).map(|_| rng.vec(len * ranks, 1.0)).collect();
    let send = upload(&mesh, &inputs);
    let mut gathered = upload(&mesh, &vec![vec![f32::NAN; len * ranks]; ranks]);
    let mut scattered = upload(&mesh, &vec![vec![f32::NAN; len]; ranks]);
    let mut reduced = upload(&mesh, &vec![vec![f32::NAN; len]; ranks]);
    nccl.all_gather(&send, &mut gathered, len)
        .expect("all_gather");
    nccl.reduce_scatter_sum(&send, &mut scattered, len)
        .expect("reduce_scatter");
    nccl.all_reduce_sum(&send, &mut reduced, len)
        .expect("all_reduce");
    let sum_at = |i: usize| -> (f64, f64) {
        let sum = inputs.iter().map(|x| f64::from(x[i])).sum();
        let scale = inputs.iter().map(|x| f64::from(x[i]).abs()).sum();
        (sum, scale)
    };
    for r in 0..ranks {
        let got = gathered[r].download().expect("download");
        let want: Vec<f32> = inputs.iter().flat_map(|x| x[..len].to_vec()).collect();
        assert_eq!(got, want, "all-gather on rank {r}");
        let (want, scale): (Vec<f64>, Vec<f64>) = (r * len..(r + 1) * len).map(sum_at).unzip();
        let got = scattered[r].download().expect("download");
        assert_close(
            &format!("reduce-scatter rank {r}"),
            &got,
            &want,
            &scale,
            1e-6,
        );
        let (want, scale): (Vec<f64>, Vec<f64>) = (0..len).map(sum_at).unzip();
        let got = reduced[r].download().expect("download");
        assert_close(&format!("all-reduce rank {r}"), &got, &want, &scale, 1e-6);
    }
}

//! A warp-specialized kernel (`async_tasks!`): per program, the default task
//! (the kernel's 4 warps) and a 4-warp task that raises its registers each
//! sum one row of `x` (each reducing across its warps on a barrier of its
//! own), a 4-warp task that gives registers back stores a count, and two
//! 1-warp replicas store their replica ids after a round trip through a
//! shared buffer each (one body for both: `shared_body`, so the replica
//! id, the buffer and the replica's barrier are picked at run time). Shared by
//! `warp_specialization.rs` (interpreter, in CI) and `gpu_differential.rs`
//! (GPU and interpreter).

use tlx::prelude::*;

#[tlx::kernel(configs = [(BLOCK = 512)], num_warps = 4)]
fn two_sums_and_ids<const BLOCK: usize>(x: Ptr<f32>, out: Ptr<f32>) {
    let pid = program_id(0);
    let rows = x + pid * 2 * BLOCK;
    let outs = out + pid * 5;
    let ids = local_alloc([32], f32, 2);
    async_tasks! {
        task(default) {
            store(outs, sum(load(rows + arange(0, BLOCK)), axis = 0));
        }
        task(num_warps = 4, num_regs = 200) {
            store(outs + 1, sum(load(rows + BLOCK + arange(0, BLOCK)), axis = 0));
        }
        task(num_warps = 4, num_regs = 40) {
            store(outs + 4, (pid * 3).to(f32));
        }
        task(num_warps = 1, replicate = 2, shared_body = true) {
            let r = async_task_replica_id();
            let slot = local_view(ids, r);
            local_store(slot, full([32], (r + 10 * pid).to(f32), f32));
            store(outs + 2 + r, max(local_load(slot), axis = 0));
        }
    }
}

/// Row length.
pub const ROW: usize = 512;

/// Runs `programs` programs over `x` (two rows each) on `dev`, the output
/// poisoned with NaN first.
pub fn run(dev: &Device, x: &[f32]) -> Result<Vec<f32>, tlx::Error> {
    let programs = x.len() / (2 * ROW);
    let dx = dev.upload(x)?;
    let out = dev.upload(&vec![f32::NAN; programs * 5])?;
    two_sums_and_ids::<512>::launch(dev, programs as u32, &dx, &out)?;
    out.download()
}

/// Panics, naming `label`, where `got` differs from the f64 row sums (to a
/// relative 1e-5) or the replica ids.
pub fn check(x: &[f32], got: &[f32], label: &str) {
    for (p, rows) in x.chunks(2 * ROW).enumerate() {
        for (i, row) in rows.chunks(ROW).enumerate() {
            let want = row.iter().map(|v| f64::from(*v)).sum::<f64>();
            let g = f64::from(got[p * 5 + i]);
            let error = (g - want).abs() / want.abs().max(1.0);
            assert!(error < 1e-5, "{label}: program {p} row {i}: {g} vs {want}");
        }
        for r in 0..2 {
            let want = (r + 10 * p) as f32;
            assert_eq!(got[p * 5 + 2 + r], want, "{label}: program {p} replica {r}");
        }
        assert_eq!(got[p * 5 + 4], (3 * p) as f32, "{label}: program {p} count");
    }
}

//! Warp-specialized task regions (`async_tasks!`) on the CPU interpreter,
//! through the real macro: each task replica runs as a task of its program
//! (interleaved with the others), and the results match an f64 reference on
//! fresh random inputs.

use tlx::prelude::*;

#[path = "common/warp_specialized.rs"]
mod warp_specialized;

#[test]
fn tasks_sum_rows_and_replicas_store_their_ids() {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(13, |d| d.as_nanos() as u64);
    let mut state = seed;
    let x: Vec<f32> = (0..3 * 2 * warp_specialized::ROW)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect();
    let got = warp_specialized::run(&Device::cpu(), &x).unwrap();
    warp_specialized::check(&x, &got, &format!("interpreter (seed {seed})"));
}

//! Persistent warp-specialized bf16 GEMM `C = A @ B` for Blackwell in the
//! style of TLX's Blackwell tutorial, through `tlx::ops::gemm_tcgen05` (the
//! kernel `tlx::ops::gemm` runs on Blackwell GPUs; its source is
//! `src/ops/gemm_blackwell.rs`): the accumulators live in tensor memory, so
//! one thread issues the whole tile's multiplications and the epilogue
//! overlaps the next tile's. Three tasks: a one-warp producer loads A and B
//! tiles with TMA into a ring of `NUM_STAGES` stages; a one-warp MMA task
//! multiplies each stage into one of `NUM_ACC` tensor-memory accumulators
//! (`async_dot` with `mbarriers = [empty]`: the stage is released when the MMA
//! reading it completes) and `tcgen05_commit`s the tile's last one to
//! `acc_full`; the default task (one warp group) reads the accumulator in
//! column slices, hands it back through `acc_empty`, and stores `C` with TMA.
//! Two 128x256 f32 accumulators take all 512 columns.
//!
//! Built for `sm_100a`. On a GPU that is not a Blackwell one (an H100, say)
//! it says so and runs on the CPU interpreter, as it does with no GPU.
//!
//! `cargo run --release --features ops-gemm --example blackwell_gemm_ws`

mod common;

use common::{Outcome, Size};
use tlx::prelude::*;

/// Checks the kernel against an f64 CPU reference on fresh random inputs.
pub fn run(device: &Device) -> Outcome {
    let device = common::blackwell_or_interpreter(device, "blackwell_gemm_ws");
    // Not multiples of the tiles, so TMA's zero fill and clipping matter.
    let mnk = match Size::for_device(&device) {
        Size::Gpu => (1000, 1032, 520),
        Size::Interpreter => (264, 520, 136),
    };
    common::check_bf16_gemms(
        &device,
        "blackwell_gemm_ws",
        mnk,
        &[("", |d, a, b, c, mnk| {
            tlx::ops::gemm_tcgen05(d, a, b, c, mnk)
        })],
    )
}

#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    common::main_with("blackwell_gemm_ws", run)
}

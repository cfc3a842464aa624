//! Stable stream compaction with TLE's `cumsum`: keep the elements above a
//! threshold, in order. One kernel counts per block, the host scans the
//! (few) block counts, and a second kernel writes each kept element at its
//! block's base plus its exclusive rank within the block.
//!
//! `cargo run --release --example stream_compaction`

mod common;

use common::{Outcome, Rng, Size};
use tlx::prelude::*;

#[tlx::kernel(configs = [(BLOCK = 1024)])]
fn count_kept<const BLOCK: usize>(x: Ptr<f32>, counts: Ptr<i32>, n: i32, threshold: f32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    let keep = (load(x + offs, mask = mask, other = 0.0) > threshold) & mask;
    store(counts + program_id(0), sum(keep.to(i32), axis = 0));
}

#[tlx::kernel(configs = [(BLOCK = 1024)])]
fn compact<const BLOCK: usize>(
    x: Ptr<f32>,
    block_base: Ptr<i32>,
    out: Ptr<f32>,
    n: i32,
    threshold: f32,
) {
    let pid = program_id(0);
    let offs = pid * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    let v = load(x + offs, mask = mask, other = 0.0);
    let keep = (v > threshold) & mask;
    let (rank, total) = cumsum(keep.to(i32), axis = 0);
    let base = load(block_base + pid);
    device_assert(
        total == load(block_base + pid + 1) - base,
        "block count changed between kernels",
    );
    store(out + base + rank, v, mask = keep);
}

/// Checks the kernels against a CPU reference on fresh random inputs.
pub fn run(device: &Device) -> Outcome {
    let size = Size::for_device(device);
    let n = match size {
        Size::Gpu => (1 << 24) + 5,
        Size::Interpreter => (1 << 16) + 5,
    };
    let threshold = 0.3_f32;
    let mut rng = Rng::fresh("stream_compaction");
    let x = rng.uniform_vec(n, -1.0, 1.0);
    let blocks = n.div_ceil(1024);
    let dx = device.upload(&x)?;
    let counts = device.upload(&vec![-1i32; blocks])?;
    count_kept::<1024>::launch(device, blocks as u32, &dx, &counts, n as i32, threshold)?;
    let counts = counts.download()?;
    // The exclusive scan of block counts, with the total appended.
    let mut base = Vec::with_capacity(blocks + 1);
    let mut running = 0i32;
    for c in &counts {
        base.push(running);
        running += c;
    }
    base.push(running);
    let want: Vec<f32> = x.iter().copied().filter(|&v| v > threshold).collect();
    if running as usize != want.len() {
        return Err(format!(
            "stream_compaction: kernel counted {running} kept elements, the reference {}",
            want.len()
        )
        .into());
    }
    let dbase = device.upload(&base)?;
    let out = device.upload(&vec![f32::NAN; want.len()])?;
    compact::<1024>::launch(
        device,
        blocks as u32,
        &dx,
        &dbase,
        &out,
        n as i32,
        threshold,
    )?;
    let got = out.download()?;
    let want64: Vec<f64> = want.iter().map(|&v| v as f64).collect();
    common::verdict(
        "stream_compaction",
        &format!("{n} elements, {} kept:", want.len()),
        common::max_rel_error(&got, &want64, 1e-6),
        0.0,
    )
}

#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    common::main_with("stream_compaction", run)
}

use tlx::prelude::*;

// A barrier phase is an integer: a float is not converted silently.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn k(x: Ptr<f32>, n: i32) {
    let bars = alloc_barriers(1, 1);
    let phase = load(x) * 2.0;
    barrier_arrive(local_view(bars, 0));
    barrier_wait(local_view(bars, 0), phase);
    store(x + n, phase);
}

fn main() {}

use tlx::prelude::*;

// A program has 16 hardware barriers, 0 to 15.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn barrier_sixteen(out: Ptr<f32>) {
    named_barrier_wait(16, 128);
    store(out, 0.0);
}

fn main() {}

use tlx::prelude::*;

// An mbarrier array is a handle for the barrier primitives, not a tensor.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn negate(out: Ptr<f32>) {
    let bars = alloc_barriers(1, 1);
    let x = -bars;
    store(out, 1.0);
}

fn main() {}

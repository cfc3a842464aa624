use tlx::prelude::*;

// `bar.sync` counts whole warps: the thread count is a multiple of 32.
#[tlx::kernel(num_warps = 4)]
fn odd_count(out: Ptr<f32>) {
    named_barrier_wait(3, 100);
    store(out, 0.0);
}

fn main() {}

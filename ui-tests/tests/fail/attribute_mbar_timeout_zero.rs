use tlx::prelude::*;

// A wait that times out at once is no timeout: the deadline must be positive.
#[tlx::kernel(num_warps = 4, mbar_timeout_ns = 0)]
fn k(out: Ptr<f32>) {
    store(out, 1.0);
}

fn main() {}

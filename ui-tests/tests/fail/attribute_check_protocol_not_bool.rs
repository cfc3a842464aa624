use tlx::prelude::*;

// `check_protocol` is on or off.
#[tlx::kernel(num_warps = 4, check_protocol = 0)]
fn k(out: Ptr<f32>) {
    store(out, 1.0);
}

fn main() {}

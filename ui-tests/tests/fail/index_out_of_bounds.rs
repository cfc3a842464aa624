use tlx::prelude::*;

// A constant index is checked where it is written.
#[tlx::kernel(num_warps = 4)]
fn k(x: Ptr<f32>, out: Ptr<f32>) {
    let t = load(x + arange(0, 16));
    store(out, t[16]);
}

fn main() {}

use tlx::prelude::*;

// A plain pointer carries no extents: `shape` needs a `Strided` parameter.
#[tlx::kernel(num_warps = 4)]
fn k(x: Ptr<f32>, out: Ptr<i32>) {
    store(out, x.shape(0));
}

fn main() {}

use tlx::prelude::*;

// A rank-2 view has dimensions 0 and 1.
#[tlx::kernel(num_warps = 4)]
fn k(x: Strided<f32, 2>, out: Ptr<i32>) {
    store(out, x.stride(2));
}

fn main() {}

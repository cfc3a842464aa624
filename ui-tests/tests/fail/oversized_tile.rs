use tlx::prelude::*;

// A block tensor lives in registers or shared memory: 2^21 elements is
// past the limit (2^20, as in Triton).
#[tlx::kernel(num_warps = 4)]
fn k(out: Ptr<f32>) {
    let big = zeros([2048, 1024], f32);
    store(out, sum(big));
}

fn main() {}

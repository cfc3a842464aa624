use tlx::prelude::*;

// Philox's round count shapes the generated code: it must be a constant.
#[tlx::kernel(num_warps = 4)]
fn k(out: Ptr<f32>, seed: i32, rounds: i32) {
    let i = arange(0, 128);
    store(out + i, rand(seed, i, n_rounds = rounds));
}

fn main() {}

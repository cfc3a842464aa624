use tlx::prelude::*;

// Philox takes an integer seed; a float seed is a mistake, not a conversion.
#[tlx::kernel(num_warps = 4)]
fn k(out: Ptr<f32>, seed: f32) {
    let i = arange(0, 128);
    store(out + i, rand(seed, i));
}

fn main() {}

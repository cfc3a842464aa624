use tlx::prelude::*;

// A combine function must be a helper `fn` written inside the kernel.
#[tlx::kernel(num_warps = 4)]
fn k(x: Ptr<f32>, out: Ptr<f32>) {
    let i = arange(0, 128);
    store(out, reduce(load(x + i), 0, largest));
}

fn main() {}

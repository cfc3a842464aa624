use tlx::prelude::*;

// `split` halves a last dimension of size 2 (what `join` makes); 128 is not.
#[tlx::kernel(num_warps = 4)]
fn k(x: Ptr<f32>, out: Ptr<f32>) {
    let i = arange(0, 128);
    let (a, b) = split(load(x + i));
    store(out + arange(0, 64), a + b);
}

fn main() {}

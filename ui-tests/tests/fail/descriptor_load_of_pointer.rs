use tlx::prelude::*;

// `.load([..])` reads a tensor descriptor's block; a pointer is loaded with `load(ptrs)`.
#[tlx::kernel(num_warps = 4)]
fn k(x: Ptr<f32>, out: Ptr<f32>) {
    let i = arange(0, 128);
    let v = x.load([0]);
    store(out + i, v);
}

fn main() {}

use tlx::prelude::*;

// `.store([..], v)` writes a tensor descriptor's block; a pointer is stored through with `store(ptrs, v)`.
#[tlx::kernel(num_warps = 4)]
fn k(x: Ptr<f32>, out: Ptr<f32>) {
    let i = arange(0, 128);
    out.store([0], load(x + i));
}

fn main() {}

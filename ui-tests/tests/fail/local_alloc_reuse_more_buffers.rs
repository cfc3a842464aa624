use tlx::prelude::*;

// Buffers are reused one for one: there are only two to reuse.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn k(out: Ptr<f32>) {
    let tiles = local_alloc([64, 64], bf16, 2);
    let words = local_alloc([64, 32], f32, 3, reuse = tiles);
    let r = arange(0, 64);
    let c = arange(0, 32);
    store(out + r[(.., None)] * 32 + c[(None, ..)], local_load(local_view(words, 2)));
}

fn main() {}

use tlx::prelude::*;

// `reuse` names an allocation, buffer for buffer: not a view of one.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn k(out: Ptr<f32>) {
    let tiles = local_alloc([64, 64], bf16, 2);
    let words = local_alloc([64, 32], f32, 1, reuse = local_view(tiles, 1));
    let r = arange(0, 64);
    let c = arange(0, 32);
    store(out + r[(.., None)] * 32 + c[(None, ..)], local_load(local_view(words, 0)));
}

fn main() {}

use tlx::prelude::*;

// Reused buffers are taken one for one, so they must have the same bytes.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn k(out: Ptr<f32>) {
    let tiles = local_alloc([64, 64], bf16, 2);
    let words = local_alloc([64, 64], f32, 2, reuse = tiles);
    let r = arange(0, 64);
    let c = arange(0, 64);
    store(out + r[(.., None)] * 64 + c[(None, ..)], local_load(local_view(words, 0)));
}

fn main() {}

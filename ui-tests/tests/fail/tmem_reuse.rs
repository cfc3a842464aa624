use tlx::prelude::*;

// Shared buffers may alias an earlier allocation with `reuse`; tensor memory
// is allocated once and its buffers picked with `local_view`.
#[tlx::kernel(arch = "sm_100a", num_warps = 4)]
fn k(out: Ptr<f32>) {
    let acc = local_alloc([128, 64], f32, 1, storage = "tmem");
    let again = local_alloc([128, 64], f32, 1, reuse = acc, storage = "tmem");
    let tile = local_load(local_view(again, 0));
    store(out + arange(0, 128), sum(tile, 1));
}

fn main() {}

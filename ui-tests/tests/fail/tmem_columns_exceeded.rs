use tlx::prelude::*;

// Two 128x256 f32 accumulators take all 512 columns of tensor memory; a
// third buffer does not fit.
#[tlx::kernel(arch = "sm_100a", num_warps = 4)]
fn k(out: Ptr<f32>) {
    let acc = local_alloc([128, 256], f32, 2, storage = "tmem");
    let scores = local_alloc([128, 64], f32, 1, storage = "tmem");
    let tile = local_load(local_view(acc, 0));
    let extra = local_load(local_view(scores, 0));
    store(out + arange(0, 128), sum(tile, 1) + sum(extra, 1));
}

fn main() {}

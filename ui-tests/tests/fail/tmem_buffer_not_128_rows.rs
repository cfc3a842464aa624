use tlx::prelude::*;

// Tensor memory has 128 lanes: a buffer is [128, N].
#[tlx::kernel(arch = "sm_100a", num_warps = 4)]
fn k(out: Ptr<f32>) {
    let acc = local_alloc([64, 128], f32, 1, storage = "tmem");
    let tile = local_load(local_view(acc, 0));
    store(out + arange(0, 64), sum(tile, 1));
}

fn main() {}

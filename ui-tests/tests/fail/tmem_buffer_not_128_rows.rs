use tlx::prelude::*;

// Tensor memory has 128 lanes: a buffer is [128, N] (or [64, N], an M = 64
// MMA's accumulator), never [32, N].
#[tlx::kernel(arch = "sm_100a", num_warps = 4)]
fn k(out: Ptr<f32>) {
    let acc = local_alloc([32, 128], f32, 1, storage = "tmem");
    let tile = local_load(local_view(acc, 0));
    store(out + arange(0, 32), sum(tile, 1));
}

fn main() {}

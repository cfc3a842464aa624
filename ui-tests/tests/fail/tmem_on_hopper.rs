use tlx::prelude::*;

// Tensor memory is Blackwell's: a Hopper build cannot have it.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn k(out: Ptr<f32>) {
    let acc = local_alloc([128, 64], f32, 1, storage = "tmem");
    local_store(local_view(acc, 0), zeros([128, 64], f32));
    let tile = local_load(local_view(acc, 0));
    store(out + arange(0, 128), sum(tile, 1));
}

fn main() {}

use tlx::prelude::*;

// Buffers live in shared memory ("smem") or, on Blackwell, tensor memory ("tmem").
#[tlx::kernel(arch = "sm_100a", num_warps = 4)]
fn k(out: Ptr<f32>) {
    let acc = local_alloc([128, 64], f32, 1, storage = "registers");
    let tile = local_load(local_view(acc, 0));
    store(out + arange(0, 128), sum(tile, 1));
}

fn main() {}

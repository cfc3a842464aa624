use tlx::prelude::*;

// TLX writes a tensor-memory MMA as `async_dot`; `tcgen05_mma` is the IR's name.
#[tlx::kernel(arch = "sm_100a", num_warps = 4)]
fn k(out: Ptr<f32>) {
    let a = local_alloc([128, 64], bf16, 1);
    let b = local_alloc([64, 64], bf16, 1);
    let acc = local_alloc([128, 64], f32, 1, storage = "tmem");
    tcgen05_mma(local_view(a, 0), local_view(b, 0), local_view(acc, 0));
    let tile = local_load(local_view(acc, 0));
    store(out + arange(0, 128), sum(tile, 1));
}

fn main() {}

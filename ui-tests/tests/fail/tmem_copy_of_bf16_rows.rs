use tlx::prelude::*;

// `tmem_copy` moves 32-bit cells: a bf16 tile has no tensor-memory form here.
#[tlx::kernel(arch = "sm_100a", num_warps = 4)]
fn copy(c: Ptr<f32>) {
    let src = local_alloc([128, 64], bf16, 1);
    let acc = local_alloc([128, 64], f32, 1, storage = "tmem");
    tmem_copy(local_view(src, 0), local_view(acc, 0));
    store(c + arange(0, 128), 1.0);
}

fn main() {}

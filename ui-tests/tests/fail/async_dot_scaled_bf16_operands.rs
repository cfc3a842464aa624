use tlx::prelude::*;

// Block-scaled MMAs take fp8 operands (mxfp8): bf16 has no scaled form.
#[tlx::kernel(arch = "sm_100a", num_warps = 4)]
fn scaled(c: Ptr<f32>) {
    let a = local_alloc([128, 128], bf16, 1);
    let b = local_alloc([128, 128], bf16, 1);
    let acc = local_alloc([128, 128], f32, 1, storage = "tmem");
    let sa = local_alloc([128, 4], u8, 1, storage = "tmem");
    let sb = local_alloc([128, 4], u8, 1, storage = "tmem");
    let done = alloc_barriers(1, 1);
    async_dot_scaled(
        local_view(a, 0),
        local_trans(local_view(b, 0)),
        local_view(acc, 0),
        local_view(sa, 0),
        local_view(sb, 0),
        use_acc = false,
        mbarriers = [local_view(done, 0)],
    );
    barrier_wait(local_view(done, 0), 0);
    store(c + arange(0, 128), 1.0);
}

fn main() {}

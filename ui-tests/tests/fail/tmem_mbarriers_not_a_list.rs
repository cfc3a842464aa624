use tlx::prelude::*;

// `mbarriers` is a list of barriers, as in TLX.
#[tlx::kernel(arch = "sm_100a", num_warps = 4)]
fn k(out: Ptr<f32>) {
    let a = local_alloc([128, 64], bf16, 1);
    let b = local_alloc([64, 64], bf16, 1);
    let acc = local_alloc([128, 64], f32, 1, storage = "tmem");
    let done = alloc_barriers(1, 1);
    local_store(local_view(a, 0), zeros([128, 64], bf16));
    local_store(local_view(b, 0), zeros([64, 64], bf16));
    async_dot(
        local_view(a, 0),
        local_view(b, 0),
        local_view(acc, 0),
        use_acc = false,
        mbarriers = local_view(done, 0),
    );
    barrier_wait(local_view(done, 0), 0);
    let tile = local_load(local_view(acc, 0));
    store(out + arange(0, 128), sum(tile, 1));
}

fn main() {}

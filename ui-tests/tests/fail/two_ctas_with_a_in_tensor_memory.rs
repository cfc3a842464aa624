use tlx::prelude::*;

// A 2-CTA MMA reads each program's A from shared memory, not tensor memory.
#[tlx::kernel(arch = "sm_100a", num_warps = 4, ctas_per_cga = 2)]
fn pair(c: Ptr<f32>) {
    let p = local_alloc([128, 64], bf16, 1, storage = "tmem");
    let b = local_alloc([64, 64], bf16, 1);
    let acc = local_alloc([128, 128], f32, 1, storage = "tmem");
    let done = alloc_barriers(1, 1);
    async_dot(local_view(p, 0), local_view(b, 0), local_view(acc, 0), use_acc = false,
              mbarriers = [local_view(done, 0)], two_ctas = true);
    barrier_wait(local_view(done, 0), 0);
    store(c + arange(0, 128), 1.0);
}

fn main() {}

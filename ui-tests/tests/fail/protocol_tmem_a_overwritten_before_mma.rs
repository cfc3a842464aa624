use tlx::prelude::*;

// P is written into tensor memory again while the MMA that reads it as its
// A may still run: wait on the MMA's barrier first.
#[tlx::kernel(arch = "sm_100a", num_warps = 4)]
fn ts(a: Ptr<bf16>, b: Ptr<bf16>, c: Ptr<f32>) {
    let b_buf = local_alloc([64, 64], bf16, 1);
    let p = local_alloc([128, 64], bf16, 1, storage = "tmem");
    let acc = local_alloc([128, 64], f32, 1, storage = "tmem");
    let done = alloc_barriers(1, 1);
    let r = arange(0, 128);
    let k = arange(0, 64);
    local_store(local_view(b_buf, 0), load(b + k[(.., None)] * 64 + k[(None, ..)]));
    local_store(local_view(p, 0), load(a + r[(.., None)] * 64 + k[(None, ..)]));
    async_dot(local_view(p, 0), local_view(b_buf, 0), local_view(acc, 0), use_acc = false,
              mbarriers = [local_view(done, 0)]);
    local_store(local_view(p, 0), full([128, 64], 1.0, bf16));
    barrier_wait(local_view(done, 0), 0);
    store(c + r[(.., None)] * 64 + k[(None, ..)], local_load(local_view(acc, 0)));
}

fn main() {}

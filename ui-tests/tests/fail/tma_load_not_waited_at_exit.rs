use tlx::prelude::*;

// A ring that prefetches one tile past the last: the copy into the spare
// stage is never waited for, so it may land after the program has exited
// and its shared memory belongs to the next one.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn k(x: TensorDesc<f32, 16, 64>, out: Ptr<f32>, n: i32) {
    let bufs = local_alloc([16, 64], f32, 2);
    let full = alloc_barriers(2, 1);
    let mut acc = zeros([16, 64], f32);
    barrier_expect_bytes(local_view(full, 0), 16 * 64 * 4);
    async_descriptor_load(x, local_view(bufs, 0), [0, 0], local_view(full, 0));
    for i in 0..n {
        let next = (i + 1) % 2;
        barrier_expect_bytes(local_view(full, next), 16 * 64 * 4);
        async_descriptor_load(x, local_view(bufs, next), [(i + 1) * 16, 0], local_view(full, next));
        barrier_wait(local_view(full, i % 2), (i / 2) % 2);
        acc = acc + local_load(local_view(bufs, i % 2));
    }
    let r = arange(0, 16);
    let c = arange(0, 64);
    store(out + r[(.., None)] * 64 + c[(None, ..)], acc);
}

fn main() {}

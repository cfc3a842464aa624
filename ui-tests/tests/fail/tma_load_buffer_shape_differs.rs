use tlx::prelude::*;

// The descriptor moves [64, 64] blocks; the buffer holds [64, 32].
#[tlx::kernel(num_warps = 4)]
fn short_buffer(a_desc: TensorDesc<bf16, 64, 64>, out: Ptr<f32>) {
    let bufs = local_alloc([64, 32], bf16, 1);
    let bars = alloc_barriers(1, 1);
    let bar = local_view(bars, 0);
    barrier_expect_bytes(bar, 64 * 64 * 2);
    async_descriptor_load(a_desc, local_view(bufs, 0), [0, 0], bar);
    barrier_wait(bar, 0);
    store(out, 0.0);
}

fn main() {}

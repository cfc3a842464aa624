use tlx::prelude::*;

// Outside a pipe stage, a TMA load needs the barrier it completes on.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn no_barrier(desc: TensorDesc<bf16, 64, 64>, out: Ptr<f32>) {
    let bufs = local_alloc([64, 64], bf16, 1);
    async_descriptor_load(desc, local_view(bufs, 0), [0, 0]);
    store(out, 0.0);
}

fn main() {}

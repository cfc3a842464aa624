use tlx::prelude::*;

// cp.async copies write their buffer until `async_load_wait_group` retires
// them: a task that ends with one in flight may have its shared memory
// reused under it.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn prefetch(x: Ptr<f32>, out: Ptr<f32>, n: i32) {
    let bufs = local_alloc([64], f32, 2);
    let offs = arange(0, 64);
    async_load(x + offs, local_view(bufs, 0), mask = offs < n);
    async_load_commit_group();
    async_load_wait_group(0);
    let first = local_load(local_view(bufs, 0));
    async_load(x + 64 + offs, local_view(bufs, 1), mask = offs + 64 < n);
    async_load_commit_group();
    store(out + offs, first);
}

fn main() {}

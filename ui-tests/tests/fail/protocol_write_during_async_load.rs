use tlx::prelude::*;

// A `local_store` into the buffer an `async_load` of the same task is still
// filling: the copy and the store land in either order.
#[tlx::kernel(arch = "sm_90a", num_warps = 4, configs = [(BLOCK = 128)])]
fn fill<const BLOCK: usize>(x: Ptr<f32>, out: Ptr<f32>) {
    let tiles = local_alloc([BLOCK], f32, 1);
    let cols = arange(0, BLOCK);
    async_load(x + cols, local_view(tiles, 0));
    async_load_commit_group();
    local_store(local_view(tiles, 0), zeros([BLOCK], f32));
    async_load_wait_group(0);
    store(out + cols, local_load(local_view(tiles, 0)));
}

fn main() {}

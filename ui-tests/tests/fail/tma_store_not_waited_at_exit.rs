use tlx::prelude::*;

// A TMA store reads its shared buffer after the call returns: a task that
// ends without `async_descriptor_store_wait(0)` may have its shared memory
// reused before the store has read it.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn k(y: TensorDesc<f32, 16, 64>) {
    let out = local_view(local_alloc([16, 64], f32, 1), 0);
    local_store(out, full([16, 64], 1.0, f32));
    async_descriptor_store(y, out, [program_id(0) * 16, 0]);
}

fn main() {}

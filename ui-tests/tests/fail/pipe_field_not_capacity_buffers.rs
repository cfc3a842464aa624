use tlx::prelude::*;

// Each field travels in one buffer per stage: `capacity` buffers.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn pipe_field_count(out: Ptr<f32>) {
    let a_bufs = local_alloc([16, 16], f32, 3);
    let b_bufs = local_alloc([16, 16], f32, 2);
    let p = pipe!(capacity = 3, a = a_bufs, b = b_bufs);
    let slot = p.writer().acquire(0);
    local_store(slot.a, 1.0);
    store(out, 0.0);
}

fn main() {}

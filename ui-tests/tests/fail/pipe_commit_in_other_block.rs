use tlx::prelude::*;

// A stage acquired in one block must be committed in that block.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn late_commit(out: Ptr<f32>, n: i32) {
    let bufs = local_alloc([16, 16], f32, 2);
    let p = pipe!(capacity = 2, x = bufs);
    let writer = p.writer();
    let slot = writer.acquire(0);
    local_store(slot.x, 1.0);
    if n > 0 {
        writer.commit(0);
    }
    store(out, 0.0);
}

fn main() {}

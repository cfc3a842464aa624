use tlx::prelude::*;

// A pipe owns its stages' barriers: it is declared once, at the top of the
// body, like the buffers it carries.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn pipe_per_iteration(out: Ptr<f32>, n: i32) {
    let x_bufs = local_alloc([16, 16], f32, 2);
    for i in 0..n {
        let p = pipe!(capacity = 2, x = x_bufs);
        let slot = p.writer().acquire(i);
        local_store(slot.x, 1.0);
    }
    store(out, 0.0);
}

fn main() {}

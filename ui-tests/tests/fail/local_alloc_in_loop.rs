use tlx::prelude::*;

// Shared buffers are allocated once per program, at the top of the body.
#[tlx::kernel(num_warps = 4)]
fn alloc_per_iteration(out: Ptr<f32>, n: i32) {
    for i in 0..n {
        let buf = local_alloc([16, 16], f32, 1);
        local_store(local_view(buf, 0), 1.0);
    }
    store(out, 0.0);
}

fn main() {}

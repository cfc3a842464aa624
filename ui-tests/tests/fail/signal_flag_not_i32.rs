use tlx::prelude::*;

// A flag is one i32: a pointer to f32 flags, or a block of them, is refused.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn waits(flags: Ptr<f32>, out: Ptr<f32>) {
    signal_wait_until(flags, "ge", 1);
    store(out, 1.0);
}

fn main() {}

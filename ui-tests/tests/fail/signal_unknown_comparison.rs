use tlx::prelude::*;

// `cmp` is one of "eq", "ne", "ge", "gt", "le", "lt".
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn waits(flags: Ptr<i32>, out: Ptr<f32>) {
    signal_wait_until(flags, ">=", 1);
    store(out, 1.0);
}

fn main() {}

use tlx::prelude::*;

// Signals are i32 flags, as `signal_wait_until` reads them.
#[tlx::kernel(arch = "sm_90a")]
fn raises(flags: Ptr<f32>) {
    signal_set(flags, 1.0);
}

fn main() {}

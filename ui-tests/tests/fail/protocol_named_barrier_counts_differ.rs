use tlx::prelude::*;

// The matching arrive and wait of a named barrier count different threads:
// the hardware barrier completes on the first count reached, or never.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn handoff(out: Ptr<f32>) {
    async_tasks! {
        task(default) {
            named_barrier_arrive(9, 256);
        }
        task(num_warps = 4) {
            named_barrier_wait(9, 128);
            store(out, 1.0);
        }
    }
}

fn main() {}

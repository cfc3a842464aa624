use tlx::prelude::*;

// The same relay with one id per hand-off passes the checker.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn relay(out: Ptr<f32>) {
    async_tasks! {
        task(default) {
            named_barrier_arrive(9, 256);
        }
        task(num_warps = 4) {
            named_barrier_wait(9, 256);
            store(out, 1.0);
            named_barrier_arrive(10, 256);
        }
        task(num_warps = 4) {
            named_barrier_wait(10, 256);
            store(out + 1, 2.0);
        }
    }
}

pub fn main() {}

use tlx::prelude::*;

// A named barrier that waits for more threads than ever arrive: the two
// warp groups bring 256 threads, the barrier waits for 384.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn handoff(out: Ptr<f32>) {
    async_tasks! {
        task(default) {
            named_barrier_arrive(9, 384);
        }
        task(num_warps = 4) {
            named_barrier_wait(9, 384);
            store(out, 1.0);
        }
    }
}

fn main() {}

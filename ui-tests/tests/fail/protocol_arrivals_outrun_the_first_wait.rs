use tlx::prelude::*;

// Two producers arrive on a barrier counted for one arrival a phase. In
// round robin the consumer's first wait passes between them and the run
// passes; when both arrive first, the barrier is two phases on and the
// wait for phase 0 never passes. Only the checker's exploration of other
// interleavings shows it.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn two_producers(out: Ptr<f32>) {
    let ready = alloc_barriers(1, 1);
    let other = alloc_barriers(1, 1);
    async_tasks! {
        task(default) {
            barrier_wait(local_view(ready, 0), 0);
            barrier_wait(local_view(ready, 0), 1);
            store(out + arange(0, 128), full([128], 1.0, f32));
        }
        task(num_warps = 1) {
            barrier_arrive(local_view(ready, 0));
        }
        task(num_warps = 1) {
            for i in 0..4 {
                barrier_arrive(local_view(other, 0));
                barrier_wait(local_view(other, 0), i % 2);
            }
            barrier_arrive(local_view(ready, 0));
        }
    }
}

fn main() {}

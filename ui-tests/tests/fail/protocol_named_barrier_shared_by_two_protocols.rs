use tlx::prelude::*;

// Two hand-offs on one named barrier id: the loader passes to the first
// consumer, the first consumer to the second. The hardware counts threads,
// so the loader's arrival can just as well complete the second consumer's
// wait.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn relay(out: Ptr<f32>) {
    async_tasks! {
        task(default) {
            named_barrier_arrive(9, 256);
        }
        task(num_warps = 4) {
            named_barrier_wait(9, 256);
            store(out, 1.0);
            named_barrier_arrive(9, 256);
        }
        task(num_warps = 4) {
            named_barrier_wait(9, 256);
            store(out + 1, 2.0);
        }
    }
}

fn main() {}

use tlx::prelude::*;

// Two task replicas: the compiler synchronizes the program on barrier 0 and
// each replica on its own (1 and 2), so a kernel's own handoff needs id 3+.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn handoff(out: Ptr<f32>) {
    async_tasks! {
        task(default) {
            named_barrier_arrive(2, 256);
        }
        task(num_warps = 4) {
            named_barrier_wait(2, 256);
            store(out, 1.0);
        }
    }
}

fn main() {}

use tlx::prelude::*;

// A task holds only some of the program's threads; the cluster barrier
// needs all of them.
#[tlx::kernel(num_warps = 4, ctas_per_cga = 2)]
fn waits(out: Ptr<f32>) {
    async_tasks! {
        task(default) {
            store(out + program_id(0), 1.0);
        }
        task(num_warps = 1) {
            cluster_barrier();
        }
    }
}

fn main() {}

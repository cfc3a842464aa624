use tlx::prelude::*;

// A program has at most 32 warps; a task cannot be replicated past them.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn many(out: Ptr<f32>) {
    async_tasks! {
        task(default) {
            store(out, 1.0);
        }
        task(num_warps = 1, replicate = 2147483647) {
        }
    }
}

fn main() {}

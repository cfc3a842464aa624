use tlx::prelude::*;

// Twelve warps start with 168 registers each; warp group 1 raises its own
// to 232, but no task lowers its: the `setmaxnreg.inc` would wait forever.
#[tlx::kernel(num_warps = 4)]
fn consumer_only(x: Ptr<f32>, out: Ptr<f32>) {
    async_tasks! {
        task(default) {
            store(out, sum(load(x + arange(0, 512)), axis = 0));
        }
        task(num_warps = 4, num_regs = 232) {
            store(out + 1, sum(load(x + 512 + arange(0, 512)), axis = 0));
        }
        task(num_warps = 4) {
            store(out + 2, 1.0);
        }
    }
}

fn main() {}

use tlx::prelude::*;

// `setmaxnreg` is executed by a whole warp group: a 1-warp task cannot
// have a register budget of its own.
#[tlx::kernel(num_warps = 4)]
fn producer_warp(x: Ptr<f32>, out: Ptr<f32>) {
    async_tasks! {
        task(default) {
            store(out, sum(load(x + arange(0, 512)), axis = 0));
        }
        task(num_warps = 1, num_regs = 40) {
            store(out + 1, 1.0);
        }
    }
}

fn main() {}

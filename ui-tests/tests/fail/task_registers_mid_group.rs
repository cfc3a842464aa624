use tlx::prelude::*;

// `setmaxnreg` is executed by a whole warp group together: a task with a
// register budget starts a warp group (a 1-warp one holds the rest of it).
#[tlx::kernel(num_warps = 4)]
fn producer_warp(x: Ptr<f32>, out: Ptr<f32>) {
    async_tasks! {
        task(default) {
            store(out, sum(load(x + arange(0, 512)), axis = 0));
        }
        task(num_warps = 1, warp_group_start_id = 4) {
            store(out + 2, 2.0);
        }
        task(num_warps = 1, num_regs = 40, warp_group_start_id = 5) {
            store(out + 1, 1.0);
        }
    }
}

fn main() {}

use tlx::prelude::*;

// A 1-warp task with a register budget holds its whole warp group (its
// other warps run `setmaxnreg` with it, then idle): no other task may
// have warps there.
#[tlx::kernel(num_warps = 4)]
fn producer_warp(x: Ptr<f32>, out: Ptr<f32>) {
    async_tasks! {
        task(default) {
            store(out, sum(load(x + arange(0, 512)), axis = 0));
        }
        task(num_warps = 1, num_regs = 40, warp_group_start_id = 4) {
            store(out + 1, 1.0);
        }
        task(num_warps = 1, warp_group_start_id = 5) {
            store(out + 2, 2.0);
        }
    }
}

fn main() {}

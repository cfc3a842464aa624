use tlx::prelude::*;

// A 1-warp task with a register budget holds its whole warp group; another
// task may run on the group's idle warps only at the same budget (the group
// executes one `setmaxnreg`).
#[tlx::kernel(num_warps = 1)]
fn producer_and_writer(x: Ptr<f32>, out: Ptr<f32>) {
    async_tasks! {
        task(default, num_regs = 24) {
            store(out, load(x));
        }
        task(num_warps = 1, num_regs = 40, warp_group_start_id = 1) {
            store(out + 1, 1.0);
        }
        task(num_warps = 4, num_regs = 240, warp_group_start_id = 4) {
            store(out + 2, 2.0);
        }
    }
}

fn main() {}

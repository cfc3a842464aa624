use tlx::prelude::*;

// In a warp-specialized kernel, thread ids are numbered per task.
#[tlx::kernel(num_warps = 4)]
fn k(out: Ptr<i32>) {
    let tid = thread_id(0);
    async_tasks! {
        task(default) {
            store(out + tid, tid);
        }
        task(num_warps = 1) {
            store(out + 200, 1);
        }
    }
}

fn main() {}

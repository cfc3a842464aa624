use tlx::prelude::*;

// Sixteen replicas, but a program has fifteen barriers to give them.
#[tlx::kernel(num_warps = 1)]
fn crowd(out: Ptr<i32>) {
    async_tasks! {
        task(default) {}
        task(num_warps = 1, replicate = 16) {
            store(out + async_task_replica_id(), 1);
        }
    }
}

fn main() {}

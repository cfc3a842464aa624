use tlx::prelude::*;

// Only a task replica has a replica id.
#[tlx::kernel(num_warps = 4)]
fn ids(out: Ptr<i32>) {
    store(out, async_task_replica_id());
}

fn main() {}

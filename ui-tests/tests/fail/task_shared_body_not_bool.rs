use tlx::prelude::*;

// `shared_body` says whether replicas share one copy of the code: a bool.
#[tlx::kernel(num_warps = 4)]
fn k(out: Ptr<f32>) {
    async_tasks! {
        task(default) {
            store(out, 1.0);
        }
        task(num_warps = 4, replicate = 2, shared_body = 1) {
            store(out + 1 + async_task_replica_id(), 2.0);
        }
    }
}

fn main() {}

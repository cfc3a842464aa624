use tlx::prelude::*;

// A warp reaches only its quarter of the TMEM lanes: one warp cannot load
// all 128 rows of an accumulator.
#[tlx::kernel(arch = "sm_100a", num_warps = 4)]
fn k(out: Ptr<f32>) {
    let acc = local_alloc([128, 64], f32, 1, storage = "tmem");
    let stored = alloc_barriers(1, 1);
    async_tasks! {
        task(default) {
            local_store(local_view(acc, 0), zeros([128, 64], f32));
            barrier_arrive(local_view(stored, 0));
        }
        task(num_warps = 1) {
            barrier_wait(local_view(stored, 0), 0);
            let tile = local_load(local_view(acc, 0));
            store(out + arange(0, 128), sum(tile, 1));
        }
    }
}

fn main() {}

use tlx::prelude::*;

// TLX's warp reductions are max, min, abs_max and abs_min (and sum here).
#[tlx::kernel(num_warps = 4)]
fn k(x: Ptr<f32>, out: Ptr<f32>) {
    let tid = thread_id(0);
    store(out + tid, warp_redux(load(x + tid), "mean"));
}

fn main() {}

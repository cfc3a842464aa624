use tlx::prelude::*;

#[tlx::kernel(num_warps = 4)]
fn wait_on_array(out: Ptr<f32>) {
    let bars = alloc_barriers(2, 1);
    barrier_arrive(local_view(bars, 0));
    barrier_wait(bars, 0);
    store(out, 0.0);
}

fn main() {}

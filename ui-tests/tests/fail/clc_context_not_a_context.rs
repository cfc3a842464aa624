use tlx::prelude::*;

#[tlx::kernel(arch = "sm_100a")]
fn persistent(x: Ptr<f32>) {
    let bars = alloc_barriers(1, 1);
    let tile = clc_consumer(bars, 0);
    store(x + tile, 1.0);
}

fn main() {}

use tlx::prelude::*;

// `launch_pdl` takes `true` or `false`, not a number.
#[tlx::kernel(launch_pdl = 1)]
fn k(x: Ptr<f32>) {
    gdc_wait();
    store(x, 1.0);
}

fn main() {}

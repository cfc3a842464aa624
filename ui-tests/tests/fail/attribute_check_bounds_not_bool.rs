use tlx::prelude::*;

// `check_bounds` takes `true` or `false`, not a number.
#[tlx::kernel(check_bounds = 1)]
fn k(x: Ptr<f32>) {
    store(x, 1.0);
}

fn main() {}

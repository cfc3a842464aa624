use tlx::prelude::*;

#[tlx::kernel]
fn twice(x: Ptr<f32>, out: Ptr<f32>) {
    let double = |v| v * 2.0;
    store(out, double(load(x)));
}

fn main() {}

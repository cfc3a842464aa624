use tlx::prelude::*;

#[tlx::kernel]
fn fill(out: Ptr<f32>) {
    store(out + arange(0, 100), zeros([100], f32));
}

fn main() {}

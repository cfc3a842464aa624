use tlx::prelude::*;

#[tlx::kernel]
fn copy(x: Ptr<f32>, out: Ptr<f32>) {
    store(out + arange(0, 128));
}

fn main() {}

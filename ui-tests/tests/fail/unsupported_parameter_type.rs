use tlx::prelude::*;

#[tlx::kernel]
fn copy(x: Vec<f32>, out: Ptr<f32>) {
    store(out, 0.0);
}

fn main() {}

use tlx::prelude::*;

#[tlx::kernel]
fn fenced(x: Ptr<f32>) {
    store(x, 1.0);
    fence("cta");
}

fn main() {}

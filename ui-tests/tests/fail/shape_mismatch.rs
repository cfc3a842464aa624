use tlx::prelude::*;

#[tlx::kernel]
fn add(x: Ptr<f32>, out: Ptr<f32>) {
    let a = load(x + arange(0, 128));
    let b = load(x + arange(0, 256));
    store(out + arange(0, 128), a + b);
}

fn main() {}

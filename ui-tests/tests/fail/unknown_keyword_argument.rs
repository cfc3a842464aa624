use tlx::prelude::*;

#[tlx::kernel]
fn copy(x: Ptr<f32>, out: Ptr<f32>, n: i32) {
    let offs = arange(0, 128);
    let v = load(x + offs, maske = offs < n);
    store(out + offs, v, mask = offs < n);
}

fn main() {}

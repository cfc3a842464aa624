use tlx::prelude::*;

// A helper's scalar parameter types are checked at each call.
#[tlx::kernel]
fn k(x: Ptr<i32>, out: Ptr<f32>) {
    fn halve(v: f32) -> f32 {
        v * 0.5
    }
    let i = arange(0, 128);
    store(out + i, halve(load(x + i)));
}

fn main() {}

use tlx::prelude::*;

// An annotation is checked, not a conversion: the loaded values are i32.
#[tlx::kernel]
fn k(x: Ptr<i32>, out: Ptr<f32>) {
    let i = arange(0, 128);
    let v: f32 = load(x + i);
    store(out + i, v);
}

fn main() {}

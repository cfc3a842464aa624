use tlx::prelude::*;

#[tlx::kernel]
fn accumulate(x: Ptr<f32>, out: Ptr<f16>, n: i32) {
    let mut acc = zeros([128], f32);
    for i in 0..n {
        acc = load(x + i * 128 + arange(0, 128)).to(f16);
    }
    store(out + arange(0, 128), acc);
}

fn main() {}

use tlx::prelude::*;

#[tlx::kernel]
fn mm(out: Ptr<f32>) {
    let a = zeros([64, 32], f16);
    let b = zeros([16, 64], f16);
    let c = dot(a, b);
    store(out + arange(0, 64)[(.., None)] * 64 + arange(0, 64)[(None, ..)], c);
}

fn main() {}

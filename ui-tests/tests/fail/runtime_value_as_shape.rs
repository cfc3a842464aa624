use tlx::prelude::*;

#[tlx::kernel]
fn fill(out: Ptr<f32>, n: i32) {
    let offs = arange(0, n);
    store(out + offs, zeros([128], f32));
}

fn main() {}

use tlx::prelude::*;

#[tlx::kernel]
fn copy(x: Ptr<f32>, out: Ptr<f32>) {
    let offs = arange(0, 128);
    store(out + offs, load(x + ofs));
}

fn main() {}

use tlx::prelude::*;

#[tlx::kernel]
fn copy(x: Ptr<f32>, out: Ptr<f32>, stride: i32) {
    let stride = multiple_of(stride, 12);
    let offs = program_id(0) * stride + arange(0, 64);
    store(out + offs, load(x + offs));
}

fn main() {}

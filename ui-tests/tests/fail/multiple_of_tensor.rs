use tlx::prelude::*;

#[tlx::kernel]
fn copy(x: Ptr<f32>, out: Ptr<f32>) {
    let offs = multiple_of(program_id(0) * 64 + arange(0, 64), 4);
    store(out + offs, load(x + offs));
}

fn main() {}

use tlx::prelude::*;

#[tlx::kernel(ctas_per_cga = (4, 8))]
fn copy(x: Ptr<f32>, out: Ptr<f32>) {
    let offs = program_id(0) * 64 + arange(0, 64);
    store(out + offs, load(x + offs));
}

fn main() {}

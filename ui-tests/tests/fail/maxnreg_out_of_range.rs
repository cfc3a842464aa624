use tlx::prelude::*;

#[tlx::kernel(configs = [(BLOCK = 1024, maxnreg = 300)])]
fn copy<const BLOCK: usize>(x: Ptr<f32>, out: Ptr<f32>) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(out + offs, load(x + offs));
}

fn main() {}

use tlx::prelude::*;

// `restore` names buffers the trial launches overwrite.
#[tlx::kernel(configs = [(BLOCK = 256), (BLOCK = 1024)], key = [n], restore = [n])]
fn k<const BLOCK: usize>(x: Ptr<f32>, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(x + offs, 1.0, mask = offs < n);
}

fn main() {}

use tlx::prelude::*;

// `key` names scalar parameters: the sizes a configuration's speed depends on.
#[tlx::kernel(configs = [(BLOCK = 256), (BLOCK = 1024)], key = [x, m])]
fn k<const BLOCK: usize>(x: Ptr<f32>, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(x + offs, 1.0, mask = offs < n);
}

fn main() {}

use tlx::prelude::*;

// Only i64 addresses (loaded from a table) become pointers.
#[tlx::kernel(arch = "sm_90a")]
fn reads(table: Ptr<i32>, out: Ptr<f32>) {
    let p = load(table) as Ptr<f32>;
    store(out, load(p));
}

fn main() {}

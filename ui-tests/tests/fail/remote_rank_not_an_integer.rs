use tlx::prelude::*;

// A rank is an integer scalar.
#[tlx::kernel(arch = "sm_90a")]
fn pulls(mesh: Mesh, x: SymPtr<f32>, out: Ptr<f32>) {
    let peer = shard_id(mesh, 0).to(f32) + 1.0;
    store(out, load(remote(x, peer)));
}

fn main() {}

use tlx::prelude::*;

// `remote` reaches a peer's copy of a symmetric buffer; a plain pointer has none.
#[tlx::kernel(arch = "sm_90a")]
fn pulls(mesh: Mesh, x: Ptr<f32>, out: Ptr<f32>) {
    let peer = (shard_id(mesh, 0) + 1) % shard_count(mesh, 0);
    store(out, load(remote(x, peer)));
}

fn main() {}

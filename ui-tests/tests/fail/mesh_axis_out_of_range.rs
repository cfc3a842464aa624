use tlx::prelude::*;

// A mesh has one axis, its ranks.
#[tlx::kernel(arch = "sm_90a")]
fn ranks(mesh: Mesh, out: Ptr<i32>) {
    store(out, shard_id(mesh, 1));
}

fn main() {}

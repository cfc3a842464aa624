use tlx::prelude::*;

// A mesh has at most three axes.
#[tlx::kernel(arch = "sm_90a")]
fn ranks(mesh: Mesh<4>, out: Ptr<i32>) {
    store(out, shard_id(mesh, 0));
}

fn main() {}

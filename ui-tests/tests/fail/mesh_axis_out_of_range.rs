use tlx::prelude::*;

// A `Mesh` has one axis, its ranks (`Mesh<2>` has two).
#[tlx::kernel(arch = "sm_90a")]
fn ranks(mesh: Mesh, out: Ptr<i32>) {
    store(out, shard_id(mesh, 1));
}

fn main() {}

use tlx::prelude::*;

// The mesh is not a number: its rank is `shard_id(mesh, 0)`.
#[tlx::kernel(arch = "sm_90a")]
fn ranks(mesh: Mesh, out: Ptr<i32>) {
    store(out, mesh + 1);
}

fn main() {}

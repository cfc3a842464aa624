use tlx::prelude::*;

// A `Mesh<2>` has axes 0 and 1: a barrier along axis 2 names none.
#[tlx::kernel(arch = "sm_90a")]
fn rows(mesh: Mesh<2>, out: Ptr<i32>) {
    distributed_barrier(mesh, 2);
    store(out, shard_id(mesh, 1));
}

fn main() {}

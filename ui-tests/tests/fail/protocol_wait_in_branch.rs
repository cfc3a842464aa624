use tlx::prelude::*;

// Nothing was issued after the product before the branch, so a wait that
// leaves one group in flight may leave that one.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn k(c: Ptr<f32>, more: i32) {
    let a = local_view(local_alloc([64, 64], bf16, 1), 0);
    let b = local_view(local_alloc([64, 64], bf16, 1), 0);
    local_store(a, full([64, 64], 1.0, bf16));
    local_store(b, full([64, 64], 1.0, bf16));
    let rows = arange(0, 64);
    let at = rows[(.., None)] * 64 + rows[(None, ..)];
    let mut acc = async_dot(a, b, zeros([64, 64], f32));
    if more > 0 {
        acc = async_dot_wait(1, acc);
        store(c + at, acc);
    }
    acc = async_dot_wait(0, acc);
    store(c + 4096 + at, acc);
}

fn main() {}

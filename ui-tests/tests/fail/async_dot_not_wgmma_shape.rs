use tlx::prelude::*;

// wgmma splits M into 64 rows per warp group: 32 rows cannot be issued
// by the 4 warps of this program.
#[tlx::kernel(num_warps = 4)]
fn small_m(out: Ptr<f32>) {
    let a = local_alloc([32, 64], bf16, 1);
    let b = local_alloc([64, 64], bf16, 1);
    local_store(local_view(a, 0), 0.0);
    local_store(local_view(b, 0), 0.0);
    let acc = zeros([32, 64], f32);
    let acc = async_dot(local_view(a, 0), local_view(b, 0), acc);
    let acc = async_dot_wait(0, acc);
    store(out + arange(0, 32)[(.., None)] * 64 + arange(0, 64)[(None, ..)], acc);
}

fn main() {}

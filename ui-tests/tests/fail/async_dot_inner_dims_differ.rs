use tlx::prelude::*;

#[tlx::kernel(num_warps = 4)]
fn mm(out: Ptr<f32>) {
    let a = local_alloc([64, 32], f16, 1);
    let b = local_alloc([64, 64], f16, 1);
    local_store(local_view(a, 0), 0.0);
    local_store(local_view(b, 0), 0.0);
    let acc = zeros([64, 64], f32);
    let acc = async_dot(local_view(a, 0), local_view(b, 0), acc);
    let acc = async_dot_wait(0, acc);
    store(out + arange(0, 64)[(.., None)] * 64 + arange(0, 64)[(None, ..)], acc);
}

fn main() {}

use tlx::prelude::*;

// `use_acc` and `mbarriers` belong to Blackwell's tensor-memory form.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn k(out: Ptr<f32>) {
    let a = local_alloc([64, 64], bf16, 1);
    let b = local_alloc([64, 64], bf16, 1);
    local_store(local_view(a, 0), zeros([64, 64], bf16));
    local_store(local_view(b, 0), zeros([64, 64], bf16));
    let mut acc = zeros([64, 64], f32);
    acc = async_dot(local_view(a, 0), local_view(b, 0), acc, use_acc = false);
    acc = async_dot_wait(0, acc);
    store(out + arange(0, 64), sum(acc, 1));
}

fn main() {}

use tlx::prelude::*;

// The product issued before the branch is the older of two in flight when
// the branch waits: leaving one group in flight completes it (FA's last
// `P V`, issued with the next tile's first scores).
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
        let s = async_dot(a, b, zeros([64, 64], f32));
        acc = async_dot_wait(1, acc);
        store(c + at, acc);
        let s = async_dot_wait(0, s);
        store(c + 4096 + at, s);
    } else {
        acc = async_dot_wait(0, acc);
        store(c + at, acc);
    }
}

pub fn main() {}

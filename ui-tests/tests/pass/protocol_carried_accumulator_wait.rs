use tlx::prelude::*;

// A wait on the previous iteration's `async_dot`, carried around the loop:
// `s` was issued after it, so leaving one group in flight completes it.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn k(c: Ptr<f32>, n: i32) {
    let a = local_view(local_alloc([64, 64], bf16, 1), 0);
    let b = local_view(local_alloc([64, 64], bf16, 1), 0);
    local_store(a, full([64, 64], 1.0, bf16));
    local_store(b, full([64, 64], 1.0, bf16));
    let rows = arange(0, 64);
    let at = rows[(.., None)] * 64 + rows[(None, ..)];
    let mut part = zeros([64, 64], f32);
    for i in 0..n {
        let s = async_dot(a, b, zeros([64, 64], f32));
        part = async_dot_wait(1, part);
        store(c + i * 4096 + at, part);
        let s = async_dot_wait(0, s);
        part = async_dot(a, b, s);
    }
    part = async_dot_wait(0, part);
    store(c + at, part);
}

pub fn main() {}

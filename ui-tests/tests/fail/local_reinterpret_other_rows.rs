use tlx::prelude::*;

// A swizzled buffer keeps its rows when reinterpreted: [64, 64] f32 rows are
// 256 bytes, and [128, 64] bf16 rows would be 128.
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn k(out: Ptr<bf16>) {
    let words = local_alloc([64, 64], f32, 1);
    let halves = local_reinterpret(local_view(words, 0), bf16, [128, 64]);
    let r = arange(0, 128);
    let c = arange(0, 64);
    store(out + r[(.., None)] * 64 + c[(None, ..)], local_load(halves));
}

fn main() {}

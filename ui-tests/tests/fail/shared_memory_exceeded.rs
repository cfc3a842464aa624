use tlx::prelude::*;

// Six stages of 128x256x64 bf16 operand tiles: 288 KB of rings.
#[tlx::kernel(configs = [(BM = 128, BN = 256, BK = 64)], num_warps = 8, num_stages = 6)]
fn too_deep<const BM: usize, const BN: usize, const BK: usize>(
    a: Ptr<bf16>,
    b: Ptr<bf16>,
    c: Ptr<f32>,
    k: i32,
) {
    let (a, b) = (multiple_of(a, 16), multiple_of(b, 16));
    let k = multiple_of(k, 8);
    let rm = arange(0, BM);
    let rn = arange(0, BN);
    let rk = arange(0, BK);
    let mut acc = zeros([BM, BN], f32);
    for k0 in (0..k).step_by(BK) {
        let at = load(a + rm[(.., None)] * k + (k0 + rk)[(None, ..)]);
        let bt = load(b + (k0 + rk)[(.., None)] * BN + rn[(None, ..)]);
        acc = dot(at, bt, acc);
    }
    store(c + rm[(.., None)] * BN + rn[(None, ..)], acc);
}

fn main() {}

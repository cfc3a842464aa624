use tlx::prelude::*;

// `words` reuses the bytes of `tiles`, which a TMA load is still filling:
// the store into `words` lands in either order with the copy.
#[tlx::kernel(arch = "sm_90a", num_warps = 4, configs = [(BM = 64, BK = 64)])]
fn stage<const BM: usize, const BK: usize>(a_desc: TensorDesc<bf16, BM, BK>, out: Ptr<f32>) {
    let tiles = local_alloc([BM, BK], bf16, 1);
    let words = local_alloc([BM, 32], f32, 1, reuse = tiles);
    let bars = alloc_barriers(1, 1);
    barrier_expect_bytes(local_view(bars, 0), BM * BK * 2);
    async_descriptor_load(a_desc, local_view(tiles, 0), [0, 0], local_view(bars, 0));
    local_store(local_view(words, 0), zeros([BM, 32], f32));
    barrier_wait(local_view(bars, 0), 0);
    let r = arange(0, BM);
    let c = arange(0, 32);
    store(out + r[(.., None)] * 32 + c[(None, ..)], local_load(local_view(words, 0)));
}

fn main() {}

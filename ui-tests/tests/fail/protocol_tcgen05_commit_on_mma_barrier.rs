use tlx::prelude::*;

// The MMA task tracks each MMA with its `mbarriers` and commits the tile on
// the same barrier: the last MMA is counted twice, the phase completes early.
#[tlx::kernel(arch = "sm_100a", num_warps = 4, configs = [(BM = 128, BN = 64, BK = 64)])]
fn gemm<const BM: usize, const BN: usize, const BK: usize>(
    a_desc: TensorDesc<bf16, BM, BK>,
    b_desc: TensorDesc<bf16, BK, BN>,
    c: Ptr<f32>,
    n: i32,
    k: i32,
) {
    let a_buf = local_alloc([BM, BK], bf16, 1);
    let b_buf = local_alloc([BK, BN], bf16, 1);
    let acc = local_alloc([BM, BN], f32, 1, storage = "tmem");
    let full = alloc_barriers(1, 1);
    let empty = alloc_barriers(1, 1);
    let done = alloc_barriers(1, 1);
    let off_m = program_id(0) * BM;
    let off_n = program_id(1) * BN;
    let k_tiles = (k + BK - 1) / BK;
    async_tasks! {
        task(default) {
            barrier_wait(local_view(done, 0), 0);
            let tile = local_load(local_view(acc, 0));
            let rows = off_m + arange(0, BM);
            let cols = off_n + arange(0, BN);
            store(c + rows[(.., None)] * n + cols[(None, ..)], tile);
        }
        task(num_warps = 1) {
            for i in 0..k_tiles {
                barrier_wait(local_view(empty, 0), i % 2 ^ 1);
                let bar = local_view(full, 0);
                barrier_expect_bytes(bar, (BM * BK + BK * BN) * size_of(bf16));
                async_descriptor_load(a_desc, local_view(a_buf, 0), [off_m, i * BK], bar);
                async_descriptor_load(b_desc, local_view(b_buf, 0), [i * BK, off_n], bar);
            }
        }
        task(num_warps = 1) {
            for i in 0..k_tiles {
                barrier_wait(local_view(full, 0), i % 2);
                async_dot(
                    local_view(a_buf, 0),
                    local_view(b_buf, 0),
                    local_view(acc, 0),
                    use_acc = i > 0,
                    mbarriers = [local_view(empty, 0)],
                );
            }
            tcgen05_commit(local_view(empty, 0));
            tcgen05_commit(local_view(done, 0));
        }
    }
}

fn main() {}

use tlx::prelude::*;

// The producer announces only A's bytes: A's copy completes the phase, the
// consumer passes its wait and reads B's buffer, and B's copy lands later,
// counting toward the next phase. The mistake is the byte count at
// `barrier_expect_bytes`, not the consumer's wait.
#[tlx::kernel(arch = "sm_90a", num_warps = 4, configs = [(BM = 64, BN = 64, BK = 64, STAGES = 2)])]
fn gemm<const BM: usize, const BN: usize, const BK: usize, const STAGES: usize>(
    a_desc: TensorDesc<bf16, BM, BK>,
    b_desc: TensorDesc<bf16, BK, BN>,
    c: Ptr<f32>,
    n: i32,
    k: i32,
) {
    let a_bufs = local_alloc([BM, BK], bf16, STAGES);
    let b_bufs = local_alloc([BK, BN], bf16, STAGES);
    let full = alloc_barriers(STAGES, 1);
    let empty = alloc_barriers(STAGES, 1);
    let off_m = program_id(0) * BM;
    let off_n = program_id(1) * BN;
    let k_tiles = (k + BK - 1) / BK;
    async_tasks! {
        task(default) {
            let mut acc = zeros([BM, BN], f32);
            for i in 0..k_tiles {
                let slot = i % STAGES;
                barrier_wait(local_view(full, slot), (i / STAGES) % 2);
                acc = async_dot(local_view(a_bufs, slot), local_view(b_bufs, slot), acc);
                acc = async_dot_wait(0, acc);
                barrier_arrive(local_view(empty, slot));
            }
            let rows = off_m + arange(0, BM);
            let cols = off_n + arange(0, BN);
            store(c + rows[(.., None)] * n + cols[(None, ..)], acc);
        }
        task(num_warps = 1) {
            for i in 0..k_tiles {
                let slot = i % STAGES;
                barrier_wait(local_view(empty, slot), (i / STAGES) % 2 ^ 1);
                let bar = local_view(full, slot);
                barrier_expect_bytes(bar, BM * BK * size_of(bf16));
                async_descriptor_load(a_desc, local_view(a_bufs, slot), [off_m, i * BK], bar);
                async_descriptor_load(b_desc, local_view(b_bufs, slot), [i * BK, off_n], bar);
            }
        }
    }
}

fn main() {}

//! Kernels several test files run: the interpreter's tests of the TLX
//! primitives and the protocol checker's.

/// A warp-specialized GEMM in the style of TLX's Hopper tutorial: a
/// producer warp loads A and B tiles with TMA into a ring of `NUM_STAGES`
/// buffers guarded by full/empty mbarriers; the default warp group
/// multiplies them with `async_dot`.
pub const WS_GEMM: &str = r#"
#[tlx::kernel(num_warps = 4, configs = [(BM = 64, BN = 64, BK = 16, NUM_STAGES = 2)])]
fn ws_gemm<const BM: usize, const BN: usize, const BK: usize, const NUM_STAGES: usize>(
    a_desc: TensorDesc<bf16, BM, BK>,
    b_desc: TensorDesc<bf16, BK, BN>,
    c: Ptr<f32>,
    m: i32,
    n: i32,
    k: i32,
) {
    let a_bufs = local_alloc([BM, BK], bf16, NUM_STAGES);
    let b_bufs = local_alloc([BK, BN], bf16, NUM_STAGES);
    let full = alloc_barriers(NUM_STAGES, 1);
    let empty = alloc_barriers(NUM_STAGES, 1);
    let off_m = program_id(0) * BM;
    let off_n = program_id(1) * BN;
    let k_tiles = (k + BK - 1) / BK;
    async_tasks! {
        task(default) {
            let mut acc = zeros([BM, BN], f32);
            for i in 0..k_tiles {
                let slot = i % NUM_STAGES;
                let phase = (i / NUM_STAGES) % 2;
                barrier_wait(local_view(full, slot), phase);
                acc = async_dot(local_view(a_bufs, slot), local_view(b_bufs, slot), acc);
                acc = async_dot_wait(0, acc);
                barrier_arrive(local_view(empty, slot));
            }
            let rows = off_m + arange(0, BM);
            let cols = off_n + arange(0, BN);
            let ptrs = c + rows[(.., None)] * n + cols[(None, ..)];
            let mask = (rows[(.., None)] < m) & (cols[(None, ..)] < n);
            store(ptrs, acc, mask = mask);
        }
        task(num_warps = 1) {
            for i in 0..k_tiles {
                let slot = i % NUM_STAGES;
                let phase = (i / NUM_STAGES) % 2;
                barrier_wait(local_view(empty, slot), phase ^ 1);
                let bar = local_view(full, slot);
                barrier_expect_bytes(bar, (BM * BK + BK * BN) * 2);
                async_descriptor_load(a_desc, local_view(a_bufs, slot), [off_m, i * BK], bar);
                async_descriptor_load(b_desc, local_view(b_bufs, slot), [i * BK, off_n], bar);
            }
        }
    }
}
"#;


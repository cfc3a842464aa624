//! `C = A B` (bf16 or f16, f32 accumulation) on Blackwell (sm_100a), the
//! kernel `gemm` runs on such GPUs: TLX's Blackwell tutorial GEMM,
//! persistent and warp-specialized, its accumulators in tensor memory. A
//! one-warp producer loads A and B tiles with TMA into a ring of
//! `NUM_STAGES` stages; a one-warp MMA task multiplies each stage into one of
//! `NUM_ACC` tensor-memory accumulators (`async_dot` with `mbarriers =
//! [empty]`: the stage is released when the MMA reading it completes) and
//! `tcgen05_commit`s the tile's last one to `acc_full`; the default task (one
//! warp group) reads the accumulator in column slices, hands it back through
//! `acc_empty`, and stores C with TMA. Two 128x256 f32 accumulators take all
//! 512 columns. Not run on Blackwell silicon here: `ptxas` assembles it and
//! the interpreter runs it in CI.

use crate::prelude::*;
use crate::PtrArg;

/// The kernel for element type `$t`, and `$launch`, which runs it.
macro_rules! tcgen05_gemm {
    ($t:ident, $name:ident, $launch:ident) => {
        #[tlx::kernel(arch = "sm_100a", num_warps = 4, configs = [
            (BM = 128, BN = 256, BK = 64, NUM_STAGES = 3, NUM_ACC = 2, EPI_N = 64, GROUP_M = 8),
        ])]
        fn $name<
            const BM: usize,
            const BN: usize,
            const BK: usize,
            const NUM_STAGES: usize,
            const NUM_ACC: usize,
            const EPI_N: usize,
            const GROUP_M: usize,
        >(
            a_desc: TensorDesc<$t, BM, BK>,
            b_desc: TensorDesc<$t, BK, BN>,
            c_desc: TensorDesc<$t, BM, EPI_N>,
            m: i32,
            n: i32,
            k: i32,
        ) {
            let a_bufs = local_alloc([BM, BK], $t, NUM_STAGES);
            let b_bufs = local_alloc([BK, BN], $t, NUM_STAGES);
            // The epilogue's column slices of C, two so a store overlaps the next.
            let c_bufs = local_alloc([BM, EPI_N], $t, 2);
            let acc = local_alloc([BM, BN], f32, NUM_ACC, storage = "tmem");
            let full = alloc_barriers(NUM_STAGES, 1);
            let empty = alloc_barriers(NUM_STAGES, 1);
            let acc_full = alloc_barriers(NUM_ACC, 1);
            let acc_empty = alloc_barriers(NUM_ACC, 1);
            let k_tiles = cdiv(k, BK);
            let tiles_m = cdiv(m, BM);
            let tiles_n = cdiv(n, BN);
            let num_tiles = tiles_m * tiles_n;
            let first = program_id(0);
            let stride = num_programs(0);
            fn tile_origin(tile: i32, tiles_m: i32, tiles_n: i32) -> (i32, i32) {
                let first_m = tile / (GROUP_M * tiles_n) * GROUP_M;
                let rows = minimum(tiles_m - first_m, GROUP_M);
                (
                    (first_m + tile % rows) * BM,
                    (tile % (GROUP_M * tiles_n)) / rows * BN,
                )
            }
            async_tasks! {
                // The epilogue: one warp group, a row of the tile per thread.
                task(default) {
                    for tile in (first..num_tiles).step_by(stride) {
                        let (off_m, off_n) = tile_origin(tile, tiles_m, tiles_n);
                        let t = (tile - first) / stride;
                        let buf = t % NUM_ACC;
                        barrier_wait(local_view(acc_full, buf), (t / NUM_ACC) % 2);
                        let tile_acc = local_view(acc, buf);
                        for j in 0..BN / EPI_N {
                            let part = local_load(local_slice(tile_acc, [0, j * EPI_N], [BM, EPI_N]));
                            // The store from this buffer two slices ago is done reading it.
                            async_descriptor_store_wait(1);
                            let out = local_view(c_bufs, j % 2);
                            local_store(out, part.to($t));
                            async_descriptor_store(c_desc, out, [off_m, off_n + j * EPI_N]);
                        }
                        // Every slice is in registers or shared memory: the MMA task
                        // may overwrite the accumulator.
                        barrier_arrive(local_view(acc_empty, buf));
                    }
                    async_descriptor_store_wait(0);
                }
                // The producer.
                task(num_warps = 1) {
                    for tile in (first..num_tiles).step_by(stride) {
                        let (off_m, off_n) = tile_origin(tile, tiles_m, tiles_n);
                        let done = (tile - first) / stride * k_tiles;
                        for kk in 0..k_tiles {
                            let it = done + kk;
                            let slot = it % NUM_STAGES;
                            barrier_wait(local_view(empty, slot), (it / NUM_STAGES) % 2 ^ 1);
                            let bar = local_view(full, slot);
                            barrier_expect_bytes(bar, (BM * BK + BK * BN) * size_of(dtype_of(a_desc)));
                            async_descriptor_load(a_desc, local_view(a_bufs, slot), [off_m, kk * BK], bar);
                            async_descriptor_load(b_desc, local_view(b_bufs, slot), [kk * BK, off_n], bar);
                        }
                    }
                }
                // The MMA issuer.
                task(num_warps = 1) {
                    for tile in (first..num_tiles).step_by(stride) {
                        let t = (tile - first) / stride;
                        let buf = t % NUM_ACC;
                        let done = t * k_tiles;
                        // The epilogue has read this accumulator's previous tile.
                        barrier_wait(local_view(acc_empty, buf), (t / NUM_ACC) % 2 ^ 1);
                        for kk in 0..k_tiles {
                            let it = done + kk;
                            let slot = it % NUM_STAGES;
                            barrier_wait(local_view(full, slot), (it / NUM_STAGES) % 2);
                            async_dot(
                                local_view(a_bufs, slot),
                                local_view(b_bufs, slot),
                                local_view(acc, buf),
                                use_acc = kk > 0,
                                mbarriers = [local_view(empty, slot)],
                            );
                        }
                        // Arrives once every MMA of the tile has completed.
                        tcgen05_commit(local_view(acc_full, buf));
                    }
                }
            }
        }

        /// `c = a @ b` with the Blackwell kernel, on TMA descriptors of the
        /// row-major operands.
        pub(super) fn $launch(
            device: &Device,
            (a, b, c): (&impl PtrArg<$t>, &impl PtrArg<$t>, &impl PtrArg<$t>),
            (m, n, k): (usize, usize, usize),
        ) -> Result<(), Error> {
            let a_desc = TensorDesc::over(a, &[m, k], &[k, 1])?;
            let b_desc = TensorDesc::over(b, &[k, n], &[n, 1])?;
            let c_desc = TensorDesc::over(c, &[m, n], &[n, 1])?;
            let tiles = m.div_ceil(128) * n.div_ceil(256);
            let grid = tiles.min(device.multiprocessor_count() as usize) as u32;
            let (m, n, k) = (m as i32, n as i32, k as i32);
            $name::<128, 256, 64, 3, 2, 64, 8>::launch(
                device, grid, &a_desc, &b_desc, &c_desc, m, n, k,
            )
        }
    };
}

tcgen05_gemm!(bf16, blackwell_gemm_ws_bf16, launch_bf16);
tcgen05_gemm!(f16, blackwell_gemm_ws_f16, launch_f16);

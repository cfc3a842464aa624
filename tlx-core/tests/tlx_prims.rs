//! TLX primitives end to end on the CPU interpreter: kernels written in the
//! language (shared buffers, mbarriers, TMA, wgmma, warp specialization)
//! compiled by the frontend, checked against a CPU reference, and misuses
//! (a forgotten wait, a wrong expected byte count) reported by the
//! interpreter. The same kernels go through code generation and `ptxas`.

#[cfg(feature = "llvm")]
mod codegen_common;

use tlx_core::frontend::compile_str;
use tlx_core::interp::{run_kernel, ArgValue, BufferId, HostMemory, InterpError, InterpOptions};
use tlx_core::ir::{Kernel, ScalarType};

mod kernels;
use kernels::WS_GEMM;

fn compile(src: &str) -> Kernel {
    match compile_str(src) {
        Ok(mut ks) => ks.remove(0),
        Err(e) => panic!("compile failed:\n{e}"),
    }
}

fn bf16_bits(x: f32) -> u16 {
    half::bf16::from_f32(x).to_bits()
}

fn upload_bf16(mem: &HostMemory, values: &[f32]) -> BufferId {
    let bytes: Vec<u8> = values
        .iter()
        .flat_map(|&v| bf16_bits(v).to_le_bytes())
        .collect();
    let id = mem.alloc(bytes.len());
    mem.write(id, 0, &bytes).expect("fresh buffer");
    id
}

fn desc(buffer: BufferId, rows: i64, cols: i64) -> ArgValue {
    ArgValue::TensorDesc {
        buffer,
        offset_elems: 0,
        elem: ScalarType::BF16,
        rank: 2,
        shape: [rows, cols, 0, 0, 0],
        strides: [cols, 1, 0, 0, 0],
    }
}

/// Small pseudo-random values exactly representable in bf16.
fn values(seed: u64, len: usize) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state % 17) as f32 - 8.0) / 8.0
        })
        .collect()
}

/// Errors are boxed: an `InterpError` is large.
fn run_gemm(
    src: &str,
    mnk: (usize, usize, usize),
) -> Result<(Vec<f32>, Vec<f32>), Box<InterpError>> {
    run_gemm_with(src, mnk, &InterpOptions::default())
}

fn run_gemm_with(
    src: &str,
    (m, n, k): (usize, usize, usize),
    opts: &InterpOptions,
) -> Result<(Vec<f32>, Vec<f32>), Box<InterpError>> {
    let kernel = compile(src);
    let mem = HostMemory::new();
    let a = values(1, m * k);
    let b = values(2, k * n);
    let a_id = upload_bf16(&mem, &a);
    let b_id = upload_bf16(&mem, &b);
    let c_id = mem.alloc(m * n * 4);
    mem.fill(c_id, 0xff).expect("fresh buffer");
    let args = [
        desc(a_id, m as i64, k as i64),
        desc(b_id, k as i64, n as i64),
        ArgValue::ptr(c_id),
        ArgValue::i32(m as i32),
        ArgValue::i32(n as i32),
        ArgValue::i32(k as i32),
    ];
    let grid = [m.div_ceil(64) as u32, n.div_ceil(64) as u32, 1];
    run_kernel(&kernel, grid, &args, &mem, opts).map_err(Box::new)?;
    let mut out = vec![0u8; m * n * 4];
    mem.read(c_id, 0, &mut out).expect("read back");
    let got = out
        .chunks(4)
        .map(|w| f32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    let mut want = vec![0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            want[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
        }
    }
    Ok((got, want))
}

#[test]
fn warp_specialized_tma_gemm_matches_the_reference_with_ragged_edges() {
    let (got, want) = run_gemm(WS_GEMM, (80, 72, 40)).expect("runs");
    assert_eq!(got, want, "products of eighths sum exactly in f32");
}

fn broken(from: &str, to: &str) -> String {
    assert!(WS_GEMM.contains(from), "{from}");
    WS_GEMM.replacen(from, to, 1)
}

#[test]
fn reading_a_tile_before_waiting_for_its_barrier_is_a_race() {
    let src = broken("barrier_wait(local_view(full, slot), phase);", "");
    let err = run_gemm(&src, (64, 64, 32)).expect_err("races");
    let text = err.to_string();
    // Round robin: the consumer gets there before the first copy is issued.
    assert!(
        matches!(*err, InterpError::UnwrittenShared { .. }),
        "{text}"
    );
    assert!(text.contains("op `async_dot`"), "{text}");
    // A schedule where the copy is issued first but the reader did not wait.
    let seeds = (0..64).map(|seed| {
        let opts = InterpOptions {
            schedule: tlx_core::interp::Schedule::Random { seed },
            ..InterpOptions::default()
        };
        run_gemm_with(&src, (64, 64, 32), &opts).expect_err("races")
    });
    let race = seeds
        .into_iter()
        .find(|e| matches!(**e, InterpError::SharedMemoryRace { .. }))
        .expect("some schedule lands the copy before the read");
    assert!(
        race.to_string().contains("before waiting on its barrier"),
        "{race}"
    );
}

#[test]
fn expecting_more_bytes_than_the_copies_bring_deadlocks() {
    // Four bytes per bf16 element: the phase waits for bytes no copy brings.
    let src = broken("(BM * BK + BK * BN) * 2", "(BM * BK + BK * BN) * 4");
    let err = run_gemm(&src, (64, 64, 32)).expect_err("never completes");
    let text = err.to_string();
    assert!(matches!(*err, InterpError::Deadlock { .. }), "{text}");
    assert!(text.contains("transaction bytes"), "{text}");
}

#[test]
fn a_producer_waiting_on_the_wrong_parity_deadlocks() {
    let src = broken("phase ^ 1);", "phase);");
    let err = run_gemm(&src, (64, 64, 32)).expect_err("deadlocks");
    assert!(matches!(*err, InterpError::Deadlock { .. }), "{err}");
}

/// Rows `row..row + 8` of a buffer of ones, through `local_slice`.
const SLICE_ROWS: &str = r#"
#[tlx::kernel(num_warps = 4)]
fn slice_rows(out: Ptr<f32>, row: i32) {
    let bufs = local_alloc([16, 16], f32, 1);
    let buf = local_view(bufs, 0);
    local_store(buf, 1.0);
    let part = local_load(local_slice(buf, [row, 0], [8, 16]));
    let rows = arange(0, 8);
    let cols = arange(0, 16);
    store(out + rows[(.., None)] * 16 + cols[(None, ..)], part);
}
"#;

fn run_slice_rows(row: i32) -> Result<Vec<f32>, Box<InterpError>> {
    let kernel = compile(SLICE_ROWS);
    let mem = HostMemory::new();
    let out = mem.alloc(8 * 16 * 4);
    let args = [ArgValue::ptr(out), ArgValue::i32(row)];
    run_kernel(&kernel, [1, 1, 1], &args, &mem, &InterpOptions::default()).map_err(Box::new)?;
    let mut bytes = vec![0u8; 8 * 16 * 4];
    mem.read(out, 0, &mut bytes).expect("read back");
    Ok(bytes
        .chunks(4)
        .map(|w| f32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect())
}

#[test]
fn a_slice_past_its_buffer_is_reported_with_both_shapes() {
    assert_eq!(run_slice_rows(8).expect("fits"), vec![1.0; 8 * 16]);
    let err = run_slice_rows(12).expect_err("rows 12..20 of 16");
    assert!(matches!(*err, InterpError::SliceBounds { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("a [8, 16] slice at [12, 0] does not fit in a [16, 16] buffer"),
        "{text}"
    );
    assert!(text.contains("op `local_slice`"), "{text}");
}

/// The same kernel through LLVM to PTX, assembled by `ptxas` for sm_90a.
#[cfg(feature = "llvm")]
mod codegen {
    use super::codegen_common;
    use tlx_core::ir::Arch;

    #[test]
    fn the_warp_specialized_gemm_assembles_without_spills() {
        let kernel = super::compile(super::WS_GEMM);
        let compiled = tlx_core::codegen::compile(&kernel, Arch::Sm90a).expect("compiles");
        for needle in [
            "mbarrier.init.shared::cta.b64",
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
            "mbarrier.try_wait.parity.shared::cta.b64",
            "mbarrier.arrive.expect_tx.shared::cta.b64",
            "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16",
            ".param .align 64 .b8 ws_gemm_param_0[128]",
        ] {
            assert!(
                compiled.ptx.contains(needle),
                "no `{needle}` in\n{}",
                compiled.ptx
            );
        }
        match codegen_common::ptxas() {
            Some(ptxas) => {
                let report = codegen_common::ptxas_verbose(&ptxas, &compiled.ptx);
                assert!(
                    !report.contains("spill stores") || report.contains("0 bytes spill stores"),
                    "{report}"
                );
            }
            None => println!("skipped: ptxas not found"),
        }
    }
}

/// Copies land at random points under a random schedule; a kernel that waits
/// for its barriers computes the same result whatever the landing order.
#[test]
fn random_landing_orders_do_not_change_a_correct_kernel() {
    for seed in 0..8 {
        let opts = InterpOptions {
            schedule: tlx_core::interp::Schedule::Random { seed },
            ..InterpOptions::default()
        };
        let (got, want) = run_gemm_with(WS_GEMM, (80, 72, 40), &opts).expect("runs");
        assert_eq!(got, want, "seed {seed}");
    }
}

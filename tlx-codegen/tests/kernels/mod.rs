//! Kernels several test files run, and the harness that runs them on the
//! interpreter: the tests of the TLX primitives and the protocol checker's.
// Each test crate that includes this module uses a part of it.
#![allow(dead_code)]

use tlx_core::instrument::{instrument_bounds, BoundsFault, BoundsSite, FAULT_RECORD_WORDS};
use tlx_core::interp::{run_kernel, ArgValue, BufferId, HostMemory, InterpError, InterpOptions};
use tlx_core::ir::{Kernel, ScalarType};
use tlx_frontend::compile_str;

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

pub fn compile(src: &str) -> Kernel {
    match compile_str(src) {
        Ok(mut ks) => ks.remove(0),
        Err(e) => panic!("compile failed:\n{e}"),
    }
}

fn bf16_bits(x: f32) -> u16 {
    half::bf16::from_f32(x).to_bits()
}

/// A fresh buffer holding `bytes`.
pub fn upload(mem: &HostMemory, bytes: &[u8]) -> BufferId {
    let id = mem.alloc(bytes.len());
    mem.write(id, 0, bytes).expect("fresh buffer");
    id
}

/// `values` rounded to bf16 (to nearest, ties to even) in a fresh buffer.
pub fn upload_bf16(mem: &HostMemory, values: &[f32]) -> BufferId {
    let bytes: Vec<u8> = values
        .iter()
        .flat_map(|&v| bf16_bits(v).to_le_bytes())
        .collect();
    upload(mem, &bytes)
}

/// `values` in a fresh buffer.
pub fn upload_f32(mem: &HostMemory, values: &[f32]) -> BufferId {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    upload(mem, &bytes)
}

/// The first `len` f32 values of buffer `id`.
pub fn download_f32(mem: &HostMemory, id: BufferId, len: usize) -> Vec<f32> {
    let mut bytes = vec![0u8; len * 4];
    mem.read(id, 0, &mut bytes).expect("read back");
    bytes
        .chunks(4)
        .map(|w| f32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect()
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
pub fn run_gemm(
    src: &str,
    mnk: (usize, usize, usize),
) -> Result<(Vec<f32>, Vec<f32>), Box<InterpError>> {
    run_gemm_with(src, mnk, &InterpOptions::default())
}

pub fn run_gemm_with(
    src: &str,
    dims: (usize, usize, usize),
    opts: &InterpOptions,
) -> Result<(Vec<f32>, Vec<f32>), Box<InterpError>> {
    run_gemm_kernel(&HostMemory::new(), &compile(src), dims, opts, Vec::new())
}

/// What a run of a kernel rewritten by `check_bounds` gives back: the
/// product, the reference, and the decoded fault record.
pub type CheckedGemm = (Vec<f32>, Vec<f32>, Option<BoundsFault>);

/// `src` rewritten by `check_bounds` and run with the launcher's extra
/// arguments, telling the kernel that `c` holds `c_len` elements.
pub fn run_checked_gemm(
    src: &str,
    dims: (usize, usize, usize),
    c_len: usize,
) -> Result<(CheckedGemm, Vec<BoundsSite>), Box<InterpError>> {
    let mut kernel = compile(src);
    let sites = instrument_bounds(&mut kernel);
    let mem = HostMemory::new();
    let record = fault_record(&mem);
    let extra = vec![ArgValue::i64(4 * c_len as i64), ArgValue::ptr(record)];
    let (got, want) = run_gemm_kernel(&mem, &kernel, dims, &InterpOptions::default(), extra)?;
    Ok(((got, want, read_fault(&mem, record)), sites))
}

/// A zeroed fault record, as the launcher passes a checked kernel.
pub fn fault_record(mem: &HostMemory) -> BufferId {
    let record = mem.alloc(8 * FAULT_RECORD_WORDS);
    mem.fill(record, 0).expect("fresh buffer");
    record
}

/// What the kernel wrote into `record`, decoded.
pub fn read_fault(mem: &HostMemory, record: BufferId) -> Option<BoundsFault> {
    let mut bytes = [0u8; 8 * FAULT_RECORD_WORDS];
    mem.read(record, 0, &mut bytes).expect("read back");
    let words = std::array::from_fn(|i| {
        let mut word = [0u8; 8];
        word.copy_from_slice(&bytes[8 * i..8 * i + 8]);
        i64::from_le_bytes(word)
    });
    BoundsFault::decode(&words)
}

/// Runs `kernel` on fresh inputs in `mem`, with `extra_args` after the
/// GEMM's own.
pub fn run_gemm_kernel(
    mem: &HostMemory,
    kernel: &Kernel,
    (m, n, k): (usize, usize, usize),
    opts: &InterpOptions,
    extra_args: Vec<ArgValue>,
) -> Result<(Vec<f32>, Vec<f32>), Box<InterpError>> {
    let grid = [m.div_ceil(64) as u32, n.div_ceil(64) as u32, 1];
    run_gemm_on(mem, kernel, (m, n, k), grid, opts, extra_args)
}

/// The same over `grid`.
pub fn run_gemm_on(
    mem: &HostMemory,
    kernel: &Kernel,
    (m, n, k): (usize, usize, usize),
    grid: [u32; 3],
    opts: &InterpOptions,
    extra_args: Vec<ArgValue>,
) -> Result<(Vec<f32>, Vec<f32>), Box<InterpError>> {
    let a = values(1, m * k);
    let b = values(2, k * n);
    let a_id = upload_bf16(mem, &a);
    let b_id = upload_bf16(mem, &b);
    let c_id = mem.alloc(m * n * 4);
    mem.fill(c_id, 0xff).expect("fresh buffer");
    let mut args = vec![
        desc(a_id, m as i64, k as i64),
        desc(b_id, k as i64, n as i64),
        ArgValue::ptr(c_id),
        ArgValue::i32(m as i32),
        ArgValue::i32(n as i32),
        ArgValue::i32(k as i32),
    ];
    args.extend(extra_args);
    run_kernel(kernel, grid, &args, mem, opts).map_err(Box::new)?;
    let got = download_f32(mem, c_id, m * n);
    let mut want = vec![0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            want[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
        }
    }
    Ok((got, want))
}

/// `WS_GEMM` with `from` replaced by `to` (which must occur).
pub fn broken(from: &str, to: &str) -> String {
    assert!(WS_GEMM.contains(from), "{from:?} not in the kernel");
    WS_GEMM.replacen(from, to, 1)
}

//! `async_dot`'s further forms end to end: A from registers (flash
//! attention's `P @ V` with `P` computed from a wgmma accumulator), tf32
//! (`f32` buffers), s8 inputs accumulated in i32, and an M-major A (a
//! `local_trans` view of a `[K, M]` buffer). Each kernel runs on the
//! interpreter against an f64 (or exact integer) CPU reference on fresh
//! random inputs; the same kernels go through code generation, where the
//! PTX must hold the right wgmma form and `ptxas` must accept it unspilled.

use tlx_core::interp::{run_kernel, ArgValue, BufferId, HostMemory, InterpOptions};
use tlx_core::ir::Kernel;
use tlx_frontend::compile_str;

use crate::kernels::{upload, upload_bf16, upload_f32};

/// `O = P @ V` with `P = exp2(S - rowmax(S))` and `S = Q @ K^T`, Q and O
/// `[BM, 64]`, K and V `[64, 64]`, bf16: `P` never leaves registers.
const ATTENTION_TILE: &str = r#"
#[tlx::kernel(num_warps = 4, configs = [(BM = 64)])]
fn attention_tile<const BM: usize>(q: Ptr<bf16>, k: Ptr<bf16>, v: Ptr<bf16>, out: Ptr<f32>) {
    let q_buf = local_view(local_alloc([BM, 64], bf16, 1), 0);
    let k_buf = local_view(local_alloc([64, 64], bf16, 1), 0);
    let v_buf = local_view(local_alloc([64, 64], bf16, 1), 0);
    let rows = arange(0, BM);
    let keys = arange(0, 64);
    let cols = arange(0, 64);
    let q_at = rows[(.., None)] * 64 + cols[(None, ..)];
    let kv_at = keys[(.., None)] * 64 + cols[(None, ..)];
    async_load(q + q_at, q_buf);
    async_load(k + kv_at, k_buf);
    async_load(v + kv_at, v_buf);
    async_load_commit_group();
    async_load_wait_group(0);
    let s = async_dot(q_buf, local_trans(k_buf), zeros([BM, 64], f32));
    let s = async_dot_wait(0, s);
    let p = exp2(s - max(s, axis = 1)[(.., None)]);
    let o = async_dot(p.to(bf16), v_buf, zeros([BM, 64], f32));
    let o = async_dot_wait(0, o);
    store(out + q_at, o);
}
"#;

/// [`ATTENTION_TILE`] with `bm` rows of Q on `num_warps` warps.
fn attention_tile(bm: usize, num_warps: u32) -> String {
    ATTENTION_TILE.replace(
        "#[tlx::kernel(num_warps = 4, configs = [(BM = 64)])]",
        &format!("#[tlx::kernel(num_warps = {num_warps}, configs = [(BM = {bm})])]"),
    )
}

/// `C = A @ B^T` for `f32` tiles A `[64, 32]` and B^T `[64, 32]` (tf32).
const TF32_TILE: &str = r#"
#[tlx::kernel(num_warps = 4)]
fn tf32_tile(a: Ptr<f32>, bt: Ptr<f32>, out: Ptr<f32>) {
    let a_buf = local_view(local_alloc([64, 32], f32, 1), 0);
    let bt_buf = local_view(local_alloc([64, 32], f32, 1), 0);
    let rows = arange(0, 64);
    let ks = arange(0, 32);
    let operand = rows[(.., None)] * 32 + ks[(None, ..)];
    async_load(a + operand, a_buf);
    async_load(bt + operand, bt_buf);
    async_load_commit_group();
    async_load_wait_group(0);
    let c = async_dot(a_buf, local_trans(bt_buf), zeros([64, 64], f32));
    let c = async_dot_wait(0, c);
    let cols = arange(0, 64);
    store(out + rows[(.., None)] * 64 + cols[(None, ..)], c);
}
"#;

/// `C = A @ B^T` for `i8` tiles A `[64, 64]` and B^T `[64, 64]`, i32 sums.
const I8_TILE: &str = r#"
#[tlx::kernel(num_warps = 4)]
fn i8_tile(a: Ptr<i8>, bt: Ptr<i8>, out: Ptr<i32>) {
    let a_buf = local_view(local_alloc([64, 64], i8, 1), 0);
    let bt_buf = local_view(local_alloc([64, 64], i8, 1), 0);
    let rows = arange(0, 64);
    let cols = arange(0, 64);
    let tile = rows[(.., None)] * 64 + cols[(None, ..)];
    async_load(a + tile, a_buf);
    async_load(bt + tile, bt_buf);
    async_load_commit_group();
    async_load_wait_group(0);
    let c = async_dot(a_buf, local_trans(bt_buf), zeros([64, 64], i32));
    let c = async_dot_wait(0, c);
    store(out + tile, c);
}
"#;

/// `C = Aᵀᵀ @ B` from `At` `[64, M]` (A stored M-major, read through
/// `local_trans`) and B `[64, 128]` (N-major), bf16, on `NW` warps.
const M_MAJOR_A_TILE: &str = r#"
#[tlx::kernel(num_warps = 4, configs = [(M = 64)])]
fn m_major_a<const M: usize>(at: Ptr<bf16>, b: Ptr<bf16>, out: Ptr<f32>) {
    let at_buf = local_view(local_alloc([64, M], bf16, 1), 0);
    let b_buf = local_view(local_alloc([64, 128], bf16, 1), 0);
    let ks = arange(0, 64);
    let ms = arange(0, M);
    let ns = arange(0, 128);
    async_load(at + ks[(.., None)] * M + ms[(None, ..)], at_buf);
    async_load(b + ks[(.., None)] * 128 + ns[(None, ..)], b_buf);
    async_load_commit_group();
    async_load_wait_group(0);
    let c = async_dot(local_trans(at_buf), b_buf, zeros([M, 128], f32));
    let c = async_dot_wait(0, c);
    store(out + ms[(.., None)] * 128 + ns[(None, ..)], c);
}
"#;

/// [`M_MAJOR_A_TILE`] with `m` rows of C on `num_warps` warps, B stored
/// K-major (`[128, 64]` through `local_trans`) when `b_k_major`.
fn m_major_a_tile(m: usize, num_warps: u32, b_k_major: bool) -> String {
    let src = M_MAJOR_A_TILE.replace(
        "#[tlx::kernel(num_warps = 4, configs = [(M = 64)])]",
        &format!("#[tlx::kernel(num_warps = {num_warps}, configs = [(M = {m})])]"),
    );
    if !b_k_major {
        return src;
    }
    src.replace(
        "local_alloc([64, 128], bf16, 1)",
        "local_alloc([128, 64], bf16, 1)",
    )
    .replace(
        "b + ks[(.., None)] * 128 + ns[(None, ..)]",
        "b + ns[(.., None)] * 64 + ks[(None, ..)]",
    )
    .replace(
        "local_trans(at_buf), b_buf",
        "local_trans(at_buf), local_trans(b_buf)",
    )
}

fn compile(src: &str) -> Kernel {
    match compile_str(src) {
        Ok(mut ks) => ks.remove(0),
        Err(e) => panic!("compile failed:\n{e}"),
    }
}

/// An xorshift generator seeded from the clock (printed, to replay a failure).
struct Rng(u64);

impl Rng {
    fn fresh(test: &str) -> Rng {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        println!("{test}: seed {nanos}");
        Rng(nanos | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in `[-1, 1)`.
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

fn bf16_round(x: f32) -> f32 {
    half::bf16::from_f32(x).to_f32()
}

/// Runs `kernel` on one program and returns the `out_words` 4-byte words
/// of its last argument's buffer.
fn run_one(
    kernel: &Kernel,
    inputs: Vec<BufferId>,
    mem: &HostMemory,
    out_words: usize,
) -> Vec<[u8; 4]> {
    let out = mem.alloc(out_words * 4);
    mem.fill(out, 0xff).expect("fresh buffer");
    let mut args: Vec<ArgValue> = inputs.into_iter().map(ArgValue::ptr).collect();
    args.push(ArgValue::ptr(out));
    run_kernel(kernel, [1, 1, 1], &args, mem, &InterpOptions::default()).expect("runs");
    let mut bytes = vec![0u8; out_words * 4];
    mem.read(out, 0, &mut bytes).expect("read back");
    bytes.chunks(4).map(|w| [w[0], w[1], w[2], w[3]]).collect()
}

/// Largest error relative to the largest reference magnitude.
fn relative_error(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0f64, |m, w| m.max(w.abs()));
    let worst = got
        .iter()
        .zip(want)
        .fold(0f64, |m, (g, w)| m.max((f64::from(*g) - w).abs()));
    worst / scale
}

#[test]
fn register_a_attention_tiles_match_the_reference() {
    const D: usize = 64;
    for (bm, num_warps) in [(64, 4), (128, 8)] {
        let mut rng = Rng::fresh("attention_tile");
        let mut random =
            |len: usize| -> Vec<f32> { (0..len).map(|_| bf16_round(2.0 * rng.unit())).collect() };
        let (q, k, v) = (random(bm * D), random(D * D), random(D * D));
        let mem = HostMemory::new();
        let inputs = vec![
            upload_bf16(&mem, &q),
            upload_bf16(&mem, &k),
            upload_bf16(&mem, &v),
        ];
        let kernel = compile(&attention_tile(bm, num_warps));
        let got: Vec<f32> = run_one(&kernel, inputs, &mem, bm * D)
            .into_iter()
            .map(f32::from_le_bytes)
            .collect();
        let mut want = vec![0f64; bm * D];
        for i in 0..bm {
            let s: Vec<f64> = (0..D)
                .map(|j| {
                    (0..D)
                        .map(|p| f64::from(q[i * D + p]) * f64::from(k[j * D + p]))
                        .sum()
                })
                .collect();
            let row_max = s.iter().copied().fold(f64::MIN, f64::max);
            // The kernel feeds P to the tensor cores as bf16.
            let p: Vec<f64> = s
                .iter()
                .map(|x| f64::from(bf16_round((x - row_max).exp2() as f32)))
                .collect();
            for j in 0..D {
                want[i * D + j] = (0..D).map(|c| p[c] * f64::from(v[c * D + j])).sum();
            }
        }
        // bf16 P (2^-9 relative) is the only rounding the reference shares
        // only approximately; a misplaced element is off by O(1).
        let err = relative_error(&got, &want);
        assert!(err < 1e-2, "{bm} rows: relative error {err}");
    }
}

#[test]
fn m_major_a_tiles_match_the_reference() {
    const K: usize = 64;
    const N: usize = 128;
    for (m, num_warps, b_k_major) in [
        (64, 4, false),
        (128, 8, false),
        (128, 4, true),
        (64, 4, true),
    ] {
        let mut rng = Rng::fresh("m_major_a_tile");
        let mut random =
            |len: usize| -> Vec<f32> { (0..len).map(|_| bf16_round(2.0 * rng.unit())).collect() };
        // At is [K, M]; B is [K, N], or [N, K] when stored K-major.
        let (at, b) = (random(K * m), random(K * N));
        let b_at = |p: usize, j: usize| {
            if b_k_major {
                b[j * K + p]
            } else {
                b[p * N + j]
            }
        };
        let mem = HostMemory::new();
        let inputs = vec![upload_bf16(&mem, &at), upload_bf16(&mem, &b)];
        let kernel = compile(&m_major_a_tile(m, num_warps, b_k_major));
        let got: Vec<f32> = run_one(&kernel, inputs, &mem, m * N)
            .into_iter()
            .map(f32::from_le_bytes)
            .collect();
        let want: Vec<f64> = (0..m * N)
            .map(|x| {
                let (i, j) = (x / N, x % N);
                (0..K)
                    .map(|p| f64::from(at[p * m + i]) * f64::from(b_at(p, j)))
                    .sum()
            })
            .collect();
        // Exact bf16 products summed in f32: a misplaced element is O(1) off.
        let err = relative_error(&got, &want);
        assert!(
            err < 1e-5,
            "{m} rows on {num_warps} warps: relative error {err}"
        );
    }
}

/// `x` rounded to tf32 (10 mantissa bits), to nearest with ties away from
/// zero, as the interpreter reads tf32 inputs.
fn tf32_round(x: f32) -> f32 {
    f32::from_bits((x.to_bits() + 0x1000) & !0x1fff)
}

#[test]
fn tf32_tile_matches_the_reference() {
    let (m, n, k) = (64, 64, 32);
    let mut rng = Rng::fresh("tf32_tile");
    let a: Vec<f32> = (0..m * k).map(|_| rng.unit()).collect();
    let bt: Vec<f32> = (0..n * k).map(|_| rng.unit()).collect();
    let mem = HostMemory::new();
    let inputs = vec![upload_f32(&mem, &a), upload_f32(&mem, &bt)];
    let got: Vec<f32> = run_one(&compile(TF32_TILE), inputs, &mem, m * n)
        .into_iter()
        .map(f32::from_le_bytes)
        .collect();
    let dot = |round: fn(f32) -> f32, i: usize, j: usize| -> f64 {
        (0..k)
            .map(|p| f64::from(round(a[i * k + p])) * f64::from(round(bt[j * k + p])))
            .sum()
    };
    let rounded: Vec<f64> = (0..m * n).map(|x| dot(tf32_round, x / n, x % n)).collect();
    let exact: Vec<f64> = (0..m * n).map(|x| dot(|v| v, x / n, x % n)).collect();
    // Against tf32-rounded inputs only f32 accumulation is left; against the
    // exact inputs the tf32 rounding (2^-11 relative) shows.
    let err = relative_error(&got, &rounded);
    assert!(err < 1e-5, "relative error {err} against tf32 inputs");
    let err = relative_error(&got, &exact);
    assert!(err < 5e-3, "relative error {err} against f32 inputs");
    assert!(err > 1e-7, "tf32 rounding left no trace ({err})");
}

#[test]
fn i8_tile_accumulates_exactly_in_i32() {
    let (m, n, k) = (64, 64, 64);
    let mut rng = Rng::fresh("i8_tile");
    let mut random = |len: usize| -> Vec<i8> { (0..len).map(|_| rng.next() as i8).collect() };
    let (a, bt) = (random(m * k), random(n * k));
    let mem = HostMemory::new();
    let as_bytes = |v: &[i8]| -> Vec<u8> { v.iter().map(|x| *x as u8).collect() };
    let inputs = vec![upload(&mem, &as_bytes(&a)), upload(&mem, &as_bytes(&bt))];
    let got: Vec<i32> = run_one(&compile(I8_TILE), inputs, &mem, m * n)
        .into_iter()
        .map(i32::from_le_bytes)
        .collect();
    for i in 0..m {
        for j in 0..n {
            let want: i64 = (0..k)
                .map(|p| i64::from(a[i * k + p]) * i64::from(bt[j * k + p]))
                .sum();
            assert_eq!(i64::from(got[i * n + j]), want, "C[{i}][{j}]");
        }
    }
}

/// The same kernels through LLVM to PTX, assembled by `ptxas` for sm_90a.
mod codegen {
    use crate::codegen_common;
    use tlx_codegen::CodegenError;
    use tlx_core::ir::Arch;

    fn ptx(src: &str) -> String {
        let kernel = super::compile(src);
        tlx_codegen::compile(&kernel, Arch::Sm90a)
            .expect("compiles")
            .ptx
    }

    fn assembles_without_spills(ptx: &str) {
        match codegen_common::ptxas() {
            Some(ptxas) => {
                let report = codegen_common::ptxas_verbose(&ptxas, ptx);
                assert!(
                    !report.contains("spill stores") || report.contains("0 bytes spill stores"),
                    "{report}"
                );
                // ptxas serializes wgmma it cannot prove fenced.
                assert!(!report.contains("serialized"), "{report}");
            }
            None => println!("skipped: ptxas not found"),
        }
    }

    /// The message and hint of the codegen error `src` must give.
    fn codegen_error(src: &str) -> (String, String) {
        let kernel = super::compile(src);
        match tlx_codegen::compile(&kernel, Arch::Sm90a) {
            Err(CodegenError::Misuse { message, hint, at }) => {
                assert!(at.is_some(), "no span for {message}");
                (message, hint)
            }
            Err(other) => panic!("not a misuse: {other}"),
            Ok(_) => panic!("compiled"),
        }
    }

    /// Register-form wgmma: `{d}, {a0, a1, a2, a3}, b-desc, ...`.
    fn register_a_instructions(ptx: &str) -> usize {
        ptx.lines()
            .filter(|l| l.contains("wgmma.mma_async") && l.contains(", {%r"))
            .count()
    }

    /// The PTX after S's `wgmma.wait_group` (the operand copies before it
    /// may store elements one by one where alignment is unknown).
    fn after_first_wait(ptx: &str) -> &str {
        let at = ptx.find("wgmma.wait_group").expect("a wgmma wait");
        &ptx[at..]
    }

    /// A kernel `name(a, b, params..)` whose `body` finds 64x64 bf16
    /// operands `a_buf` and `b_buf` in shared memory, `rows` (`0..64`) and
    /// `at` (the row-major offsets of a 64x64 tile).
    fn with_operands_in_shared(name: &str, params: &str, body: &str) -> String {
        format!(
            r#"
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn {name}(a: Ptr<bf16>, b: Ptr<bf16>, {params}) {{
    let a_buf = local_view(local_alloc([64, 64], bf16, 1), 0);
    let b_buf = local_view(local_alloc([64, 64], bf16, 1), 0);
    let rows = arange(0, 64);
    let at = rows[(.., None)] * 64 + rows[(None, ..)];
    async_load(a + at, a_buf);
    async_load(b + at, b_buf);
    async_load_commit_group();
    async_load_wait_group(0);
{body}
}}
"#
        )
    }

    #[test]
    fn attention_tile_feeds_p_from_registers_without_moving_it() {
        let ptx = ptx(super::ATTENTION_TILE);
        let needle = "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16";
        assert!(ptx.contains(needle), "no `{needle}` in\n{ptx}");
        // P @ V: 4 K steps of 16, A from registers.
        assert_eq!(register_a_instructions(&ptx), 4, "{ptx}");
        // The accumulator's registers are P's A fragments: from S's wait on,
        // no shared-memory round trip (the f32 result is stored to global
        // memory directly).
        let after_s = after_first_wait(&ptx);
        for moved in ["st.shared", "ld.shared", "stmatrix", "ldmatrix"] {
            assert!(!after_s.contains(moved), "`{moved}` in\n{ptx}");
        }
        assembles_without_spills(&ptx);
    }

    #[test]
    fn an_accumulator_cast_to_bf16_is_a_register_a_without_shuffles() {
        // No row reduction: nothing at all may move between threads.
        let src = super::ATTENTION_TILE.replace(
            "let p = exp2(s - max(s, axis = 1)[(.., None)]);",
            "let p = exp2(s);",
        );
        let ptx = ptx(&src);
        assert_eq!(register_a_instructions(&ptx), 4, "{ptx}");
        let after_s = after_first_wait(&ptx);
        for moved in ["shfl", "st.shared", "ld.shared", "stmatrix", "ldmatrix"] {
            assert!(!after_s.contains(moved), "`{moved}` in\n{ptx}");
        }
        assembles_without_spills(&ptx);
    }

    /// An accumulator reset to `zeros` in an `if`'s first branch and
    /// rescaled in its second: the merge takes the rescaled value's wgmma
    /// layout (the zeros are made in it), so nothing goes through shared
    /// memory after the first product (it did when the first branch's
    /// layout decided the merge).
    #[test]
    fn an_accumulator_reset_in_a_branch_keeps_its_layout() {
        let src = include_str!("../../tests/common/reset_or_rescale.rs");
        let ptx = ptx(src);
        let after_s = after_first_wait(&ptx);
        for moved in ["st.shared", "ld.shared", "stmatrix", "ldmatrix"] {
            assert!(!after_s.contains(moved), "`{moved}` in\n{ptx}");
        }
        assembles_without_spills(&ptx);
    }

    /// An accumulator carried through two nested loops (the backward's
    /// heads-then-query-tiles steps) keeps the wgmma layout in the outer
    /// loop too: before, the outer loop carried it in the default layout
    /// and converted through shared memory on every inner loop's way in
    /// and out (the backward at head dim 128 then needed 262 KB).
    #[test]
    fn an_accumulator_carried_through_nested_loops_keeps_its_layout() {
        let src = with_operands_in_shared(
            "nested_accumulate",
            "out: Ptr<f32>, outer: i32, inner: i32",
            "
    let mut acc = zeros([64, 64], f32);
    for i in 0..outer {
        for j in 0..inner {
            acc = async_dot(a_buf, b_buf, acc);
            acc = async_dot_wait(0, acc);
        }
    }
    store(out + at, acc);",
        );
        let ptx = ptx(&src);
        // Nothing reads shared memory but wgmma (through its descriptors),
        // and the one barrier is the copies' (`async_load_wait_group`):
        // a conversion would add reads and barriers around the inner loop.
        for moved in ["ld.shared", "ldmatrix"] {
            assert!(!ptx.contains(moved), "`{moved}` in\n{ptx}");
        }
        assert_eq!(ptx.matches("barrier.sync").count(), 1, "{ptx}");
        // The carried accumulator is read by every step (the `zeros` before
        // the loop is not the product's operand).
        assert!(scale_d(&ptx).iter().all(|&on| on), "{ptx}");
        assembles_without_spills(&ptx);
    }

    /// Whether each wgmma of `ptx` reads its accumulator (scale-d on).
    fn scale_d(ptx: &str) -> Vec<bool> {
        ptx.lines()
            .filter(|l| l.contains("wgmma.mma_async"))
            .map(|l| !l.contains("setp.ne.b32 p, 0, 0;"))
            .collect()
    }

    /// A product into a `zeros` tile does not read it: its first K step runs
    /// with scale-d off, and no register is zeroed for it.
    #[test]
    fn a_product_into_zeros_does_not_read_the_accumulator() {
        let ptx = ptx(super::ATTENTION_TILE);
        // S and O: four K steps of 16 each, the first of each writing.
        let steps = [false, true, true, true];
        assert_eq!(scale_d(&ptx), [steps, steps].concat(), "{ptx}");
        assembles_without_spills(&ptx);
    }

    /// A loaded row vector broadcast over a wgmma accumulator (a bias, or
    /// the backward's `lse` and `delta`): the load is issued in the
    /// accumulator's column layout, each column once per thread, instead of
    /// in the default layout and moved through shared memory after the
    /// product (two barriers and a shared round trip per use).
    #[test]
    fn a_row_vector_broadcast_over_an_accumulator_is_loaded_in_its_layout() {
        let src = include_str!("../../tests/common/bias_epilogue.rs");
        let ptx = ptx(src);
        let after_product = after_first_wait(&ptx);
        for moved in [
            "st.shared",
            "ld.shared",
            "stmatrix",
            "ldmatrix",
            "barrier.sync",
        ] {
            assert!(!after_product.contains(moved), "`{moved}` in\n{ptx}");
        }
        // A thread's columns come in adjacent pairs (the default layout
        // would read four at a time).
        assert!(ptx.contains("ld.global.v2.b32"), "{ptx}");
        assert!(!ptx.contains("ld.global.v4.b32"), "{ptx}");
        assembles_without_spills(&ptx);
    }

    /// A `local_store` right before a named barrier that both replicas
    /// wait on: the store's trailing barrier over its own warp group is
    /// subsumed by the named one and not emitted (its leading one is).
    #[test]
    fn a_named_barrier_subsumes_the_barrier_just_before_it() {
        let src = r#"
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn handoff_through_shared(out: Ptr<f32>) {
    let bufs = local_alloc([64, 64], f32, 2);
    async_tasks! {
        task(default) {
        }
        task(num_warps = 4, replicate = 2) {
            let me = async_task_replica_id();
            local_store(local_view(bufs, me), full([64, 64], me.to(f32), f32));
            named_barrier_wait(8, 256);
            let other = local_load(local_view(bufs, 1 - me));
            let rows = arange(0, 64);
            store(out + me * 4096 + rows[(.., None)] * 64 + rows[(None, ..)], other);
        }
    }
}
"#;
        let ptx = ptx(src);
        let barriers = |threads: &str| {
            ptx.lines()
                .filter(|l| l.contains("barrier.sync") && l.ends_with(threads))
                .count()
        };
        // Each replica: the named barrier, and one warp-group barrier (the
        // store's leading one), not two.
        assert_eq!(barriers(", 256;"), 2, "{ptx}");
        assert_eq!(barriers(", 128;"), 2, "{ptx}");
    }

    /// A TMA store of a tile just written by `local_store`: the store's
    /// trailing proxy fence and barrier already make the tile visible to
    /// TMA, so the TMA store adds none; after another write (a global
    /// store here) it fences again.
    #[test]
    fn a_tma_store_right_after_a_local_store_fences_once() {
        let src = |between: &str| {
            format!(
                r#"
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn stage_out(x: Ptr<f32>, desc: TensorDesc<f32, 8, 32>) {{
    let buf = local_alloc([8, 32], f32, 1);
    let row0 = program_id(0) * 8;
    let r = arange(0, 8);
    let c = arange(0, 32);
    local_store(local_view(buf, 0), load(x + r[(.., None)] * 32 + c[(None, ..)]) * 2.0);
    {between}
    async_descriptor_store(desc, local_view(buf, 0), [row0, 0]);
    async_descriptor_store_wait(0);
}}
"#
            )
        };
        let fences = |ptx: &str| ptx.matches("fence.proxy.async.shared::cta").count();
        let direct = ptx(&src(""));
        assert_eq!(fences(&direct), 1, "{direct}");
        let with_write = ptx(&src("store(x + 256 + row0, 1.0);"));
        assert_eq!(fences(&with_write), 2, "{with_write}");
        assembles_without_spills(&direct);
    }

    /// A staging buffer refilled right after `async_descriptor_store_wait`
    /// (the TMA store of the previous tile has read it): the wait's
    /// barrier already orders every earlier reader, so the `local_store`
    /// adds no barrier before its writes; after a global load in between
    /// (not pure) it syncs again.
    #[test]
    fn a_local_store_right_after_a_store_wait_syncs_once() {
        let src = |between: &str| {
            format!(
                r#"
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn stage_twice(x: Ptr<f32>, desc: TensorDesc<f32, 8, 32>) {{
    let buf = local_alloc([8, 32], f32, 1);
    let at = arange(0, 8)[(.., None)] * 32 + arange(0, 32)[(None, ..)];
    let first = load(x + at);
    local_store(local_view(buf, 0), first);
    async_descriptor_store(desc, local_view(buf, 0), [0, 0]);
    async_descriptor_store_wait(0);
    {between}
    local_store(local_view(buf, 0), y);
    async_descriptor_store(desc, local_view(buf, 0), [8, 0]);
    async_descriptor_store_wait(0);
}}
"#
            )
        };
        let syncs = |ptx: &str| ptx.matches("barrier.sync 0;").count();
        let pure = ptx(&src("let y = first;"));
        let loaded = ptx(&src("let y = load(x + 256 + at);"));
        assert_eq!(syncs(&loaded), syncs(&pure) + 1, "{pure}\n{loaded}");
        assembles_without_spills(&pure);
    }

    /// A partial result merged into a wgmma accumulator, as split-KV
    /// attention merges another program's rows: `acc * alpha + beta * o`,
    /// with `o` a loaded tile and `beta` computed from a loaded row
    /// statistic. The tile reaches the sum that wants the accumulator's
    /// layout through a product with another held operand (`beta`); it is
    /// still loaded in that layout, and nothing moves through shared memory.
    #[test]
    fn a_tile_scaled_by_a_loaded_statistic_is_loaded_in_the_accumulators_layout() {
        let ptx = ptx(&with_operands_in_shared(
            "merge_rows",
            "part: Ptr<f32>, part_max: Ptr<f32>, out: Ptr<f32>",
            "
    let acc = async_dot(a_buf, b_buf, zeros([64, 64], f32));
    let acc = async_dot_wait(0, acc);
    let m = max(acc, axis = 1);
    let o = load(part + at);
    let m_o = load(part_max + rows);
    let m_new = maximum(m, m_o);
    let alpha = exp2(m - m_new);
    let beta = exp2(0.0 - (m_new - m_o));
    store(out + at, acc * alpha[(.., None)] + beta[(.., None)] * o);",
        ));
        let after_product = after_first_wait(&ptx);
        for moved in ["st.shared", "ld.shared", "stmatrix", "ldmatrix"] {
            assert!(!after_product.contains(moved), "`{moved}` in\n{ptx}");
        }
        assembles_without_spills(&ptx);
    }

    /// 128 rows: two 64-row instructions per K step on one warp group, or
    /// one on each of two warp groups.
    #[test]
    fn taller_attention_tiles_take_a_from_registers_per_m_block() {
        for (num_warps, instructions) in [(4, 8), (8, 4)] {
            let ptx = ptx(&super::attention_tile(128, num_warps));
            assert_eq!(register_a_instructions(&ptx), instructions, "{ptx}");
            let after_s = after_first_wait(&ptx);
            for moved in ["st.shared", "ld.shared", "stmatrix", "ldmatrix"] {
                assert!(!after_s.contains(moved), "`{moved}` in\n{ptx}");
            }
            assembles_without_spills(&ptx);
        }
    }

    /// The A transpose flag is set (the fourth immediate), with B's as its
    /// order asks, and every warp group finds its rows.
    #[test]
    fn m_major_a_sets_the_a_transpose_flag() {
        for (m, num_warps, b_k_major, instructions) in
            [(64, 4, false, 4), (128, 8, false, 4), (128, 4, true, 8)]
        {
            let ptx = ptx(&super::m_major_a_tile(m, num_warps, b_k_major));
            let flags = format!("p, 1, 1, 1, {};", u8::from(!b_k_major));
            let wgmma: Vec<&str> = ptx
                .lines()
                .filter(|l| l.contains("wgmma.mma_async"))
                .collect();
            assert_eq!(wgmma.len(), instructions, "{ptx}");
            assert!(wgmma.iter().all(|l| l.contains(&flags)), "{wgmma:#?}");
            assembles_without_spills(&ptx);
        }
    }

    #[test]
    fn an_m_major_fp8_a_is_a_compile_error_naming_the_order() {
        let src = super::m_major_a_tile(64, 4, true).replace("bf16", "f8e4m3");
        let (err, _) = codegen_error(&src);
        assert!(err.contains("A must be an [M, K] buffer"), "{err}");
    }

    #[test]
    fn tf32_tile_uses_k8_tf32_wgmma() {
        let ptx = ptx(super::TF32_TILE);
        let needle = "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32";
        assert_eq!(ptx.matches(needle).count(), 32 / 8, "{ptx}");
        assembles_without_spills(&ptx);
    }

    #[test]
    fn i8_tile_uses_k32_s8_wgmma_into_i32() {
        let ptx = ptx(super::I8_TILE);
        let needle = "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8";
        assert_eq!(ptx.matches(needle).count(), 64 / 32, "{ptx}");
        assembles_without_spills(&ptx);
    }

    #[test]
    fn an_f32_register_a_is_a_compile_error_with_a_hint() {
        let src = super::TF32_TILE.replace(
            "async_dot(a_buf, local_trans(bt_buf)",
            "async_dot(local_load(a_buf), local_trans(bt_buf)",
        );
        let (err, hint) = codegen_error(&src);
        assert!(
            err.contains("A in registers takes f16 or bf16, not f32"),
            "{err}"
        );
        assert!(hint.contains("local_store"), "{hint}");
    }

    #[test]
    fn an_n_major_i8_b_is_a_compile_error_naming_the_order() {
        let src = super::I8_TILE.replace("local_trans(bt_buf)", "bt_buf");
        let (err, hint) = codegen_error(&src);
        assert!(err.contains("must be K-major"), "{err}");
        assert!(hint.contains("local_trans"), "{hint}");
    }
}

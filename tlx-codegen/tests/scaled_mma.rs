//! Blackwell's block-scaled MMA (`async_dot_scaled`, mxfp8) end to end
//! without a Blackwell GPU: fp8 operands and ue8m0 scales staged in shared
//! memory, the scales copied into tensor memory (`tmem_copy`, atoms of 128
//! rows by 4 blocks), one scaled MMA per 32 elements of K; the interpreter's
//! product against the host's, misuses as errors, and the PTX `ptxas`
//! accepts for sm_100a.

use tlx_core::check::{check_protocol, ProtocolReport};
use tlx_core::interp::{run_kernel, ArgValue, HostMemory, InterpOptions};
use tlx_core::ir::Arch;

use crate::codegen_common;
use crate::kernels::compile;

/// `c = (a * 2^(sa - 127)) @ (b * 2^(sb - 127))` for one 128 x N tile, K =
/// 128: `a` `[128, K]` and `bt` `[N, K]` e4m3 bytes, `sa` and `sb` the
/// scales' 512-byte atoms.
const SCALED: &str = r#"
#[tlx::kernel(arch = "sm_100a", num_warps = 4)]
fn scaled(a: Ptr<f8e4m3>, bt: Ptr<f8e4m3>, sa: Ptr<u8>, sb: Ptr<u8>, c: Ptr<f32>) {
    let a_buf = local_alloc([128, 128], f8e4m3, 1);
    let b_buf = local_alloc([NCOLS, 128], f8e4m3, 1);
    let sa_buf = local_alloc([2, 256], u8, 1);
    let sb_buf = local_alloc([2 * NCOLS / 128, 256], u8, 1);
    let acc = local_alloc([128, NCOLS], f32, 1, storage = "tmem");
    let sa_t = local_alloc([128, 4], u8, 1, storage = "tmem");
    let sb_t = local_alloc([NCOLS, 4], u8, 1, storage = "tmem");
    let done = alloc_barriers(1, 1);
    let r = arange(0, 128);
    let n = arange(0, NCOLS);
    let k = arange(0, 128);
    let bytes = arange(0, 256);
    local_store(local_view(a_buf, 0), load(a + r[(.., None)] * 128 + k[(None, ..)]));
    local_store(local_view(b_buf, 0), load(bt + n[(.., None)] * 128 + k[(None, ..)]));
    let two = arange(0, 2);
    local_store(local_view(sa_buf, 0), load(sa + two[(.., None)] * 256 + bytes[(None, ..)]));
    let rows_b = arange(0, 2 * NCOLS / 128);
    local_store(local_view(sb_buf, 0), load(sb + rows_b[(.., None)] * 256 + bytes[(None, ..)]));
    fence_async_shared();
    tmem_copy(local_view(sa_buf, 0), local_view(sa_t, 0));
    tmem_copy(local_view(sb_buf, 0), local_view(sb_t, 0));
    async_dot_scaled(
        local_view(a_buf, 0),
        local_trans(local_view(b_buf, 0)),
        local_view(acc, 0),
        local_view(sa_t, 0),
        local_view(sb_t, 0),
        use_acc = false,
        mbarriers = [local_view(done, 0)],
    );
    barrier_wait(local_view(done, 0), 0);
    store(c + r[(.., None)] * NCOLS + n[(None, ..)], local_load(local_view(acc, 0)));
}
"#;

fn kernel_src(n: usize) -> String {
    SCALED.replace("NCOLS", &n.to_string())
}

/// The 512-byte atoms of `[rows, blocks]` scales (`tmem_copy`'s order).
fn atoms(scales: &[u8], rows: usize, blocks: usize) -> Vec<u8> {
    let mut out = vec![0u8; rows * blocks];
    for r in 0..rows {
        for kb in 0..blocks {
            let atom = (r / 128) * (blocks / 4) + kb / 4;
            out[atom * 512 + (r % 32) * 16 + (r % 128) / 32 * 4 + kb % 4] = scales[r * blocks + kb];
        }
    }
    out
}

fn run(n: usize) -> (Vec<f32>, Vec<f64>) {
    let kernel = compile(&kernel_src(n));
    let mem = HostMemory::new();
    // Whole-number e4m3 values and exponents near 127: every product exact.
    let a: Vec<f32> = (0..128 * 128)
        .map(|i| ((i * 7 + 3) % 9) as f32 - 4.0)
        .collect();
    let bt: Vec<f32> = (0..n * 128)
        .map(|i| ((i * 5 + 1) % 7) as f32 - 3.0)
        .collect();
    let sa: Vec<u8> = (0..128 * 4).map(|i| 124 + (i * 3 % 7) as u8).collect();
    let sb: Vec<u8> = (0..n * 4).map(|i| 125 + (i * 5 % 5) as u8).collect();
    let e4m3 = |v: &[f32]| -> Vec<u8> {
        v.iter()
            .map(|&x| tlx_core::numeric::f64_to_e4m3(f64::from(x)))
            .collect()
    };
    let put = |bytes: &[u8]| {
        let id = mem.alloc(bytes.len());
        mem.write(id, 0, bytes).expect("fresh buffer");
        id
    };
    let ids = [
        put(&e4m3(&a)),
        put(&e4m3(&bt)),
        put(&atoms(&sa, 128, 4)),
        put(&atoms(&sb, n, 4)),
    ];
    let c = put(&vec![0xffu8; 128 * n * 4]);
    let args: Vec<ArgValue> = ids
        .iter()
        .chain([&c])
        .map(|&id| ArgValue::ptr(id))
        .collect();
    run_kernel(&kernel, [1, 1, 1], &args, &mem, &InterpOptions::default()).expect("runs");
    let mut bytes = vec![0u8; 128 * n * 4];
    mem.read(c, 0, &mut bytes).expect("read back");
    let got = bytes
        .chunks(4)
        .map(|w| f32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    let scale = |e: u8| 2f64.powi(i32::from(e) - 127);
    let mut want = vec![0.0f64; 128 * n];
    for i in 0..128 {
        for j in 0..n {
            want[i * n + j] = (0..128)
                .map(|kk| {
                    f64::from(a[i * 128 + kk])
                        * scale(sa[i * 4 + kk / 32])
                        * f64::from(bt[j * 128 + kk])
                        * scale(sb[j * 4 + kk / 32])
                })
                .sum();
        }
    }
    (got, want)
}

#[test]
fn a_block_scaled_mma_multiplies_by_each_blocks_scales() {
    for n in [128, 256] {
        let (got, want) = run(n);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (f64::from(*g) - w).abs() <= 1e-6 * w.abs().max(1.0),
                "N = {n}, element {i}: {g} vs {w}"
            );
        }
        let kernel = compile(&kernel_src(n));
        assert_eq!(check_protocol(&kernel), ProtocolReport::default());
        let c = tlx_codegen::compile(&kernel, Arch::Sm100a).expect("compiles");
        // One scaled MMA per 32 elements of K; one copy per scale atom.
        let mma = "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X";
        assert_eq!(c.ptx.matches(mma).count(), 4, "{}", c.ptx);
        let cp = "tcgen05.cp.cta_group::1.32x128b.warpx4";
        assert_eq!(c.ptx.matches(cp).count(), 1 + n / 128, "{}", c.ptx);
        if let Some(p) = codegen_common::ptxas() {
            codegen_common::assemble(&p, Arch::Sm100a, &kernel.name, &c.ptx);
        }
    }
}

fn compile_error(src: &str) -> String {
    match tlx_frontend::compile_str(src) {
        Ok(_) => panic!("compiled, but should not have"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn scales_of_the_wrong_shape_or_type_are_errors() {
    let src = kernel_src(128);
    let wrong_blocks = src.replace(
        "let sa_t = local_alloc([128, 4], u8, 1, storage = \"tmem\");",
        "let sa_t = local_alloc([128, 8], u8, 1, storage = \"tmem\");",
    );
    let err = compile_error(&wrong_blocks);
    assert!(err.contains("a u8 [128, 4] tensor-memory buffer"), "{err}");
    let bf16_operands = src
        .replace("[128, 128], f8e4m3", "[128, 128], bf16")
        .replace("a: Ptr<f8e4m3>", "a: Ptr<bf16>");
    let err = compile_error(&bf16_operands);
    assert!(err.contains("takes fp8 operands"), "{err}");
    let swizzled = src
        .replace(
            "local_alloc([2, 256], u8, 1)",
            "local_alloc([8, 64], u8, 1)",
        )
        .replace("two[(.., None)] * 256", "two[(.., None)] * 64");
    let err = compile_error(&swizzled);
    assert!(err.contains("is swizzled"), "{err}");
    let read_scales = src.replace(
        "barrier_wait(local_view(done, 0), 0);",
        "barrier_wait(local_view(done, 0), 0);\n    let s = local_load(local_view(sa_t, 0));",
    );
    let err = compile_error(&read_scales);
    assert!(err.contains("only `async_dot_scaled` reads them"), "{err}");
}

#[test]
fn a_block_scaled_mma_needs_blackwell() {
    let src = kernel_src(128).replace("arch = \"sm_100a\", ", "");
    let kernel = compile(&src);
    let err = tlx_codegen::compile(&kernel, Arch::Sm90a).expect_err("Hopper has no tcgen05");
    assert!(
        err.to_string().contains("needs Blackwell (sm_100a)"),
        "{err}"
    );
}

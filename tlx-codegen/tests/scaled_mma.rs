//! Blackwell's block-scaled MMAs (`async_dot_scaled`: mxfp8, mxfp4,
//! nvfp4) end to end without a Blackwell GPU: operands and scales staged in
//! shared memory, the scales copied into tensor memory (`tmem_copy`, atoms
//! of 128 rows by 4 blocks), one scaled MMA per 32 bytes of K; the
//! interpreter's product against the host's, misuses as errors, and the PTX
//! `ptxas` accepts for sm_100a.

use tlx_core::check::{check_protocol, ProtocolReport};
use tlx_core::interp::{run_kernel, ArgValue, HostMemory, InterpOptions};
use tlx_core::ir::Arch;

use crate::codegen_common;
use crate::kernels::{compile, download_f32, upload};

/// `c = (a * sa) @ (b * sb)` for one 128 x NCOLS tile, K = 128: `a`
/// `[128, KB]` and `bt` `[NCOLS, KB]` bytes of ELEM (one fp8 value or two
/// fp4 ones each), `sa` and `sb` the scales' 512-byte atoms (SCALE, BLOCKS
/// per row).
const SCALED: &str = r#"
#[tlx::kernel(arch = "sm_100a", num_warps = 4)]
fn scaled(a: Ptr<ELEM>, bt: Ptr<ELEM>, sa: Ptr<SCALE>, sb: Ptr<SCALE>, c: Ptr<f32>) {
    let a_buf = local_alloc([128, KB], ELEM, 1);
    let b_buf = local_alloc([NCOLS, KB], ELEM, 1);
    let sa_buf = local_alloc([SA_ROWS, 512], SCALE, 1);
    let sb_buf = local_alloc([SB_ROWS, 512], SCALE, 1);
    let acc = local_alloc([128, NCOLS], f32, 1, storage = "tmem");
    let sa_t = local_alloc([128, BLOCKS], SCALE, 1, storage = "tmem");
    let sb_t = local_alloc([NCOLS, BLOCKS], SCALE, 1, storage = "tmem");
    let done = alloc_barriers(1, 1);
    let r = arange(0, 128);
    let n = arange(0, NCOLS);
    let k = arange(0, KB);
    let bytes = arange(0, 512);
    local_store(local_view(a_buf, 0), load(a + r[(.., None)] * KB + k[(None, ..)]));
    local_store(local_view(b_buf, 0), load(bt + n[(.., None)] * KB + k[(None, ..)]));
    let rows_a = arange(0, SA_ROWS);
    local_store(local_view(sa_buf, 0), load(sa + rows_a[(.., None)] * 512 + bytes[(None, ..)]));
    let rows_b = arange(0, SB_ROWS);
    local_store(local_view(sb_buf, 0), load(sb + rows_b[(.., None)] * 512 + bytes[(None, ..)]));
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

/// One block-scaled form: its operand and scale types in the kernel
/// language, elements per byte, elements per scale, and the PTX it becomes.
#[derive(Clone, Copy)]
struct Form {
    elem: &'static str,
    scale: &'static str,
    per_byte: usize,
    block: usize,
    ptx: &'static str,
}

const MXFP8: Form = Form {
    elem: "f8e4m3",
    scale: "u8",
    per_byte: 1,
    block: 32,
    ptx: "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X",
};
const MXFP4: Form = Form {
    elem: "u8",
    scale: "u8",
    per_byte: 2,
    block: 32,
    ptx: "tcgen05.mma.cta_group::1.kind::mxf4.block_scale.scale_vec::2X",
};
const NVFP4: Form = Form {
    elem: "u8",
    scale: "f8e4m3",
    per_byte: 2,
    block: 16,
    ptx: "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X",
};

const K: usize = 128;

fn kernel_src(form: Form, n: usize) -> String {
    let blocks = K / form.block;
    SCALED
        .replace("NCOLS", &n.to_string())
        .replace("ELEM", form.elem)
        .replace("SCALE", form.scale)
        .replace("KB", &(K / form.per_byte).to_string())
        .replace("BLOCKS", &blocks.to_string())
        .replace("SA_ROWS", &(128 * blocks / 512).to_string())
        .replace("SB_ROWS", &(n * blocks / 512).to_string())
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

const E2M1: [f64; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];

/// `rows` x K operand values and their bytes: whole e4m3 numbers, or e2m1
/// codes packed two per byte (low nibble first).
fn operand(form: Form, rows: usize, seed: usize) -> (Vec<f64>, Vec<u8>) {
    let code = |i: usize| (i * 7 + seed * 3 + i / 13) % 16;
    if form.per_byte == 1 {
        let v: Vec<f64> = (0..rows * K).map(|i| code(i) as f64 - 8.0).collect();
        let bytes = v
            .iter()
            .map(|&x| tlx_core::numeric::f64_to_e4m3(x))
            .collect();
        return (v, bytes);
    }
    let value = |c: usize| {
        if c & 8 != 0 {
            -E2M1[c & 7]
        } else {
            E2M1[c & 7]
        }
    };
    let codes: Vec<usize> = (0..rows * K).map(code).collect();
    let bytes = codes.chunks(2).map(|p| (p[0] | p[1] << 4) as u8).collect();
    (codes.into_iter().map(value).collect(), bytes)
}

/// `rows` x blocks scales and their bytes: ue8m0 exponents near 127, or
/// ue4m3 values from 1/4 to 3.
fn scales(form: Form, rows: usize, seed: usize) -> (Vec<f64>, Vec<u8>) {
    let blocks = K / form.block;
    let pick = |i: usize| (i * 5 + seed) % 7;
    if form.scale == "u8" {
        let e: Vec<u8> = (0..rows * blocks).map(|i| 124 + pick(i) as u8).collect();
        let v = e.iter().map(|&e| 2f64.powi(i32::from(e) - 127)).collect();
        return (v, e);
    }
    let v: Vec<f64> = (0..rows * blocks)
        .map(|i| [0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0][pick(i)])
        .collect();
    let bytes = v
        .iter()
        .map(|&x| tlx_core::numeric::f64_to_e4m3(x))
        .collect();
    (v, bytes)
}

fn run(form: Form, n: usize) -> (Vec<f32>, Vec<f64>) {
    let kernel = compile(&kernel_src(form, n));
    let mem = HostMemory::new();
    let blocks = K / form.block;
    let ((a, a_bytes), (bt, b_bytes)) = (operand(form, 128, 1), operand(form, n, 2));
    let ((sa, sa_bytes), (sb, sb_bytes)) = (scales(form, 128, 3), scales(form, n, 4));
    let put = |bytes: &[u8]| upload(&mem, bytes);
    let ids = [
        put(&a_bytes),
        put(&b_bytes),
        put(&atoms(&sa_bytes, 128, blocks)),
        put(&atoms(&sb_bytes, n, blocks)),
    ];
    let c = put(&vec![0xffu8; 128 * n * 4]);
    let args: Vec<ArgValue> = ids
        .iter()
        .chain([&c])
        .map(|&id| ArgValue::ptr(id))
        .collect();
    run_kernel(&kernel, [1, 1, 1], &args, &mem, &InterpOptions::default()).expect("runs");
    let got = download_f32(&mem, c, 128 * n);
    let mut want = vec![0.0f64; 128 * n];
    for i in 0..128 {
        for j in 0..n {
            want[i * n + j] = (0..K)
                .map(|kk| {
                    a[i * K + kk]
                        * sa[i * blocks + kk / form.block]
                        * bt[j * K + kk]
                        * sb[j * blocks + kk / form.block]
                })
                .sum();
        }
    }
    (got, want)
}

#[test]
fn block_scaled_mmas_multiply_by_each_blocks_scales() {
    for (name, form) in [("mxfp8", MXFP8), ("mxfp4", MXFP4), ("nvfp4", NVFP4)] {
        for n in [128, 256] {
            let (got, want) = run(form, n);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (f64::from(*g) - w).abs() <= 1e-6 * w.abs().max(1.0),
                    "{name}, N = {n}, element {i}: {g} vs {w}"
                );
            }
            let kernel = compile(&kernel_src(form, n));
            assert_eq!(check_protocol(&kernel), ProtocolReport::default());
            let c = tlx_codegen::compile(&kernel, Arch::Sm100a).expect("compiles");
            // One scaled MMA per 32 bytes of K; one copy per scale atom.
            let steps = K / form.per_byte / 32;
            assert_eq!(c.ptx.matches(form.ptx).count(), steps, "{name}: {}", c.ptx);
            let cp = "tcgen05.cp.cta_group::1.32x128b.warpx4";
            let atoms = (128 + n) * (K / form.block) / 512;
            assert_eq!(c.ptx.matches(cp).count(), atoms, "{name}: {}", c.ptx);
            if let Some(p) = codegen_common::ptxas() {
                codegen_common::assemble(&p, Arch::Sm100a, &kernel.name, &c.ptx);
            }
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
    let src = kernel_src(MXFP8, 128);
    let wrong_blocks = src.replace(
        "let sa_t = local_alloc([128, 4], u8, 1, storage = \"tmem\");",
        "let sa_t = local_alloc([128, 8], u8, 1, storage = \"tmem\");",
    );
    assert_ne!(wrong_blocks, src);
    let err = compile_error(&wrong_blocks);
    assert!(err.contains("a u8 [128, 4] tensor-memory buffer"), "{err}");
    let bf16_operands = src
        .replace("[128, 128], f8e4m3", "[128, 128], bf16")
        .replace("a: Ptr<f8e4m3>", "a: Ptr<bf16>");
    assert_ne!(bf16_operands, src);
    let err = compile_error(&bf16_operands);
    assert!(err.contains("takes fp8 operands"), "{err}");
    let swizzled = src
        .replace(
            "local_alloc([1, 512], u8, 1)",
            "local_alloc([8, 64], u8, 1)",
        )
        .replace(
            "rows_a[(.., None)] * 512 + bytes",
            "rows_a[(.., None)] * 64 + bytes",
        );
    assert_ne!(swizzled, src);
    let err = compile_error(&swizzled);
    assert!(err.contains("is swizzled"), "{err}");
    let read_scales = src.replace(
        "barrier_wait(local_view(done, 0), 0);",
        "barrier_wait(local_view(done, 0), 0);\n    let s = local_load(local_view(sa_t, 0));",
    );
    let err = compile_error(&read_scales);
    assert!(err.contains("only `async_dot_scaled` reads them"), "{err}");
    // nvfp4's ue4m3 scales with mxfp8's operands: no such form.
    let mixed = kernel_src(NVFP4, 128)
        .replace("[128, 64], u8", "[128, 64], f8e4m3")
        .replace("a: Ptr<u8>", "a: Ptr<f8e4m3>");
    let err = compile_error(&mixed);
    assert!(err.contains("f8e4m3 (ue4m3, nvfp4) scales"), "{err}");
}

#[test]
fn a_block_scaled_mma_needs_blackwell() {
    let src = kernel_src(MXFP8, 128).replace("arch = \"sm_100a\", ", "");
    let kernel = compile(&src);
    let err = tlx_codegen::compile(&kernel, Arch::Sm90a).expect_err("Hopper has no tcgen05");
    assert!(
        err.to_string().contains("needs Blackwell (sm_100a)"),
        "{err}"
    );
}

//! `dot` over every operand form a Triton-style matmul can give it, through
//! code generation: f16, bf16, f32 (tf32) and fp8 e4m3 inputs; A and B each
//! stored row- or column-major; the contiguous dimension's stride a literal
//! 1, a known constant other than 1, or a run-time argument. Each kernel
//! has Triton's two tutorial configurations (64x64x32 on 4 warps;
//! 128x128x64 on 8 warps with 3 stages, where wgmma operands get rings of
//! their own) and is compiled for sm_90a and sm_100a, and assembled by
//! `ptxas` when present. The same forms run on the interpreter and the GPU
//! against a reference in the `tlx` crate's `tests/dot_operands.rs`.
//!
//! A form whose loads cannot be copied in 4-16 byte chunks must still
//! build, only slower, and say so in the compiled kernel's notes (issue
//! 58's regression was an internal compiler error here).

use crate::codegen_common;
use tlx_core::ir::{Arch, Kernel, ScalarType};
use tlx_frontend::compile_str;

/// How the contiguous dimension of an operand is strided.
#[derive(Copy, Clone, Debug)]
enum Inner {
    /// Literally 1: the index is added unscaled.
    Unit,
    /// A constant other than 1, known when the kernel is compiled.
    Known(i32),
    /// A runtime `i32` argument (passed as 1, the common case).
    Runtime,
}

/// One operand form: element type, which operands are stored transposed
/// (A as `[K, M]`, B as `[N, K]`), and the inner stride.
#[derive(Copy, Clone, Debug)]
struct Form {
    elem: ScalarType,
    a_transposed: bool,
    b_transposed: bool,
    inner: Inner,
}

impl Form {
    fn name(&self) -> String {
        let inner = match self.inner {
            Inner::Unit => "unit".to_string(),
            Inner::Known(s) => format!("known{s}"),
            Inner::Runtime => "runtime".to_string(),
        };
        format!(
            "dot_{}_{}{}_{inner}",
            self.elem.name(),
            if self.a_transposed { "t" } else { "n" },
            if self.b_transposed { "t" } else { "n" },
        )
    }

    /// `index * stride` for the contiguous dimension, as kernel source.
    fn scaled(&self, index: &str, runtime: &str) -> String {
        match self.inner {
            Inner::Unit => index.to_string(),
            Inner::Known(s) => format!("{index} * {s}"),
            Inner::Runtime => format!("{index} * {runtime}"),
        }
    }

    /// The kernel: `c = a @ b` over `m x n x k`, every outer stride a
    /// runtime argument, masked loads on every edge with `other = 0.0`.
    fn source(&self) -> String {
        let (rows, ks, cols) = ("offs_m[(.., None)]", "ks[(None, ..)]", "offs_n[(None, ..)]");
        let ks_col = "ks[(.., None)]";
        // Element (i, p) of A is at `i * sam + p * sak`: the contiguous
        // dimension is K unless A is stored transposed.
        let a_at = if self.a_transposed {
            format!("{} + {ks} * sak", self.scaled(rows, "sam"))
        } else {
            format!("{rows} * sam + {}", self.scaled(ks, "sak"))
        };
        let b_at = if self.b_transposed {
            format!("{} + {cols} * sbn", self.scaled(ks_col, "sbk"))
        } else {
            format!("{ks_col} * sbk + {}", self.scaled(cols, "sbn"))
        };
        let t = self.elem.name();
        format!(
            r#"
#[tlx::kernel(configs = [
    (BM = 64, BN = 64, BK = 32, num_warps = 4),
    (BM = 128, BN = 128, BK = 64, num_warps = 8, num_stages = 3),
])]
fn {name}<const BM: usize, const BN: usize, const BK: usize>(
    a: Ptr<{t}>, b: Ptr<{t}>, c: Ptr<f32>,
    m: i32, n: i32, k: i32,
    sam: i32, sak: i32, sbk: i32, sbn: i32, scm: i32,
) {{
    let offs_m = program_id(0) * BM + arange(0, BM);
    let offs_n = program_id(1) * BN + arange(0, BN);
    let offs_k = arange(0, BK);
    let rows_ok = offs_m[(.., None)] < m;
    let cols_ok = offs_n[(None, ..)] < n;
    let mut acc = zeros([BM, BN], f32);
    for k0 in (0..k).step_by(BK) {{
        let ks = k0 + offs_k;
        let a_tile = load(a + {a_at}, mask = rows_ok & ({ks} < k), other = 0.0);
        let b_tile = load(b + {b_at}, mask = ({ks_col} < k) & cols_ok, other = 0.0);
        acc = dot(a_tile, b_tile, acc);
    }}
    store(c + offs_m[(.., None)] * scm + offs_n[(None, ..)], acc, mask = rows_ok & cols_ok);
}}
"#,
            name = self.name()
        )
    }
}

/// Every form: four element types, four transpositions, three strides;
/// fp8 only where some tensor-core path takes it as the user wrote it.
fn forms() -> Vec<Form> {
    let mut out = Vec::new();
    for elem in [
        ScalarType::F16,
        ScalarType::BF16,
        ScalarType::F32,
        ScalarType::F8E4M3,
    ] {
        for (a_transposed, b_transposed) in
            [(false, false), (true, false), (false, true), (true, true)]
        {
            for inner in [Inner::Unit, Inner::Known(2), Inner::Runtime] {
                out.push(Form {
                    elem,
                    a_transposed,
                    b_transposed,
                    inner,
                });
            }
        }
    }
    out
}

fn compile(form: &Form) -> Vec<Kernel> {
    compile_str(&form.source()).unwrap_or_else(|e| panic!("{}: {e}", form.name()))
}

#[test]
fn every_operand_form_compiles_for_hopper_and_blackwell() {
    let ptxas = codegen_common::ptxas();
    if ptxas.is_none() {
        println!("ptxas not found: compiling without assembling");
    }
    let mut builds = Vec::new();
    for form in forms() {
        let kernels = compile(&form);
        // sm_100a has no wgmma: the plain configuration differs from the
        // pipelined one only by the copies, which the latter has too.
        let pipelined = kernels.last().expect("two configurations").clone();
        builds.extend(kernels.into_iter().map(|k| (form, k, Arch::Sm90a)));
        builds.push((form, pipelined, Arch::Sm100a));
    }
    tlx_codegen::parallel::map(&builds, |(form, kernel, arch)| {
        let compiled = tlx_codegen::compile(kernel, *arch).unwrap_or_else(|e| {
            panic!(
                "{} (num_stages {}) for {}: {e}",
                form.name(),
                kernel.options.num_stages,
                arch.name()
            )
        });
        if let Some(p) = &ptxas {
            codegen_common::assemble(p, *arch, &kernel.name, &compiled.ptx);
        }
    });
}

/// The notes of `form`'s pipelined configuration for sm_90a.
fn pipelined_notes(form: Form) -> Vec<String> {
    let kernel = compile(&form).pop().expect("two configurations");
    tlx_codegen::compile(&kernel, Arch::Sm90a)
        .expect("compiles")
        .notes
}

#[test]
fn a_slow_operand_path_says_why_and_a_fast_one_says_nothing() {
    let f16 = |inner| Form {
        elem: ScalarType::F16,
        a_transposed: false,
        b_transposed: false,
        inner,
    };
    assert_eq!(pipelined_notes(f16(Inner::Unit)), Vec::<String>::new());
    for inner in [Inner::Known(2), Inner::Runtime] {
        let notes = pipelined_notes(f16(inner));
        // Both operands: A at line 19, B at line 20 of the source.
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(
            notes[0]
                .starts_with("line 19: this `dot` operand is loaded into registers each iteration"),
            "{}",
            notes[0]
        );
        assert!(notes[1].starts_with("line 20:"), "{}", notes[1]);
        assert!(notes[0].contains("runs of 2 bytes"), "{}", notes[0]);
    }
}

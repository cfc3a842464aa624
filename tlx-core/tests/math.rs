//! Elementwise math beyond the basics: `tanh`, `round`, `trunc`, and the
//! activations built from `exp` and `log` (`sigmoid`, `softplus`) or from
//! `maximum`/`minimum` (`clamp`). Each runs on the interpreter against an
//! f64 reference on fresh random inputs; the same kernel goes through code
//! generation, where the PTX must use the hardware instructions and
//! `ptxas` must accept it.

#[cfg(feature = "llvm")]
mod codegen_common;

use tlx_core::frontend::compile_str;
use tlx_core::interp::{run_kernel, ArgValue, HostMemory, InterpOptions};
use tlx_core::ir::Kernel;

/// Each function of `x`, in its own row of `out`.
const MATH: &str = r#"
#[tlx::kernel(num_warps = 4)]
fn math(x: Ptr<f32>, out: Ptr<f32>) {
    let i = arange(0, 256);
    let v = load(x + i);
    store(out + i, tanh(v));
    store(out + 256 + i, round(v));
    store(out + 512 + i, v.trunc());
    store(out + 768 + i, sigmoid(v));
    store(out + 1024 + i, softplus(v));
    store(out + 1280 + i, clamp(v, -1.5, 2.0));
}
"#;

/// What each row of `out` holds, in f64.
fn references(x: f64) -> [f64; 6] {
    let softplus = x.max(0.0) + (-x.abs()).exp().ln_1p();
    [
        x.tanh(),
        x.round_ties_even(),
        x.trunc(),
        1.0 / (1.0 + (-x).exp()),
        softplus,
        x.clamp(-1.5, 2.0),
    ]
}

fn compile(src: &str) -> Kernel {
    match compile_str(src) {
        Ok(mut kernels) => kernels.remove(0),
        Err(e) => panic!("compile failed:\n{e}"),
    }
}

/// Fresh inputs: halves and near-halves (where rounding modes differ),
/// large magnitudes (where activations saturate) and ordinary values.
fn inputs() -> Vec<f32> {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(7, |d| d.as_nanos() as u64);
    println!("seed {seed}");
    let mut state = seed | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 24) as f32
    };
    (0..256)
        .map(|i| match i % 4 {
            0 => (next() * 20.0 - 10.0).round() + 0.5,
            1 => next() * 80.0 - 40.0,
            _ => next() * 8.0 - 4.0,
        })
        .collect()
}

#[test]
fn math_functions_match_f64_references() {
    let kernel = compile(MATH);
    let mem = HostMemory::new();
    let xs = inputs();
    let x = mem.alloc(256 * 4);
    let bytes: Vec<u8> = xs.iter().flat_map(|v| v.to_le_bytes()).collect();
    mem.write(x, 0, &bytes).expect("write");
    let out = mem.alloc(6 * 256 * 4);
    mem.write(out, 0, &vec![0xff; 6 * 256 * 4]).expect("poison");
    let args = [ArgValue::ptr(x), ArgValue::ptr(out)];
    run_kernel(&kernel, [1, 1, 1], &args, &mem, &InterpOptions::default()).expect("runs");
    let mut got = vec![0u8; 6 * 256 * 4];
    mem.read(out, 0, &mut got).expect("read back");
    let got: Vec<f32> = got
        .chunks(4)
        .map(|w| f32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    let names = ["tanh", "round", "trunc", "sigmoid", "softplus", "clamp"];
    for (i, &v) in xs.iter().enumerate() {
        for (row, want) in references(f64::from(v)).into_iter().enumerate() {
            let have = f64::from(got[row * 256 + i]);
            // f32 arithmetic: a few ulp of the larger of the value and 1e-30.
            let tolerance = 4.0 * f64::from(f32::EPSILON) * want.abs().max(1e-30);
            assert!(
                (have - want).abs() <= tolerance,
                "{}({v}) = {have}, want {want}",
                names[row]
            );
        }
    }
}

#[cfg(feature = "llvm")]
mod codegen {
    use super::codegen_common;
    use tlx_core::ir::Arch;

    /// `tanh` is one `tanh.approx.f32`, `round` and `trunc` one conversion
    /// each with the right rounding mode.
    #[test]
    fn math_uses_the_hardware_instructions() {
        let kernel = super::compile(super::MATH);
        let ptx = tlx_core::codegen::compile(&kernel, Arch::Sm90a)
            .expect("compiles")
            .ptx;
        for needle in ["tanh.approx.f32", "cvt.rni.f32.f32", "cvt.rzi.f32.f32"] {
            assert!(ptx.contains(needle), "no `{needle}`:\n{ptx}");
        }
        match codegen_common::ptxas() {
            Some(ptxas) => {
                codegen_common::ptxas_verbose(&ptxas, &ptx);
            }
            None => println!("skipped: ptxas not found"),
        }
    }
}

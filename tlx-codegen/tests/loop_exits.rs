//! `break` and `continue` in `for`, `while` and `static_range` loops, on the
//! interpreter against the same loops run in Rust, for run-time bounds that
//! exit early, late and never; the kernel also goes through code generation
//! and `ptxas`.

use crate::codegen_common;

use tlx_core::interp::{run_kernel, ArgValue, HostMemory, InterpOptions};
use tlx_core::ir::Kernel;
use tlx_frontend::compile_str;

/// Four results per run: a `for` that skips multiples of 3 and stops past
/// `stop`, a `while` that stops at the first `i * i > stop`, nested loops
/// whose inner `break` leaves only the inner one, and an unrolled loop with
/// `continue`.
const EXITS: &str = r#"
#[tlx::kernel(num_warps = 4)]
fn exits(out: Ptr<i32>, n: i32, stop: i32) {
    let mut skipped = 0;
    for i in 0..n {
        if i % 3 == 0 {
            continue;
        }
        if i > stop {
            break;
        }
        skipped += i;
    }
    store(out, skipped);
    let mut j = 0;
    while j < n {
        if j * j > stop {
            break;
        }
        j += 1;
    }
    store(out + 1, j);
    let mut pairs = 0;
    for a in 0..n {
        for b in 0..n {
            if b > a {
                break;
            }
            pairs += 1;
        }
        if a >= stop {
            break;
        }
    }
    store(out + 2, pairs);
    let mut odd = 0;
    for k in static_range(0, 8) {
        if k % 2 == 0 {
            continue;
        }
        odd += k * stop;
    }
    store(out + 3, odd);
}
"#;

/// The same loops in Rust.
fn expected(n: i32, stop: i32) -> [i32; 4] {
    let mut skipped = 0;
    for i in 0..n {
        if i % 3 == 0 {
            continue;
        }
        if i > stop {
            break;
        }
        skipped += i;
    }
    let mut j = 0;
    while j < n {
        if j * j > stop {
            break;
        }
        j += 1;
    }
    let mut pairs = 0;
    for a in 0..n {
        for b in 0..n {
            if b > a {
                break;
            }
            pairs += 1;
        }
        if a >= stop {
            break;
        }
    }
    let odd = (0..8).filter(|k| k % 2 == 1).map(|k| k * stop).sum();
    [skipped, j, pairs, odd]
}

fn compile(src: &str) -> Kernel {
    match compile_str(src) {
        Ok(mut kernels) => kernels.remove(0),
        Err(e) => panic!("compile failed:\n{e}"),
    }
}

#[test]
fn break_and_continue_exit_like_rust() {
    let kernel = compile(EXITS);
    for (n, stop) in [(0, 5), (1, 0), (10, 4), (10, 100), (17, 9), (30, 2)] {
        let mem = HostMemory::new();
        let out = mem.alloc(16);
        mem.write(out, 0, &[0xff; 16]).expect("poison");
        let args = [ArgValue::ptr(out), ArgValue::i32(n), ArgValue::i32(stop)];
        run_kernel(&kernel, [1, 1, 1], &args, &mem, &InterpOptions::default()).expect("runs");
        let mut bytes = [0u8; 16];
        mem.read(out, 0, &mut bytes).expect("read back");
        let got: Vec<i32> = bytes
            .chunks(4)
            .map(|w| i32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect();
        assert_eq!(got, expected(n, stop), "n = {n}, stop = {stop}");
    }
}

#[test]
fn loops_with_exits_assemble() {
    let kernel = compile(EXITS);
    let ptx = tlx_codegen::compile(&kernel, tlx_core::ir::Arch::Sm90a)
        .expect("compiles")
        .ptx;
    codegen_common::ptxas_verbose_if_found(&ptx);
}

//! Triton's inclusive scans `cumprod`, `cummax` and `cummin` (forward and
//! reversed, on floats and integers) next to TLE's exclusive `cumsum`, the
//! shape ops `join`, `split` and `interleave`, and `reduce` with a combine
//! function, on the interpreter against plain Rust over fresh inputs; the
//! same kernels through code generation and `ptxas`.

use crate::codegen_common;

use tlx_core::interp::{run_kernel, ArgValue, HostMemory, InterpOptions};
use tlx_core::ir::Kernel;
use tlx_frontend::compile_str;

const N: usize = 256;

const SCANS: &str = r#"
#[tlx::kernel(num_warps = 4)]
fn scans(x: Ptr<f32>, k: Ptr<i32>, out: Ptr<f32>, iout: Ptr<i32>) {
    let i = arange(0, 256);
    let v = load(x + i);
    let w = load(k + i);
    store(out + i, cumprod(v));
    store(out + 256 + i, cummax(v));
    store(out + 512 + i, cummin(v, reverse = true));
    let (excl, total) = cumsum(v);
    store(out + 768 + i, excl);
    store(out + 1024, total);
    store(iout + i, cummax(w, reverse = true));
    store(iout + 256 + i, cummin(w));
    store(iout + 512 + i, w.cumprod(0));
}
"#;

fn compile(src: &str) -> Kernel {
    match compile_str(src) {
        Ok(mut kernels) => kernels.remove(0),
        Err(e) => panic!("compile failed:\n{e}"),
    }
}

/// A buffer for [`run`]: its bytes, or the number of poisoned 32-bit words
/// of an output.
enum Buffer {
    Input(Vec<u8>),
    Output(usize),
}

fn f32s(v: &[f32]) -> Buffer {
    Buffer::Input(v.iter().flat_map(|x| x.to_le_bytes()).collect())
}

fn i32s(v: &[i32]) -> Buffer {
    Buffer::Input(v.iter().flat_map(|x| x.to_le_bytes()).collect())
}

/// Runs `kernel` on one program with `buffers` as its pointer arguments
/// and returns each output's words.
fn run(kernel: &Kernel, buffers: &[Buffer]) -> Vec<Vec<[u8; 4]>> {
    let mem = HostMemory::new();
    let mut args = Vec::new();
    let mut outputs = Vec::new();
    for b in buffers {
        let bytes = match b {
            Buffer::Input(bytes) => bytes.clone(),
            Buffer::Output(words) => vec![0xa5; words * 4],
        };
        let id = mem.alloc(bytes.len());
        mem.write(id, 0, &bytes).expect("write");
        args.push(ArgValue::ptr(id));
        if let Buffer::Output(words) = b {
            outputs.push((id, *words));
        }
    }
    run_kernel(kernel, [1, 1, 1], &args, &mem, &InterpOptions::default()).expect("runs");
    outputs
        .into_iter()
        .map(|(id, words)| {
            let mut bytes = vec![0u8; words * 4];
            mem.read(id, 0, &mut bytes).expect("read back");
            bytes.chunks(4).map(|w| [w[0], w[1], w[2], w[3]]).collect()
        })
        .collect()
}

fn as_f32(words: &[[u8; 4]]) -> Vec<f32> {
    words.iter().map(|&w| f32::from_le_bytes(w)).collect()
}

fn as_i32(words: &[[u8; 4]]) -> Vec<i32> {
    words.iter().map(|&w| i32::from_le_bytes(w)).collect()
}

/// Inclusive scan of `v` by `f`, from the end when `reverse`.
fn inclusive<T: Copy>(v: &[T], reverse: bool, f: impl Fn(T, T) -> T) -> Vec<T> {
    let mut out = v.to_vec();
    let order: Vec<usize> = if reverse {
        (0..v.len()).rev().collect()
    } else {
        (0..v.len()).collect()
    };
    for pair in order.windows(2) {
        out[pair[1]] = f(out[pair[0]], v[pair[1]]);
    }
    out
}

fn fresh() -> impl FnMut() -> u64 {
    let mut state = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(5, |d| d.as_nanos() as u64)
        | 1;
    println!("seed {state}");
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

#[test]
fn inclusive_scans_match_plain_rust() {
    let kernel = compile(SCANS);
    let mut next = fresh();
    // Factors near 1 keep the product in range over 256 steps.
    let x: Vec<f32> = (0..N)
        .map(|_| 0.9 + (next() >> 40) as f32 / (1u64 << 24) as f32 * 0.2)
        .collect();
    // Small odd-and-even integers: the i32 product wraps, as it does on the GPU.
    let k: Vec<i32> = (0..N).map(|_| (next() % 61) as i32 - 30).collect();
    let got = run(
        &kernel,
        &[
            f32s(&x),
            i32s(&k),
            Buffer::Output(4 * N + 1),
            Buffer::Output(3 * N),
        ],
    );
    let (floats, ints) = (as_f32(&got[0]), as_i32(&got[1]));

    // Products in f32, one rounding per step, as both scans take them.
    let prod = inclusive(&x, false, |a, b| a * b);
    let max = inclusive(&x, false, f32::max);
    let min_rev = inclusive(&x, true, f32::min);
    for i in 0..N {
        let rel = |have: f32, want: f32| f64::from((have - want).abs() / want.abs());
        // The scan tree multiplies in another order than the running product.
        assert!(
            rel(floats[i], prod[i]) < 2e-5,
            "cumprod[{i}] = {} vs {}",
            floats[i],
            prod[i]
        );
        assert_eq!(floats[N + i], max[i], "cummax[{i}]");
        assert_eq!(floats[2 * N + i], min_rev[i], "reversed cummin[{i}]");
    }
    let mut running = 0.0f64;
    for i in 0..N {
        let have = f64::from(floats[3 * N + i]);
        assert!(
            (have - running).abs() < 1e-4 * running.max(1.0),
            "cumsum[{i}] = {have} vs {running}"
        );
        running += f64::from(x[i]);
    }
    assert!(
        (f64::from(floats[4 * N]) - running).abs() < 1e-4 * running,
        "cumsum total"
    );

    let imax_rev = inclusive(&k, true, i32::max);
    let imin = inclusive(&k, false, i32::min);
    let iprod = inclusive(&k, false, i32::wrapping_mul);
    assert_eq!(&ints[..N], &imax_rev[..], "reversed cummax of i32");
    assert_eq!(&ints[N..2 * N], &imin[..], "cummin of i32");
    assert_eq!(&ints[2 * N..], &iprod[..], "cumprod of i32 (wrapping)");
}

#[test]
fn scans_of_bools_and_scalars_are_reported() {
    for (call, message) in [
        ("cummax(i < 5)", "`cummax` needs numbers, not bools"),
        ("cumprod(i.sum(0))", "`cumprod` of a scalar"),
    ] {
        let src = format!(
            "#[tlx::kernel]\nfn k(out: Ptr<i32>) {{ let i = arange(0, 32); let s = {call}; }}"
        );
        let err = match compile_str(&src) {
            Ok(_) => panic!("`{call}` compiled"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains(message), "`{call}`: {err}");
    }
}

const PAIRS: &str = r#"
#[tlx::kernel(num_warps = 4)]
fn pairs(x: Ptr<f32>, out: Ptr<f32>) {
    let r = arange(0, 32);
    let c = arange(0, 16);
    let a = load(x + r[(.., None)] * 16 + c[(None, ..)]);
    let b = load(x + 512 + r[(.., None)] * 16 + c[(None, ..)]);
    // [32, 16, 2] back to [32, 32]: a and b alternate along each row.
    let mixed = interleave(a, b);
    let cols = arange(0, 32);
    store(out + r[(.., None)] * 32 + cols[(None, ..)], mixed);
    // Splitting a loaded [.., 2] tile: even and odd elements of each row.
    let whole = load(x + arange(0, 1024));
    let (even, odd) = reshape(whole, [512, 2]).split();
    store(out + 1024 + arange(0, 512), odd - even);
    // A join split again round-trips, also of scalars.
    let (p, q) = split(join(a * 2.0, b));
    store(out + 1536 + r[(.., None)] * 16 + c[(None, ..)], p + q);
    let (s, t) = split(join(1.5, 2.5));
    store(out + 2048, s * t);
    // The size-2 dimension held across warps: split converts first.
    let rows = load(x + arange(0, 2)[(.., None)] * 256 + arange(0, 256)[(None, ..)]);
    let (first, second) = trans(rows).split();
    store(out + 2049 + arange(0, 256), first * 3.0 + second);
}
"#;

#[test]
fn join_split_and_interleave_move_the_right_elements() {
    let kernel = compile(PAIRS);
    let mut next = fresh();
    let x: Vec<f32> = (0..1024)
        .map(|_| (next() >> 40) as f32 / (1u64 << 20) as f32 - 8.0)
        .collect();
    let got = as_f32(&run(&kernel, &[f32s(&x), Buffer::Output(2561)])[0]);
    for row in 0..32 {
        for col in 0..32 {
            let want = x[(col % 2) * 512 + row * 16 + col / 2];
            assert_eq!(got[row * 32 + col], want, "interleave at ({row}, {col})");
        }
        for col in 0..16 {
            let at = row * 16 + col;
            assert_eq!(
                got[1536 + at],
                x[at] * 2.0 + x[512 + at],
                "join then split at {at}"
            );
        }
    }
    for i in 0..512 {
        assert_eq!(got[1024 + i], x[2 * i + 1] - x[2 * i], "split at {i}");
    }
    assert_eq!(got[2048], 3.75, "scalars joined and split");
    for i in 0..256 {
        assert_eq!(
            got[2049 + i],
            x[i] * 3.0 + x[256 + i],
            "split of a transposed tile at {i}"
        );
    }
}

#[test]
fn split_needs_a_last_dimension_of_two() {
    let src = "#[tlx::kernel]\nfn k(out: Ptr<f32>) { let (a, b) = split(arange(0, 32)); }";
    let err = match compile_str(src) {
        Ok(_) => panic!("compiled"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("`split` needs a last dimension of size 2"),
        "{err}"
    );
}

const COMBINES: &str = r#"
#[tlx::kernel(num_warps = 4)]
fn combines(x: Ptr<f32>, out: Ptr<f32>, iout: Ptr<i32>) {
    fn larger_magnitude(a: f32, b: f32) -> f32 {
        select(abs(b) > abs(a), b, a)
    }
    // Associative, not commutative: the first non-zero in order.
    fn first_nonzero(a: f32, b: f32) -> f32 {
        select(a != 0.0, a, b)
    }
    fn argmax_pair(v: f32, i: i32, w: f32, j: i32) -> (f32, i32) {
        let right = w > v;
        (select(right, w, v), select(right, j, i))
    }
    let r = arange(0, 16);
    let c = arange(0, 64);
    let tile = load(x + r[(.., None)] * 64 + c[(None, ..)]);
    store(out + r, reduce(tile, 1, larger_magnitude));
    store(out + 16 + c, reduce(tile, 0, first_nonzero));
    let cols = broadcast_to(c[(None, ..)], [16, 64]);
    let (best, at) = reduce((tile, cols), 1, argmax_pair);
    store(out + 80 + r, best);
    store(iout + r, at);
    store(out + 96, reduce(tile, None, larger_magnitude));
    let kept = reduce(tile, 0, first_nonzero, keep_dims = true);
    store(out + 97 + c[(None, ..)], kept);
}
"#;

#[test]
fn reduce_with_a_combine_function_matches_plain_rust() {
    let kernel = compile(COMBINES);
    let mut next = fresh();
    // A third zeros, so `first_nonzero` has leading zeros to skip.
    let x: Vec<f32> = (0..1024)
        .map(|_| {
            let u = next();
            if u % 3 == 0 {
                0.0
            } else {
                (u >> 40) as f32 / (1u64 << 20) as f32 - 8.0
            }
        })
        .collect();
    let outs = run(
        &kernel,
        &[f32s(&x), Buffer::Output(161), Buffer::Output(16)],
    );
    let (got, at) = (as_f32(&outs[0]), as_i32(&outs[1]));
    // Ties of magnitude keep the earlier element in every tree, as in this fold.
    let larger = |a: f32, b: f32| if b.abs() > a.abs() { b } else { a };
    for row in 0..16 {
        let line = &x[row * 64..][..64];
        let want = line.iter().copied().reduce(larger).expect("a row");
        assert_eq!(got[row], want, "larger magnitude of row {row}");
        let (best, idx) =
            line.iter().enumerate().fold(
                (line[0], 0),
                |(v, i), (j, &w)| if w > v { (w, j) } else { (v, i) },
            );
        assert_eq!(
            (got[80 + row], at[row]),
            (best, idx as i32),
            "argmax of row {row}"
        );
    }
    for col in 0..64 {
        let want = (0..16)
            .map(|r| x[r * 64 + col])
            .find(|&v| v != 0.0)
            .unwrap_or(0.0);
        assert_eq!(got[16 + col], want, "first non-zero of column {col}");
        assert_eq!(got[97 + col], want, "kept dims, column {col}");
    }
    assert_eq!(
        got[96],
        x.iter().copied().reduce(larger).expect("all"),
        "over all elements"
    );
}

const ASSOCIATIVE: &str = r#"
#[tlx::kernel(num_warps = 4)]
fn associative(x: Ptr<f32>, k: Ptr<i32>, out: Ptr<f32>, iout: Ptr<i32>) {
    // Associative, not commutative: the last non-zero so far.
    fn latest_nonzero(a: f32, b: f32) -> f32 {
        select(b != 0.0, b, a)
    }
    fn add(a: i32, b: i32) -> i32 {
        a + b
    }
    // The linear recurrence h = a h + b, composed: Triton's classic example.
    fn affine(a1: f32, b1: f32, a2: f32, b2: f32) -> (f32, f32) {
        (a1 * a2, a2 * b1 + b2)
    }
    let r = arange(0, 8);
    let c = arange(0, 128);
    let at = r[(.., None)] * 128 + c[(None, ..)];
    let tile = load(x + at);
    store(out + at, associative_scan(tile, 1, latest_nonzero));
    store(out + 1024 + at, associative_scan(tile, 1, latest_nonzero, reverse = true));
    let w = load(k + at);
    store(iout + at, associative_scan(w, 0, add));
    store(iout + 1024 + at, associative_scan(w, 0, add, reverse = true));
    let gates = abs(tile) * 0.1 + 0.5;
    let (_, h) = associative_scan((gates, tile), 1, affine);
    store(out + 2048 + at, h);
}
"#;

#[test]
fn associative_scans_match_plain_rust() {
    let kernel = compile(ASSOCIATIVE);
    let mut next = fresh();
    let x: Vec<f32> = (0..1024)
        .map(|_| {
            let u = next();
            if u % 3 == 0 {
                0.0
            } else {
                (u >> 40) as f32 / (1u64 << 20) as f32 - 8.0
            }
        })
        .collect();
    let k: Vec<i32> = (0..1024).map(|_| (next() % 2001) as i32 - 1000).collect();
    let outs = run(
        &kernel,
        &[
            f32s(&x),
            i32s(&k),
            Buffer::Output(3072),
            Buffer::Output(2048),
        ],
    );
    let (got, ints) = (as_f32(&outs[0]), as_i32(&outs[1]));
    let latest = |a: f32, b: f32| if b != 0.0 { b } else { a };
    for row in 0..8 {
        let line = &x[row * 128..][..128];
        let fwd = inclusive(line, false, latest);
        let rev = inclusive(line, true, latest);
        assert_eq!(
            &got[row * 128..][..128],
            &fwd[..],
            "latest non-zero, row {row}"
        );
        assert_eq!(
            &got[1024 + row * 128..][..128],
            &rev[..],
            "reversed, row {row}"
        );
        let mut h = 0.0f64;
        for col in 0..128 {
            let v = f64::from(line[col]);
            h = (v.abs() * 0.1 + 0.5) * h + v;
            let have = f64::from(got[2048 + row * 128 + col]);
            assert!(
                (have - h).abs() <= 1e-4 * h.abs().max(1.0),
                "recurrence ({row}, {col}): {have} vs {h}"
            );
        }
    }
    for col in 0..128 {
        let column: Vec<i32> = (0..8).map(|r| k[r * 128 + col]).collect();
        let fwd = inclusive(&column, false, |a, b| a + b);
        let rev = inclusive(&column, true, |a, b| a + b);
        for r in 0..8 {
            assert_eq!(ints[r * 128 + col], fwd[r], "column sum ({r}, {col})");
            assert_eq!(
                ints[1024 + r * 128 + col],
                rev[r],
                "reversed column sum ({r}, {col})"
            );
        }
    }
}

const SORTS: &str = r#"
#[tlx::kernel(num_warps = 4)]
fn sorts(x: Ptr<f32>, k: Ptr<i32>, out: Ptr<f32>, iout: Ptr<i32>) {
    let r = arange(0, 4);
    let c = arange(0, 64);
    let at = r[(.., None)] * 64 + c[(None, ..)];
    let tile = load(x + at);
    store(out + at, sort(tile));
    store(out + 256 + at, sort(tile, descending = true));
    let top = topk(tile, 8);
    store(out + 512 + r[(.., None)] * 8 + arange(0, 8)[(None, ..)], top);
    let w = load(k + arange(0, 256));
    store(iout + arange(0, 256), w.sort());
}
"#;

#[test]
fn sort_and_topk_match_plain_rust() {
    let kernel = compile(SORTS);
    let mut next = fresh();
    // Few distinct values, so ties are common.
    let x: Vec<f32> = (0..256)
        .map(|_| ((next() % 41) as f32 - 20.0) * 0.25)
        .collect();
    let k: Vec<i32> = (0..256).map(|_| next() as i32).collect();
    let outs = run(
        &kernel,
        &[f32s(&x), i32s(&k), Buffer::Output(544), Buffer::Output(256)],
    );
    let (got, ints) = (as_f32(&outs[0]), as_i32(&outs[1]));
    for row in 0..4 {
        let mut want = x[row * 64..][..64].to_vec();
        want.sort_by(f32::total_cmp);
        assert_eq!(&got[row * 64..][..64], &want[..], "ascending row {row}");
        want.reverse();
        assert_eq!(
            &got[256 + row * 64..][..64],
            &want[..],
            "descending row {row}"
        );
        assert_eq!(&got[512 + row * 8..][..8], &want[..8], "top 8 of row {row}");
    }
    let mut want = k.clone();
    want.sort_unstable();
    assert_eq!(ints, want, "i32 sort");
}

#[test]
fn reduce_misuse_is_reported() {
    for (body, message) in [
        (
            "reduce(v, 0, nothing)",
            "the combine function must name a helper",
        ),
        ("reduce(v, 0, wrong_type)", "the combine function returns"),
        (
            "reduce((v, v), 0, pick)",
            "the combine function returns 1 value for 2 reduced tensors",
        ),
        (
            "reduce((v, v), 0, wrong_type)",
            "`wrong_type` takes 2 arguments, but a combine function for 2 tensors takes 4",
        ),
    ] {
        let src = format!(
            "#[tlx::kernel]\nfn k(out: Ptr<f32>) {{\n fn wrong_type(a: f32, b: f32) -> i32 {{ (a + b).to(i32) }}\n fn pick(a: f32, b: f32, c: f32, d: f32) -> f32 {{ a }}\n let v = arange(0, 32).to(f32); let s = {body}; }}"
        );
        let err = match compile_str(&src) {
            Ok(_) => panic!("`{body}` compiled"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains(message), "`{body}`: {err}");
    }
}

#[test]
fn reduce_with_a_combine_function_assembles() {
    for src in [COMBINES, ASSOCIATIVE, SORTS] {
        assemble(src);
    }
}

fn assemble(src: &str) {
    let kernel = compile(src);
    let ptx = tlx_codegen::compile(&kernel, tlx_core::ir::Arch::Sm90a)
        .expect("compiles")
        .ptx;
    codegen_common::ptxas_verbose_if_found(&ptx);
}

#[test]
fn join_and_split_assemble() {
    let kernel = compile(PAIRS);
    let ptx = tlx_codegen::compile(&kernel, tlx_core::ir::Arch::Sm90a)
        .expect("compiles")
        .ptx;
    codegen_common::ptxas_verbose_if_found(&ptx);
}

#[test]
fn scans_compile_and_assemble() {
    let kernel = compile(SCANS);
    let ptx = tlx_codegen::compile(&kernel, tlx_core::ir::Arch::Sm90a)
        .expect("compiles")
        .ptx;
    // cummax/cummin over f32 keep NaN: LLVM's maximum/minimum become max.NaN.
    assert!(
        ptx.contains("max.NaN.f32") || ptx.contains("max.f32"),
        "no float max:\n{ptx}"
    );
    codegen_common::ptxas_verbose_if_found(&ptx);
}

const SCANS_2D: &str = r#"
#[tlx::kernel(num_warps = 4)]
fn scans_2d(k: Ptr<i32>, iout: Ptr<i32>) {
    let r = arange(0, 8);
    let c = arange(0, 32);
    let at = r[(.., None)] * 32 + c[(None, ..)];
    let w = load(k + at);
    let (down, column_totals) = cumsum(w, axis = 0);
    store(iout + at, down);
    store(iout + 256 + at, cummax(w, axis = 1, reverse = true));
    store(iout + 512 + c, column_totals);
}
"#;

/// Scans along either axis of a tile: every line at once, exact on integers.
#[test]
fn scans_along_either_axis_match_plain_rust() {
    let kernel = compile(SCANS_2D);
    let mut next = fresh();
    let k: Vec<i32> = (0..256).map(|_| (next() % 201) as i32 - 100).collect();
    let got = as_i32(&run(&kernel, &[i32s(&k), Buffer::Output(512 + 32)])[0]);
    for c in 0..32 {
        let column: Vec<i32> = (0..8).map(|r| k[r * 32 + c]).collect();
        let mut sum = 0;
        for (r, v) in column.iter().enumerate() {
            assert_eq!(
                got[r * 32 + c],
                sum,
                "exclusive cumsum down column {c}, row {r}"
            );
            sum += v;
        }
        assert_eq!(got[512 + c], sum, "total of column {c}");
    }
    for r in 0..8 {
        let max = inclusive(&k[r * 32..(r + 1) * 32], true, i32::max);
        assert_eq!(&got[256 + r * 32..256 + (r + 1) * 32], &max[..], "row {r}");
    }
    assemble(SCANS_2D);
}

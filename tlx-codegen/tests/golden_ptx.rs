//! Golden PTX: a few kernels, kept here rather than read from `examples/` so
//! that editing an example does not churn them, compiled for sm_90a and
//! compared exactly with `tests/golden/<name>.ptx`. A difference is either a
//! regression or an intended change of the generated code; `TLX_BLESS=1`
//! (`scripts/bless-golden.sh`) rewrites the files so the change can be
//! reviewed in the diff.

use std::path::PathBuf;

use tlx_codegen as codegen;
use tlx_core::ir::Arch;
use tlx_frontend as frontend;

const VECTOR_ADD: &str = r#"
#[tlx::kernel(configs = [(BLOCK = 1024, num_warps = 4)])]
fn vector_add<const BLOCK: usize>(x: Ptr<f32>, y: Ptr<f32>, out: Ptr<f32>, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    let a = load(x + offs, mask = mask, other = 0.0);
    let b = load(y + offs, mask = mask, other = 0.0);
    store(out + offs, a + b, mask = mask);
}
"#;

const SOFTMAX: &str = r#"
#[tlx::kernel(configs = [(BLOCK = 1024, num_warps = 4)])]
fn softmax<const BLOCK: usize>(out: Ptr<f32>, inp: Ptr<f32>, stride: i32, n_cols: i32) {
    let row = program_id(0);
    let cols = arange(0, BLOCK);
    let mask = cols < n_cols;
    let x = load(inp + row * stride + cols, mask = mask, other = f32::NEG_INFINITY);
    let shifted = x - max(x, axis = 0);
    let num = exp(shifted);
    let den = sum(num, axis = 0);
    store(out + row * stride + cols, num / den, mask = mask);
}
"#;

const MATMUL: &str = r#"
#[tlx::kernel(configs = [(BLOCK_M = 32, BLOCK_N = 32, BLOCK_K = 16, num_warps = 4)])]
fn matmul<const BLOCK_M: usize, const BLOCK_N: usize, const BLOCK_K: usize>(
    a: Ptr<f16>,
    b: Ptr<f16>,
    c: Ptr<f32>,
    m: i32,
    n: i32,
    k: i32,
) {
    let offs_m = program_id(0) * BLOCK_M + arange(0, BLOCK_M);
    let offs_n = program_id(1) * BLOCK_N + arange(0, BLOCK_N);
    let offs_k = arange(0, BLOCK_K);
    let rows_ok = offs_m[(.., None)] < m;
    let cols_ok = offs_n[(None, ..)] < n;
    let mut acc = zeros([BLOCK_M, BLOCK_N], f32);
    for k0 in (0..k).step_by(BLOCK_K) {
        let ks = k0 + offs_k;
        let a_tile = load(a + offs_m[(.., None)] * k + ks[(None, ..)], mask = rows_ok & (ks[(None, ..)] < k));
        let b_tile = load(b + ks[(.., None)] * n + offs_n[(None, ..)], mask = (ks[(.., None)] < k) & cols_ok);
        acc = dot(a_tile, b_tile, acc);
    }
    store(c + offs_m[(.., None)] * n + offs_n[(None, ..)], acc, mask = rows_ok & cols_ok);
}
"#;

/// The Hopper path of `dot`: a pipelined loop whose operand tiles go by
/// `cp.async` into swizzled ring slots that `wgmma.mma_async` reads in place.
const MATMUL_WGMMA: &str = r#"
#[tlx::kernel(configs = [(BLOCK_M = 64, BLOCK_N = 64, BLOCK_K = 32, num_warps = 4, num_stages = 3)])]
fn matmul_wgmma<const BLOCK_M: usize, const BLOCK_N: usize, const BLOCK_K: usize>(
    a: Ptr<bf16>,
    b: Ptr<bf16>,
    c: Ptr<f32>,
    n: i32,
    k: i32,
) {
    let (a, b, c) = (multiple_of(a, 16), multiple_of(b, 16), multiple_of(c, 16));
    let (n, k) = (multiple_of(n, 8), multiple_of(k, 8));
    let offs_m = program_id(0) * BLOCK_M + arange(0, BLOCK_M);
    let offs_n = program_id(1) * BLOCK_N + arange(0, BLOCK_N);
    let offs_k = arange(0, BLOCK_K);
    let mut acc = zeros([BLOCK_M, BLOCK_N], f32);
    for k0 in (0..k).step_by(BLOCK_K) {
        let ks = k0 + offs_k;
        let a_tile = load(a + offs_m[(.., None)] * k + ks[(None, ..)], mask = ks[(None, ..)] < k, other = 0.0);
        let b_tile = load(b + ks[(.., None)] * n + offs_n[(None, ..)], mask = ks[(.., None)] < k, other = 0.0);
        acc = dot(a_tile, b_tile, acc);
    }
    store(c + offs_m[(.., None)] * n + offs_n[(None, ..)], acc);
}
"#;

/// The same loop over tensor descriptors: the operand tiles go by TMA
/// (`cp.async.bulk.tensor`, one mbarrier per ring slot) into the slots
/// `wgmma.mma_async` reads in place.
const MATMUL_TMA: &str = r#"
#[tlx::kernel(configs = [(BLOCK_M = 64, BLOCK_N = 64, BLOCK_K = 32, num_warps = 4, num_stages = 3)])]
fn matmul_tma<const BLOCK_M: usize, const BLOCK_N: usize, const BLOCK_K: usize>(
    a: TensorDesc<bf16, BLOCK_M, BLOCK_K>,
    b: TensorDesc<bf16, BLOCK_K, BLOCK_N>,
    c: Ptr<f32>,
    n: i32,
    k: i32,
) {
    let (om, on) = (program_id(0) * BLOCK_M, program_id(1) * BLOCK_N);
    let mut acc = zeros([BLOCK_M, BLOCK_N], f32);
    for k0 in (0..k).step_by(BLOCK_K) {
        acc = dot(a.load([om, k0]), b.load([k0, on]), acc);
    }
    let (rm, rn) = (om + arange(0, BLOCK_M), on + arange(0, BLOCK_N));
    store(c + rm[(.., None)] * n + rn[(None, ..)], acc);
}
"#;

const COMPACT: &str = r#"
#[tlx::kernel(configs = [(BLOCK = 256, num_warps = 4)])]
fn compact<const BLOCK: usize>(x: Ptr<f32>, out: Ptr<f32>, counts: Ptr<i32>, n: i32, threshold: f32) {
    let pid = program_id(0);
    let offs = pid * BLOCK + arange(0, BLOCK);
    let mask = offs < n;
    let v = load(x + offs, mask = mask, other = 0.0);
    let keep = (v > threshold) & mask;
    let (rank, total) = cumsum(keep.to(i32), axis = 0);
    store(out + pid * BLOCK + rank, v, mask = keep);
    store(counts + pid, total);
}
"#;

/// Lines of context shown around a difference, and the most changed lines shown.
const CONTEXT_LINES: usize = 3;
const MAX_SHOWN: usize = 40;

fn golden_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("golden")
        .join(format!("{name}.ptx"))
}

fn blessing() -> bool {
    std::env::var("TLX_BLESS").is_ok_and(|v| v == "1")
}

/// The PTX of `source`'s only configuration for sm_90a.
fn generate(source: &str) -> String {
    let mut kernels = frontend::compile_str(source).unwrap_or_else(|e| panic!("frontend:\n{e}"));
    assert_eq!(kernels.len(), 1, "a golden kernel has exactly one config");
    let kernel = kernels.remove(0);
    codegen::compile(&kernel, Arch::Sm90a)
        .unwrap_or_else(|e| panic!("codegen of `{}`: {e}", kernel.name))
        .ptx
}

/// A unified-style excerpt of where `actual` departs from `expected`: the
/// common head and tail are trimmed and the differing middle is shown with
/// a few lines of context. `None` when the texts are equal.
fn first_difference(expected: &str, actual: &str) -> Option<String> {
    if expected == actual {
        return None;
    }
    let old: Vec<&str> = expected.lines().collect();
    let new: Vec<&str> = actual.lines().collect();
    let head = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let tail = old[head..]
        .iter()
        .rev()
        .zip(new[head..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let (old_end, new_end) = (old.len() - tail, new.len() - tail);
    let start = head.saturating_sub(CONTEXT_LINES);
    let mut out = format!(
        "@@ -{},{} +{},{} @@\n",
        head + 1,
        old_end - head,
        head + 1,
        new_end - head
    );
    for line in &old[start..head] {
        out.push_str(&format!(" {line}\n"));
    }
    for (sign, lines) in [('-', &old[head..old_end]), ('+', &new[head..new_end])] {
        for line in lines.iter().take(MAX_SHOWN) {
            out.push_str(&format!("{sign}{line}\n"));
        }
        if lines.len() > MAX_SHOWN {
            out.push_str(&format!(
                "{sign}... {} more line(s)\n",
                lines.len() - MAX_SHOWN
            ));
        }
    }
    for line in old[old_end..].iter().take(CONTEXT_LINES) {
        out.push_str(&format!(" {line}\n"));
    }
    if old_end == old.len() && new_end == new.len() && head == old.len().min(new.len()) {
        // The lines agree but the texts do not: only the final newline differs.
        out.push_str("(the texts differ in their final newline)\n");
    }
    Some(out)
}

/// Compares `source`'s PTX with the golden file `name`, or rewrites the file
/// when blessing.
fn check_golden(name: &str, source: &str) {
    let actual = generate(source);
    let path = golden_path(name);
    if blessing() {
        std::fs::create_dir_all(path.parent().expect("golden files have a folder"))
            .expect("creating tests/golden");
        std::fs::write(&path, &actual)
            .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        println!("blessed {}", path.display());
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read the golden PTX {}: {e}\nrun scripts/bless-golden.sh and review the diff",
            path.display()
        )
    });
    if let Some(diff) = first_difference(&expected, &actual) {
        panic!(
            "the sm_90a PTX of `{name}` differs from {}:\n--- golden\n+++ generated\n{diff}\
             if the change is intended, run scripts/bless-golden.sh and review the diff",
            path.display()
        );
    }
}

#[test]
fn vector_add_ptx_matches_golden() {
    check_golden("vector_add", VECTOR_ADD);
}

#[test]
fn softmax_ptx_matches_golden() {
    check_golden("softmax", SOFTMAX);
}

#[test]
fn matmul_dot_ptx_matches_golden() {
    check_golden("matmul_dot", MATMUL);
}

#[test]
fn matmul_wgmma_ptx_matches_golden() {
    let ptx = generate(MATMUL_WGMMA);
    for needle in [
        "cp.async.cg.shared.global",
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16",
        "wgmma.wait_group.sync.aligned 1",
    ] {
        assert!(ptx.contains(needle), "{needle}");
    }
    check_golden("matmul_wgmma", MATMUL_WGMMA);
}

#[test]
fn matmul_tma_ptx_matches_golden() {
    let ptx = generate(MATMUL_TMA);
    for needle in [
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
        "mbarrier.arrive.expect_tx.shared::cta.b64",
        "mbarrier.try_wait.parity.shared::cta.b64",
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16",
        "wgmma.wait_group.sync.aligned 1",
    ] {
        assert!(ptx.contains(needle), "{needle}");
    }
    // No thread copies anything itself: the loop has no `cp.async` of its own.
    assert!(
        !ptx.contains("cp.async.cg"),
        "per-thread copies in a TMA loop"
    );
    check_golden("matmul_tma", MATMUL_TMA);
}

#[test]
fn cumsum_compact_ptx_matches_golden() {
    check_golden("cumsum_compact", COMPACT);
}

#[test]
fn generation_is_deterministic() {
    // A golden is only useful when the same source always gives the same text.
    assert_eq!(generate(SOFTMAX), generate(SOFTMAX));
}

mod tests {
    use super::first_difference;

    #[test]
    fn equal_texts_have_no_difference() {
        assert_eq!(first_difference("a\nb\n", "a\nb\n"), None);
    }

    #[test]
    fn a_changed_line_is_shown_with_its_context() {
        let expected = "1\n2\n3\n4\n5\n6\n7\n8\n";
        let actual = "1\n2\n3\n4\nfive\n6\n7\n8\n";
        let diff = first_difference(expected, actual).expect("the texts differ");
        assert_eq!(diff, "@@ -5,1 +5,1 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n");
    }

    #[test]
    fn inserted_lines_show_as_additions_only() {
        let diff = first_difference("a\nc\n", "a\nb\nc\n").expect("the texts differ");
        assert_eq!(diff, "@@ -2,0 +2,1 @@\n a\n+b\n c\n");
    }

    #[test]
    fn a_missing_final_newline_is_named() {
        let diff = first_difference("a\n", "a").expect("the texts differ");
        assert!(diff.contains("final newline"), "{diff}");
    }
}

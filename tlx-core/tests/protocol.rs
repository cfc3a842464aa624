//! The compile-time protocol checker (`check::check_protocol`) on kernels
//! written in the language: correct kernels pass with no finding, and each
//! class of protocol bug is an error at the offending call. Every kernel
//! rejected as deadlocking also deadlocks on the interpreter with real
//! data: checker and interpreter share one model and must not disagree.

use tlx_core::check::{check_protocol, ProtocolReport, Rule};
use tlx_core::frontend::compile_str;
use tlx_core::ir::Kernel;

mod kernels;
use kernels::WS_GEMM;

fn compile(src: &str) -> Kernel {
    match compile_str(src) {
        Ok(mut ks) => ks.remove(0),
        Err(e) => panic!("compile failed:\n{e}"),
    }
}

fn check(src: &str) -> ProtocolReport {
    check_protocol(&compile(src))
}

/// `WS_GEMM` with `from` replaced by `to` (which must occur).
fn broken(from: &str, to: &str) -> String {
    assert!(WS_GEMM.contains(from), "{from:?} not in the kernel");
    WS_GEMM.replacen(from, to, 1)
}

/// The one error of `src`, which must break `rule` on the line of `call`.
fn expect_error(src: &str, rule: Rule, call: &str) -> String {
    let report = check(src);
    assert!(report.warnings.is_empty(), "{report:#?}");
    let [finding] = report.errors.as_slice() else {
        panic!("expected one error, got {report:#?}");
    };
    assert_eq!(finding.rule, rule, "{finding:#?}");
    let line = src
        .lines()
        .position(|l| l.contains(call))
        .map(|i| i as u32 + 1)
        .unwrap_or_else(|| panic!("{call:?} not in the kernel"));
    assert_eq!(finding.at.line, line, "{finding:#?}");
    format!("{}\nhelp: {}", finding.message, finding.hint)
}

#[test]
fn a_correct_warp_specialized_gemm_passes() {
    let report = check(WS_GEMM);
    assert_eq!(report, ProtocolReport::default());
}

#[test]
fn a_producer_first_wait_with_phase_zero_is_a_deadlock() {
    let src = broken("phase ^ 1);", "phase);");
    let text = expect_error(&src, Rule::Deadlock, "barrier_wait(local_view(empty, slot), phase)");
    assert!(text.contains("start its phase at 1"), "{text}");
}

#[test]
fn a_forgotten_phase_flip_is_a_stale_wait() {
    let src = broken(
        "let phase = (i / NUM_STAGES) % 2;\n                barrier_wait(local_view(full",
        "let phase = 0;\n                barrier_wait(local_view(full",
    );
    let text = expect_error(&src, Rule::StaleWait, "barrier_wait(local_view(full, slot), phase)");
    assert!(text.contains("phase ^= 1"), "{text}");
}

#[test]
fn expect_bytes_of_the_wrong_size_are_an_error_at_the_call() {
    let src = broken("(BM * BK + BK * BN) * 2", "(BM * BK + BK * BN) * 4");
    let text = expect_error(&src, Rule::ExpectBytes, "barrier_expect_bytes");
    assert!(text.contains("announces 8192 bytes"), "{text}");
}

#[test]
fn a_missing_release_is_a_deadlock() {
    let src = broken("                barrier_arrive(local_view(empty, slot));\n", "");
    expect_error(&src, Rule::Deadlock, "barrier_wait(local_view(empty, slot), phase ^ 1)");
}

#[test]
fn too_many_arrivals_are_an_error() {
    let src = broken(
        "barrier_arrive(local_view(empty, slot));",
        "barrier_arrive(local_view(empty, slot));\n                barrier_arrive(local_view(empty, slot));",
    );
    expect_error(&src, Rule::ArriveCount, "// again");
}

#[test]
fn reading_before_the_wait_is_an_error() {
    let src = broken(
        "                barrier_wait(local_view(full, slot), phase);\n",
        "",
    );
    expect_error(&src, Rule::UnorderedRead, "acc = async_dot(");
}

#[test]
fn reading_the_accumulator_before_its_wait_is_an_error() {
    let src = broken("acc = async_dot_wait(0, acc);", "acc = acc * 1.0;");
    expect_error(&src, Rule::AccumulatorBeforeWait, "acc = acc * 1.0;");
}

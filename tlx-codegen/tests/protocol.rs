//! The compile-time protocol checker (`check::check_protocol`) on kernels
//! written in the language: correct kernels pass with no finding, and each
//! class of protocol bug is an error at the offending call. Every kernel
//! rejected as deadlocking also deadlocks on the interpreter with real
//! data: checker and interpreter share one model and must not disagree.

use tlx_core::check::{check_protocol, ProtocolReport, Rule};
use tlx_core::interp::InterpError;

use crate::kernels::{broken, compile, run_gemm, WS_GEMM};

fn check(src: &str) -> ProtocolReport {
    check_protocol(&compile(src))
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
    let text = expect_error(
        &src,
        Rule::Deadlock,
        "barrier_wait(local_view(empty, slot), phase)",
    );
    assert!(text.contains("start its phase at 1"), "{text}");
}

#[test]
fn a_forgotten_phase_flip_is_a_stale_wait() {
    let src = broken(
        "let phase = (i / NUM_STAGES) % 2;\n                barrier_wait(local_view(full",
        "let phase = 0;\n                barrier_wait(local_view(full",
    );
    let text = expect_error(
        &src,
        Rule::StaleWait,
        "barrier_wait(local_view(full, slot), phase)",
    );
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
    let src = broken(
        "                barrier_arrive(local_view(empty, slot));\n",
        "",
    );
    expect_error(
        &src,
        Rule::Deadlock,
        "barrier_wait(local_view(empty, slot), phase ^ 1)",
    );
}

#[test]
fn too_many_arrivals_are_an_error() {
    let src = broken(
        "barrier_arrive(local_view(empty, slot));",
        "barrier_arrive(local_view(empty, slot));\n                barrier_arrive(local_view(empty, slot)); // again",
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

/// Two products in flight, then `async_dot_wait(1, ..)`: the older one is
/// complete (groups retire in order), the newer one is not.
const TWO_GROUPS: &str = r#"
#[tlx::kernel(num_warps = 4)]
fn two_groups(a: Ptr<bf16>, out: Ptr<f32>) {
    let buf = local_view(local_alloc([64, 64], bf16, 1), 0);
    let at = arange(0, 64)[(.., None)] * 64 + arange(0, 64)[(None, ..)];
    local_store(buf, load(a + at));
    fence_async_shared();
    let first = async_dot(buf, buf, zeros([64, 64], f32));
    let second = async_dot(buf, buf, zeros([64, 64], f32));
    let first = async_dot_wait(1, first);
    let early = first * 2.0;
    let second = async_dot_wait(0, second);
    store(out + at, early + second);
}
"#;

#[test]
fn a_wait_leaving_only_later_groups_in_flight_completes_the_earlier() {
    assert_eq!(check(TWO_GROUPS), ProtocolReport::default());
    let src = TWO_GROUPS
        .replace(
            "let first = async_dot_wait(1, first);",
            "let second = async_dot_wait(1, second);",
        )
        .replace("let early = first * 2.0;", "let early = second * 2.0;")
        .replace(
            "let second = async_dot_wait(0, second);",
            "let first = async_dot_wait(0, first);",
        )
        .replace("early + second", "early + first");
    expect_error(
        &src,
        Rule::AccumulatorBeforeWait,
        "let early = second * 2.0;",
    );
}

/// Every variant the checker rejects as a deadlock also deadlocks on the
/// interpreter with real data, at the sizes the checker names.
#[test]
fn checker_deadlocks_are_interpreter_deadlocks() {
    let variants = [
        broken("phase ^ 1);", "phase);"),
        broken(
            "                barrier_arrive(local_view(empty, slot));\n",
            "",
        ),
    ];
    for src in variants {
        let report = check(&src);
        let finding = &report.errors[0];
        assert_eq!(finding.rule, Rule::Deadlock, "{finding:#?}");
        // "(found with k = 33, one program)": the same K on the interpreter.
        let k: usize = finding
            .message
            .split("k = ")
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .and_then(|k| k.parse().ok())
            .unwrap_or_else(|| panic!("no k in {}", finding.message));
        let err = run_gemm(&src, (64, 64, k)).expect_err("deadlocks");
        let InterpError::Deadlock { tasks, .. } = &*err else {
            panic!("the interpreter reports {err}");
        };
        assert!(
            tasks.iter().any(|t| t.wait.line == finding.at.line),
            "the checker blames line {}, the interpreter's deadlock: {err}",
            finding.at.line
        );
    }
}

#[test]
fn releasing_a_stage_before_the_wgmma_reading_it_is_waited_for_is_an_error() {
    let src = broken(
        "                acc = async_dot_wait(0, acc);\n                barrier_arrive(local_view(empty, slot));\n",
        "                barrier_arrive(local_view(empty, slot));\n                acc = async_dot_wait(0, acc);\n",
    );
    // The wgmma's read of the stage ends at the wait, after the release.
    let text = expect_error(
        &src,
        Rule::OverwriteBeforeRelease,
        "async_descriptor_load(a_desc",
    );
    assert!(text.contains("released its read of it at line"), "{text}");
}

#[test]
fn releasing_a_stage_before_reading_it_is_an_error() {
    let src = broken(
        "                acc = async_dot(local_view(a_bufs, slot), local_view(b_bufs, slot), acc);\n                acc = async_dot_wait(0, acc);\n                barrier_arrive(local_view(empty, slot));\n",
        "                barrier_arrive(local_view(empty, slot));\n                acc = async_dot(local_view(a_bufs, slot), local_view(b_bufs, slot), acc);\n                acc = async_dot_wait(0, acc);\n",
    );
    let report = check(&src);
    let [finding] = report.errors.as_slice() else {
        panic!("expected one error, got {report:#?}");
    };
    // Whichever comes first in the skeleton run: the producer's refill
    // over the unfinished read, or the consumer's read of the refill.
    assert!(
        matches!(
            finding.rule,
            Rule::OverwriteBeforeRelease | Rule::UnorderedRead
        ),
        "{finding:#?}"
    );
}

/// `WS_GEMM`'s protocol written with `pipe!`.
const PIPE_GEMM: &str = r#"
#[tlx::kernel(num_warps = 4, configs = [(BM = 64, BN = 64, BK = 16, NUM_STAGES = 2)])]
fn pipe_gemm<const BM: usize, const BN: usize, const BK: usize, const NUM_STAGES: usize>(
    a_desc: TensorDesc<bf16, BM, BK>,
    b_desc: TensorDesc<bf16, BK, BN>,
    c: Ptr<f32>,
    n: i32,
    k: i32,
) {
    let a_bufs = local_alloc([BM, BK], bf16, NUM_STAGES);
    let b_bufs = local_alloc([BK, BN], bf16, NUM_STAGES);
    let tiles = pipe!(capacity = NUM_STAGES, a = a_bufs, b = b_bufs);
    let off_m = program_id(0) * BM;
    let off_n = program_id(1) * BN;
    let k_tiles = (k + BK - 1) / BK;
    async_tasks! {
        task(default) {
            let reader = tiles.reader();
            let mut acc = zeros([BM, BN], f32);
            for i in 0..k_tiles {
                let ready = reader.wait(i);
                acc = async_dot(ready.a, ready.b, acc);
                acc = async_dot_wait(0, acc);
                reader.release(i);
            }
            let rows = off_m + arange(0, BM);
            let cols = off_n + arange(0, BN);
            store(c + rows[(.., None)] * n + cols[(None, ..)], acc);
        }
        task(num_warps = 1) {
            let writer = tiles.writer();
            for i in 0..k_tiles {
                let slot = writer.acquire(i);
                async_descriptor_load(a_desc, slot.a, [off_m, i * BK]);
                async_descriptor_load(b_desc, slot.b, [i * BK, off_n]);
                writer.commit(i);
            }
        }
    }
}
"#;

fn broken_pipe(from: &str, to: &str) -> String {
    assert!(PIPE_GEMM.contains(from), "{from:?} not in the kernel");
    PIPE_GEMM.replacen(from, to, 1)
}

#[test]
fn a_correct_pipe_passes() {
    assert_eq!(check(PIPE_GEMM), ProtocolReport::default());
}

#[test]
fn a_reader_iterating_past_the_writer_deadlocks() {
    let src = broken_pipe(
        "            for i in 0..k_tiles {\n                let ready",
        "            for i in 0..k_tiles + 1 {\n                let ready",
    );
    expect_error(&src, Rule::Deadlock, "let ready = reader.wait(i);");
}

#[test]
fn reading_a_slot_after_releasing_it_is_an_error() {
    let src = broken_pipe(
        "                acc = async_dot_wait(0, acc);\n                reader.release(i);\n",
        "                reader.release(i);\n                acc = async_dot_wait(0, acc);\n",
    );
    expect_error(
        &src,
        Rule::OverwriteBeforeRelease,
        "async_descriptor_load(a_desc, slot.a",
    );
}

#[test]
fn a_reader_skipping_a_phase_is_a_stale_wait() {
    // Waiting on iteration 0's phase forever: wraps onto a completed phase.
    let src = broken_pipe(
        "let ready = reader.wait(i);",
        "let ready = reader.wait(i % NUM_STAGES);",
    );
    expect_error(&src, Rule::StaleWait, "let ready = reader.wait(");
}

/// A prefetch neither waits nor arrives: where it points may come from
/// memory without the checker giving up (grouped GEMMs load their tiles'
/// coordinates).
#[test]
fn a_prefetch_at_a_loaded_offset_is_no_protocol_matter() {
    let src = broken(
        "let bar = local_view(full, slot);",
        "async_descriptor_prefetch(a_desc, [load(c + i).to(i32), 0]);
                let bar = local_view(full, slot);",
    );
    assert_eq!(check(&src), ProtocolReport::default());
}

#[test]
fn a_phase_loaded_from_memory_is_a_warning_not_a_silent_pass() {
    let src = broken(
        "                barrier_wait(local_view(full, slot), phase);",
        "                barrier_wait(local_view(full, slot), load(c + i).to(i32));",
    );
    let report = check(&src);
    assert!(report.errors.is_empty(), "{report:#?}");
    let [warning] = report.warnings.as_slice() else {
        panic!("expected one warning, got {report:#?}");
    };
    assert_eq!(warning.rule, Rule::Undecidable);
    assert!(
        warning.hint.contains("check_protocol = false"),
        "{warning:#?}"
    );
}

/// Two producers arrive on a barrier counted for one, and the consumer
/// waits for the two phases they complete: in round robin the consumer's
/// first wait passes between the two arrivals, so the run passes; when
/// both arrive before it, the barrier is two phases on and the wait for
/// phase 0 never passes. Only an interleaving other than round robin shows
/// it, and the exploration of the smallest sizes finds it.
const TWO_PRODUCERS: &str = r#"
#[kernel]
fn two_producers(out: Ptr<f32>) {
    let ready = alloc_barriers(1, 1);
    let other = alloc_barriers(1, 1);
    async_tasks! {
        task(default) {
            barrier_wait(local_view(ready, 0), 0);
            barrier_wait(local_view(ready, 0), 1);
            store(out + arange(0, 32), full([32], 1.0, f32));
        }
        task(num_warps = 1) {
            barrier_arrive(local_view(ready, 0));
        }
        task(num_warps = 1) {
            for i in 0..4 {
                barrier_arrive(local_view(other, 0));
                barrier_wait(local_view(other, 0), i % 2);
            }
            barrier_arrive(local_view(ready, 0));
        }
    }
}
"#;

#[test]
fn a_bug_only_another_interleaving_shows_fails_the_check() {
    use tlx_core::interp::{run_kernel, ArgValue, HostMemory, InterpOptions};
    let kernel = compile(TWO_PRODUCERS);
    let mem = HostMemory::new();
    let args = [ArgValue::Ptr {
        buffer: mem.alloc(32 * 4),
        offset_elems: 0,
    }];
    let round_robin = InterpOptions::new(1, true);
    run_kernel(&kernel, [1, 1, 1], &args, &mem, &round_robin).expect("round robin passes");
    let report = check_protocol(&kernel);
    let [finding] = report.errors.as_slice() else {
        panic!("expected one error, got {report:#?}");
    };
    // Both arrivals completed a phase before the consumer's first wait:
    // the barrier counts one arrival a phase and gets two.
    assert_eq!(finding.rule, Rule::ArriveCount, "{finding:#?}");
    let alloc = TWO_PRODUCERS
        .lines()
        .position(|l| l.contains("let ready = alloc_barriers"))
        .map(|i| i as u32 + 1);
    assert_eq!(Some(finding.at.line), alloc, "{finding:#?}");
    assert!(report.coverage.explored > 1, "{:?}", report.coverage);
    assert!(
        finding.message.contains("other than round robin"),
        "{}\nhelp: {}",
        finding.message,
        finding.hint
    );
    eprintln!("{}\nhelp: {}", finding.message, finding.hint);
}

/// A correct kernel's exploration ends: every order of its dependent
/// steps is run within the budget, and the report says so.
#[test]
fn a_correct_kernel_is_explored_completely() {
    let fixed = TWO_PRODUCERS.replace(
        "alloc_barriers(1, 1);\n    let other",
        "alloc_barriers(1, 2);\n    let other",
    );
    let fixed = fixed.replacen(
        "            barrier_wait(local_view(ready, 0), 1);\n",
        "",
        1,
    );
    let report = check(&fixed);
    assert!(report.errors.is_empty(), "{report:#?}");
    let covered = &report.coverage;
    assert!(covered.explored_all && covered.explored > 1, "{covered:?}");
}

/// TLX-W002: a wait on a flag no store or atomic of the kernel sets is a
/// warning at the wait; set through `remote`, through an offset, or by a
/// store, it is not.
#[test]
fn a_flag_nothing_sets_is_a_warning() {
    let never = r#"
        #[tlx::kernel(arch = "sm_90a")]
        fn k(flags: Ptr<i32>, out: Ptr<f32>) {
            signal_wait_until(flags + program_id(0), "ge", 1);
            store(out, 1.0);
        }
    "#;
    let report = check(never);
    assert!(report.errors.is_empty(), "{report:#?}");
    let [warning] = report.warnings.as_slice() else {
        panic!("expected one warning, got {report:#?}");
    };
    assert_eq!(warning.rule, Rule::FlagNeverSet);
    assert_eq!(warning.at.line, 4, "{warning:#?}");
    assert!(warning.message.contains("`flags`"), "{warning:#?}");
    for set in [
        r#"
        #[tlx::kernel(arch = "sm_90a")]
        fn k(mesh: Mesh, flags: SymPtr<i32>, out: Ptr<f32>) {
            let next = (shard_id(mesh, 0) + 1) % shard_count(mesh, 0);
            signal_set(remote(flags, next), 1);
            signal_wait_until(flags, "ge", 1);
            store(out, 1.0);
        }
        "#,
        r#"
        #[tlx::kernel(arch = "sm_90a")]
        fn k(flags: Ptr<i32>, out: Ptr<f32>) {
            let pid = program_id(0);
            if pid > 0 {
                signal_wait_until(flags + (pid - 1), "ge", 1);
            }
            atomic_xchg(flags + pid, 1, sem = "release", scope = "gpu");
            store(out, 1.0);
        }
        "#,
        r#"
        #[tlx::kernel(arch = "sm_90a")]
        fn k(flags: Ptr<i32>, out: Ptr<f32>) {
            store(flags + 1, 7);
            signal_wait_until(flags, "eq", 7);
            store(out, 1.0);
        }
        "#,
    ] {
        let report = check(set);
        assert!(
            report.warnings.is_empty() && report.errors.is_empty(),
            "{report:#?}"
        );
    }
}

//! TLX primitives end to end on the CPU interpreter: kernels written in the
//! language (shared buffers, mbarriers, TMA, wgmma, warp specialization)
//! compiled by the frontend, checked against a CPU reference, and misuses
//! (a forgotten wait, a wrong expected byte count) reported by the
//! interpreter. The same kernels go through code generation and `ptxas`.

use tlx_core::interp::{run_kernel, ArgValue, HostMemory, InterpError, InterpOptions};

use crate::kernels::{broken, compile, run_gemm, run_gemm_with, WS_GEMM};

#[test]
fn warp_specialized_tma_gemm_matches_the_reference_with_ragged_edges() {
    let (got, want) = run_gemm(WS_GEMM, (80, 72, 40)).expect("runs");
    assert_eq!(got, want, "products of eighths sum exactly in f32");
}

#[test]
fn reading_a_tile_before_waiting_for_its_barrier_is_a_race() {
    let src = broken("barrier_wait(local_view(full, slot), phase);", "");
    let err = run_gemm(&src, (64, 64, 32)).expect_err("races");
    let text = err.to_string();
    // Round robin: the consumer gets there before the first copy is issued.
    assert!(
        matches!(*err, InterpError::UnwrittenShared { .. }),
        "{text}"
    );
    assert!(text.contains("op `async_dot`"), "{text}");
    // A schedule where the copy is issued first but the reader did not wait.
    let seeds = (0..64).map(|seed| {
        let opts = InterpOptions {
            schedule: tlx_core::interp::Schedule::Random { seed },
            ..InterpOptions::default()
        };
        run_gemm_with(&src, (64, 64, 32), &opts).expect_err("races")
    });
    let race = seeds
        .into_iter()
        .find(|e| matches!(**e, InterpError::SharedMemoryRace { .. }))
        .expect("some schedule lands the copy before the read");
    assert!(
        race.to_string().contains("before waiting on its barrier"),
        "{race}"
    );
}

#[test]
fn expecting_more_bytes_than_the_copies_bring_is_reported_at_the_expect() {
    // Four bytes per bf16 element: the phase waits for bytes no copy brings.
    let src = broken("(BM * BK + BK * BN) * 2", "(BM * BK + BK * BN) * 4");
    let err = run_gemm(&src, (64, 64, 32)).expect_err("never completes");
    let text = err.to_string();
    assert!(matches!(*err, InterpError::ExpectBytes { .. }), "{text}");
    assert!(text.contains("announced 8192 bytes"), "{text}");
    assert!(text.contains("brought 4096"), "{text}");
}

#[test]
fn a_producer_waiting_on_the_wrong_parity_deadlocks() {
    let src = broken("phase ^ 1);", "phase);");
    let err = run_gemm(&src, (64, 64, 32)).expect_err("deadlocks");
    assert!(matches!(*err, InterpError::Deadlock { .. }), "{err}");
}

/// Rows `row..row + 8` of a buffer of ones, through `local_slice`.
const SLICE_ROWS: &str = r#"
#[tlx::kernel(num_warps = 4)]
fn slice_rows(out: Ptr<f32>, row: i32) {
    let bufs = local_alloc([16, 16], f32, 1);
    let buf = local_view(bufs, 0);
    local_store(buf, 1.0);
    let part = local_load(local_slice(buf, [row, 0], [8, 16]));
    let rows = arange(0, 8);
    let cols = arange(0, 16);
    store(out + rows[(.., None)] * 16 + cols[(None, ..)], part);
}
"#;

fn run_slice_rows(row: i32) -> Result<Vec<f32>, Box<InterpError>> {
    let kernel = compile(SLICE_ROWS);
    let mem = HostMemory::new();
    let out = mem.alloc(8 * 16 * 4);
    let args = [ArgValue::ptr(out), ArgValue::i32(row)];
    run_kernel(&kernel, [1, 1, 1], &args, &mem, &InterpOptions::default()).map_err(Box::new)?;
    let mut bytes = vec![0u8; 8 * 16 * 4];
    mem.read(out, 0, &mut bytes).expect("read back");
    Ok(bytes
        .chunks(4)
        .map(|w| f32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect())
}

#[test]
fn a_slice_past_its_buffer_is_reported_with_both_shapes() {
    assert_eq!(run_slice_rows(8).expect("fits"), vec![1.0; 8 * 16]);
    let err = run_slice_rows(12).expect_err("rows 12..20 of 16");
    assert!(matches!(*err, InterpError::SliceBounds { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("a [8, 16] slice at [12, 0] does not fit in a [16, 16] buffer"),
        "{text}"
    );
    assert!(text.contains("op `local_slice`"), "{text}");
}

/// A kernel that waits on flags runs all its programs in one schedule on
/// the interpreter: a grid past what that holds, or clusters (not yet
/// supported with it), is a clear error, not a hang.
#[test]
fn a_cooperative_run_refuses_what_it_cannot_hold() {
    let waits = |attr: &str| {
        compile(&format!(
            r#"
#[tlx::kernel({attr})]
fn waits(flags: Ptr<i32>) {{
    signal_wait_until(flags, "ge", 1);
}}
"#
        ))
    };
    let mem = HostMemory::new();
    let flags = mem.alloc(4);
    mem.write(flags, 0, &1i32.to_le_bytes()).expect("write");
    let args = [ArgValue::ptr(flags)];
    let run = |kernel, grid| {
        run_kernel(kernel, grid, &args, &mem, &InterpOptions::default()).map_err(Box::new)
    };
    let plain = waits("num_warps = 4");
    run(&plain, [64, 2, 1]).expect("128 programs run together");
    let too_many = run(&plain, [4097, 1, 1]).expect_err("refused");
    assert!(
        matches!(*too_many, InterpError::Cooperative { programs: 4097, .. }),
        "{too_many}"
    );
    assert!(too_many.to_string().contains("at most 4096"), "{too_many}");
    let clustered = waits("num_warps = 4, ctas_per_cga = (2, 1, 1)");
    let err = run(&clustered, [2, 1, 1]).expect_err("refused");
    assert!(err.to_string().contains("clusters"), "{err}");
}

/// The checker's skeleton drops flag waits (it moves no data): one in a
/// task, whose region the skeleton steps through, is skipped there too,
/// not read as an undecidable value.
#[test]
fn a_flag_wait_in_a_task_is_no_matter_for_the_checker() {
    let kernel = compile(
        r#"
#[tlx::kernel(num_warps = 4)]
fn handoff(x: Ptr<f32>, flags: Ptr<i32>, out: Ptr<f32>) {
    let offs = arange(0, 128);
    async_tasks! {
        task(default) {
            signal_wait_until(flags, "eq", 1);
            store(out + offs, load(x + offs));
        }
        task(num_warps = 4) {
            atomic_xchg(flags, 1, sem = "release", scope = "sys");
        }
    }
}
"#,
    );
    let report = tlx_core::check::check_protocol(&kernel);
    assert!(
        report.errors.is_empty() && report.warnings.is_empty(),
        "{report:#?}"
    );
}

/// Two launches of one kernel as two ranks: each stores its block into
/// the other's inbox, sets the other's flag and waits on its own. Run one
/// after the other, the first waits forever; run together
/// (`run_together`), each gets the other's block.
#[test]
fn two_launches_run_together_exchange_through_flags() {
    use tlx_core::interp::{run_together, Launch};
    let kernel = compile(
        r#"
#[tlx::kernel(num_warps = 4)]
fn exchange(mine: Ptr<f32>, peer_inbox: Ptr<f32>, peer_flag: Ptr<i32>, inbox: Ptr<f32>, flag: Ptr<i32>, out: Ptr<f32>) {
    let offs = arange(0, 128);
    store(peer_inbox + offs, load(mine + offs));
    atomic_xchg(peer_flag, 1, sem = "release", scope = "sys");
    signal_wait_until(flag, "eq", 1);
    store(out + offs, load(inbox + offs));
}
"#,
    );
    let mem = HostMemory::new();
    let floats = |v: f32| {
        let b = mem.alloc(128 * 4);
        let bytes: Vec<u8> = (0..128)
            .flat_map(|i| (v + i as f32).to_le_bytes())
            .collect();
        mem.write(b, 0, &bytes).expect("write");
        b
    };
    let (mine0, mine1) = (floats(1000.0), floats(2000.0));
    let (inbox0, inbox1, out0, out1) = (
        floats(f32::NAN),
        floats(f32::NAN),
        floats(f32::NAN),
        floats(f32::NAN),
    );
    let flag = || {
        let b = mem.alloc(4);
        mem.write(b, 0, &0i32.to_le_bytes()).expect("write");
        b
    };
    let (flag0, flag1) = (flag(), flag());
    let p = ArgValue::ptr;
    let rank0 = [p(mine0), p(inbox1), p(flag1), p(inbox0), p(flag0), p(out0)];
    let rank1 = [p(mine1), p(inbox0), p(flag0), p(inbox1), p(flag1), p(out1)];
    let launch = |args| Launch {
        kernel: &kernel,
        grid: [1, 1, 1],
        args,
    };
    run_together(
        &[launch(&rank0), launch(&rank1)],
        &mem,
        &InterpOptions::default(),
    )
    .expect("the ranks exchange");
    let floats_of = |b| {
        let mut bytes = vec![0u8; 128 * 4];
        mem.read(b, 0, &mut bytes).expect("read");
        bytes
            .chunks(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect::<Vec<_>>()
    };
    let expected = |v: f32| (0..128).map(|i| v + i as f32).collect::<Vec<_>>();
    assert_eq!(floats_of(out0), expected(2000.0));
    assert_eq!(floats_of(out1), expected(1000.0));
    // Alone, rank 0 waits for a flag only rank 1 sets.
    mem.write(flag0, 0, &0i32.to_le_bytes()).expect("write");
    let alone = run_kernel(&kernel, [1, 1, 1], &rank0, &mem, &InterpOptions::default())
        .expect_err("deadlocks");
    assert!(matches!(alone, InterpError::Deadlock { .. }), "{alone}");
    // A deadlock of launches run together names each rank's task.
    mem.write(flag0, 0, &0i32.to_le_bytes()).expect("write");
    mem.write(flag1, 0, &0i32.to_le_bytes()).expect("write");
    let waits_only = [p(mine0), p(inbox1), p(flag0), p(inbox0), p(flag0), p(out0)];
    let stuck = run_together(
        &[launch(&waits_only), launch(&rank1)],
        &mem,
        &InterpOptions::default(),
    )
    .expect_err("rank 1 waits for a flag nobody sets");
    assert!(stuck.to_string().contains("of rank 1"), "{stuck}");
}

/// Cycles spent on a stretch of the kernel, read twice with `clock64()`.
const TIMED: &str = r#"
#[tlx::kernel(num_warps = 4)]
fn timed(x: Ptr<f32>, out: Ptr<f32>, cycles: Ptr<i64>) {
    let start = clock64();
    let offs = arange(0, 128);
    store(out + offs, load(x + offs) * 2.0);
    let end = clock64();
    store(cycles, end - start);
}
"#;

#[test]
fn clock64_counts_forward_over_a_stretch_of_the_kernel() {
    let kernel = compile(TIMED);
    let mem = HostMemory::new();
    let x = mem.alloc(128 * 4);
    mem.write(x, 0, &vec![7u8; 128 * 4]).expect("write");
    let (out, cycles) = (mem.alloc(128 * 4), mem.alloc(8));
    let args = [ArgValue::ptr(x), ArgValue::ptr(out), ArgValue::ptr(cycles)];
    run_kernel(&kernel, [1, 1, 1], &args, &mem, &InterpOptions::default()).expect("runs");
    let mut bytes = [0u8; 8];
    mem.read(cycles, 0, &mut bytes).expect("read back");
    // The interpreter's cycles are ops: the stretch runs at least its
    // load, multiply and store.
    assert!(i64::from_le_bytes(bytes) >= 3, "{bytes:?}");
}

/// `WS_GEMM` whose producer asks for the next k-tile's blocks in L2 before
/// loading this one's (past the end, on the last: TMA clips it).
fn prefetching_gemm() -> String {
    crate::kernels::broken(
        "let bar = local_view(full, slot);",
        "async_descriptor_prefetch(a_desc, [off_m, (i + 1) * BK]);
                async_descriptor_prefetch(b_desc, [(i + 1) * BK, off_n]);
                let bar = local_view(full, slot);",
    )
}

#[test]
fn a_prefetch_changes_no_result() {
    let (got, want) = run_gemm(&prefetching_gemm(), (80, 72, 40)).expect("runs");
    assert_eq!(got, want, "products of eighths sum exactly in f32");
}

/// A dependent launch (`launch_pdl`) that waits for the kernel before it,
/// lets the next one start, copies a block out by TMA and counts itself
/// once the copy has written.
const PUBLISHING: &str = r#"
#[tlx::kernel(num_warps = 4, launch_pdl = true, configs = [(BLOCK = 64)])]
fn publish<const BLOCK: usize>(x: Ptr<f32>, y_desc: TensorDesc<f32, 1, BLOCK>, done: Ptr<i32>) {
    gdc_wait();
    gdc_launch_dependents();
    let buf = local_view(local_alloc([1, BLOCK], f32, 1), 0);
    let col0 = program_id(0) * BLOCK;
    let cols = col0 + arange(0, BLOCK);
    local_store(buf, load(x + cols)[(None, ..)]);
    async_descriptor_store(y_desc, buf, [0, col0]);
    async_descriptor_store_wait(0, writes = true);
    atomic_add(done, 1, sem = "release");
}
"#;

/// The same kernel through LLVM to PTX, assembled by `ptxas` for sm_90a.
mod codegen {
    use crate::codegen_common;
    use tlx_core::ir::Arch;

    #[test]
    fn the_warp_specialized_gemm_assembles_without_spills() {
        let kernel = super::compile(super::WS_GEMM);
        let compiled = tlx_codegen::compile(&kernel, Arch::Sm90a).expect("compiles");
        for needle in [
            "mbarrier.init.shared::cta.b64",
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
            "mbarrier.try_wait.parity.shared::cta.b64",
            "mbarrier.arrive.expect_tx.shared::cta.b64",
            "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16",
            ".param .align 64 .b8 ws_gemm_param_0[128]",
        ] {
            assert!(
                compiled.ptx.contains(needle),
                "no `{needle}` in\n{}",
                compiled.ptx
            );
        }
        match codegen_common::ptxas() {
            Some(ptxas) => {
                let report = codegen_common::ptxas_verbose(&ptxas, &compiled.ptx);
                assert!(
                    !report.contains("spill stores") || report.contains("0 bytes spill stores"),
                    "{report}"
                );
            }
            None => println!("skipped: ptxas not found"),
        }
    }

    /// Each `fence` scope is its one instruction, for sm_90a and sm_100a,
    /// and `ptxas` takes it.
    #[test]
    fn each_fence_scope_is_its_instruction() {
        let kernel = super::compile(
            r#"
#[tlx::kernel(num_warps = 4)]
fn fenced(x: Ptr<f32>, flag: Ptr<i32>) {
    store(x + arange(0, 128), 1.0);
    fence("gpu");
    atomic_xchg(flag, 1);
    fence("sys");
    fence("async_shared");
}
"#,
        );
        for arch in [Arch::Sm90a, Arch::Sm100a] {
            let ptx = tlx_codegen::compile(&kernel, arch).expect("compiles").ptx;
            for fence in [
                "fence.acq_rel.gpu;",
                "fence.acq_rel.sys;",
                "fence.proxy.async.shared::cta;",
            ] {
                assert_eq!(ptx.matches(fence).count(), 1, "{fence} in\n{ptx}");
            }
            if arch == Arch::Sm90a {
                codegen_common::ptxas_verbose_if_found(&ptx);
            }
        }
    }

    /// `signal_wait_until` is a polling loop of system-scope acquire loads,
    /// the comparison asked for and a back-off, for each comparison; with
    /// `mbar_timeout_ns`, the loop reads the global timer and can trap.
    /// `ptxas` takes both.
    #[test]
    fn each_signal_comparison_is_an_acquire_polling_loop() {
        for (cmp, setp) in [
            ("eq", "setp.eq.s32"),
            ("ne", "setp.ne.s32"),
            ("ge", "setp.ge.s32"),
            ("gt", "setp.gt.s32"),
            ("le", "setp.le.s32"),
            ("lt", "setp.lt.s32"),
        ] {
            let kernel = super::compile(&format!(
                r#"
#[tlx::kernel(num_warps = 4)]
fn waits(flags: Ptr<i32>, x: Ptr<f32>, n: i32) {{
    signal_wait_until(flags + 1, "{cmp}", n);
    store(x + arange(0, 128), load(x + 128 + arange(0, 128)));
    signal_wait_until(flags, "{cmp}", n + 1);
    atomic_xchg(flags + 2, 1, sem = "release", scope = "sys");
}}
"#
            ));
            for arch in [Arch::Sm90a, Arch::Sm100a] {
                let ptx = tlx_codegen::compile(&kernel, arch).expect("compiles").ptx;
                assert_eq!(ptx.matches("ld.acquire.sys.global.s32").count(), 2, "{ptx}");
                // LLVM may branch on the opposite comparison.
                assert!(ptx.matches("setp.").count() >= 2, "{setp} in\n{ptx}");
                assert!(ptx.contains("nanosleep.u32"), "{ptx}");
                assert!(ptx.contains("atom.release.sys.global.exch.b32"), "{ptx}");
                if arch == Arch::Sm90a {
                    codegen_common::ptxas_verbose_if_found(&ptx);
                }
            }
        }
    }

    /// Under `mbar_timeout_ns` a flag wait reads the global timer and can
    /// trap, saying where it hung; `ptxas` takes it.
    #[test]
    fn a_flag_wait_under_a_deadline_can_report_and_trap() {
        let kernel = super::compile(
            r#"
#[tlx::kernel(num_warps = 4, mbar_timeout_ns = 2_000_000_000)]
fn waits(flags: Ptr<i32>, x: Ptr<f32>) {
    signal_wait_until(flags, "ge", 3);
    store(x + arange(0, 128), 1.0);
}
"#,
        );
        let ptx = tlx_codegen::compile(&kernel, Arch::Sm90a)
            .expect("compiles")
            .ptx;
        assert!(
            ptx.contains("%globaltimer") && ptx.contains("trap;"),
            "{ptx}"
        );
        // The message is a byte array: its text is not in the PTX.
        assert!(ptx.contains("vprintf"), "{ptx}");
        codegen_common::ptxas_verbose_if_found(&ptx);
    }

    /// One L2 prefetch per TMA box of each block, from one thread, and the
    /// loads unchanged beside them.
    #[test]
    fn a_prefetch_is_one_bulk_prefetch_per_block() {
        let kernel = super::compile(&super::prefetching_gemm());
        let ptx = tlx_codegen::compile(&kernel, Arch::Sm90a)
            .expect("compiles")
            .ptx;
        let prefetch = "cp.async.bulk.prefetch.tensor.2d.L2.global.tile";
        assert_eq!(ptx.matches(prefetch).count(), 2, "{ptx}");
        assert_eq!(
            ptx.matches("cp.async.bulk.tensor.2d.shared::cluster")
                .count(),
            2
        );
        codegen_common::ptxas_verbose_if_found(&ptx);
    }

    /// Both sides of a programmatic dependent launch, and a count
    /// published once TMA stores have written: `griddepcontrol`,
    /// `cp.async.bulk.wait_group` without `.read`, and a `red` for the
    /// count, whose old value nothing reads (no `atom`, no sharing).
    #[test]
    fn dependent_launch_prims_and_a_published_count_compile() {
        let kernel = super::compile(super::PUBLISHING);
        assert!(kernel.options.launch_pdl);
        let ptx = tlx_codegen::compile(&kernel, Arch::Sm90a)
            .expect("compiles")
            .ptx;
        for needle in [
            "griddepcontrol.wait;",
            "griddepcontrol.launch_dependents;",
            "cp.async.bulk.wait_group 0;",
            "red.release.gpu.global.add.u32",
        ] {
            assert!(ptx.contains(needle), "no `{needle}` in\n{ptx}");
        }
        assert!(!ptx.contains("wait_group.read"), "{ptx}");
        assert!(!ptx.contains("atom."), "{ptx}");
        codegen_common::ptxas_verbose_if_found(&ptx);
    }

    /// A program's release (one thread performs a scalar atomic) comes after
    /// a barrier, so that it publishes the stores of every thread.
    #[test]
    fn a_scalar_release_follows_a_barrier() {
        let kernel = super::compile(
            r#"
#[tlx::kernel(num_warps = 4)]
fn publish_rows(out: Ptr<f32>, flag: Ptr<i32>) {
    let cols = arange(0, 512);
    store(out + cols, cols.to(f32));
    atomic_add(flag, 1, sem = "release");
}
"#,
        );
        let ptx = tlx_codegen::compile(&kernel, Arch::Sm90a)
            .expect("compiles")
            .ptx;
        let release = ptx.find("red.release.gpu").expect("a red");
        let barrier = ptx.find("barrier.sync").expect("a barrier");
        let store = ptx.find("st.global").expect("the stores");
        assert!(store < barrier && barrier < release, "{ptx}");
    }

    /// Each `clock64()` is its own read of the cycle counter, in program
    /// order around the work it times: never merged into one.
    #[test]
    fn clock64_reads_are_kept_apart() {
        let kernel = super::compile(super::TIMED);
        let ptx = tlx_codegen::compile(&kernel, Arch::Sm90a)
            .expect("compiles")
            .ptx;
        assert_eq!(ptx.matches("%clock64").count(), 2, "{ptx}");
        let first = ptx.find("%clock64").unwrap_or(0);
        let last = ptx.rfind("%clock64").unwrap_or(0);
        let store = ptx.find("st.global").unwrap_or(0);
        assert!(
            first < store && store < last,
            "the reads do not bracket the store"
        );
    }

    /// `mbar_timeout_ns` gives every `barrier_wait` a deadline that prints
    /// the wait's line and traps; without it, the waits are the plain loop
    /// (no clock read, no trap: the option costs nothing when off).
    #[test]
    fn timed_waits_read_the_clock_and_trap_only_when_asked() {
        let plain = super::compile(super::WS_GEMM);
        let timed_src = super::WS_GEMM.replacen(
            "#[tlx::kernel(num_warps = 4,",
            "#[tlx::kernel(num_warps = 4, mbar_timeout_ns = 500000000,",
            1,
        );
        let timed = super::compile(&timed_src);
        assert_eq!(timed.options.mbar_timeout_ns, Some(500_000_000));
        let ptx =
            |k: &tlx_core::ir::Kernel| tlx_codegen::compile(k, Arch::Sm90a).expect("compiles").ptx;
        let (plain, timed_ptx) = (ptx(&plain), ptx(&timed));
        for needle in ["%globaltimer", "trap;", "vprintf"] {
            assert!(!plain.contains(needle), "`{needle}` without the option");
            assert!(timed_ptx.contains(needle), "no `{needle}` with the option");
        }
        codegen_common::ptxas_verbose_if_found(&timed_ptx);
    }
}

/// Copies land at random points under a random schedule; a kernel that waits
/// for its barriers computes the same result whatever the landing order.
#[test]
fn random_landing_orders_do_not_change_a_correct_kernel() {
    for seed in 0..8 {
        let opts = InterpOptions {
            schedule: tlx_core::interp::Schedule::Random { seed },
            ..InterpOptions::default()
        };
        let (got, want) = run_gemm_with(WS_GEMM, (80, 72, 40), &opts).expect("runs");
        assert_eq!(got, want, "seed {seed}");
    }
}

/// `reuse =` places the second allocation on the first one's bytes: the
/// kernel needs exactly their bytes less, and (on the interpreter) a buffer
/// written through one allocation is read through the other.
#[test]
fn a_reusing_allocation_takes_no_shared_memory_of_its_own() {
    let source = |reuse: &str| {
        format!(
            r#"
#[tlx::kernel(arch = "sm_90a", num_warps = 4)]
fn k(out: Ptr<f32>) {{
    let tiles = local_alloc([64, 64], bf16, 2);
    let words = local_alloc([64, 32], f32, 2{reuse});
    let r = arange(0, 64);
    let c = arange(0, 32);
    local_store(local_view(tiles, 1), full([64, 64], 1.0, bf16));
    store(out + r[(.., None)] * 32 + c[(None, ..)], local_load(local_view(words, 1)));
}}"#
        )
    };
    let shared_bytes = |src: &str| {
        tlx_codegen::compile(&compile(src), tlx_core::ir::Arch::Sm90a)
            .expect("compiles")
            .shared_bytes
    };
    let (fresh, reused) = (source(""), source(", reuse = tiles"));
    assert_eq!(
        shared_bytes(&fresh),
        shared_bytes(&reused) + 2 * 64 * 32 * 4
    );
    // Two bf16 ones (0x3f80) side by side are the f32 0x3f80_3f80.
    let mem = HostMemory::new();
    let out = mem.alloc(64 * 32 * 4);
    let args = [ArgValue::ptr(out)];
    run_kernel(
        &compile(&reused),
        [1, 1, 1],
        &args,
        &mem,
        &InterpOptions::default(),
    )
    .expect("runs");
    let mut bytes = vec![0u8; 64 * 32 * 4];
    mem.read(out, 0, &mut bytes).expect("read back");
    assert!(bytes
        .chunks(4)
        .all(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]) == 0x3f80_3f80));
}

//! Whole-kernel tests of checked mode's undefined-lane reports: values a
//! masked load without `other` leaves in its masked-off lanes, followed
//! through the ops to the uses that would observe GPU garbage.

use super::*;

const BLOCK: usize = 8;

/// `x[offs]` under `offs < n` (line 5), `other` 0.0 when `with_other`.
fn masked_row(k: &mut Kb, with_other: bool) -> (ValueId, ValueId) {
    let x = k.ptr_param("x", ScalarType::F32);
    let n = k.scalar_param("n", ScalarType::I32);
    let offs = k.arange(BLOCK);
    let limit = k.splat(n, &[BLOCK]);
    let mask = k.cmp(CmpPred::Lt, offs, limit);
    let p = k.ptrs(x, offs);
    let other = with_other.then(|| {
        k.constant(
            Literal::Float(0.0),
            Type::tensor(Elem::Scalar(ScalarType::F32), vec![BLOCK]),
        )
    });
    k.line(5);
    let row = k.load(p, Some(mask), other);
    (row, mask)
}

/// The classic bug: `out[0] = sum(load(x, mask))` with no `other`, stored on line 9.
fn masked_sum(with_other: bool) -> ir::Kernel {
    let mut k = Kb::new("masked_sum");
    let (row, _) = masked_row(&mut k, with_other);
    let out = k.ptr_param("out", ScalarType::F32);
    let total = k.reduce(row, 0, ReduceKind::Sum);
    k.line(9);
    k.store(out, total, None);
    k.finish()
}

fn run_on(kernel: &ir::Kernel, n: usize, check: bool) -> (Result<(), InterpError>, Vec<f32>) {
    let mem = HostMemory::new();
    let x = upload_f32(&mem, &[1.0; BLOCK]);
    let out = upload_f32(&mem, &[-1.0; BLOCK]);
    let args = [
        ArgValue::ptr(x),
        ArgValue::i32(n as i32),
        ArgValue::ptr(out),
    ];
    let run = run_kernel(
        kernel,
        [1, 1, 1],
        &args,
        &mem,
        &InterpOptions::new(1, check),
    );
    (run, download_f32(&mem, out))
}

/// The (op, line, element, operand, origin line) of an undefined-use report.
fn report(run: Result<(), InterpError>) -> (&'static str, u32, usize, &'static str, u32) {
    match run {
        Err(InterpError::UndefinedUse {
            at,
            element,
            what,
            origin_line,
        }) => (at.op, at.line, element, what, origin_line),
        other => panic!("expected an undefined use, got {other:?}"),
    }
}

#[test]
fn summing_masked_off_lanes_into_a_store_names_the_store_and_the_load() {
    let (run, _) = run_on(&masked_sum(false), 5, true);
    let Err(err) = run else {
        panic!("the undefined sum was stored unreported")
    };
    let text = err.to_string();
    for part in ["`store`", "line 9", "stored value", "`load` at line 5"] {
        assert!(text.contains(part), "`{text}` lacks `{part}`");
    }
    assert_eq!(report(Err(err)), ("store", 9, 0, "stored value", 5));
    // No lane is masked off when the whole block is in range.
    let (run, out) = run_on(&masked_sum(false), BLOCK, true);
    assert!(run.is_ok(), "{run:?}");
    assert_eq!(out[0], BLOCK as f32);
}

#[test]
fn an_other_value_defines_the_masked_off_lanes() {
    let (run, out) = run_on(&masked_sum(true), 5, true);
    assert!(run.is_ok(), "{run:?}");
    assert_eq!(out[0], 5.0);
}

#[test]
fn the_check_off_reports_nothing_and_reads_zeros() {
    let (run, out) = run_on(&masked_sum(false), 5, false);
    assert!(run.is_ok(), "{run:?}");
    assert_eq!(out[0], 5.0);
}

/// `out[offs] = load(x, mask)`, the store masked too or not.
fn masked_copy(store_masked: bool) -> ir::Kernel {
    let mut k = Kb::new("masked_copy");
    let (row, mask) = masked_row(&mut k, false);
    let out = k.ptr_param("out", ScalarType::F32);
    let offs = k.arange(BLOCK);
    let p = k.ptrs(out, offs);
    k.line(7);
    k.store(p, row, store_masked.then_some(mask));
    k.finish()
}

#[test]
fn masked_off_lanes_stored_under_the_same_mask_are_fine() {
    let (run, out) = run_on(&masked_copy(true), 3, true);
    assert!(run.is_ok(), "{run:?}");
    assert_eq!(&out[..4], &[1.0, 1.0, 1.0, -1.0]);
    // Without the mask, lane 3 is the first undefined one written.
    let (run, _) = run_on(&masked_copy(false), 3, true);
    assert_eq!(report(run), ("store", 7, 3, "stored value", 5));
}

/// The loaded row broadcast to `[2, BLOCK]`, zeroed by `where` in rows
/// `>= rows_kept` (or, with `by_mask`, in masked-off lanes), summed per row
/// and both sums stored unmasked.
fn broadcast_select_reduce(by_mask: bool) -> ir::Kernel {
    let mut k = Kb::new("broadcast_select_reduce");
    let (row, mask) = masked_row(&mut k, false);
    let out = k.ptr_param("out", ScalarType::F32);
    let rows_kept = k.scalar_param("rows_kept", ScalarType::I32);
    let shape = [2, BLOCK];
    let wide = k.expand(row, 0);
    let wide = k.broadcast(wide, &shape);
    let keep = if by_mask {
        let m = k.expand(mask, 0);
        k.broadcast(m, &shape)
    } else {
        let r = k.arange(2);
        let r = k.expand(r, 1);
        let r = k.broadcast(r, &shape);
        let limit = k.splat(rows_kept, &shape);
        k.cmp(CmpPred::Lt, r, limit)
    };
    let zeros = k.constant(
        Literal::Float(0.0),
        Type::tensor(Elem::Scalar(ScalarType::F32), shape.to_vec()),
    );
    let ty = k.ty(wide);
    let picked = k.op(
        OpKind::Select {
            cond: keep,
            on_true: wide,
            on_false: zeros,
        },
        ty,
    );
    let sums = k.reduce(picked, 1, ReduceKind::Sum);
    let lanes = k.arange(2);
    let p = k.ptrs(out, lanes);
    k.line(12);
    k.store(p, sums, None);
    k.finish()
}

fn run_rows(kernel: &ir::Kernel, rows_kept: i32) -> (Result<(), InterpError>, Vec<f32>) {
    let mem = HostMemory::new();
    let x = upload_f32(&mem, &[1.0; BLOCK]);
    let out = upload_f32(&mem, &[-1.0; 2]);
    let args = [
        ArgValue::ptr(x),
        ArgValue::i32(5),
        ArgValue::ptr(out),
        ArgValue::i32(rows_kept),
    ];
    let run = run_kernel(kernel, [1, 1, 1], &args, &mem, &InterpOptions::new(1, true));
    (run, download_f32(&mem, out))
}

#[test]
fn undefined_lanes_follow_broadcast_select_and_reduce() {
    // Row 0 keeps the loaded row, so its sum sees the masked-off lanes; row 1 is zeros.
    let (run, _) = run_rows(&broadcast_select_reduce(false), 1);
    assert_eq!(report(run), ("store", 12, 0, "stored value", 5));
    let (run, _) = run_rows(&broadcast_select_reduce(false), 2);
    assert!(matches!(
        run,
        Err(InterpError::UndefinedUse { element: 0, .. })
    ));
    // Neither row keeps it: both sums are defined.
    let (run, out) = run_rows(&broadcast_select_reduce(false), 0);
    assert!(run.is_ok(), "{run:?}");
    assert_eq!(out, vec![0.0, 0.0]);
    // `where(mask, x, 0)` is the correct way to use a load without `other`.
    let (run, out) = run_rows(&broadcast_select_reduce(true), 0);
    assert!(run.is_ok(), "{run:?}");
    assert_eq!(out, vec![5.0, 5.0]);
}

/// `acc += load(x, mask)` twice in a `for`, then `acc` stored, masked or not.
fn loop_carried(store_masked: bool) -> ir::Kernel {
    let mut k = Kb::new("loop_carried");
    let (row, mask) = masked_row(&mut k, false);
    let out = k.ptr_param("out", ScalarType::F32);
    let row_ty = k.ty(row);
    let zeros = k.constant(Literal::Float(0.0), row_ty.clone());
    let lo = k.int(0);
    let hi = k.int(2);
    let step = k.int(1);
    let args =
        k.b.begin_block(vec![Type::scalar(ScalarType::I32), row_ty.clone()]);
    let next = k.bin(BinaryOp::Add, args[1], row);
    k.effect(OpKind::Yield(vec![next]));
    let body = k.b.end_block();
    let acc = k.op(
        OpKind::For {
            lower: lo,
            upper: hi,
            step,
            inits: vec![zeros],
            body,
        },
        row_ty,
    );
    let offs = k.arange(BLOCK);
    let p = k.ptrs(out, offs);
    k.line(20);
    k.store(p, acc, store_masked.then_some(mask));
    k.finish()
}

#[test]
fn undefined_lanes_are_carried_through_loops() {
    let (run, out) = run_on(&loop_carried(true), 6, true);
    assert!(run.is_ok(), "{run:?}");
    assert_eq!(&out[5..], &[2.0, -1.0, -1.0]);
    let (run, _) = run_on(&loop_carried(false), 6, true);
    assert_eq!(report(run), ("store", 20, 6, "stored value", 5));
}

/// `if sum(load(x, mask)) > 0 { out[0] = 1 }`: the condition is undefined when lanes are off.
fn branch_on_sum() -> ir::Kernel {
    let mut k = Kb::new("branch_on_sum");
    let (row, _) = masked_row(&mut k, false);
    let out = k.ptr_param("out", ScalarType::F32);
    let total = k.reduce(row, 0, ReduceKind::Sum);
    let zero = k.constant(Literal::Float(0.0), Type::scalar(ScalarType::F32));
    let positive = k.cmp(CmpPred::Gt, total, zero);
    k.b.begin_block(vec![]);
    let one = k.constant(Literal::Float(1.0), Type::scalar(ScalarType::F32));
    k.store(out, one, None);
    k.effect(OpKind::Yield(vec![]));
    let then_block = k.b.end_block();
    k.b.begin_block(vec![]);
    k.effect(OpKind::Yield(vec![]));
    let else_block = k.b.end_block();
    k.line(15);
    k.effect(OpKind::If {
        cond: positive,
        then_block,
        else_block,
    });
    k.finish()
}

#[test]
fn an_undefined_branch_condition_is_reported() {
    let (run, _) = run_on(&branch_on_sum(), 4, true);
    assert_eq!(report(run), ("if", 15, 0, "branch condition", 5));
    let (run, out) = run_on(&branch_on_sum(), BLOCK, true);
    assert!(run.is_ok(), "{run:?}");
    assert_eq!(out[0], 1.0);
}

/// `y = load(x + idx)` where `idx = load(indices, mask)` without `other`:
/// masked-off indices make pointers of active lanes undefined.
fn gather() -> ir::Kernel {
    let mut k = Kb::new("gather");
    let indices = k.ptr_param("indices", ScalarType::I32);
    let n = k.scalar_param("n", ScalarType::I32);
    let x = k.ptr_param("x", ScalarType::F32);
    let offs = k.arange(BLOCK);
    let limit = k.splat(n, &[BLOCK]);
    let mask = k.cmp(CmpPred::Lt, offs, limit);
    let ip = k.ptrs(indices, offs);
    k.line(3);
    let idx = k.load(ip, Some(mask), None);
    let xp = k.ptrs(x, idx);
    k.line(4);
    k.load(xp, None, None);
    k.finish()
}

#[test]
fn an_undefined_offset_used_by_an_active_lane_is_reported() {
    let mem = HostMemory::new();
    let indices = upload_i32(&mem, &[0; BLOCK]);
    let x = upload_f32(&mem, &[1.0; BLOCK]);
    let args = [ArgValue::ptr(indices), ArgValue::i32(6), ArgValue::ptr(x)];
    let run = run_kernel(&gather(), [1, 1, 1], &args, &mem, &opts(1));
    assert_eq!(report(run), ("load", 4, 6, "pointer", 3));
    let args = [
        ArgValue::ptr(indices),
        ArgValue::i32(BLOCK as i32),
        ArgValue::ptr(x),
    ];
    assert!(run_kernel(&gather(), [1, 1, 1], &args, &mem, &opts(1)).is_ok());
}

/// The uses of an undefined scalar other than stores.
#[derive(Clone, Copy, Debug)]
enum ScalarUse {
    Mask,
    Assert,
    Print,
    ForBound,
    WhileCondition,
    Atomic,
}

/// `u = load(ints, mask = n > 0)` on line 2 (undefined when `n == 0`), then
/// `u` used on line 30 as `use_` says.
fn scalar_use(use_: ScalarUse) -> ir::Kernel {
    let i32t = Type::scalar(ScalarType::I32);
    let mut k = Kb::new("scalar_use");
    let ints = k.ptr_param("ints", ScalarType::I32);
    let n = k.scalar_param("n", ScalarType::I32);
    let zero = k.int(0);
    let any = k.cmp(CmpPred::Gt, n, zero);
    k.line(2);
    let u = k.load(ints, Some(any), None);
    k.line(30);
    match use_ {
        ScalarUse::Mask => {
            let positive = k.cmp(CmpPred::Gt, u, zero);
            k.load(ints, Some(positive), None);
        }
        ScalarUse::Assert => {
            let positive = k.cmp(CmpPred::Gt, u, zero);
            k.effect(OpKind::Assert {
                cond: positive,
                message: "u > 0".into(),
            });
        }
        ScalarUse::Print => k.effect(OpKind::Print {
            prefix: "u =".into(),
            values: vec![u],
        }),
        ScalarUse::ForBound => {
            let step = k.int(1);
            k.b.begin_block(vec![i32t]);
            k.effect(OpKind::Yield(vec![]));
            let body = k.b.end_block();
            k.b.push(
                OpKind::For {
                    lower: zero,
                    upper: u,
                    step,
                    inits: vec![],
                    body,
                },
                vec![],
            );
        }
        ScalarUse::WhileCondition => {
            let cargs = k.b.begin_block(vec![i32t.clone()]);
            let go = k.cmp(CmpPred::Lt, cargs[0], u);
            k.effect(OpKind::Condition(go));
            let cond = k.b.end_block();
            let bargs = k.b.begin_block(vec![i32t.clone()]);
            let one = k.int(1);
            let next = k.bin(BinaryOp::Add, bargs[0], one);
            k.effect(OpKind::Yield(vec![next]));
            let body = k.b.end_block();
            k.op(
                OpKind::While {
                    inits: vec![zero],
                    cond,
                    body,
                },
                i32t,
            );
        }
        ScalarUse::Atomic => {
            k.op(
                OpKind::AtomicRmw {
                    op: AtomicOp::Add,
                    ptr: ints,
                    value: u,
                    mask: None,
                    sem: Default::default(),
                    scope: Default::default(),
                },
                i32t,
            );
        }
    }
    k.finish()
}

#[test]
fn undefined_masks_conditions_bounds_prints_and_atomics_are_reported() {
    for (use_, op, what) in [
        (ScalarUse::Mask, "load", "mask"),
        (ScalarUse::Assert, "device_assert", "asserted condition"),
        (ScalarUse::Print, "device_print", "printed value"),
        (ScalarUse::ForBound, "for", "loop bound"),
        (ScalarUse::WhileCondition, "condition", "loop condition"),
        (ScalarUse::Atomic, "atomic_rmw", "atomic operand"),
    ] {
        let kernel = scalar_use(use_);
        for n in [0, 1] {
            let mem = HostMemory::new();
            let ints = upload_i32(&mem, &[3]);
            let args = [ArgValue::ptr(ints), ArgValue::i32(n)];
            let run = run_kernel(&kernel, [1, 1, 1], &args, &mem, &opts(1));
            if n == 0 {
                assert_eq!(report(run), (op, 30, 0, what, 2), "{use_:?}");
            } else {
                assert!(run.is_ok(), "{use_:?}: {run:?}");
            }
        }
    }
}

//! Whole-kernel tests: kernels built by hand with `ir::Builder`, run on the
//! interpreter over a grid and compared with CPU references.

use super::*;
use crate::ir::{
    AtomicOp, BinaryOp, Builder, CmpPred, DotPrecision, Elem, KernelOptions, Literal, OpKind,
    ReduceKind, SrcLoc, Type, UnaryOp, ValueId,
};

/// A thin layer over `ir::Builder` for writing test kernels tersely.
struct Kb {
    b: Builder,
}

impl Kb {
    fn new(name: &str) -> Kb {
        Kb {
            b: Builder::new(name, KernelOptions::default()),
        }
    }

    fn line(&mut self, line: u32) {
        self.b.set_loc(SrcLoc { line, col: 0 });
    }

    fn ptr_param(&mut self, name: &str, pointee: ScalarType) -> ValueId {
        self.b.add_param(name, ParamKind::Ptr(pointee))
    }

    fn scalar_param(&mut self, name: &str, ty: ScalarType) -> ValueId {
        self.b.add_param(name, ParamKind::Scalar(ty))
    }

    fn ty(&self, v: ValueId) -> Type {
        self.b.type_of(v).clone()
    }

    fn op(&mut self, kind: OpKind, ty: Type) -> ValueId {
        self.b.push1(kind, ty)
    }

    fn effect(&mut self, kind: OpKind) {
        self.b.push(kind, vec![]);
    }

    fn int(&mut self, v: i64) -> ValueId {
        self.op(
            OpKind::Constant(Literal::Int(v)),
            Type::scalar(ScalarType::I32),
        )
    }

    fn constant(&mut self, lit: Literal, ty: Type) -> ValueId {
        self.op(OpKind::Constant(lit), ty)
    }

    fn pid(&mut self, axis: u8) -> ValueId {
        self.op(OpKind::ProgramId { axis }, Type::scalar(ScalarType::I32))
    }

    fn arange(&mut self, n: usize) -> ValueId {
        let ty = Type::tensor(Elem::Scalar(ScalarType::I32), vec![n]);
        self.op(
            OpKind::Arange {
                start: 0,
                end: n as i64,
            },
            ty,
        )
    }

    fn splat(&mut self, v: ValueId, shape: &[usize]) -> ValueId {
        let ty = self.ty(v).with_shape(shape.to_vec());
        self.op(OpKind::Splat(v), ty)
    }

    fn expand(&mut self, v: ValueId, axis: usize) -> ValueId {
        let mut shape = self.ty(v).shape().to_vec();
        shape.insert(axis, 1);
        let ty = self.ty(v).with_shape(shape);
        self.op(OpKind::ExpandDims { value: v, axis }, ty)
    }

    fn broadcast(&mut self, v: ValueId, shape: &[usize]) -> ValueId {
        let ty = self.ty(v).with_shape(shape.to_vec());
        self.op(OpKind::Broadcast(v), ty)
    }

    fn bin(&mut self, op: BinaryOp, lhs: ValueId, rhs: ValueId) -> ValueId {
        let ty = self.ty(lhs);
        self.op(OpKind::Binary { op, lhs, rhs }, ty)
    }

    fn unary(&mut self, op: UnaryOp, value: ValueId) -> ValueId {
        let ty = self.ty(value);
        self.op(OpKind::Unary { op, value }, ty)
    }

    fn cmp(&mut self, pred: CmpPred, lhs: ValueId, rhs: ValueId) -> ValueId {
        let ty = self.ty(lhs).with_elem(Elem::Scalar(ScalarType::Bool));
        self.op(OpKind::Compare { pred, lhs, rhs }, ty)
    }

    fn reduce(&mut self, value: ValueId, axis: usize, kind: ReduceKind) -> ValueId {
        let ty = self.ty(value);
        let mut shape = ty.shape().to_vec();
        shape.remove(axis);
        let elem = match kind {
            ReduceKind::Argmax | ReduceKind::Argmin => Elem::Scalar(ScalarType::I32),
            _ => ty.elem(),
        };
        self.op(
            OpKind::Reduce { value, axis, kind },
            Type::tensor(elem, shape),
        )
    }

    fn add_ptr(&mut self, ptr: ValueId, offset: ValueId) -> ValueId {
        let shape = self.ty(offset).shape().to_vec();
        let ty = self.ty(ptr).with_shape(shape);
        self.op(OpKind::AddPtr { ptr, offset }, ty)
    }

    fn load(&mut self, ptr: ValueId, mask: Option<ValueId>, other: Option<ValueId>) -> ValueId {
        let pty = self.ty(ptr);
        let ty = Type::tensor(
            Elem::Scalar(pty.elem().pointee().unwrap_or(ScalarType::F32)),
            pty.shape().to_vec(),
        );
        self.op(
            OpKind::Load {
                ptr,
                mask,
                other,
                cache: Default::default(),
                eviction: Default::default(),
                volatile: false,
            },
            ty,
        )
    }

    fn store(&mut self, ptr: ValueId, value: ValueId, mask: Option<ValueId>) {
        self.effect(OpKind::Store {
            ptr,
            value,
            mask,
            cache: Default::default(),
            eviction: Default::default(),
        });
    }

    /// `pid * block + arange(block)`.
    fn block_offsets(&mut self, block: usize) -> ValueId {
        let pid = self.pid(0);
        let width = self.int(block as i64);
        let base = self.bin(BinaryOp::Mul, pid, width);
        let base = self.splat(base, &[block]);
        let lanes = self.arange(block);
        self.bin(BinaryOp::Add, base, lanes)
    }

    /// `base[offsets]` as a tile of pointers.
    fn ptrs(&mut self, base: ValueId, offsets: ValueId) -> ValueId {
        let shape = self.ty(offsets).shape().to_vec();
        let splat = self.splat(base, &shape);
        self.add_ptr(splat, offsets)
    }

    fn finish(self) -> ir::Kernel {
        self.b.finish()
    }
}

pub(super) fn upload_f32(mem: &HostMemory, data: &[f32]) -> BufferId {
    let id = mem.alloc(data.len() * 4);
    let bytes: Vec<u8> = data.iter().flat_map(|x| x.to_le_bytes()).collect();
    mem.write(id, 0, &bytes).expect("fresh buffer");
    id
}

fn upload_f16(mem: &HostMemory, data: &[f32]) -> BufferId {
    let id = mem.alloc(data.len() * 2);
    let bytes: Vec<u8> = data
        .iter()
        .flat_map(|&x| half::f16::from_f32(x).to_bits().to_le_bytes())
        .collect();
    mem.write(id, 0, &bytes).expect("fresh buffer");
    id
}

pub(super) fn upload_i32(mem: &HostMemory, data: &[i32]) -> BufferId {
    let id = mem.alloc(data.len() * 4);
    let bytes: Vec<u8> = data.iter().flat_map(|x| x.to_le_bytes()).collect();
    mem.write(id, 0, &bytes).expect("fresh buffer");
    id
}

fn download_bytes(mem: &HostMemory, id: BufferId) -> Vec<u8> {
    let mut out = vec![0u8; mem.len(id).expect("live")];
    mem.read(id, 0, &mut out).expect("live");
    out
}

pub(super) fn download_f32(mem: &HostMemory, id: BufferId) -> Vec<f32> {
    download_bytes(mem, id)
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

pub(super) fn download_i32(mem: &HostMemory, id: BufferId) -> Vec<i32> {
    download_bytes(mem, id)
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Deterministic pseudo-random values in [-1, 1).
pub(super) fn noise(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn opts(threads: usize) -> InterpOptions {
    InterpOptions::new(threads, true)
}

const ADD_BLOCK: usize = 128;

/// `out[i] = x[i] + y[i]` for `i < n`, BLOCK elements a program; the load of x is on line 5.
pub(super) fn vector_add() -> ir::Kernel {
    let mut k = Kb::new("vector_add");
    let x = k.ptr_param("x", ScalarType::F32);
    let y = k.ptr_param("y", ScalarType::F32);
    let out = k.ptr_param("out", ScalarType::F32);
    let n = k.scalar_param("n", ScalarType::I32);
    let offs = k.block_offsets(ADD_BLOCK);
    let limit = k.splat(n, &[ADD_BLOCK]);
    let mask = k.cmp(CmpPred::Lt, offs, limit);
    let xp = k.ptrs(x, offs);
    let yp = k.ptrs(y, offs);
    k.line(5);
    let xv = k.load(xp, Some(mask), None);
    k.line(6);
    let yv = k.load(yp, Some(mask), None);
    let sum = k.bin(BinaryOp::Add, xv, yv);
    let op = k.ptrs(out, offs);
    k.line(8);
    k.store(op, sum, Some(mask));
    k.finish()
}

pub(super) fn add_args(x: BufferId, y: BufferId, out: BufferId, n: usize) -> [ArgValue; 4] {
    [
        ArgValue::ptr(x),
        ArgValue::ptr(y),
        ArgValue::ptr(out),
        ArgValue::i32(n as i32),
    ]
}

fn grid_for(n: usize, block: usize) -> [u32; 3] {
    [n.div_ceil(block) as u32, 1, 1]
}

#[test]
fn vector_add_with_mask_matches_reference_and_leaves_the_tail() {
    let n = 1000;
    let mem = HostMemory::new();
    let xs = noise(n, 1);
    let ys = noise(n, 2);
    let x = upload_f32(&mem, &xs);
    let y = upload_f32(&mem, &ys);
    // One spare element past n: the mask must keep it untouched.
    let out = mem.alloc((n + 1) * 4);
    mem.fill(out, 0xcd).expect("live");
    run_kernel(
        &vector_add(),
        grid_for(n, ADD_BLOCK),
        &add_args(x, y, out, n),
        &mem,
        &opts(2),
    )
    .expect("kernel runs");
    let got = download_f32(&mem, out);
    for i in 0..n {
        assert_eq!(got[i], xs[i] + ys[i], "element {i}");
    }
    assert_eq!(got[n].to_bits(), 0xcdcd_cdcd);
}

#[test]
fn the_schedule_option_leaves_single_task_kernels_unchanged() {
    let n = 700;
    let mem = HostMemory::new();
    let x = upload_f32(&mem, &noise(n, 3));
    let y = upload_f32(&mem, &noise(n, 4));
    let run = |schedule: Schedule, threads| {
        let out = mem.alloc(n * 4);
        let opts = InterpOptions::new(threads, true).with_schedule(schedule);
        run_kernel(
            &vector_add(),
            grid_for(n, ADD_BLOCK),
            &add_args(x, y, out, n),
            &mem,
            &opts,
        )
        .expect("kernel runs");
        download_bytes(&mem, out)
    };
    let reference = run(Schedule::RoundRobin, 1);
    for (seed, threads) in [(0, 1), (7, 3), (u64::MAX, 2)] {
        assert_eq!(
            run(Schedule::Random { seed }, threads),
            reference,
            "seed {seed}"
        );
    }
    assert_eq!(InterpOptions::default().schedule, Schedule::RoundRobin);
}

#[test]
fn out_of_bounds_is_reported_with_its_site() {
    let n = 300;
    let mem = HostMemory::new();
    // x is one element short.
    let x = upload_f32(&mem, &noise(n - 1, 1));
    let y = upload_f32(&mem, &noise(n, 2));
    let out = mem.alloc(n * 4);
    let kernel = vector_add();
    let err = run_kernel(
        &kernel,
        grid_for(n, ADD_BLOCK),
        &add_args(x, y, out, n),
        &mem,
        &opts(4),
    );
    let Err(err @ InterpError::OutOfBounds { .. }) = err else {
        panic!("expected an out-of-bounds error, got {err:?}");
    };
    let InterpError::OutOfBounds {
        at,
        element,
        byte_offset,
        buffer,
        buffer_len,
    } = &err
    else {
        unreachable!()
    };
    assert_eq!(at.program, [2, 0, 0]);
    assert_eq!((at.op, at.line), ("load", 5));
    assert_eq!(
        (*element, *byte_offset, *buffer, *buffer_len),
        (299 - 256, 1196, x, 1196)
    );
    let text = err.to_string();
    for part in [
        "vector_add",
        "(2, 0, 0)",
        "`load`",
        "line 5",
        "element 43",
        "1196",
    ] {
        assert!(text.contains(part), "`{text}` lacks `{part}`");
    }
    // The same error whatever the thread count.
    let again = run_kernel(
        &kernel,
        grid_for(n, ADD_BLOCK),
        &add_args(x, y, out, n),
        &mem,
        &opts(1),
    );
    assert_eq!(again.map_err(|e| e.to_string()), Err(text));
}

#[test]
fn uninitialized_reads_are_reported_when_asked() {
    let n = 200;
    let mem = HostMemory::new();
    let x = upload_f32(&mem, &noise(n, 1));
    let y = mem.alloc(n * 4);
    let out = mem.alloc(n * 4);
    let kernel = vector_add();
    let args = add_args(x, y, out, n);
    let err = run_kernel(&kernel, grid_for(n, ADD_BLOCK), &args, &mem, &opts(2));
    match err {
        Err(InterpError::UninitRead {
            at,
            element,
            byte_offset,
            buffer,
            ..
        }) => {
            assert_eq!((at.program, at.op, at.line), ([0, 0, 0], "load", 6));
            assert_eq!((element, byte_offset, buffer), (0, 0, y));
        }
        other => panic!("expected an uninit read, got {other:?}"),
    }
    let unchecked = InterpOptions::new(2, false);
    assert!(run_kernel(&kernel, grid_for(n, ADD_BLOCK), &args, &mem, &unchecked).is_ok());
}

#[test]
fn launches_are_validated() {
    let mem = HostMemory::new();
    let x = mem.alloc(4);
    let kernel = vector_add();
    let grid = [1, 1, 1];
    let err = run_kernel(&kernel, grid, &[ArgValue::ptr(x)], &mem, &opts(1));
    assert!(matches!(
        err,
        Err(InterpError::ArgCount {
            expected: 4,
            got: 1,
            ..
        })
    ));
    let mut args = add_args(x, x, x, 1);
    args[3] = ArgValue::f32(1.0);
    let err = run_kernel(&kernel, grid, &args, &mem, &opts(1));
    assert!(
        matches!(err, Err(InterpError::ArgMismatch { index: 3, .. })),
        "{err:?}"
    );
    args[3] = ArgValue::ptr(x);
    assert!(run_kernel(&kernel, grid, &args, &mem, &opts(1)).is_err());
    let err = run_kernel(&kernel, [1, 0, 1], &add_args(x, x, x, 1), &mem, &opts(1));
    assert!(matches!(err, Err(InterpError::EmptyGrid { .. })));
    mem.free(x);
    let err = run_kernel(&kernel, grid, &add_args(x, x, x, 1), &mem, &opts(1));
    assert!(
        matches!(err, Err(InterpError::FreedBuffer { element: 0, .. })),
        "{err:?}"
    );
}

/// `device_assert(x >= 0)` on BLOCK = 16 elements a program, on line 3.
fn assert_non_negative() -> ir::Kernel {
    let mut k = Kb::new("check_sign");
    let x = k.ptr_param("x", ScalarType::I32);
    let offs = k.block_offsets(16);
    let p = k.ptrs(x, offs);
    let v = k.load(p, None, None);
    let zero = k.int(0);
    let zeros = k.splat(zero, &[16]);
    let ok = k.cmp(CmpPred::Ge, v, zeros);
    k.line(3);
    k.effect(OpKind::Assert {
        cond: ok,
        message: "x must be non-negative".into(),
    });
    k.finish()
}

#[test]
fn failed_assert_names_the_first_failing_element() {
    let mem = HostMemory::new();
    let mut data = vec![1i32; 64];
    data[16 + 5] = -1;
    data[48 + 2] = -3;
    let x = upload_i32(&mem, &data);
    for threads in [1, 4] {
        let err = run_kernel(
            &assert_non_negative(),
            [4, 1, 1],
            &[ArgValue::ptr(x)],
            &mem,
            &opts(threads),
        );
        match err {
            Err(
                ref e @ InterpError::AssertFailed {
                    ref at,
                    ref message,
                    element,
                },
            ) => {
                assert_eq!((at.program, at.line, element), ([1, 0, 0], 3, 5));
                assert_eq!(message, "x must be non-negative");
                assert!(e.to_string().contains("device_assert"));
            }
            other => panic!("expected an assert failure, got {other:?}"),
        }
    }
}

/// Every program adds 1 to `counter[0]` and records the old value in `olds[pid]`.
fn count_programs() -> ir::Kernel {
    let mut k = Kb::new("count");
    let counter = k.ptr_param("counter", ScalarType::I32);
    let olds = k.ptr_param("olds", ScalarType::I32);
    let one = k.int(1);
    let old = k.op(
        OpKind::AtomicRmw {
            op: AtomicOp::Add,
            ptr: counter,
            value: one,
            mask: None,
            sem: Default::default(),
            scope: Default::default(),
        },
        Type::scalar(ScalarType::I32),
    );
    let pid = k.pid(0);
    let at = k.add_ptr(olds, pid);
    k.store(at, old, None);
    k.finish()
}

#[test]
fn atomic_add_from_many_programs_counts_each_once() {
    let programs = 1000;
    for threads in [1, 4] {
        let mem = HostMemory::new();
        let counter = upload_i32(&mem, &[0]);
        let olds = mem.alloc(programs * 4);
        let args = [ArgValue::ptr(counter), ArgValue::ptr(olds)];
        run_kernel(
            &count_programs(),
            [programs as u32, 1, 1],
            &args,
            &mem,
            &opts(threads),
        )
        .expect("kernel runs");
        assert_eq!(download_i32(&mem, counter), vec![programs as i32]);
        // The old values are a permutation of 0..programs.
        let mut seen = download_i32(&mem, olds);
        seen.sort_unstable();
        assert_eq!(seen, (0..programs as i32).collect::<Vec<_>>());
    }
}

/// out[0] = Σ_{i<10} i (for), out[1] = first power of 3 >= 100 (while),
/// out[2 + pid] = pid == 0 ? 7 : 9 (if).
fn control_flow() -> ir::Kernel {
    let i32t = Type::scalar(ScalarType::I32);
    let mut k = Kb::new("control");
    let out = k.ptr_param("out", ScalarType::I32);
    let lo = k.int(0);
    let hi = k.int(10);
    let step = k.int(1);
    let args = k.b.begin_block(vec![i32t.clone(), i32t.clone()]);
    let next = k.bin(BinaryOp::Add, args[1], args[0]);
    k.effect(OpKind::Yield(vec![next]));
    let body = k.b.end_block();
    let sum = k.op(
        OpKind::For {
            lower: lo,
            upper: hi,
            step,
            inits: vec![lo],
            body,
        },
        i32t.clone(),
    );
    k.store(out, sum, None);

    let one = k.int(1);
    let cargs = k.b.begin_block(vec![i32t.clone()]);
    let limit = k.int(100);
    let go = k.cmp(CmpPred::Lt, cargs[0], limit);
    k.effect(OpKind::Condition(go));
    let cond = k.b.end_block();
    let bargs = k.b.begin_block(vec![i32t.clone()]);
    let three = k.int(3);
    let tripled = k.bin(BinaryOp::Mul, bargs[0], three);
    k.effect(OpKind::Yield(vec![tripled]));
    let body = k.b.end_block();
    let power = k.op(
        OpKind::While {
            inits: vec![one],
            cond,
            body,
        },
        i32t.clone(),
    );
    let at1 = k.add_ptr(out, one);
    k.store(at1, power, None);

    let pid = k.pid(0);
    let is_first = k.cmp(CmpPred::Eq, pid, lo);
    k.b.begin_block(vec![]);
    let seven = k.int(7);
    k.effect(OpKind::Yield(vec![seven]));
    let then_block = k.b.end_block();
    k.b.begin_block(vec![]);
    let nine = k.int(9);
    k.effect(OpKind::Yield(vec![nine]));
    let else_block = k.b.end_block();
    let chosen = k.op(
        OpKind::If {
            cond: is_first,
            then_block,
            else_block,
        },
        i32t,
    );
    let two = k.int(2);
    let slot = k.bin(BinaryOp::Add, pid, two);
    let at = k.add_ptr(out, slot);
    k.store(at, chosen, None);
    k.finish()
}

#[test]
fn for_while_and_if_compute_their_results() {
    let mem = HostMemory::new();
    let out = mem.alloc(4 * 4);
    run_kernel(
        &control_flow(),
        [2, 1, 1],
        &[ArgValue::ptr(out)],
        &mem,
        &opts(2),
    )
    .expect("runs");
    assert_eq!(download_i32(&mem, out), vec![45, 243, 7, 9]);
}

#[test]
fn loops_with_a_non_positive_step_fail() {
    let i32t = Type::scalar(ScalarType::I32);
    let mut k = Kb::new("bad_step");
    let lo = k.int(0);
    let step = k.int(0);
    k.b.begin_block(vec![i32t]);
    k.effect(OpKind::Yield(vec![]));
    let body = k.b.end_block();
    k.line(4);
    k.b.push(
        OpKind::For {
            lower: lo,
            upper: lo,
            step,
            inits: vec![],
            body,
        },
        vec![],
    );
    let err = run_kernel(&k.finish(), [1, 1, 1], &[], &HostMemory::new(), &opts(1));
    match err {
        Err(InterpError::NonPositiveStep { at, step: 0 }) => {
            assert_eq!((at.op, at.line), ("for", 4))
        }
        other => panic!("expected a step error, got {other:?}"),
    }
}

#[test]
fn integer_division_by_zero_is_an_error() {
    let mut k = Kb::new("div0");
    let x = k.ptr_param("x", ScalarType::I32);
    let v = k.load(x, None, None);
    let zero = k.int(0);
    k.line(2);
    let q = k.bin(BinaryOp::Div, v, zero);
    k.store(x, q, None);
    let mem = HostMemory::new();
    let x = upload_i32(&mem, &[5]);
    let err = run_kernel(&k.finish(), [1, 1, 1], &[ArgValue::ptr(x)], &mem, &opts(1));
    assert!(
        matches!(&err, Err(InterpError::DivisionByZero { at, element: 0 }) if at.op == "div" && at.line == 2),
        "{err:?}"
    );
}

/// Row softmax over an `[rows, cols]` f32 matrix, one row a program, BLOCK = cols.
fn softmax(cols: usize) -> ir::Kernel {
    let mut k = Kb::new("softmax");
    let input = k.ptr_param("input", ScalarType::F32);
    let output = k.ptr_param("output", ScalarType::F32);
    let offs = k.block_offsets(cols);
    let ip = k.ptrs(input, offs);
    let x = k.load(ip, None, None);
    let m = k.reduce(x, 0, ReduceKind::Max);
    let ms = k.splat(m, &[cols]);
    let shifted = k.bin(BinaryOp::Sub, x, ms);
    let e = k.unary(UnaryOp::Exp, shifted);
    let s = k.reduce(e, 0, ReduceKind::Sum);
    let ss = k.splat(s, &[cols]);
    let y = k.bin(BinaryOp::Div, e, ss);
    let op = k.ptrs(output, offs);
    k.store(op, y, None);
    k.finish()
}

/// The input, the output, and how long the kernel itself took.
fn run_softmax(
    rows: usize,
    cols: usize,
    threads: usize,
) -> (Vec<f32>, Vec<f32>, std::time::Duration) {
    let mem = HostMemory::new();
    let xs: Vec<f32> = noise(rows * cols, 3).iter().map(|x| x * 10.0).collect();
    let input = upload_f32(&mem, &xs);
    let output = mem.alloc(rows * cols * 4);
    let args = [ArgValue::ptr(input), ArgValue::ptr(output)];
    let start = std::time::Instant::now();
    run_kernel(
        &softmax(cols),
        [rows as u32, 1, 1],
        &args,
        &mem,
        &opts(threads),
    )
    .expect("runs");
    let elapsed = start.elapsed();
    (xs, download_f32(&mem, output), elapsed)
}

#[test]
fn softmax_rows_match_reference_and_do_not_depend_on_threads() {
    let (rows, cols) = (16, 256);
    let (xs, one, _) = run_softmax(rows, cols, 1);
    let (_, four, _) = run_softmax(rows, cols, 4);
    assert_eq!(
        one.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        four.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
    );
    for r in 0..rows {
        let row = &xs[r * cols..(r + 1) * cols];
        let m = row
            .iter()
            .copied()
            .fold(f64::MIN, |a, x| a.max(f64::from(x)));
        let total: f64 = row.iter().map(|&x| (f64::from(x) - m).exp()).sum();
        for c in 0..cols {
            let want = (f64::from(row[c]) - m).exp() / total;
            let got = f64::from(one[r * cols + c]);
            assert!(
                (got - want).abs() <= 1e-5 * want + 1e-12,
                "[{r}, {c}]: {got} vs {want}"
            );
        }
    }
}

/// `C = A @ B` for row-major `[m, kk] x [kk, n]` with tiles `[bm, bk] x [bk, bn]`; C is f32.
fn matmul(
    input: ScalarType,
    (n, kk): (usize, usize),
    (bm, bn, bk): (usize, usize, usize),
    precision: DotPrecision,
) -> ir::Kernel {
    let mut k = Kb::new("matmul");
    let a = k.ptr_param("a", input);
    let b = k.ptr_param("b", input);
    let c = k.ptr_param("c", ScalarType::F32);
    let pid_m = k.pid(0);
    let pid_n = k.pid(1);
    let rows = {
        let w = k.int(bm as i64);
        let base = k.bin(BinaryOp::Mul, pid_m, w);
        let base = k.splat(base, &[bm]);
        let r = k.arange(bm);
        k.bin(BinaryOp::Add, base, r)
    };
    let cols = {
        let w = k.int(bn as i64);
        let base = k.bin(BinaryOp::Mul, pid_n, w);
        let base = k.splat(base, &[bn]);
        let r = k.arange(bn);
        k.bin(BinaryOp::Add, base, r)
    };
    let ks = k.arange(bk);
    // offsets[i][j] = row[i] * stride + col[j]
    let grid2 = |k: &mut Kb, row: ValueId, col: ValueId, stride: usize, shape: [usize; 2]| {
        let r = k.expand(row, 1);
        let s = k.int(stride as i64);
        let s = k.splat(s, &[shape[0], 1]);
        let r = k.bin(BinaryOp::Mul, r, s);
        let r = k.broadcast(r, &shape);
        let c = k.expand(col, 0);
        let c = k.broadcast(c, &shape);
        k.bin(BinaryOp::Add, r, c)
    };
    let a_offs = grid2(&mut k, rows, ks, kk, [bm, bk]);
    let b_offs = grid2(&mut k, ks, cols, n, [bk, bn]);
    let a_ptrs = k.ptrs(a, a_offs);
    let b_ptrs = k.ptrs(b, b_offs);
    let acc_ty = Type::tensor(Elem::Scalar(ScalarType::F32), vec![bm, bn]);
    let acc0 = k.constant(Literal::Float(0.0), acc_ty.clone());
    let lo = k.int(0);
    let hi = k.int(kk as i64);
    let step = k.int(bk as i64);
    let a_ty = k.ty(a_ptrs);
    let b_ty = k.ty(b_ptrs);
    let args = k.b.begin_block(vec![
        Type::scalar(ScalarType::I32),
        acc_ty.clone(),
        a_ty,
        b_ty,
    ]);
    let av = k.load(args[2], None, None);
    let bv = k.load(args[3], None, None);
    let acc = k.op(
        OpKind::Dot {
            a: av,
            b: bv,
            acc: args[1],
            precision,
        },
        acc_ty.clone(),
    );
    let a_step = k.int(bk as i64);
    let a_step = k.splat(a_step, &[bm, bk]);
    let a_next = k.add_ptr(args[2], a_step);
    let b_step = k.int((bk * n) as i64);
    let b_step = k.splat(b_step, &[bk, bn]);
    let b_next = k.add_ptr(args[3], b_step);
    k.effect(OpKind::Yield(vec![acc, a_next, b_next]));
    let body = k.b.end_block();
    let a_ty = k.ty(a_ptrs);
    let b_ty = k.ty(b_ptrs);
    let results = k.b.push(
        OpKind::For {
            lower: lo,
            upper: hi,
            step,
            inits: vec![acc0, a_ptrs, b_ptrs],
            body,
        },
        vec![acc_ty, a_ty, b_ty],
    );
    let c_offs = grid2(&mut k, rows, cols, n, [bm, bn]);
    let c_ptrs = k.ptrs(c, c_offs);
    k.store(c_ptrs, results[0], None);
    k.finish()
}

/// Runs the matmul and returns the largest error relative to Σ|a||b| of its row and column.
fn matmul_error(
    input: ScalarType,
    size: usize,
    tiles: (usize, usize, usize),
    precision: DotPrecision,
    threads: usize,
) -> f64 {
    let mem = HostMemory::new();
    let a_vals = noise(size * size, 11);
    let b_vals = noise(size * size, 12);
    let (a, b, a_ref, b_ref): (BufferId, BufferId, Vec<f32>, Vec<f32>) = if input == ScalarType::F16
    {
        let round = |v: &[f32]| {
            v.iter()
                .map(|&x| half::f16::from_f32(x).to_f32())
                .collect::<Vec<_>>()
        };
        (
            upload_f16(&mem, &a_vals),
            upload_f16(&mem, &b_vals),
            round(&a_vals),
            round(&b_vals),
        )
    } else {
        (
            upload_f32(&mem, &a_vals),
            upload_f32(&mem, &b_vals),
            a_vals.clone(),
            b_vals.clone(),
        )
    };
    let c = mem.alloc(size * size * 4);
    let kernel = matmul(input, (size, size), tiles, precision);
    let grid = [(size / tiles.0) as u32, (size / tiles.1) as u32, 1];
    let start = std::time::Instant::now();
    run_kernel(
        &kernel,
        grid,
        &[ArgValue::ptr(a), ArgValue::ptr(b), ArgValue::ptr(c)],
        &mem,
        &opts(threads),
    )
    .expect("matmul runs");
    let elapsed = start.elapsed();
    if size >= 512 {
        println!("matmul {size}^3 {input} on {threads} threads: {elapsed:?}");
    }
    let got = download_f32(&mem, c);
    let mut worst = 0.0f64;
    for i in 0..size {
        for j in 0..size {
            let (mut exact, mut scale) = (0.0f64, 0.0f64);
            for p in 0..size {
                let prod = f64::from(a_ref[i * size + p]) * f64::from(b_ref[p * size + j]);
                exact += prod;
                scale += prod.abs();
            }
            worst = worst.max((f64::from(got[i * size + j]) - exact).abs() / scale);
        }
    }
    worst
}

#[test]
fn dot_f16_matches_an_f64_reference() {
    // f16 products are exact in f32: only the k-order f32 sum rounds.
    let err = matmul_error(ScalarType::F16, 128, (64, 64, 32), DotPrecision::Tf32, 2);
    assert!(err < 128.0 * 2f64.powi(-24), "relative error {err}");
}

#[test]
fn dot_f32_rounds_to_tf32_unless_ieee() {
    let tf32 = matmul_error(ScalarType::F32, 64, (32, 32, 16), DotPrecision::Tf32, 2);
    let ieee = matmul_error(ScalarType::F32, 64, (32, 32, 16), DotPrecision::Ieee, 2);
    // tf32 keeps 11 significant bits: errors near 2^-11 relative, far above f32's.
    assert!(tf32 < 2e-3 && tf32 > 1e-5, "tf32 relative error {tf32}");
    assert!(ieee < 64.0 * 2f64.powi(-24), "ieee relative error {ieee}");
}

/// Loads an `[rows, cols]` i32 tile and stores its argmax and sum along `axis`.
fn reduce_tile(rows: usize, cols: usize, axis: usize) -> ir::Kernel {
    let mut k = Kb::new("reduce_tile");
    let x = k.ptr_param("x", ScalarType::I32);
    let out = k.ptr_param("out", ScalarType::I32);
    let r = k.arange(rows);
    let c = k.arange(cols);
    let r = k.expand(r, 1);
    let w = k.int(cols as i64);
    let w = k.splat(w, &[rows, 1]);
    let r = k.bin(BinaryOp::Mul, r, w);
    let r = k.broadcast(r, &[rows, cols]);
    let c = k.expand(c, 0);
    let c = k.broadcast(c, &[rows, cols]);
    let offs = k.bin(BinaryOp::Add, r, c);
    let p = k.ptrs(x, offs);
    let tile = k.load(p, None, None);
    let arg = k.reduce(tile, axis, ReduceKind::Argmax);
    let sum = k.reduce(tile, axis, ReduceKind::Sum);
    let len = if axis == 0 { cols } else { rows };
    let lanes = k.arange(len);
    let op = k.ptrs(out, lanes);
    k.store(op, arg, None);
    let shift = k.int(len as i64);
    let shift = k.splat(shift, &[len]);
    let lanes2 = k.bin(BinaryOp::Add, lanes, shift);
    let op2 = k.ptrs(out, lanes2);
    k.store(op2, sum, None);
    k.finish()
}

#[test]
fn reductions_of_a_loaded_tile_along_both_axes() {
    let data = [3, 9, 9, 1, 7, 1, 7, 8]; // [[3, 9, 9, 1], [7, 1, 7, 8]]
    for (axis, want) in [
        (0usize, vec![1, 0, 0, 1, 10, 10, 16, 9]),
        (1, vec![1, 3, 22, 23]),
    ] {
        let mem = HostMemory::new();
        let x = upload_i32(&mem, &data);
        let out = mem.alloc(want.len() * 4);
        run_kernel(
            &reduce_tile(2, 4, axis),
            [1, 1, 1],
            &[ArgValue::ptr(x), ArgValue::ptr(out)],
            &mem,
            &opts(1),
        )
        .expect("runs");
        assert_eq!(download_i32(&mem, out), want, "axis {axis}");
    }
}

#[test]
fn device_print_runs_and_results_do_not_depend_on_thread_count() {
    let n = 5000;
    let run = |threads| {
        let mem = HostMemory::new();
        let x = upload_f32(&mem, &noise(n, 5));
        let y = upload_f32(&mem, &noise(n, 6));
        let out = mem.alloc(n * 4);
        mem.fill(out, 0).expect("live");
        run_kernel(
            &vector_add(),
            grid_for(n, ADD_BLOCK),
            &add_args(x, y, out, n),
            &mem,
            &opts(threads),
        )
        .expect("runs");
        download_bytes(&mem, out)
    };
    assert_eq!(run(1), run(4));
    let mut k = Kb::new("hello");
    let pid = k.pid(0);
    k.effect(OpKind::Print {
        prefix: "pid is".into(),
        values: vec![pid],
    });
    assert!(run_kernel(&k.finish(), [2, 1, 1], &[], &HostMemory::new(), &opts(1)).is_ok());
}

#[test]
#[ignore = "performance measurement; run with --release -- --ignored --nocapture"]
fn perf_matmul_512_f16_and_softmax_4096() {
    let err = matmul_error(ScalarType::F16, 512, (64, 64, 32), DotPrecision::Tf32, 2);
    assert!(err < 512.0 * 2f64.powi(-24), "relative error {err}");
    let (_, out, elapsed) = run_softmax(4096, 4096, 2);
    println!("softmax 4096x4096 f32 on 2 threads: {elapsed:?}");
    let row_sum: f32 = out[..4096].iter().sum();
    assert!((row_sum - 1.0).abs() < 1e-4);
}

#[test]
fn cumsum_defines_prefix_and_total() {
    for (reverse, want) in [(false, vec![0, 1, 3, 6, 10]), (true, vec![9, 7, 4, 0, 10])] {
        let mut k = Kb::new("scan");
        let x = k.ptr_param("x", ScalarType::I32);
        let out = k.ptr_param("out", ScalarType::I32);
        let lanes = k.arange(4);
        let p = k.ptrs(x, lanes);
        let v = k.load(p, None, None);
        let ty = k.ty(v);
        let results = k.b.push(
            OpKind::Scan {
                value: v,
                axis: 0,
                reverse,
                combine: BinaryOp::Add,
            },
            vec![ty, Type::scalar(ScalarType::I32)],
        );
        let op = k.ptrs(out, lanes);
        k.store(op, results[0], None);
        let four = k.int(4);
        let last = k.add_ptr(out, four);
        k.store(last, results[1], None);
        let mem = HostMemory::new();
        let x = upload_i32(&mem, &[1, 2, 3, 4]);
        let out = mem.alloc(5 * 4);
        let args = [ArgValue::ptr(x), ArgValue::ptr(out)];
        run_kernel(&k.finish(), [1, 1, 1], &args, &mem, &opts(1)).expect("runs");
        assert_eq!(download_i32(&mem, out), want, "reverse = {reverse}");
    }
}

#[test]
fn casts_between_every_pair_of_types_keep_small_integers() {
    // 1 and 0 are exact in every type; each pair goes through the executor's cast.
    for from in ScalarType::ALL {
        for to in ScalarType::ALL {
            for (value, want_true) in [(1i64, true), (0, false)] {
                let mut k = Kb::new("cast");
                let out = k.ptr_param("out", to);
                let v = k.constant(Literal::Int(value), Type::scalar(from));
                let c = k.op(OpKind::Cast(v), Type::scalar(to));
                k.store(out, c, None);
                let mem = HostMemory::new();
                let buf = mem.alloc(to.size_bytes());
                run_kernel(
                    &k.finish(),
                    [1, 1, 1],
                    &[ArgValue::ptr(buf)],
                    &mem,
                    &opts(1),
                )
                .expect("cast runs");
                let bytes = download_bytes(&mem, buf);
                let bits = bytes
                    .iter()
                    .rev()
                    .fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
                let want = if want_true { 1.0 } else { 0.0 };
                let got = if to == ScalarType::F64 {
                    f64::from_bits(bits) == want
                } else if to.is_float() {
                    crate::numeric::float_from_bits(to, bits) == want as f32
                } else {
                    bits == u64::from(want_true)
                };
                assert!(got, "cast {value} from {from} to {to} gave bits {bits:#x}");
            }
        }
    }
}

#[test]
fn malformed_ir_is_an_error_not_a_panic() {
    let mut k = Kb::new("broken");
    let t = k.constant(Literal::Bool(true), Type::scalar(ScalarType::Bool));
    k.b.begin_block(vec![]);
    let then_block = k.b.end_block();
    k.b.begin_block(vec![]);
    k.effect(OpKind::Yield(vec![]));
    let else_block = k.b.end_block();
    k.line(9);
    k.b.push(
        OpKind::If {
            cond: t,
            then_block,
            else_block,
        },
        vec![],
    );
    let err = run_kernel(&k.finish(), [1, 1, 1], &[], &HostMemory::new(), &opts(1));
    assert!(
        matches!(&err, Err(InterpError::MalformedIr { at, .. }) if at.op == "if" && at.line == 9),
        "{err:?}"
    );

    let mut k = Kb::new("undefined");
    let ghost = k.b.new_value(Type::scalar(ScalarType::I32));
    k.unary(UnaryOp::Neg, ghost);
    let err = run_kernel(&k.finish(), [1, 1, 1], &[], &HostMemory::new(), &opts(1));
    assert!(
        matches!(&err, Err(InterpError::MalformedIr { detail, .. }) if detail.contains("before it is defined")),
        "{err:?}"
    );
}

#[test]
fn scalar_arguments_reach_the_kernel_in_their_types() {
    // out[0] = flag ? x * alpha : -1 with alpha an f16 scalar, flag a bool, x an i64.
    let mut k = Kb::new("scalars");
    let out = k.ptr_param("out", ScalarType::F32);
    let alpha = k.scalar_param("alpha", ScalarType::F16);
    let flag = k.scalar_param("flag", ScalarType::Bool);
    let x = k.scalar_param("x", ScalarType::I64);
    let xf = k.op(OpKind::Cast(x), Type::scalar(ScalarType::F32));
    let af = k.op(OpKind::Cast(alpha), Type::scalar(ScalarType::F32));
    let product = k.bin(BinaryOp::Mul, xf, af);
    let fallback = k.constant(Literal::Float(-1.0), Type::scalar(ScalarType::F32));
    let chosen = k.op(
        OpKind::Select {
            cond: flag,
            on_true: product,
            on_false: fallback,
        },
        Type::scalar(ScalarType::F32),
    );
    k.store(out, chosen, None);
    let kernel = k.finish();
    let half_bits = u64::from(half::f16::from_f32(1.5).to_bits());
    for (flag, want) in [(true, -4.5f32), (false, -1.0)] {
        let mem = HostMemory::new();
        let buf = mem.alloc(4);
        let args = [
            ArgValue::ptr(buf),
            ArgValue::Scalar(ScalarType::F16, half_bits),
            ArgValue::bool(flag),
            ArgValue::i64(-3),
        ];
        run_kernel(&kernel, [1, 1, 1], &args, &mem, &opts(1)).expect("runs");
        assert_eq!(download_f32(&mem, buf), vec![want]);
    }
}

#[test]
fn nested_loops_carry_values_through_both_levels() {
    // out[0] = Σ_{i<3} Σ_{j<4} (i * j, or 100 when i == j == 2)
    let i32t = Type::scalar(ScalarType::I32);
    let mut k = Kb::new("nested");
    let out = k.ptr_param("out", ScalarType::I32);
    let zero = k.int(0);
    let three = k.int(3);
    let four = k.int(4);
    let one = k.int(1);
    let outer = k.b.begin_block(vec![i32t.clone(), i32t.clone()]);
    let inner = k.b.begin_block(vec![i32t.clone(), i32t.clone()]);
    let prod = k.bin(BinaryOp::Mul, outer[0], inner[0]);
    let both = k.bin(BinaryOp::Add, outer[0], inner[0]);
    let sum_four = k.int(4);
    let is_corner = k.cmp(CmpPred::Eq, both, sum_four);
    let diagonal = k.cmp(CmpPred::Eq, outer[0], inner[0]);
    let pick = k.bin(BinaryOp::And, is_corner, diagonal);
    k.b.begin_block(vec![]);
    let hundred = k.int(100);
    k.effect(OpKind::Yield(vec![hundred]));
    let then_block = k.b.end_block();
    k.b.begin_block(vec![]);
    k.effect(OpKind::Yield(vec![prod]));
    let else_block = k.b.end_block();
    let term = k.op(
        OpKind::If {
            cond: pick,
            then_block,
            else_block,
        },
        i32t.clone(),
    );
    let next = k.bin(BinaryOp::Add, inner[1], term);
    k.effect(OpKind::Yield(vec![next]));
    let inner_body = k.b.end_block();
    let row = k.op(
        OpKind::For {
            lower: zero,
            upper: four,
            step: one,
            inits: vec![outer[1]],
            body: inner_body,
        },
        i32t.clone(),
    );
    k.effect(OpKind::Yield(vec![row]));
    let outer_body = k.b.end_block();
    let total = k.op(
        OpKind::For {
            lower: zero,
            upper: three,
            step: one,
            inits: vec![zero],
            body: outer_body,
        },
        i32t,
    );
    k.store(out, total, None);
    let mem = HostMemory::new();
    let buf = mem.alloc(4);
    run_kernel(
        &k.finish(),
        [1, 1, 1],
        &[ArgValue::ptr(buf)],
        &mem,
        &opts(1),
    )
    .expect("runs");
    // 18 with the (2, 2) term 4 replaced by 100.
    assert_eq!(download_i32(&mem, buf), vec![18 - 4 + 100]);
}

// A child module so the undefined-lane tests share the kernel builder above.
#[path = "undef_tests.rs"]
mod undef_tests;

/// A cluster of two where only rank 0 reaches `cluster_barrier` (line 5):
/// the checker rejects this in the frontend; built by hand, the interpreter
/// must report the deadlock instead of hanging.
#[test]
fn a_cluster_barrier_only_some_programs_reach_deadlocks() {
    let mut k = Kb::new("half_barrier");
    k.b = Builder::new(
        "half_barrier",
        KernelOptions {
            cluster: [2, 1, 1],
            ..KernelOptions::default()
        },
    );
    let rank = k.op(OpKind::ClusterCtaRank, Type::scalar(ScalarType::I32));
    let zero = k.int(0);
    let first = k.cmp(CmpPred::Eq, rank, zero);
    k.b.begin_block(vec![]);
    k.line(5);
    k.effect(OpKind::ClusterBarrier);
    k.effect(OpKind::Yield(vec![]));
    let then_block = k.b.end_block();
    k.b.begin_block(vec![]);
    k.effect(OpKind::Yield(vec![]));
    let else_block = k.b.end_block();
    k.b.push(
        OpKind::If {
            cond: first,
            then_block,
            else_block,
        },
        vec![],
    );
    let kernel = k.finish();
    let err = run_kernel(&kernel, [4, 1, 1], &[], &HostMemory::new(), &opts(2));
    let Err(InterpError::Deadlock { program, tasks, .. }) = &err else {
        panic!("expected a deadlock, got {err:?}");
    };
    assert_eq!(*program, [0, 0, 0]);
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    assert_eq!(tasks[0].name, "default of program (0, 0, 0)");
    assert_eq!(tasks[0].wait.line, 5);
    let text = err.expect_err("deadlock").to_string();
    assert!(
        text.contains("1 of the cluster's 2 programs arrived"),
        "{text}"
    );
    // Whole clusters only.
    let err = run_kernel(&kernel, [3, 1, 1], &[], &HostMemory::new(), &opts(1));
    assert!(
        matches!(err, Err(InterpError::ClusterGrid { .. })),
        "{err:?}"
    );
}

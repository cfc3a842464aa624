//! Task regions (`async_tasks`) on the interpreter: kernels built with
//! `ir::Builder` whose tasks and replicas write parts of an output, run
//! round robin and under seeded random schedules.

use super::tests::{download_i32, upload_i32};
use super::*;
use crate::ir::{
    BinaryOp, Block, Builder, Elem, Kernel, KernelOptions, Literal, OpKind, ReduceKind, SrcLoc,
    TaskRegion, Type, ValueId,
};

/// Elements each program owns in `out`.
const PER_PROGRAM: usize = 16;

struct K {
    b: Builder,
}

impl K {
    fn new(name: &str) -> K {
        K {
            b: Builder::new(name, KernelOptions::default()),
        }
    }

    fn i32s(shape: &[usize]) -> Type {
        Type::tensor(Elem::Scalar(ScalarType::I32), shape.to_vec())
    }

    fn int(&mut self, v: i64, shape: &[usize]) -> ValueId {
        self.b
            .push1(OpKind::Constant(Literal::Int(v)), K::i32s(shape))
    }

    fn binary(&mut self, op: BinaryOp, lhs: ValueId, rhs: ValueId) -> ValueId {
        let ty = self.b.type_of(lhs).clone();
        self.b.push1(OpKind::Binary { op, lhs, rhs }, ty)
    }

    fn splat(&mut self, v: ValueId, n: usize) -> ValueId {
        let ty = self.b.type_of(v).with_shape(vec![n]);
        self.b.push1(OpKind::Splat(v), ty)
    }

    fn arange(&mut self, n: usize) -> ValueId {
        let end = n as i64;
        self.b
            .push1(OpKind::Arange { start: 0, end }, K::i32s(&[n]))
    }

    /// `out[offsets] = values`, with `out` a scalar pointer.
    fn store(&mut self, out: ValueId, offsets: ValueId, values: ValueId) {
        let shape = self.b.type_of(offsets).shape().to_vec();
        let ptrs = match shape.as_slice() {
            [] => out,
            [n] => self.splat(out, *n),
            _ => unreachable!("tests store scalars and vectors"),
        };
        let ty = self.b.type_of(ptrs).clone();
        let ptrs = self.b.push1(
            OpKind::AddPtr {
                ptr: ptrs,
                offset: offsets,
            },
            ty,
        );
        self.b.push(
            OpKind::Store {
                ptr: ptrs,
                value: values,
                mask: None,
                cache: Default::default(),
                eviction: Default::default(),
            },
            vec![],
        );
    }

    /// A task body built by `build` (which gets this builder).
    fn body(&mut self, build: impl FnOnce(&mut K)) -> Block {
        self.b.begin_block(vec![]);
        build(self);
        self.b.end_block()
    }
}

/// The default task writes `3 * i` to the first half of each program's
/// elements and a two-warp task to the second half; after the region the
/// program sums its elements (which it can only read once both tasks have
/// written them) into `out[programs * 16 + pid]`.
fn halves_then_sum(programs: usize) -> Kernel {
    let mut k = K::new("halves_then_sum");
    let out = k.b.add_param("out", ParamKind::Ptr(ScalarType::I32));
    let pid = k.b.push1(OpKind::ProgramId { axis: 0 }, K::i32s(&[]));
    let width = k.int(PER_PROGRAM as i64, &[]);
    let base = k.binary(BinaryOp::Mul, pid, width);
    let half = PER_PROGRAM / 2;
    let lanes = k.arange(half);
    let three = k.int(3, &[half]);
    let half_task = |k: &mut K, skip: i64| {
        k.body(|k| {
            let start = k.splat(base, half);
            let skip = k.int(skip, &[half]);
            let at = k.binary(BinaryOp::Add, start, lanes);
            let at = k.binary(BinaryOp::Add, at, skip);
            let values = k.binary(BinaryOp::Mul, at, three);
            k.store(out, at, values);
        })
    };
    let first = half_task(&mut k, 0);
    let second = half_task(&mut k, half as i64);
    k.b.set_loc(SrcLoc { line: 7, col: 4 });
    k.b.push(
        OpKind::AsyncTasks {
            tasks: vec![
                TaskRegion::default_task(first),
                TaskRegion::with_warps(2, second),
            ],
        },
        vec![],
    );
    let all = k.arange(PER_PROGRAM);
    let start = k.splat(base, PER_PROGRAM);
    let at = k.binary(BinaryOp::Add, start, all);
    let outs = k.splat(out, PER_PROGRAM);
    let ptr_ty = k.b.type_of(outs).clone();
    let ptrs = k.b.push1(
        OpKind::AddPtr {
            ptr: outs,
            offset: at,
        },
        ptr_ty,
    );
    let loaded = k.b.push1(
        OpKind::Load {
            ptr: ptrs,
            mask: None,
            other: None,
            cache: Default::default(),
            eviction: Default::default(),
            volatile: false,
        },
        K::i32s(&[PER_PROGRAM]),
    );
    let total = k.b.push1(
        OpKind::Reduce {
            value: loaded,
            axis: 0,
            kind: ReduceKind::Sum,
        },
        K::i32s(&[]),
    );
    let sums = k.int((programs * PER_PROGRAM) as i64, &[]);
    let slot = k.binary(BinaryOp::Add, sums, pid);
    k.store(out, slot, total);
    k.b.finish()
}

fn schedules() -> Vec<Schedule> {
    let mut all = vec![Schedule::RoundRobin];
    all.extend((0..8).map(|seed| Schedule::Random { seed }));
    all
}

#[test]
fn two_tasks_write_disjoint_halves_and_the_region_joins_them() {
    let programs = 3;
    let kernel = halves_then_sum(programs);
    assert_eq!(crate::check::verify(&kernel), Ok(()));
    let mut expected: Vec<i32> = (0..programs * PER_PROGRAM).map(|i| 3 * i as i32).collect();
    for p in 0..programs {
        let own = &expected[p * PER_PROGRAM..(p + 1) * PER_PROGRAM];
        expected.push(own.iter().sum());
    }
    for schedule in schedules() {
        for threads in [1, 2] {
            let mem = HostMemory::new();
            let out = mem.alloc(expected.len() * 4);
            let opts = InterpOptions::new(threads, true).with_schedule(schedule);
            let run = run_kernel(
                &kernel,
                [programs as u32, 1, 1],
                &[ArgValue::ptr(out)],
                &mem,
                &opts,
            );
            if let Err(e) = run {
                panic!("{schedule}: {e}");
            }
            assert_eq!(download_i32(&mem, out), expected, "{schedule}");
        }
    }
}

/// Three replicas of a one-warp task each write `10 * replica + pid` to
/// their own element; the default task writes 99 after them.
fn replicas(replicate: u32) -> Kernel {
    let mut k = K::new("replicas");
    let out = k.b.add_param("out", ParamKind::Ptr(ScalarType::I32));
    let pid = k.b.push1(OpKind::ProgramId { axis: 0 }, K::i32s(&[]));
    let width = k.int(PER_PROGRAM as i64, &[]);
    let base = k.binary(BinaryOp::Mul, pid, width);
    let copies = k.body(|k| {
        let replica = k.b.push1(OpKind::AsyncTaskReplicaId, K::i32s(&[]));
        let ten = k.int(10, &[]);
        let value = k.binary(BinaryOp::Mul, replica, ten);
        let value = k.binary(BinaryOp::Add, value, pid);
        let at = k.binary(BinaryOp::Add, base, replica);
        k.store(out, at, value);
    });
    let trunk = k.body(|k| {
        let after = k.int(i64::from(replicate), &[]);
        let at = k.binary(BinaryOp::Add, base, after);
        let value = k.int(99, &[]);
        k.store(out, at, value);
    });
    let mut task = TaskRegion::with_warps(1, copies);
    task.replicate = replicate;
    k.b.push(
        OpKind::AsyncTasks {
            tasks: vec![task, TaskRegion::default_task(trunk)],
        },
        vec![],
    );
    k.b.finish()
}

#[test]
fn replicas_tell_themselves_apart_by_their_replica_id() {
    let (programs, replicate) = (2, 3);
    let kernel = replicas(replicate);
    assert_eq!(crate::check::verify(&kernel), Ok(()));
    let mut expected = vec![-1; programs * PER_PROGRAM];
    for p in 0..programs {
        for r in 0..replicate as usize {
            expected[p * PER_PROGRAM + r] = (10 * r + p) as i32;
        }
        expected[p * PER_PROGRAM + replicate as usize] = 99;
    }
    for schedule in schedules() {
        let mem = HostMemory::new();
        let out = upload_i32(&mem, &vec![-1; expected.len()]);
        let opts = InterpOptions::new(1, true).with_schedule(schedule);
        let run = run_kernel(
            &kernel,
            [programs as u32, 1, 1],
            &[ArgValue::ptr(out)],
            &mem,
            &opts,
        );
        if let Err(e) = run {
            panic!("{schedule}: {e}");
        }
        assert_eq!(download_i32(&mem, out), expected, "{schedule}");
    }
}

/// A task stuck for good (at a cluster barrier no other program of its
/// one-program cluster can complete, as it is not the program's own task)
/// shows in the deadlock report beside the trunk waiting at the region's end.
#[test]
fn a_stuck_task_and_the_waiting_trunk_are_reported() {
    let mut k = K::new("stuck");
    let stuck = k.body(|k| {
        k.b.set_loc(SrcLoc { line: 12, col: 8 });
        k.b.push(OpKind::ClusterBarrier, vec![]);
    });
    let idle = k.body(|_| {});
    k.b.set_loc(SrcLoc { line: 10, col: 4 });
    k.b.push(
        OpKind::AsyncTasks {
            tasks: vec![
                TaskRegion::default_task(idle),
                TaskRegion::with_warps(4, stuck),
            ],
        },
        vec![],
    );
    let kernel = k.b.finish();
    let err = run_kernel(
        &kernel,
        [1, 1, 1],
        &[],
        &HostMemory::new(),
        &InterpOptions::new(1, true),
    );
    let Err(InterpError::Deadlock { tasks, .. }) = &err else {
        panic!("expected a deadlock, got {err:?}");
    };
    let lines: Vec<(&str, &str, u32)> = tasks
        .iter()
        .map(|t| (t.name.as_str(), t.wait.op, t.wait.line))
        .collect();
    assert_eq!(
        lines,
        [
            ("default", "async_tasks", 10),
            ("task 1", "cluster_barrier", 12)
        ]
    );
    let text = err.expect_err("deadlock").to_string();
    assert!(text.contains("1 of its tasks have not finished"), "{text}");
}

/// The same region read from IR text: two replicas of a task store their
/// replica ids, the default task stores 7.
#[test]
fn task_regions_from_ir_text_run() {
    let text = r#"kernel "from_text" {
  source ""
  options num_warps 4 num_stages 1
  param "out" %0 ptr<i32>
  async_tasks {
    task num_warps 1 replicate 2 {
      %1 = async_task_replica_id : i32
      %2 = addptr %0, %1 : ptr<i32>
      store %2, %1
    }
    task default {
      %3 = constant 2 : i32
      %4 = addptr %0, %3 : ptr<i32>
      %5 = constant 7 : i32
      store %4, %5
    }
  }
}
"#;
    let kernel = match crate::ir::parse(text) {
        Ok(k) => k,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(crate::check::verify(&kernel), Ok(()));
    assert_eq!(crate::ir::print(&kernel), text);
    for schedule in schedules() {
        let mem = HostMemory::new();
        let out = upload_i32(&mem, &[-1; 3]);
        let opts = InterpOptions::new(1, true).with_schedule(schedule);
        if let Err(e) = run_kernel(&kernel, [1, 1, 1], &[ArgValue::ptr(out)], &mem, &opts) {
            panic!("{schedule}: {e}");
        }
        assert_eq!(download_i32(&mem, out), [0, 1, 7], "{schedule}");
    }
}

#[test]
fn a_traced_run_records_each_task_and_the_trunk_waiting_for_them() {
    let programs = 2;
    let kernel = halves_then_sum(programs);
    let mem = HostMemory::new();
    let out = mem.alloc((programs * PER_PROGRAM + programs) * 4);
    let mut opts = InterpOptions::new(2, true);
    let trace = std::sync::Arc::new(Trace::default());
    opts.trace = Some(trace.clone());
    run_kernel(
        &kernel,
        [programs as u32, 1, 1],
        &[ArgValue::ptr(out)],
        &mem,
        &opts,
    )
    .expect("runs");
    let events = trace.events();
    for p in 0..programs as u32 {
        let program = [p, 0, 0];
        let tasks: Vec<&TraceEvent> = events
            .iter()
            .filter(|e| e.program == program && e.kind == TraceKind::Task)
            .collect();
        // The trunk and the region's two tasks, each a slice of steps.
        assert_eq!(tasks.len(), 3, "{events:#?}");
        assert!(tasks.iter().all(|t| t.end > t.start), "{tasks:#?}");
        let trunk_waits = events
            .iter()
            .filter(|e| {
                e.program == program && e.kind == TraceKind::Wait("wait: tasks to finish".into())
            })
            .count();
        assert_eq!(trunk_waits, 1, "{events:#?}");
    }
}

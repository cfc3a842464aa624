//! The rules of warp-specialized task regions (`async_tasks`), after TLX's
//! validation and the hardware's limits: one default task, warp counts and
//! placements that fit a program, register budgets `setmaxnreg` accepts and
//! the register file holds.

use crate::ir::{launch_registers, task_warps, KernelOptions, TaskRegion, TaskWarps};

/// Threads a program (CTA) may have, in warps: 1024 threads.
const MAX_WARPS: u32 = 32;
/// Task replicas of one region: hardware barriers 1-15 (0 is the program's).
const MAX_REPLICAS: usize = 15;

/// 32-bit registers in an SM's register file.
const REGISTER_FILE: u64 = 65536;

/// Which rule of task regions a kernel breaks. Tasks are numbered from 0 in
/// the order they are written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TaskRuleError {
    #[error(
        "`async_tasks` needs exactly one default task (`async_task(\"default\")`), found {found}"
    )]
    DefaultTaskCount { found: usize },
    #[error(
        "task {task}: the default task runs on the kernel's own `num_warps` warps; \
         it takes no `num_warps`, `replicate` or start warp"
    )]
    DefaultTaskWarps { task: usize },
    #[error("task {task}: a task other than the default one needs `num_warps`")]
    MissingWarps { task: usize },
    #[error("task {task}: `num_warps = {num_warps}` is not a power of two (1, 2, 4, 8, ...)")]
    WarpCount { task: usize, num_warps: u32 },
    #[error("task {task}: `replicate = 0`; a task runs at least once")]
    NoReplica { task: usize },
    #[error(
        "start warps (`warp_group_start_id`) must be given for every task other than the \
         default one, or for none"
    )]
    MixedStartWarps,
    #[error(
        "warp {warp} belongs to task {task} (replica {replica}) and to task {other_task} \
         (replica {other_replica}): tasks need warps of their own (a task with `num_regs` on \
         fewer than 4 warps holds its whole warp group; only a task of fewer than 4 warps \
         with the same `num_regs` may run on its idle warps)"
    )]
    OverlappingWarps {
        warp: u32,
        task: usize,
        replica: u32,
        other_task: usize,
        other_replica: u32,
    },
    #[error(
        "the tasks need warps up to {warps}; a program has at most {MAX_WARPS} (1024 threads)"
    )]
    TooManyWarps { warps: u32 },
    #[error(
        "task {task}: `num_regs = {num_regs}` must be a multiple of 8 from 24 to 256 \
         (PTX `setmaxnreg`)"
    )]
    RegisterCount { task: usize, num_regs: u32 },
    #[error(
        "the tasks keep {registers} registers (num_regs x 32 threads x warps, over every \
         replica); an SM's register file has {REGISTER_FILE}"
    )]
    RegisterFile { registers: u64 },
    #[error(
        "task {task}: `num_regs` applies to whole warp groups (`setmaxnreg` is executed by \
         four aligned warps together); this task's warps {first_warp}..{end_warp} do not start \
         a warp group (a multiple of 4)"
    )]
    PartialWarpGroup {
        task: usize,
        first_warp: u32,
        end_warp: u32,
    },
    #[error(
        "task {task}: `num_regs = {num_regs}` on warps of the group task {holder} holds with \
         `num_regs = {holder_regs}`: tasks sharing a warp group share its registers \
         (`setmaxnreg` is executed by the group together); give both the same `num_regs`"
    )]
    SharedGroupRegisters {
        task: usize,
        num_regs: u32,
        holder: usize,
        holder_regs: u32,
    },
    #[error(
        "the tasks' `num_regs` need {needed} registers but the program starts with {available} \
         ({per_thread} per thread over {warps} warps): `setmaxnreg.inc` would wait forever for \
         registers no task gives back; lower some `num_regs` or give other tasks fewer"
    )]
    RegisterPool {
        needed: u64,
        available: u64,
        per_thread: u32,
        warps: u32,
    },
    #[error(
        "`async_tasks` may only be written at the top level of the kernel body, not inside \
         control flow or another task"
    )]
    NestedTasks,
    #[error(
        "the region has {replicas} task replicas; each synchronizes on a hardware barrier of \
         its own and a program has {MAX_REPLICAS} besides its own"
    )]
    TooManyReplicas { replicas: usize },
    #[error("`async_task_replica_id()` is only meaningful inside a task of `async_tasks`")]
    ReplicaIdOutsideTask,
}

/// Checks one `async_tasks` region of a kernel with `options`.
pub fn check_task_region(
    tasks: &[TaskRegion],
    options: &KernelOptions,
) -> Result<(), TaskRuleError> {
    let defaults = tasks.iter().filter(|t| t.default).count();
    if defaults != 1 {
        return Err(TaskRuleError::DefaultTaskCount { found: defaults });
    }
    for (task, t) in tasks.iter().enumerate() {
        if t.default {
            if t.num_warps.is_some() || t.replicate != 1 || t.start_warp.is_some() {
                return Err(TaskRuleError::DefaultTaskWarps { task });
            }
        } else {
            let num_warps = t.num_warps.ok_or(TaskRuleError::MissingWarps { task })?;
            if !num_warps.is_power_of_two() {
                return Err(TaskRuleError::WarpCount { task, num_warps });
            }
        }
        if t.replicate == 0 {
            return Err(TaskRuleError::NoReplica { task });
        }
        if let Some(num_regs) = t.num_regs {
            if !(24..=256).contains(&num_regs) || num_regs % 8 != 0 {
                return Err(TaskRuleError::RegisterCount { task, num_regs });
            }
        }
    }
    let placed = tasks
        .iter()
        .filter(|t| !t.default && t.start_warp.is_some())
        .count();
    if placed != 0 && placed != tasks.len() - 1 {
        return Err(TaskRuleError::MixedStartWarps);
    }
    let warps = task_warps(tasks, options.num_warps);
    let end = warps.iter().map(|w| w.held_end()).max().unwrap_or(0);
    if end > MAX_WARPS {
        return Err(TaskRuleError::TooManyWarps { warps: end });
    }
    if warps.len() > MAX_REPLICAS {
        return Err(TaskRuleError::TooManyReplicas {
            replicas: warps.len(),
        });
    }
    for (i, a) in warps.iter().enumerate() {
        for b in &warps[i + 1..] {
            // A replica sharing a group holds no warps: its own must be free.
            let end = |w: &TaskWarps| {
                if a.shares_group() || b.shares_group() {
                    w.end_warp()
                } else {
                    w.held_end()
                }
            };
            let first_shared = a.first_warp.max(b.first_warp);
            if first_shared < end(a).min(end(b)) {
                return Err(TaskRuleError::OverlappingWarps {
                    warp: first_shared,
                    task: a.task,
                    replica: a.replica,
                    other_task: b.task,
                    other_replica: b.replica,
                });
            }
        }
    }
    // A task without a budget keeps what the kernel is compiled for: its
    // `maxnreg` if set; otherwise ptxas decides and nothing can be checked here.
    let registers: u64 = warps
        .iter()
        .filter_map(|w| {
            let regs = tasks.get(w.task)?.num_regs.or(options.maxnreg)?;
            Some(u64::from(regs) * 32 * u64::from(w.held_warps))
        })
        .sum();
    if registers > REGISTER_FILE {
        return Err(TaskRuleError::RegisterFile { registers });
    }
    if tasks.iter().all(|t| t.num_regs.is_none()) {
        return Ok(());
    }
    for w in &warps {
        let budget = tasks.get(w.task).and_then(|t| t.num_regs);
        if let Some(holder) = w.holder {
            let holder_regs = warps
                .get(holder)
                .and_then(|h| Some((h.task, tasks.get(h.task)?.num_regs?)));
            match (budget, holder_regs) {
                (Some(num_regs), Some((holder, holder_regs))) if num_regs != holder_regs => {
                    return Err(TaskRuleError::SharedGroupRegisters {
                        task: w.task,
                        num_regs,
                        holder,
                        holder_regs,
                    })
                }
                _ => continue,
            }
        }
        // Fewer than four warps hold their whole group (`held_warps`).
        if budget.is_some() && (w.first_warp % 4 != 0 || w.held_warps % 4 != 0) {
            return Err(TaskRuleError::PartialWarpGroup {
                task: w.task,
                first_warp: w.first_warp,
                end_warp: w.end_warp(),
            });
        }
    }
    // Every warp starts with the same count; budgets move registers between
    // warp groups through the program's pool, which must cover them all.
    let total = end.max(options.num_warps);
    let per_thread = launch_registers(total, options.maxnreg);
    let available = u64::from(per_thread) * 32 * u64::from(total);
    let needed: u64 = (0..total)
        .map(|warp| {
            let task = warps
                .iter()
                .find(|w| (w.first_warp..w.held_end()).contains(&warp))
                .and_then(|w| tasks.get(w.task));
            u64::from(task.and_then(|t| t.num_regs).unwrap_or(per_thread)) * 32
        })
        .sum();
    if needed > available {
        return Err(TaskRuleError::RegisterPool {
            needed,
            available,
            per_thread,
            warps: total,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{verify, VerifyError, VerifyErrorKind};
    use crate::ir::{
        Block, Builder, Kernel, Literal, OpKind, ScalarType, SrcLoc, Type, INDEX_TYPE,
    };

    fn task(num_warps: u32) -> TaskRegion {
        TaskRegion::with_warps(num_warps, Block::default())
    }

    fn trunk() -> TaskRegion {
        TaskRegion::default_task(Block::default())
    }

    fn kernel(tasks: Vec<TaskRegion>, options: KernelOptions) -> Kernel {
        let mut b = Builder::new("k", options);
        b.set_loc(SrcLoc { line: 3, col: 4 });
        b.push(OpKind::AsyncTasks { tasks }, vec![]);
        b.finish()
    }

    /// The rule `tasks` break in a kernel of 4 warps and no `maxnreg`.
    fn broken(tasks: Vec<TaskRegion>) -> TaskRuleError {
        broken_kernel(&kernel(tasks, KernelOptions::default()))
    }

    fn broken_kernel(k: &Kernel) -> TaskRuleError {
        match verify(k) {
            Err(VerifyError {
                kind: VerifyErrorKind::TaskRule(rule),
                ..
            }) => rule,
            other => panic!("expected a task rule error, got {other:?}"),
        }
    }

    #[test]
    fn a_well_formed_region_passes() {
        let mut pair = task(4);
        pair.replicate = 2;
        pair.num_regs = Some(24);
        let mut consumer = task(4);
        consumer.num_regs = Some(240);
        let k = kernel(vec![trunk(), pair, consumer], KernelOptions::default());
        assert_eq!(verify(&k), Ok(()));
    }

    #[test]
    fn exactly_one_default_task() {
        assert_eq!(
            broken(vec![task(1)]),
            TaskRuleError::DefaultTaskCount { found: 0 }
        );
        let err = broken(vec![trunk(), trunk()]);
        assert_eq!(err, TaskRuleError::DefaultTaskCount { found: 2 });
        assert!(
            err.to_string().contains("exactly one default task"),
            "{err}"
        );
    }

    #[test]
    fn the_default_task_keeps_the_kernel_warps() {
        let mut wide = trunk();
        wide.num_warps = Some(8);
        assert_eq!(
            broken(vec![task(1), wide]),
            TaskRuleError::DefaultTaskWarps { task: 1 }
        );
        let mut copied = trunk();
        copied.replicate = 2;
        assert_eq!(
            broken(vec![copied]),
            TaskRuleError::DefaultTaskWarps { task: 0 }
        );
    }

    #[test]
    fn other_tasks_need_a_power_of_two_warps() {
        let mut unsized_task = task(1);
        unsized_task.num_warps = None;
        assert_eq!(
            broken(vec![trunk(), unsized_task]),
            TaskRuleError::MissingWarps { task: 1 }
        );
        assert_eq!(
            broken(vec![trunk(), task(3)]),
            TaskRuleError::WarpCount {
                task: 1,
                num_warps: 3
            }
        );
        assert_eq!(
            broken(vec![trunk(), task(0)]),
            TaskRuleError::WarpCount {
                task: 1,
                num_warps: 0
            }
        );
    }

    #[test]
    fn a_task_runs_at_least_once() {
        let mut none = task(1);
        none.replicate = 0;
        assert_eq!(
            broken(vec![trunk(), none]),
            TaskRuleError::NoReplica { task: 1 }
        );
    }

    #[test]
    fn start_warps_for_all_tasks_or_none() {
        let mut placed = task(1);
        placed.start_warp = Some(8);
        assert_eq!(
            broken(vec![trunk(), placed, task(1)]),
            TaskRuleError::MixedStartWarps
        );
    }

    #[test]
    fn warp_ranges_are_disjoint() {
        // Over the default task's warps 0..4.
        let mut low = task(2);
        low.start_warp = Some(2);
        assert_eq!(
            broken(vec![trunk(), low]),
            TaskRuleError::OverlappingWarps {
                warp: 2,
                task: 0,
                replica: 0,
                other_task: 1,
                other_replica: 0
            }
        );
        // Replicas of 2 warps from warp 4 end at 8; another task starts at 7.
        let mut pair = task(2);
        pair.replicate = 2;
        pair.start_warp = Some(4);
        let mut late = task(1);
        late.start_warp = Some(7);
        let err = broken(vec![trunk(), pair, late]);
        assert_eq!(
            err,
            TaskRuleError::OverlappingWarps {
                warp: 7,
                task: 1,
                replica: 1,
                other_task: 2,
                other_replica: 0
            }
        );
        assert!(
            err.to_string().contains("warp 7 belongs to task 1"),
            "{err}"
        );
    }

    #[test]
    fn at_most_32_warps() {
        // 4 + 16 + 8 + 4 = 32 fits; one more warp does not.
        let fits = vec![trunk(), task(16), task(8), task(4)];
        assert_eq!(verify(&kernel(fits, KernelOptions::default())), Ok(()));
        let err = broken(vec![trunk(), task(16), task(8), task(4), task(1)]);
        assert_eq!(err, TaskRuleError::TooManyWarps { warps: 33 });
        assert!(err.to_string().contains("at most 32"), "{err}");
    }

    #[test]
    fn register_budgets_are_what_setmaxnreg_takes() {
        for num_regs in [16, 100, 264] {
            let mut t = task(1);
            t.num_regs = Some(num_regs);
            assert_eq!(
                broken(vec![trunk(), t]),
                TaskRuleError::RegisterCount { task: 1, num_regs }
            );
        }
    }

    #[test]
    fn register_budgets_cover_whole_warp_groups() {
        // Two budgeted warps hold their group: the next task starts at 8,
        // and the program launches 12 warps.
        let mut two = task(2);
        two.num_regs = Some(40);
        let k = kernel(
            vec![trunk(), two.clone(), task(4)],
            KernelOptions::default(),
        );
        assert_eq!(verify(&k), Ok(()));
        assert_eq!(k.total_warps(), 12);
        // A task placed in the held group's idle warps overlaps it.
        let mut inside = task(2);
        inside.start_warp = Some(6);
        let mut placed = two.clone();
        placed.start_warp = Some(4);
        let err = broken(vec![trunk(), placed, inside]);
        assert!(
            matches!(err, TaskRuleError::OverlappingWarps { warp: 6, .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("whole warp group"), "{err}");
        // Budgeted warps that do not start a group.
        let mut mid = two;
        mid.start_warp = Some(5);
        let mut other = task(1);
        other.start_warp = Some(4);
        assert_eq!(
            broken(vec![trunk(), other, mid]),
            TaskRuleError::PartialWarpGroup {
                task: 2,
                first_warp: 5,
                end_warp: 7
            }
        );
        // Four warps, but starting mid-group.
        let mut off = task(4);
        off.num_regs = Some(40);
        off.start_warp = Some(6);
        assert!(matches!(
            broken(vec![trunk(), off]),
            TaskRuleError::PartialWarpGroup { first_warp: 6, .. }
        ));
    }

    /// A one-warp default task at 24 registers and two consumer groups at
    /// 240 from warp 4, in a kernel of one warp.
    fn fa3_layout() -> (TaskRegion, TaskRegion, KernelOptions) {
        let mut producer = trunk();
        producer.num_regs = Some(24);
        let mut consumers = task(4);
        consumers.replicate = 2;
        consumers.num_regs = Some(240);
        consumers.start_warp = Some(4);
        let options = KernelOptions {
            num_warps: 1,
            ..KernelOptions::default()
        };
        (producer, consumers, options)
    }

    #[test]
    fn a_one_warp_budgeted_default_task_frees_its_group() {
        // FA3's producer: one warp at 24 registers, its group's three other
        // warps idle at 24 too, two consumer groups at 240: 12 warps' pool.
        let (producer, consumers, options) = fa3_layout();
        let k = kernel(vec![producer, consumers.clone()], options.clone());
        assert_eq!(verify(&k), Ok(()));
        assert_eq!(k.total_warps(), 12);
        // Each replica of a budgeted one-warp task holds a group of its own.
        let mut one_replica = task(1);
        one_replica.num_regs = Some(24);
        one_replica.replicate = 2;
        let ranges: Vec<(u32, u32)> = task_warps(&[trunk(), one_replica], 4)
            .iter()
            .map(|w| (w.first_warp, w.held_end()))
            .collect();
        assert_eq!(ranges, [(0, 4), (4, 8), (8, 12)]);
    }

    #[test]
    fn budgeted_warps_share_a_held_group() {
        // FA3's backward: the producer warp holds group 0, the dQ writer
        // runs on its warp 1 at the same budget, consumers from warp 4.
        let (producer, consumers, options) = fa3_layout();
        let mut writer = task(1);
        writer.num_regs = Some(24);
        writer.start_warp = Some(1);
        let tasks = vec![producer.clone(), writer.clone(), consumers.clone()];
        let k = kernel(tasks.clone(), options.clone());
        assert_eq!(verify(&k), Ok(()));
        assert_eq!(k.total_warps(), 12);
        let holders: Vec<Option<usize>> = task_warps(&tasks, 1).iter().map(|w| w.holder).collect();
        assert_eq!(holders, [None, Some(0), None, None]);
        // Another budget than the group's.
        let mut greedy = writer.clone();
        greedy.num_regs = Some(40);
        let err = broken_kernel(&kernel(
            vec![producer.clone(), greedy, consumers.clone()],
            options.clone(),
        ));
        assert_eq!(
            err,
            TaskRuleError::SharedGroupRegisters {
                task: 1,
                num_regs: 40,
                holder: 0,
                holder_regs: 24
            }
        );
        assert!(err.to_string().contains("same `num_regs`"), "{err}");
        // Two sharers on one warp.
        let mut second = writer.clone();
        second.num_warps = Some(2);
        let err = broken_kernel(&kernel(vec![producer, writer, second, consumers], options));
        assert!(
            matches!(err, TaskRuleError::OverlappingWarps { warp: 1, .. }),
            "{err:?}"
        );
    }

    #[test]
    fn raised_budgets_are_paid_for_by_lowered_ones() {
        // 12 warps start with 168 registers; raising 4 of them to 232 needs
        // 4 x 32 x 64 more, which only a task lowering its own gives back.
        let mut consumer = task(4);
        consumer.num_regs = Some(232);
        let starved = kernel(
            vec![trunk(), consumer.clone(), task(4)],
            KernelOptions::default(),
        );
        assert_eq!(
            broken_kernel(&starved),
            TaskRuleError::RegisterPool {
                needed: (4 * 168 + 4 * 232 + 4 * 168) * 32,
                available: 12 * 168 * 32,
                per_thread: 168,
                warps: 12
            }
        );
        let mut producer = task(4);
        producer.num_regs = Some(40);
        let paid = kernel(vec![trunk(), consumer, producer], KernelOptions::default());
        assert_eq!(verify(&paid), Ok(()));
    }

    #[test]
    fn register_budgets_fit_the_register_file() {
        // 4 warps x 32 x 256 = 32768 each: two such fit, with a third
        // counted at the kernel's maxnreg they do not.
        let mut a = task(4);
        a.num_regs = Some(256);
        let mut t = trunk();
        t.num_regs = Some(256);
        let fits = kernel(vec![t.clone(), a.clone()], KernelOptions::default());
        assert_eq!(verify(&fits), Ok(()));
        let options = KernelOptions {
            maxnreg: Some(32),
            ..KernelOptions::default()
        };
        let k = kernel(vec![t, a, task(1)], options);
        let err = broken_kernel(&k);
        assert_eq!(
            err,
            TaskRuleError::RegisterFile {
                registers: 65536 + 32 * 32
            }
        );
        assert!(err.to_string().contains("65536"), "{err}");
    }

    #[test]
    fn regions_only_at_the_top_level() {
        let mut b = Builder::new("k", KernelOptions::default());
        let flag = b.push1(
            OpKind::Constant(Literal::Bool(true)),
            Type::scalar(ScalarType::Bool),
        );
        b.begin_block(vec![]);
        b.push(
            OpKind::AsyncTasks {
                tasks: vec![trunk()],
            },
            vec![],
        );
        b.push(OpKind::Yield(vec![]), vec![]);
        let then_block = b.end_block();
        b.begin_block(vec![]);
        b.push(OpKind::Yield(vec![]), vec![]);
        let else_block = b.end_block();
        b.push(
            OpKind::If {
                cond: flag,
                then_block,
                else_block,
            },
            vec![],
        );
        assert_eq!(broken_kernel(&b.finish()), TaskRuleError::NestedTasks);

        let mut b = Builder::new("k", KernelOptions::default());
        b.begin_block(vec![]);
        b.push(
            OpKind::AsyncTasks {
                tasks: vec![trunk()],
            },
            vec![],
        );
        let inner = b.end_block();
        b.push(
            OpKind::AsyncTasks {
                tasks: vec![TaskRegion::default_task(inner)],
            },
            vec![],
        );
        assert_eq!(broken_kernel(&b.finish()), TaskRuleError::NestedTasks);
    }

    #[test]
    fn replica_ids_only_inside_tasks() {
        let mut b = Builder::new("k", KernelOptions::default());
        b.begin_block(vec![]);
        b.push1(OpKind::AsyncTaskReplicaId, Type::scalar(INDEX_TYPE));
        let body = b.end_block();
        b.push(
            OpKind::AsyncTasks {
                tasks: vec![trunk(), TaskRegion::with_warps(1, body)],
            },
            vec![],
        );
        assert_eq!(verify(&b.finish()), Ok(()));

        let mut b = Builder::new("k", KernelOptions::default());
        b.push1(OpKind::AsyncTaskReplicaId, Type::scalar(INDEX_TYPE));
        assert_eq!(
            broken_kernel(&b.finish()),
            TaskRuleError::ReplicaIdOutsideTask
        );
    }

    #[test]
    fn task_values_stay_in_their_task_and_bodies_have_no_terminator() {
        let mut b = Builder::new("k", KernelOptions::default());
        b.begin_block(vec![]);
        let inner = b.push1(OpKind::Constant(Literal::Int(1)), Type::scalar(INDEX_TYPE));
        let body = b.end_block();
        b.push(
            OpKind::AsyncTasks {
                tasks: vec![TaskRegion::default_task(body)],
            },
            vec![],
        );
        b.push1(
            OpKind::Binary {
                op: crate::ir::BinaryOp::Add,
                lhs: inner,
                rhs: inner,
            },
            Type::scalar(INDEX_TYPE),
        );
        let err = verify(&b.finish()).expect_err("a task's value escapes");
        assert!(err.to_string().contains("not defined"), "{err}");

        let mut b = Builder::new("k", KernelOptions::default());
        b.begin_block(vec![]);
        b.push(OpKind::Yield(vec![]), vec![]);
        let body = b.end_block();
        b.push(
            OpKind::AsyncTasks {
                tasks: vec![TaskRegion::default_task(body)],
            },
            vec![],
        );
        let err = verify(&b.finish()).expect_err("a yield ends a task");
        assert!(err.to_string().contains("terminator"), "{err}");
    }
}

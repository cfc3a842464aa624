//! Warp-specialized task regions (TLX's `async_tasks` / `async_task`): the
//! tasks of an [`super::OpKind::AsyncTasks`] op and the warps each replica
//! of each task runs on.

use super::ops::Block;

/// One task of an `async_tasks` region (TLX's `async_task`). Every task
/// runs its body once per replica, on warps of its own, at the same time as
/// the other tasks; the region ends when all of them have finished.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskRegion {
    /// The trunk (TLX's `async_task("default")`): it runs on the kernel's
    /// own `num_warps` warps, `0..num_warps`.
    pub default: bool,
    /// Warps of each replica; `None` for the default task, which takes the
    /// kernel's.
    pub num_warps: Option<u32>,
    /// Registers per thread the task's warps keep (`setmaxnreg`); `None`:
    /// whatever the kernel was compiled for.
    pub num_regs: Option<u32>,
    /// Copies of the task, each on warps of its own; a body tells them apart
    /// with `async_task_replica_id()`.
    pub replicate: u32,
    /// TLX's `warp_group_start_id`: the first warp of the first replica, if
    /// the author placed the task; otherwise the tasks follow the default
    /// task's warps in order.
    pub start_warp: Option<u32>,
    /// The replicas run one copy of the code, which computes the replica
    /// index from the warp index, instead of a copy each with the index
    /// folded in: half the instructions for the instruction cache to hold
    /// (short, branchy work gains), a few registers more (long loops may
    /// lose). Code generation keeps separate copies anyway when the body
    /// needs scratch memory or pipeline rings of its own.
    pub shared_body: bool,
    /// Takes no args and has no terminator, like the kernel body.
    pub body: Block,
}

impl TaskRegion {
    /// A task with the kernel's warps, one replica and no register budget.
    pub fn default_task(body: Block) -> TaskRegion {
        TaskRegion {
            default: true,
            num_warps: None,
            num_regs: None,
            replicate: 1,
            start_warp: None,
            shared_body: false,
            body,
        }
    }

    /// A non-default task of `num_warps` warps, one replica, placed after
    /// the tasks before it.
    pub fn with_warps(num_warps: u32, body: Block) -> TaskRegion {
        TaskRegion {
            default: false,
            num_warps: Some(num_warps),
            ..TaskRegion::default_task(body)
        }
    }
}

/// The warps one replica of one task runs on.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TaskWarps {
    /// The task's index in its region.
    pub task: usize,
    pub replica: u32,
    pub first_warp: u32,
    pub num_warps: u32,
    /// The warps the replica holds from `first_warp`: its own, or, for a
    /// task with a register budget on fewer than four warps, its whole warp
    /// group, whose other warps idle (`setmaxnreg` is executed by the four
    /// warps of a group together).
    pub held_warps: u32,
    /// The replica runs on idle warps of a group another replica holds
    /// (a budgeted task of fewer than four warps placed inside it, FA3's
    /// producer and dQ-writer warps): the holder's index in
    /// [`task_warps`]'s list. Such a replica holds no warps of its own, and
    /// the group's `setmaxnreg` is the holder's.
    pub holder: Option<usize>,
}

impl TaskWarps {
    /// One past the last warp the replica runs on.
    pub fn end_warp(&self) -> u32 {
        self.first_warp.saturating_add(self.num_warps)
    }

    /// One past the last warp the replica holds (see `held_warps`).
    pub fn held_end(&self) -> u32 {
        self.first_warp.saturating_add(self.held_warps)
    }

    /// Whether the replica runs in a group another holds (see `holder`).
    pub fn shares_group(&self) -> bool {
        self.holder.is_some()
    }
}

/// Warps per warp group: `setmaxnreg` moves registers a group at a time.
const WARP_GROUP: u32 = 4;

/// The warps a replica of `warps` warps holds: a whole warp group when the
/// task has a register budget and fewer warps.
fn held_warps(task: &TaskRegion, warps: u32) -> u32 {
    if task.num_regs.is_some() && warps < WARP_GROUP {
        WARP_GROUP
    } else {
        warps
    }
}

/// The warps of every replica of every task, in task then replica order,
/// for a kernel of `kernel_warps` warps. A non-default task without
/// `num_warps` is given none (the verifier rejects it); a task without
/// `start_warp` starts where the previous one without it ended (after the
/// warps it holds). A budgeted task of fewer than four warps placed in the
/// idle warps of another's held group shares that group (`holder`).
pub fn task_warps(tasks: &[TaskRegion], kernel_warps: u32) -> Vec<TaskWarps> {
    let mut out = place_tasks(tasks, kernel_warps);
    // The idle warps of each group a replica holds from its start, and
    // that replica's index.
    let idle: Vec<(usize, u32, u32)> = out
        .iter()
        .enumerate()
        .filter(|(_, w)| w.held_warps > w.num_warps && w.first_warp % WARP_GROUP == 0)
        .map(|(index, w)| (index, w.end_warp(), w.held_end()))
        .collect();
    for w in &mut out {
        let budgeted = tasks.get(w.task).is_some_and(|t| t.num_regs.is_some());
        let inside =
            |&&(_, from, end): &&(usize, u32, u32)| from <= w.first_warp && w.end_warp() <= end;
        if !budgeted || w.num_warps >= WARP_GROUP {
            continue;
        }
        if let Some(&(holder, _, _)) = idle.iter().find(inside) {
            w.held_warps = 0;
            w.holder = Some(holder);
        }
    }
    out
}

/// [`task_warps`] before sharing: every replica where its placement puts it.
fn place_tasks(tasks: &[TaskRegion], kernel_warps: u32) -> Vec<TaskWarps> {
    let mut next = tasks
        .iter()
        .find(|t| t.default)
        .map_or(kernel_warps, |t| held_warps(t, kernel_warps));
    let mut out = Vec::new();
    for (index, task) in tasks.iter().enumerate() {
        if task.default {
            out.push(TaskWarps {
                task: index,
                replica: 0,
                first_warp: 0,
                num_warps: kernel_warps,
                held_warps: held_warps(task, kernel_warps),
                holder: None,
            });
            continue;
        }
        let warps = task.num_warps.unwrap_or(0);
        let held = held_warps(task, warps);
        let mut first = task.start_warp.unwrap_or(next);
        for replica in 0..task.replicate {
            out.push(TaskWarps {
                task: index,
                replica,
                first_warp: first,
                num_warps: warps,
                held_warps: held,
                holder: None,
            });
            first = first.saturating_add(held);
        }
        if task.start_warp.is_none() {
            next = first;
        }
    }
    out
}

/// Registers per thread a program of `warps` warps starts with when a task
/// uses `setmaxnreg`: ptxas then gives every thread the register file split
/// over the threads rounded up to whole warp groups (of 128), in steps of 8
/// (at most 256, or the kernel's `maxnreg`). `setmaxnreg.inc` takes from
/// what the other warp groups' `setmaxnreg.dec` gave back to this pool.
pub fn launch_registers(warps: u32, maxnreg: Option<u32>) -> u32 {
    let threads = (warps.max(1) * 32).div_ceil(128) * 128;
    let even = 65536 / threads / 8 * 8;
    maxnreg.unwrap_or(256).min(even).min(256)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_follow_the_default_warps_and_replicas_each_other() {
        let mut pair = TaskRegion::with_warps(2, Block::default());
        pair.replicate = 2;
        let tasks = [
            TaskRegion::with_warps(1, Block::default()),
            TaskRegion::default_task(Block::default()),
            pair,
        ];
        let ranges: Vec<(usize, u32, u32, u32)> = task_warps(&tasks, 4)
            .iter()
            .map(|w| (w.task, w.replica, w.first_warp, w.end_warp()))
            .collect();
        assert_eq!(
            ranges,
            [(0, 0, 4, 5), (1, 0, 0, 4), (2, 0, 5, 7), (2, 1, 7, 9)]
        );
    }

    #[test]
    fn placed_tasks_start_where_the_author_says() {
        // TLX README: replicas of 2 warps from warp 4, then one warp at 8.
        let mut pair = TaskRegion::with_warps(2, Block::default());
        pair.replicate = 2;
        pair.start_warp = Some(4);
        let mut single = TaskRegion::with_warps(1, Block::default());
        single.start_warp = Some(8);
        let tasks = [TaskRegion::default_task(Block::default()), pair, single];
        let starts: Vec<u32> = task_warps(&tasks, 4).iter().map(|w| w.first_warp).collect();
        assert_eq!(starts, [0, 4, 6, 8]);
    }
}

//! Warp-specialized task regions (`async_tasks`): each replica of each task
//! runs its body on warps of its own, in an [`ExecContext`] of its own.
//!
//! The program meets at a barrier, then every warp branches to the one task
//! replica whose warp range holds it and runs that body with warp and thread
//! indices, layouts, barriers (hardware barrier `region` over the replica's
//! threads) and scratch memory relative to the replica; the program meets
//! again when every replica is done. Replicas run at the same time, so each
//! gets scratch and pipeline rings of its own, and scratch inside a region
//! never shares bytes with rings. A task with a register budget starts with
//! `setmaxnreg` (the kernel then declares `.minnctapersm 1`, without which
//! ptxas ignores it); one on fewer than four warps holds its warp group,
//! whose other warps run that `setmaxnreg` with it and then go on to the
//! tasks sharing the group or to the region's end.
//!
//! Values computed before the region cross into a task only when the task's
//! threads hold them in full: scalars, values recomputable from constants,
//! `arange` and scalars, and anything in a task that runs on the program's
//! own warps (the default task). A tensor the program holds spread over its
//! warps is not in the other tasks' registers: compute it inside the task.

use std::fmt::Write as _;

use super::error::{malformed, Result};
use super::lower::{BarrierId, ExecContext, Lowerer};
use tlx_core::ir::{launch_registers, task_warps, Op, OpKind};

/// The idle warps of a warp group one replica holds: where they go after
/// its `setmaxnreg` (`head`), and the block that routes those no sharing
/// replica has claimed yet (`tail`; the region's end once all are placed).
struct IdleChain {
    /// The holding replica's index in `task_warps`'s list.
    holder: usize,
    head: String,
    tail: String,
}

impl<'k> Lowerer<'k> {
    pub fn lower_async_tasks(&mut self, op: &'k Op) -> Result<()> {
        let OpKind::AsyncTasks { tasks } = &op.kind else {
            return Err(malformed("not async_tasks"));
        };
        if self.context.region != 0 {
            return Err(malformed("async_tasks inside a task"));
        }
        // The verifier keeps replicas within the hardware barriers.
        let replicas = task_warps(tasks, self.kernel.options.num_warps);
        let program = self.context.clone();
        let held_before: Vec<_> = self.held.values.keys().copied().collect();
        // Everything before the region is visible to every task.
        self.barrier();
        // Tasks run at the same time: their scratch and rings must not meet
        // each other's, and scratch may not reuse ring bytes (see `use_shared`).
        self.shared.pipelines_open += 1;
        let join = self.f.fresh("tasks_end");
        let mut scratch_next = self.scratch_high_water();
        let regs_default = self.default_registers();
        let mut idle_chains: Vec<IdleChain> = replicas
            .iter()
            .enumerate()
            .filter(|(_, r)| r.held_warps > r.num_warps && !r.shares_group())
            .map(|(holder, _)| {
                let head = self.f.fresh("task_idle");
                IdleChain {
                    holder,
                    tail: head.clone(),
                    head,
                }
            })
            .collect();
        let mut i = 0;
        while i < replicas.len() {
            let replica = &replicas[i];
            let task = &tasks[replica.task];
            // The task's replicas from this one on: with `shared_body`, one
            // body serves them all if it uses no scratch or rings of its own.
            let rest = replicas[i..]
                .iter()
                .take_while(|r| r.task == replica.task)
                .count();
            let task_first = replicas[i - replica.replica as usize].first_warp;
            // A budgeted task on fewer than four warps holds its whole warp
            // group: the idle warps run its `setmaxnreg` with it (the group
            // executes it together), then wait at the region's end.
            let idle_warps = replica.held_warps > replica.num_warps;
            let body_label = self.f.fresh("task");
            let next_label = self.f.fresh("task_next");
            let route = self.f.fresh("%route");
            if let Some(holder) = replica.holder {
                // Its warps enter through the holder's body, past the
                // group's `setmaxnreg`: none of them is on this chain.
                let chain = idle_chains
                    .iter_mut()
                    .find(|c| c.holder == holder)
                    .ok_or_else(|| malformed("a task sharing a warp group no task holds"))?;
                self.f.stmt(format!("br label %{next_label}"));
                self.enter_block(&chain.tail);
                chain.tail = self.f.fresh("task_idle");
                self.f.stmt(format!(
                    "br i1 {route}, label %{body_label}, label %{}",
                    chain.tail
                ));
            } else {
                self.f.stmt(format!(
                    "br i1 {route}, label %{body_label}, label %{next_label}"
                ));
            }
            self.enter_block(&body_label);
            let region = (i - replica.replica as usize) as u32 + 1;
            let own_body = idle_warps || replica.shares_group();
            if task.shared_body && !own_body {
                self.enter_shared_task_context(task_first, region, replica, scratch_next);
            } else {
                self.enter_replica_context(region, replica, scratch_next);
            }
            let rings_before = self.shared.ring_peak;
            self.shared.ring_bytes = self.shared.ring_peak;
            if !task.default || replica.first_warp != 0 || replica.num_warps != program.num_warps {
                self.held.outside_values = held_before.iter().copied().collect();
            }
            match task.num_regs {
                Some(regs) if !replica.shares_group() => self.set_max_registers(regs, regs_default),
                _ => {}
            }
            if idle_warps {
                let chain = idle_chains
                    .iter()
                    .find(|c| c.holder == i)
                    .ok_or_else(|| malformed("a held warp group without its idle chain"))?;
                let work = self.f.fresh("task_work");
                let idle = self.f.inst(format!(
                    "icmp uge i32 {}, {}",
                    self.threads.program_warp,
                    replica.end_warp()
                ));
                self.f.stmt(format!(
                    "br i1 {idle}, label %{}, label %{work}",
                    chain.head
                ));
                self.enter_block(&work);
            }
            if let Some(term) = self.lower_block(&task.body)? {
                return Err(malformed(format!(
                    "task body ends with {}",
                    term.kind.mnemonic()
                )));
            }
            self.f.stmt(format!("br label %{join}"));
            let private =
                self.scratch_high_water() > scratch_next || self.shared.ring_peak > rings_before;
            let served = if task.shared_body && !private && !own_body {
                rest
            } else {
                1
            };
            let end = replicas[i + served - 1].held_end();
            if replica.shares_group() {
                self.define_route(&route, replica.first_warp, replica.end_warp());
            } else {
                self.define_route(&route, replica.first_warp, end);
            }
            self.enter_block(&next_label);
            self.held.outside_values.clear();
            scratch_next = self.scratch_high_water();
            i += served;
        }
        self.f.stmt(format!("br label %{join}"));
        // Idle warps no sharing replica took wait at the region's end.
        for chain in idle_chains {
            self.enter_block(&chain.tail);
            self.f.stmt(format!("br label %{join}"));
        }
        self.enter_block(&join);
        self.enter_context(program);
        self.shared.pipelines_open -= 1;
        self.barrier();
        Ok(())
    }

    /// Switches emission back to the whole program.
    fn enter_context(&mut self, context: ExecContext) {
        self.threads.warp = self.threads.program_warp.clone();
        let tid = self.threads.program_tid.clone();
        self.set_thread_id(tid);
        self.num_warps = context.num_warps;
        self.context = context;
    }

    /// Switches emission to the body of one replica: its index, first warp
    /// and hardware barrier (`region + replica`) are constants, and its warp
    /// and thread indices are relative to its first warp (computed in the
    /// entry block, where every later block sees them).
    fn enter_replica_context(
        &mut self,
        region: u32,
        replica: &tlx_core::ir::TaskWarps,
        scratch_base: usize,
    ) {
        let first = replica.first_warp;
        self.threads.warp = self
            .f
            .prologue_inst(format!("sub i32 {}, {first}", self.threads.program_warp));
        let tid = self.f.prologue_inst(format!(
            "sub i32 {}, {}",
            self.threads.program_tid,
            first * 32
        ));
        self.set_thread_id(tid);
        self.num_warps = replica.num_warps;
        self.context = ExecContext {
            region,
            first_warp: first,
            num_warps: replica.num_warps,
            scratch_base,
            replica: replica.replica.to_string(),
            barrier_id: BarrierId::Fixed(region + replica.replica),
        };
    }

    /// Switches emission to the body of a `shared_body` task whose replicas
    /// start at warp `task_first`, lowered for `replica` but able to run any
    /// replica of it: the replica index, the warp and thread indices
    /// relative to the replica, and the replica's hardware barrier
    /// (`region + replica`) are computed from the warp index (in the entry
    /// block), so that replicas which keep no scratch of their own share one
    /// body and the instruction cache holds it once.
    fn enter_shared_task_context(
        &mut self,
        task_first: u32,
        region: u32,
        replica: &tlx_core::ir::TaskWarps,
        scratch_base: usize,
    ) {
        let warps = replica.num_warps.max(1);
        // The warp index read back from lane 0 (it is the same in every lane):
        // ptxas then knows the replica index is uniform in a warp, so the
        // shared memory addresses and wgmma descriptors derived from it stay
        // in uniform registers instead of being built per thread and moved
        // over (`R2UR`) before every wgmma.
        let warp = self.threads.program_warp.clone();
        let uniform_warp = self.f.prologue_call(
            "i32",
            "llvm.nvvm.shfl.sync.idx.i32",
            &[("i32", "-1"), ("i32", &warp), ("i32", "0"), ("i32", "31")],
        );
        let in_task = self
            .f
            .prologue_inst(format!("sub i32 {uniform_warp}, {task_first}"));
        let index = self.f.prologue_inst(format!("udiv i32 {in_task}, {warps}"));
        self.threads.warp = self.f.prologue_inst(format!("urem i32 {in_task}, {warps}"));
        let task_tid = self.f.prologue_inst(format!(
            "sub i32 {}, {}",
            self.threads.program_tid,
            task_first * 32
        ));
        let tid = self
            .f
            .prologue_inst(format!("urem i32 {task_tid}, {}", warps * 32));
        self.set_thread_id(tid);
        let barrier_id = self.f.prologue_inst(format!("add i32 {index}, {region}"));
        self.num_warps = warps;
        self.context = ExecContext {
            region,
            first_warp: replica.first_warp,
            num_warps: warps,
            scratch_base,
            replica: index,
            barrier_id: BarrierId::Register(barrier_id),
        };
    }

    /// Defines `route` (in the entry block): whether this warp is one of
    /// `first..end`.
    fn define_route(&mut self, route: &str, first: u32, end: u32) {
        let warp = self.threads.program_warp.clone();
        let from = self
            .f
            .prologue_inst(format!("icmp uge i32 {warp}, {first}"));
        let to = self.f.prologue_inst(format!("icmp ult i32 {warp}, {end}"));
        let _ = writeln!(self.f.prologue, "  {route} = and i1 {from}, {to}");
    }

    /// Registers per thread the program starts with (see
    /// [`tlx_core::ir::launch_registers`]).
    fn default_registers(&self) -> u32 {
        launch_registers(self.kernel.total_warps(), self.kernel.options.maxnreg)
    }

    /// `setmaxnreg` to `regs`, up or down from `from`.
    fn set_max_registers(&mut self, regs: u32, from: u32) {
        self.sync.uses_setmaxnreg = true;
        let direction = match regs.cmp(&from) {
            std::cmp::Ordering::Less => "dec",
            std::cmp::Ordering::Greater => "inc",
            std::cmp::Ordering::Equal => return,
        };
        let text = format!("setmaxnreg.{direction}.sync.aligned.u32 {regs};");
        self.f.asm("void", &text, "~{memory}", &[]);
    }

    /// The first scratch byte no context has used yet, 16-byte aligned.
    fn scratch_high_water(&self) -> usize {
        (self.scratch_used() as usize).div_ceil(16) * 16
    }
}

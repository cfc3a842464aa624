//! The mbarrier family's lowering (`alloc_barriers`, `barrier_wait`,
//! `barrier_arrive`, `barrier_expect_bytes`) and the named barriers
//! (`named_barrier_wait`/`named_barrier_arrive`, `barrier.sync`/`arrive`):
//! initialization, arrivals (remote ones at cluster scope), transaction
//! bytes, and the phase waits, with a deadline under `mbar_timeout_ns`.
//! The TMA rings of pipelined loops (`descriptor.rs`) use the same helpers.

use super::{no_lowering, Deadline, Operands};
use crate::error::Result;
use crate::lower::Lowerer;
use tlx_core::ir::{Op, Prim};

impl<'k> Lowerer<'k> {
    pub(super) fn lower_mbarrier_prim(&mut self, op: &'k Op, named: &Operands<'k>) -> Result<()> {
        let arg = |name: &str| named.arg(name);
        let imm = |name: &str| named.imm(name);
        let result = || named.result();
        let prim = named.prim();
        match prim {
            Prim::AllocBarriers => {
                let r = result()?;
                let at = self.define_placed(r)?;
                self.init_barriers(at, self.ty(r).numel(), imm("arrive_count")?);
                Ok(())
            }
            Prim::BarrierWait => {
                let bar = self.shared_address_of(arg("bar")?)?;
                let phase = self.register(arg("phase")?)?;
                let pred = self.register(arg("pred")?)?;
                match self.kernel.options.mbar_timeout_ns {
                    Some(timeout) => self.wait_parity_or_trap(&bar, &phase, &pred, timeout, op),
                    None => self.wait_parity(&bar, &phase, &pred),
                }
                self.tcgen05_fence_after();
                Ok(())
            }
            Prim::BarrierArrive => {
                let remote = self.ty(arg("bar")?).is_remote();
                // A remote view's register is already its `shared::cluster` address.
                let bar = if remote {
                    self.register(arg("bar")?)?
                } else {
                    self.shared_address_of(arg("bar")?)?
                };
                let pred = self.register(arg("pred")?)?;
                let count = imm("arrive_count")?;
                self.tcgen05_fence_before();
                self.order_context_before_single_thread();
                // A remote arrival publishes this program's generic stores
                // into the peer's buffers (`remote_shmem_store`) only with a
                // release at cluster scope, which ptxas builds from a
                // GPU-wide `MEMBAR` (hundreds of cycles, every arrival).
                // Without such stores, the peer learns only that this
                // program is done reading a buffer of its own, which the
                // default release (CTA scope) orders, as CUTLASS's and
                // TLX's own remote arrivals do: the remote-arrive-per-stage
                // multicast backward measured 20% slower with the
                // cluster-scope form (H200, session 31).
                let publishes_stores = remote && self.facts.stores_into_peers;
                self.on_first_thread(&pred, |l| {
                    let asm = if publishes_stores {
                        format!(
                            "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [$0], {count};"
                        )
                    } else if remote {
                        format!("mbarrier.arrive.shared::cluster.b64 _, [$0], {count};")
                    } else {
                        format!("mbarrier.arrive.shared::cta.b64 _, [$0], {count};")
                    };
                    l.f.asm("void", &asm, "r,~{memory}", &[("i32", &bar)]);
                });
                Ok(())
            }
            Prim::BarrierExpectBytes => {
                let bar = self.shared_address_of(arg("bar")?)?;
                let bytes = self.register(arg("bytes")?)?;
                let pred = self.register(arg("pred")?)?;
                self.expect_bytes(&pred, &bar, &bytes);
                Ok(())
            }
            Prim::NamedBarrierWait | Prim::NamedBarrierArrive => {
                let step = if prim == Prim::NamedBarrierWait {
                    "sync"
                } else {
                    "arrive"
                };
                let id = self.register(arg("bar_id")?)?;
                let threads = u32::try_from(imm("num_threads")?).unwrap_or(0);
                if prim == Prim::NamedBarrierWait {
                    self.drop_barrier_subsumed_by(threads);
                }
                // Not `.aligned` (`bar.*`): see `Lowerer::barrier`.
                let asm = format!("barrier.{step} $0, {};", imm("num_threads")?);
                self.tcgen05_fence_before();
                self.f.asm("void", &asm, "r,~{memory}", &[("i32", &id)]);
                if prim == Prim::NamedBarrierWait {
                    self.tcgen05_fence_after();
                }
                Ok(())
            }
            other => Err(no_lowering(other)),
        }
    }

    /// Initializes `count` mbarriers at byte `at` from the first thread,
    /// then makes them visible to every thread and to the async proxy.
    pub(crate) fn init_barriers(&mut self, at: usize, count: usize, arrive_count: i64) {
        let offsets: Vec<String> = (0..count).map(|i| (at + 8 * i).to_string()).collect();
        self.init_barriers_at(&offsets, arrive_count);
    }

    /// [`Lowerer::init_barriers`] for mbarriers at the shared byte offsets
    /// `offsets` (i32 operands).
    pub(crate) fn init_barriers_at(&mut self, offsets: &[String], arrive_count: i64) {
        self.on_first_thread("true", |l| {
            for offset in offsets {
                let address = l.shared_address(offset);
                let asm = format!("mbarrier.init.shared::cta.b64 [$0], {arrive_count};");
                l.f.asm("void", &asm, "r,~{memory}", &[("i32", &address)]);
            }
            l.f.asm(
                "void",
                "fence.mbarrier_init.release.cluster;",
                "~{memory}",
                &[],
            );
        });
        self.barrier();
    }

    /// From the first thread, when `pred`: arrives on the mbarrier at `bar`
    /// announcing `bytes` (an i32 operand) of asynchronous copies for its
    /// current phase.
    pub(crate) fn expect_bytes(&mut self, pred: &str, bar: &str, bytes: &str) {
        self.on_first_thread(pred, |l| {
            l.f.asm(
                "void",
                "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;",
                "r,r,~{memory}",
                &[("i32", bar), ("i32", bytes)],
            );
        });
    }

    /// From the first thread: retires the mbarriers at the shared addresses
    /// `bars`, so that their bytes may hold something else (every wait on
    /// them is over).
    pub(crate) fn invalidate_barriers(&mut self, bars: &[String]) {
        self.on_first_thread("true", |l| {
            for bar in bars {
                l.f.asm(
                    "void",
                    "mbarrier.inval.shared::cta.b64 [$0];",
                    "r,~{memory}",
                    &[("i32", bar)],
                );
            }
        });
    }

    /// Spins on `mbarrier.try_wait.parity` (which itself suspends for a
    /// while) until the phase of parity `phase` completed; skipped when `pred` is false.
    pub(crate) fn wait_parity(&mut self, bar: &str, phase: &str, pred: &str) {
        let head = self.f.fresh("mbar_wait");
        let done = self.f.fresh("mbar_done");
        self.f
            .stmt(format!("br i1 {pred}, label %{head}, label %{done}"));
        self.enter_block(&head);
        let passed = self.try_wait_parity(bar, phase);
        self.f
            .stmt(format!("br i1 {passed}, label %{done}, label %{head}"));
        self.enter_block(&done);
    }

    /// One `mbarrier.try_wait.parity`: whether the phase of parity `phase` completed.
    fn try_wait_parity(&mut self, bar: &str, phase: &str) -> String {
        // A peer's stores into this program (`remote_shmem_store`) come
        // with its cluster-scope release (see `BarrierArrive`), which by
        // PTX's memory model synchronizes only with an acquire whose scope
        // holds the peer: the default is the CTA's.
        let scope = if self.facts.stores_into_peers {
            ".acquire.cluster"
        } else {
            ""
        };
        let asm = format!(
            "{{ .reg .pred p; mbarrier.try_wait.parity{scope}.shared::cta.b64 p, [$1], $2; \
             selp.u32 $0, 1, 0, p; }}"
        );
        let ok = self.f.asm(
            "i32",
            &asm,
            "=r,r,r,~{memory}",
            &[("i32", bar), ("i32", phase)],
        );
        self.f.inst(format!("icmp ne i32 {ok}, 0"))
    }

    /// `wait_parity` with a deadline (`mbar_timeout_ns`): past `timeout`
    /// nanoseconds the context's first thread says where it hangs and
    /// traps (see [`Lowerer::spin_until`]).
    fn wait_parity_or_trap(&mut self, bar: &str, phase: &str, pred: &str, timeout: u64, op: &Op) {
        let deadline = Deadline {
            timeout,
            op,
            what: "barrier_wait",
            why: "the mbarrier at shared address %u never completed the phase of parity %u"
                .to_owned(),
            args: vec![("i32", bar.to_owned()), ("i32", phase.to_owned())],
        };
        // `try_wait` suspends the thread for a while itself: no back-off.
        self.spin_until(pred, Some(deadline), false, |l| {
            l.try_wait_parity(bar, phase)
        });
    }

    /// Spins until `poll` (which emits the test and gives its `i1`) holds;
    /// skipped when `pred` is false; with `back_off`, a `nanosleep` before
    /// each retry. With a deadline, past its `timeout` nanoseconds of
    /// `%globaltimer` the context's first thread prints where it hangs
    /// (the op's source place, `what`, the time waited, `why` with its
    /// `args`, the program) and traps, which ends the grid with an error;
    /// the other threads spin until then.
    pub(crate) fn spin_until(
        &mut self,
        pred: &str,
        deadline: Option<Deadline<'_>>,
        back_off: bool,
        mut poll: impl FnMut(&mut Self) -> String,
    ) {
        let start = self.f.fresh("spin_start");
        let head = self.f.fresh("spin_wait");
        let retry = self.f.fresh("spin_retry");
        let done = self.f.fresh("spin_done");
        let clock = |l: &mut Self| {
            l.f.asm("i64", "mov.u64 $0, %globaltimer;", "=l,~{memory}", &[])
        };
        self.f
            .stmt(format!("br i1 {pred}, label %{start}, label %{done}"));
        self.enter_block(&start);
        let started = deadline.as_ref().map(|_| clock(self));
        self.f.stmt(format!("br label %{head}"));
        self.enter_block(&head);
        let passed = poll(self);
        self.f
            .stmt(format!("br i1 {passed}, label %{done}, label %{retry}"));
        self.enter_block(&retry);
        if back_off {
            self.f.asm("void", "nanosleep.u32 64;", "~{memory}", &[]);
        }
        let (Some(deadline), Some(started)) = (deadline, started) else {
            self.f.stmt(format!("br label %{head}"));
            self.enter_block(&done);
            return;
        };
        let late = self.f.fresh("spin_late");
        let report = self.f.fresh("spin_report");
        let now = clock(self);
        let waited = self.f.inst(format!("sub i64 {now}, {started}"));
        let over = self
            .f
            .inst(format!("icmp ugt i64 {waited}, {}", deadline.timeout));
        self.f
            .stmt(format!("br i1 {over}, label %{late}, label %{head}"));
        self.enter_block(&late);
        let first = self.f.inst(format!("icmp eq i32 {}, 0", self.thread_id()));
        self.f
            .stmt(format!("br i1 {first}, label %{report}, label %{head}"));
        self.enter_block(&report);
        let site = format!(
            "{}:{}:{}: {} timed out after %llu ns (mbar_timeout_ns): {}; program (%u, %u, %u)\n",
            crate::debug::escape_percent(&self.kernel.source_file),
            deadline.op.loc.line,
            deadline.op.loc.col,
            deadline.what,
            deadline.why,
        );
        let mut args = vec![("i64", waited)];
        args.extend(deadline.args);
        for d in ["x", "y", "z"] {
            let id = self
                .f
                .call("i32", &format!("llvm.nvvm.read.ptx.sreg.ctaid.{d}"), &[]);
            args.push(("i32", id));
        }
        self.vprintf(&site, &args);
        self.f.declare("declare void @llvm.trap()");
        self.f.stmt("call void @llvm.trap()");
        self.f.stmt("unreachable");
        self.enter_block(&done);
    }

    /// A single-thread arrival stands for the context's work: with several
    /// warp groups, the others must be done first (one warp group's own
    /// `wgmma.wait_group` already orders its reads).
    fn order_context_before_single_thread(&mut self) {
        if self.context.num_warps > 4 {
            self.barrier();
        }
    }
}

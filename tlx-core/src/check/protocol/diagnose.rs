//! From the interpreter's report on a skeleton run to the checker's
//! finding: which rule the kernel broke, at which call, and what to write
//! instead. The interpreter and the checker share one model, so the
//! finding names the same barrier and line the interpreter's report does.

use crate::interp::{BlockedTask, InterpError, NamedBarrierError, WaitReason};
use std::collections::HashMap;

use crate::ir::{Block, Kernel, Named, Op, OpKind, Prim, SrcLoc, ValueId};

use super::names::HandleNames;
use super::{Finding, Rule};

/// What a failed skeleton run means: an error in the kernel's protocol, or
/// something the checker could not follow (a warning).
pub(crate) enum Verdict {
    Error(Finding),
    Undecided(Finding),
}

/// The verdict on `error`, found with the sizes `sample` describes; about
/// a pipe's or a cluster-launch-control context's barriers, told in the
/// terms of their calls.
pub(crate) fn diagnose(kernel: &Kernel, error: &InterpError, sample: &str) -> Verdict {
    match diagnose_run(kernel, error, sample) {
        Verdict::Error(finding) => Verdict::Error(in_clc_terms(in_pipe_terms(finding))),
        Verdict::Undecided(finding) => Verdict::Undecided(in_clc_terms(in_pipe_terms(finding))),
    }
}

/// A finding about a `pipe!`'s barriers (the frontend names them
/// `PIPE.full` and `PIPE.empty`), whose hint would otherwise speak of the
/// `barrier_arrive` and `barrier_wait` a pipe user never writes: the hint
/// says which pipe call to write or fix instead.
fn in_pipe_terms(mut finding: Finding) -> Finding {
    // The first barrier the message names is the one the finding is about
    // (the list of blocked tasks comes after).
    let mention = |side: &str| {
        let end = finding.message.find(&format!(".{side}["))?;
        let start = finding.message[..end].rfind('`')? + 1;
        Some((end, finding.message[start..end].to_owned()))
    };
    let (pipe, full) = match (mention("full"), mention("empty")) {
        (Some((at_full, pipe)), Some((at_empty, _))) if at_full < at_empty => (pipe, true),
        (Some((_, pipe)), None) => (pipe, true),
        (_, Some((_, pipe))) => (pipe, false),
        (None, None) => return finding,
    };
    let calls = format!(
        "`{pipe}.full[s]` is what `writer.commit(it)` completes and `reader.wait(it)` waits \
         for, `{pipe}.empty[s]` what `reader.release(it)` completes and `writer.acquire(it)` \
         waits for, for stage `s = it % capacity` in round `it / capacity`"
    );
    finding.hint = if full {
        format!(
            "commit every stage the readers wait for, once each, from one task that is not \
             replicated, with the iteration number the readers pass to `wait` ({calls})"
        )
    } else {
        format!(
            "release every stage a reader waited for, with the same iteration number, in \
             every replica of each reading task, before the writer acquires it again \
             ({calls})"
        )
    };
    finding
}

/// A finding about a cluster-launch-control context's barriers (the
/// frontend names them `CTX.answered` and `CTX.released`): the hint speaks
/// of `clc_producer` and `clc_consumer`, which is what the user wrote.
fn in_clc_terms(mut finding: Finding) -> Finding {
    let Some(end) = ["answered[", "released["]
        .iter()
        .filter_map(|side| finding.message.find(&format!(".{side}")))
        .min()
    else {
        return finding;
    };
    let Some(start) = finding.message[..end].rfind('`').map(|s| s + 1) else {
        return finding;
    };
    let ctx = finding.message[start..end].to_owned();
    finding.hint = format!(
        "`{ctx}.answered` is what `clc_producer({ctx}, phase)`'s request completes and \
         `clc_consumer({ctx}, phase)` waits for; `{ctx}.released` gets one arrival from every \
         `clc_consumer` call and is what `clc_producer` waits for. Start the producer's phase \
         at 1 and every consumer's at 0, flip each after its call, and count in \
         `clc_create_context(num_consumers)` every task (in a cluster, of every program) that \
         calls `clc_consumer` once per tile"
    );
    finding
}

fn diagnose_run(kernel: &Kernel, error: &InterpError, sample: &str) -> Verdict {
    let names = HandleNames::of(kernel);
    let with = |rule, line: u32, op: &str, message: String, hint: &str| Finding {
        rule,
        at: locate(kernel, line, op),
        message: format!("{} (found with {sample})", names.rewrite(&message)),
        hint: hint.to_owned(),
    };
    let error_at =
        |rule, line, op, message, hint| Verdict::Error(with(rule, line, op, message, hint));
    match error {
        InterpError::Deadlock { tasks, .. } => match primary(kernel, tasks) {
            Some(task) => Verdict::Error(deadlock(kernel, task, tasks, sample)),
            None => Verdict::Undecided(with(
                Rule::Deadlock,
                0,
                "",
                format!("every task blocks:{}", list(tasks)),
                "",
            )),
        },
        InterpError::ExpectBytes { at, shortfall } => error_at(
            Rule::ExpectBytes,
            at.line,
            at.op,
            format!(
                "this `barrier_expect_bytes` announces {} bytes for phase {} of mbarrier #{}, but \
                 the copies completing on that phase bring {}: the phase never completes and its \
                 waiters hang",
                shortfall.expected, shortfall.phase, shortfall.barrier, shortfall.landed
            ),
            "announce exactly the bytes of the copies that complete on the barrier: the sum of \
             each copy's full box, `size_of(dtype) * rows * cols` (a box clipped at the tensor's \
             edge still counts in full)",
        ),
        InterpError::ExpectBytesShort {
            at,
            barrier,
            phase,
            copy_line,
        } => error_at(
            Rule::ExpectBytes,
            at.line,
            at.op,
            format!(
                "this `barrier_expect_bytes` announces fewer bytes than the copies completing on \
                 phase {phase} of mbarrier #{barrier} bring: the phase completed before the copy \
                 at line {copy_line} landed, so that copy counts toward the next phase and its \
                 reader, which waited for phase {phase}, reads the buffer before it lands"
            ),
            &format!(
                "announce the bytes of every copy that completes on the barrier, the copy at \
                 line {copy_line} too: the sum of each copy's full box, \
                 `size_of(dtype) * rows * cols`"
            ),
        ),
        InterpError::StaleWait {
            at,
            barrier,
            phase,
            first_line,
            ..
        } => error_at(
            Rule::StaleWait,
            at.line,
            at.op,
            format!(
                "this wait on mbarrier #{barrier} returns at once: the phase it names ({}) \
                 already completed and this task waited for it at line {first_line}; the \
                 barrier has moved on, so the wait does not wait for the newer phase",
                phase_name(*phase)
            ),
            "flip the phase each time the ring wraps around: `phase ^= 1` when the buffer index \
             returns to 0, or `phase = (iteration / STAGES) & 1`",
        ),
        InterpError::MBarrier { at, error, .. } => error_at(
            Rule::ArriveCount,
            at.line,
            at.op,
            format!("{error}: the phase would complete early and release its waiters too soon"),
            "make the arrivals per phase match `alloc_barriers`' arrive count: each \
             `barrier_arrive` counts once per task replica that runs it (not per thread), and \
             `barrier_expect_bytes` arrives once",
        ),
        InterpError::EarlyArrive {
            at,
            barrier,
            phase,
            earlier,
            ..
        } => error_at(
            Rule::ArriveCount,
            at.line,
            at.op,
            format!(
                "this arrive on mbarrier #{barrier} counts towards phase {phase}: this task's \
                 arrive at line {earlier} already completed the phase before, and the task has \
                 not waited since, so the phase completes early with an arrival meant for the \
                 last one"
            ),
            "arrive once per phase per task (as many arrivals per phase as `alloc_barriers`' \
             arrive count), and wait for the stage to come round again before arriving on it \
             again",
        ),
        InterpError::NamedBarrier { at, error, .. } => error_at(
            Rule::NamedBarrier,
            at.line,
            at.op,
            error.to_string(),
            match **error {
                NamedBarrierError::MixedProtocols { .. } => {
                    "give each pair (or group) of tasks that synchronize its own named barrier \
                     id: a hardware barrier counts threads, not tasks, so a generation \
                     completes with whichever tasks arrive first"
                }
                _ => {
                    "use ids below 16 and above the compiler's (0, and one per task replica of \
                     `async_tasks!`), thread counts that are multiples of 32, and the same \
                     count in the matching `named_barrier_arrive` and `named_barrier_wait`"
                }
            },
        ),
        InterpError::SharedMemoryRace { at, race, .. } => error_at(
            Rule::UnorderedRead,
            at.line,
            at.op,
            format!(
                "this reads shared buffer #{} before waiting on the barrier its asynchronous \
                 write (line {}) completes on: mbarrier #{} phase {}",
                race.buffer, race.line, race.barrier, race.phase
            ),
            "`barrier_wait` on the buffer's full barrier with the phase of this fill before \
             reading it",
        ),
        InterpError::OverwriteBeforeRelease {
            at, buffer, read, ..
        } if read.in_flight && tma_store_at(kernel, read.line) => error_at(
            Rule::OverwriteBeforeRelease,
            at.line,
            at.op,
            format!(
                "this writes shared buffer #{buffer} while the TMA store at line {} may still \
                 be reading it: no `async_descriptor_store_wait` retired that store first",
                read.line
            ),
            "call `async_descriptor_store_wait(0)` before writing the buffer again (or \
             `async_descriptor_store_wait(n)` with the `n` newer stores you keep in flight, \
             each from a buffer of its own)",
        ),
        InterpError::OverwriteBeforeRelease {
            at, buffer, read, ..
        } if at.op == Prim::Tcgen05Mma.mnemonic() || at.op == Prim::Tcgen05MmaScaled.mnemonic() => {
            error_at(
                Rule::OverwriteBeforeRelease,
                at.line,
                at.op,
                format!(
                "this `async_dot` overwrites tensor-memory accumulator #{buffer} before task `{}` \
                 released its read of it at line {}: nothing the reader arrived on after reading \
                 was waited for before this MMA",
                read.reader, read.line
            ),
                "have the reader arrive on the accumulator's \"empty\" barrier after its last \
             `local_load` of it, and wait on that barrier before the first `async_dot` into it \
             (with two accumulators, the MMAs of one tile overlap the other's epilogue)",
            )
        }
        InterpError::OverwriteBeforeRelease {
            at, buffer, read, ..
        } => error_at(
            Rule::OverwriteBeforeRelease,
            at.line,
            at.op,
            format!(
                "this writes shared buffer #{buffer} before task `{}` released its read of it at \
                 line {}{}: no arrive of the reader after that read was waited for here, so the \
                 write may clobber data still in use",
                read.reader,
                read.line,
                if read.in_flight {
                    " (an `async_dot` still reading it)"
                } else {
                    ""
                }
            ),
            "wait on the stage's \"empty\" barrier before refilling it, and have the reader \
             arrive on it only after its last read (after the `async_dot_wait` that retires an \
             `async_dot` reading it)",
        ),
        InterpError::UnorderedStoreRead { at, store, .. } => error_at(
            Rule::UnorderedRead,
            at.line,
            at.op,
            format!(
                "this reads shared buffer #{}, which `{}` stores into from another program at \
                 line {} (`remote_shmem_store`), with nothing ordering the store before the read",
                store.buffer, store.writer, store.line
            ),
            "after the `remote_shmem_store`, arrive on the reader's barrier \
             (`barrier_arrive(bar, 1, remote_cta_rank = <the reader's rank>)`), and \
             `barrier_wait` on it before reading",
        ),
        InterpError::UnfencedProxyRead { at, read, .. } => error_at(
            Rule::ProxyFence,
            at.line,
            at.op,
            format!(
                "this `{}` reads shared buffer #{} through the async proxy, but `{}` wrote \
                 it at line {} with `remote_shmem_store` (the generic proxy), and this task ran no \
                 proxy fence after it saw the store: the read may miss it",
                read.reader, read.store.buffer, read.store.writer, read.store.line
            ),
            "call `fence_async_shared()` after the `barrier_wait` that orders the store, \
             before this read",
        ),
        InterpError::UnwrittenShared { at, buffer, .. } => error_at(
            Rule::UnorderedRead,
            at.line,
            at.op,
            format!("this reads shared buffer #{buffer}, which nothing has written yet"),
            "wait for the copy that fills it (`barrier_wait` on its barrier, or \
             `async_load_wait_group`) before reading; a buffer read in a later iteration than \
             it is filled needs the same ring index on both sides",
        ),
        InterpError::WriteDuringCopy {
            at, buffer, copy, ..
        } => {
            let (message, hint) = match copy.barrier {
                None => (
                    format!(
                        "this writes shared buffer #{buffer} while the `async_load` at line {} \
                         may still be filling it: the two writes land in either order",
                        copy.line
                    ),
                    "commit the copy's group and `async_load_wait_group(n)` for it before \
                     writing the buffer, or write into another buffer"
                        .to_owned(),
                ),
                Some((barrier, phase)) => (
                    format!(
                        "this writes shared buffer #{buffer} while the {} at line {} may still \
                         be landing in it (it completes phase {phase} of mbarrier #{barrier}, \
                         which this task has not waited for): the two writes land in either order",
                        copy.op, copy.line
                    ),
                    format!(
                        "`barrier_wait` for phase {phase} of that barrier (or be ordered after a \
                         task that did) before writing the buffer, or write into another buffer"
                    ),
                ),
            };
            error_at(Rule::WriteDuringCopy, at.line, at.op, message, &hint)
        }
        InterpError::AsyncLoadPending { at, buffer, .. } => error_at(
            Rule::UnorderedRead,
            at.line,
            at.op,
            format!("this reads shared buffer #{buffer} while an `async_load` still fills it"),
            "`async_load_commit_group()` then `async_load_wait_group(n)` with `n` small enough \
             to cover the group that fills it",
        ),
        InterpError::CopyInFlightAtTaskEnd {
            at, buffer, copy, ..
        } => error_at(
            Rule::InFlightAtExit,
            at.line,
            at.op,
            format!(
                "this `{}` may still be {} shared buffer #{buffer} when its task ends: nothing \
                 waits for it, and the program's shared memory may be reused under it",
                copy.op(),
                copy.access()
            ),
            &format!(
                "call `{}` after the task's last `{}`, before the task ends",
                copy.wait(),
                copy.op()
            ),
        ),
        InterpError::WriteInFlightAtExit {
            at,
            buffer,
            barrier,
            phase,
            ..
        } => error_at(
            Rule::InFlightAtExit,
            at.line,
            at.op,
            format!(
                "this asynchronous write into shared buffer #{buffer} is never waited for \
                 (mbarrier #{barrier} phase {phase}) before the program exits: it may land \
                 after the program's shared memory is reused"
            ),
            "wait on the copy's barrier (`barrier_wait`) before the program ends, or do not \
             issue a copy whose data is never used (guard a prefetch past the last stage \
             with `if`)",
        ),
        InterpError::ViewIndex { at, index, count } => error_at(
            Rule::RingIndex,
            at.line,
            at.op,
            format!("`local_view` index {index} is outside the {count} buffers or barriers"),
            "take the ring index modulo the number of stages",
        ),
        InterpError::SliceBounds { at, slice } => error_at(
            Rule::RingIndex,
            at.line,
            at.op,
            format!(
                "a {:?} slice at {:?} does not fit in the {:?} buffer",
                slice.shape, slice.offsets, slice.of
            ),
            "keep `local_slice`'s offsets plus shape within the buffer",
        ),
        InterpError::AccumulatorBeforeCompletion { at, access, .. } => {
            let buffer = access.buffer;
            error_at(
            Rule::AccumulatorBeforeWait,
            at.line,
            at.op,
            match (access.mma_line, access.barrier) {
                (None, _) => format!(
                    "this reads tensor-memory buffer #{buffer}, which nothing has written yet: \
                     the `async_dot` that fills it has not been waited for"
                ),
                (Some(line), Some((bar, phase))) => format!(
                    "this accesses tensor-memory accumulator #{buffer} before waiting for the \
                     `async_dot` into it at line {line} to complete (mbarrier #{bar} phase \
                     {phase} tracks it): it may see a partial product"
                ),
                (Some(line), None) => format!(
                    "this accesses tensor-memory accumulator #{buffer} while the `async_dot` \
                     into it at line {line} is in flight and no barrier tracks it"
                ),
            },
            "give the `async_dot` `mbarriers = [bar]` (or call `tcgen05_commit(bar)` after it) \
             and `barrier_wait(bar, phase)` before `local_load` or `local_store` of the \
             accumulator",
            )
        }
        InterpError::DoubleMmaCompletion { at, barrier, .. } => error_at(
            Rule::MmaCompletion,
            at.line,
            at.op,
            format!(
                "this `tcgen05_commit` arrives on mbarrier #{barrier}, on which the `mbarriers` \
                 of the `async_dot`s it tracks already arrive: their completion is counted twice \
                 and the barrier's phase completes early"
            ),
            "track each `async_dot` once: either pass `mbarriers = [bar]` to it or call \
             `tcgen05_commit(bar)` after it, not both on the same barrier",
        ),
        InterpError::ClcAfterFailure {
            at, failed_line, ..
        } => error_at(
            Rule::ClcAfterFailure,
            at.line,
            at.op,
            format!(
                "this asks for more work after the program learned at line {failed_line} that \
                 none is left (`clc_consumer` gave -1): PTX leaves such a request undefined"
            ),
            "stop asking once an answer says -1: end the persistent loop on `tile != -1` and \
             call `clc_producer` only at the top of an iteration that has a tile, one request \
             per answer consumed",
        ),
        InterpError::Remote { at, error, .. } => error_at(
            Rule::ClusterAccess,
            at.line,
            at.op,
            error.to_string(),
            "after `alloc_barriers`, call `fence_mbarrier_init_cluster()` and then \
             `cluster_barrier()` in every program before peers arrive on, store into or \
             multicast onto its buffers and barriers; end the kernel with `cluster_barrier()`; \
             keep ranks below `cluster_num_ctas()`",
        ),
        InterpError::Undecidable { at, .. } => Verdict::Undecided(with(
            Rule::Undecidable,
            at.line,
            at.op,
            "the barrier protocol depends on a value loaded from memory or computed from data \
             here, which the checker does not follow"
                .to_owned(),
            "compute phases, ring indices, predicates and loop bounds from loop counters, \
             program ids and scalar parameters; or opt out with `check_protocol = false` in \
             `#[tlx::kernel(...)]`",
        )),
        other => Verdict::Undecided(with(
            Rule::Undecidable,
            0,
            "",
            format!("the checker could not run this kernel's synchronization skeleton: {other}"),
            "opt out with `check_protocol = false` in `#[tlx::kernel(...)]` if this persists, \
             and report the kernel",
        )),
    }
}

/// The blocked task to blame. A deadlock is a cycle of waits, so this is
/// a choice: first a wait on barriers nothing in the kernel arrives on,
/// then a producer's wait on a fresh "empty" barrier (one no copy
/// completes on) that nobody has arrived on yet, the classic wrong first
/// parity, then any mbarrier wait, then any other (not the join at the end
/// of `async_tasks`).
fn primary<'t>(kernel: &Kernel, tasks: &'t [BlockedTask]) -> Option<&'t BlockedTask> {
    let roles = BarrierRoles::of(kernel);
    let barrier_waits = || {
        tasks.iter().filter_map(|t| match t.wait.reason {
            WaitReason::MBarrier {
                phase, arrivals, ..
            } => Some((t, roles.of_wait(kernel, t.wait.line), phase, arrivals)),
            _ => None,
        })
    };
    // A wait that skips a phase (its parity not flipped when the ring
    // wrapped) is the cause; the other tasks wait on its account.
    let skipping = tasks.iter().find(|t| {
        matches!(
            t.wait.reason,
            WaitReason::MBarrier {
                skipped: Some(_),
                ..
            }
        )
    });
    if skipping.is_some() {
        return skipping;
    }
    barrier_waits()
        .find(|(_, role, ..)| role.is_some_and(|r| !r.arrived))
        .or_else(|| {
            barrier_waits().find(|(_, role, phase, arrivals)| {
                role.is_some_and(|r| !r.filled_by_copies) && *phase == 0 && *arrivals == 0
            })
        })
        .or_else(|| barrier_waits().next())
        .map(|(t, ..)| t)
        .or_else(|| {
            tasks
                .iter()
                .find(|t| !matches!(t.wait.reason, WaitReason::Tasks { .. }))
        })
}

/// What the kernel's text does with each `alloc_barriers` allocation.
#[derive(Copy, Clone, Debug, Default)]
struct Role {
    /// Some `barrier_arrive` or `barrier_expect_bytes` names it.
    arrived: bool,
    /// Some `barrier_expect_bytes` names it: copies complete on it.
    filled_by_copies: bool,
}

struct BarrierRoles {
    /// Per allocation (its value), its role.
    roles: HashMap<ValueId, Role>,
    /// The allocation each barrier view comes from.
    root: HashMap<ValueId, ValueId>,
}

impl BarrierRoles {
    fn of(kernel: &Kernel) -> BarrierRoles {
        let mut roles = BarrierRoles {
            roles: HashMap::new(),
            root: HashMap::new(),
        };
        roles.walk(&kernel.body);
        roles
    }

    fn walk(&mut self, block: &Block) {
        for op in &block.ops {
            if let OpKind::Prim { prim, args, .. } = &op.kind {
                let named = Named::new(*prim, args, &[]);
                match prim {
                    Prim::AllocBarriers => {
                        if let Some(&r) = op.results.first() {
                            self.root.insert(r, r);
                            self.roles.insert(r, Role::default());
                        }
                    }
                    Prim::LocalView => {
                        let root = named.get("buffers").ok().and_then(|a| self.root.get(a));
                        let root = root.copied();
                        if let (Some(root), Some(&r)) = (root, op.results.first()) {
                            self.root.insert(r, root);
                        }
                    }
                    Prim::BarrierArrive
                    | Prim::BarrierExpectBytes
                    | Prim::Tcgen05Commit
                    | Prim::Tcgen05Mma
                    | Prim::Tcgen05MmaScaled => {
                        // The barriers it arrives on.
                        let bars = match prim {
                            Prim::Tcgen05Mma | Prim::Tcgen05MmaScaled => named.rest("mbarriers"),
                            _ => named.get("bar").map(std::slice::from_ref),
                        };
                        for bar in bars.unwrap_or_default() {
                            let root = self.root.get(bar).copied();
                            if let Some(role) = root.and_then(|r| self.roles.get_mut(&r)) {
                                role.arrived = true;
                                role.filled_by_copies |= *prim == Prim::BarrierExpectBytes;
                            }
                        }
                    }
                    _ => {}
                }
            }
            for nested in op.kind.blocks() {
                self.walk(nested);
            }
        }
    }

    /// The role of the barrier the `barrier_wait` on `line` waits on.
    fn of_wait(&self, kernel: &Kernel, line: u32) -> Option<Role> {
        let wait = find_op(&kernel.body, &|op| {
            op.loc.line == line
                && matches!(
                    op.kind,
                    OpKind::Prim {
                        prim: Prim::BarrierWait,
                        ..
                    }
                )
        })?;
        let OpKind::Prim { prim, args, .. } = &wait.kind else {
            return None;
        };
        let root = self
            .root
            .get(Named::new(*prim, args, &[]).get("bar").ok()?)?;
        self.roles.get(root).copied()
    }
}

/// Whether the op at `line` is a TMA store (an in-flight read that a store
/// wait, not a barrier, ends).
fn tma_store_at(kernel: &Kernel, line: u32) -> bool {
    find_op(&kernel.body, &|op| {
        op.loc.line == line
            && matches!(
                op.kind,
                OpKind::Prim {
                    prim: Prim::AsyncDescriptorStore,
                    ..
                }
            )
    })
    .is_some()
}

fn find_op<'k>(block: &'k Block, pred: &dyn Fn(&Op) -> bool) -> Option<&'k Op> {
    block.ops.iter().find_map(|op| {
        if pred(op) {
            return Some(op);
        }
        op.kind.blocks().into_iter().find_map(|b| find_op(b, pred))
    })
}

fn deadlock(kernel: &Kernel, task: &BlockedTask, all: &[BlockedTask], sample: &str) -> Finding {
    let role = BarrierRoles::of(kernel).of_wait(kernel, task.wait.line);
    let (message, hint) = match task.wait.reason {
        WaitReason::MBarrier { barrier, .. } if role.is_some_and(|r| !r.arrived) => (
            format!(
                "this wait can never pass: nothing in the kernel arrives on mbarrier #{barrier} \
                 (the kernel deadlocks; blocked:{})",
                list(all)
            ),
            "release the stage once its data is consumed: `barrier_arrive` on this barrier \
             (in the task that reads the buffer it guards)",
        ),
        WaitReason::MBarrier {
            barrier,
            phase,
            skipped: Some(skipped),
            ..
        } if skipped.same_parity => (
            format!(
                "this wait can never pass: it waits for phase {phase} of mbarrier #{barrier}, but \
                 this task's previous wait on that barrier (line {}) passed on phase {}, and \
                 this one names the same parity, skipping phase {} (the kernel deadlocks; \
                 blocked:{})",
                skipped.line,
                phase_name(skipped.passed),
                skipped.passed + 1,
                list(all)
            ),
            "the phase was not flipped when the ring wrapped: flip it each time the buffer index \
             returns to 0 (`phase ^= 1`), or compute it, `(iteration / STAGES) & 1` for a wait \
             on \"full\" and `((iteration / STAGES) & 1) ^ 1` for a producer's wait on \"empty\"",
        ),
        WaitReason::MBarrier {
            barrier,
            phase,
            expected_arrivals,
            skipped: Some(skipped),
            ..
        } => (
            format!(
                "this wait can never pass: it means phase {} of mbarrier #{barrier}, which \
                 completed before it could wait, and so did the next: the barrier is at phase \
                 {phase}, ahead of its waiter. It gets more arrivals a phase than the {} \
                 `alloc_barriers` counts (the kernel deadlocks; blocked:{})",
                skipped.passed + 1,
                expected_arrivals,
                list(all)
            ),
            "count every arrival a phase gets in `alloc_barriers(n, count)`: each replica of \
             a replicated task arrives once, and so does each task that arrives on the barrier",
        ),
        WaitReason::MBarrier {
            barrier,
            phase,
            arrivals,
            expected_arrivals,
            ..
        } => (
            format!(
                "this wait can never pass: it waits for phase {phase} of mbarrier #{barrier}, \
                 which gets {arrivals} of its {expected_arrivals} arrivals and nothing else \
                 arrives (the kernel deadlocks; blocked:{})",
                list(all)
            ),
            if phase == 0 && arrivals == 0 {
                "a producer's first wait on an empty ring must pass at once: start its phase at \
                 1 (the phase before a barrier's first counts as completed); otherwise make \
                 sure some task arrives on this barrier before anyone waits for it"
            } else {
                "check that every phase gets `alloc_barriers`' arrive count of arrivals (each \
                 task replica's `barrier_arrive` counts once, `barrier_expect_bytes` once), \
                 and that waiter and arriver agree on the ring index and phase"
            },
        ),
        WaitReason::NamedBarrier {
            barrier,
            arrived_threads,
            expected_threads,
        } => (
            format!(
                "this named barrier {barrier} waits for {expected_threads} threads, but only \
                 {arrived_threads} ever arrive (the kernel deadlocks; blocked:{})",
                list(all)
            ),
            "the thread count must equal the threads of all the tasks that arrive or wait on \
             the id (128 per warp group)",
        ),
        WaitReason::ClusterBarrier { .. }
        | WaitReason::Tasks { .. }
        | WaitReason::Signal { .. } => (
            format!("the kernel deadlocks; blocked:{}", list(all)),
            "every program of a cluster must reach each `cluster_barrier()`",
        ),
    };
    let rule = match task.wait.reason {
        WaitReason::NamedBarrier { .. } => Rule::NamedBarrier,
        WaitReason::MBarrier {
            skipped: Some(skipped),
            ..
        } if !skipped.same_parity => Rule::ArriveCount,
        _ => Rule::Deadlock,
    };
    let names = HandleNames::of(kernel);
    // A barrier that runs ahead of its waiters counts too few arrivals: the
    // line to change is its `alloc_barriers`.
    let allocation = match task.wait.reason {
        WaitReason::MBarrier { barrier, .. } if rule == Rule::ArriveCount => {
            names.barrier_allocation(barrier)
        }
        _ => None,
    };
    let (at, message) = match allocation {
        Some(at) => (
            at,
            message.replacen(
                "this wait can never pass",
                &format!("the wait at line {} can never pass", task.wait.line),
                1,
            ),
        ),
        None => (locate(kernel, task.wait.line, task.wait.op), message),
    };
    Finding {
        rule,
        at,
        message: format!("{} (found with {sample})", names.rewrite(&message)),
        hint: hint.to_owned(),
    }
}

/// A completed phase as messages name it (`-1` is the one before the first,
/// which a fresh barrier counts as completed).
fn phase_name(phase: i64) -> String {
    if phase < 0 {
        "-1, before the first".to_owned()
    } else {
        phase.to_string()
    }
}

fn list(tasks: &[BlockedTask]) -> String {
    tasks.iter().map(|t| format!("\n  {t}")).collect()
}

/// The location of the op named `op` on `line` (the interpreter reports
/// lines; messages point at the call's first token).
fn locate(kernel: &Kernel, line: u32, op: &str) -> SrcLoc {
    find_op(&kernel.body, &|o| {
        o.loc.line == line && o.kind.code().source_name() == op
    })
    .map_or(SrcLoc { line, col: 0 }, |o| o.loc)
}

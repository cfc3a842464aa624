//! The cluster's primitives on the interpreter: `remote_view` (a handle
//! naming the peer, resolved where it is used), arrivals on a peer's
//! mbarrier, synchronous and asynchronous stores into a peer's buffer, the
//! init fence, and multicast TMA copies, which land in the same buffer of
//! every target program and complete their bytes on each target's own
//! barrier. Every access to a peer checks that the peer has made the buffer
//! or barrier visible to the cluster (see `interp::cluster`). Writes into a
//! peer's buffer follow the rules of local ones (ordered after its readers'
//! release; recorded for race reports); a skeleton run moves no data.

use crate::ir::Type;
use crate::ir::{Named, Op, Prim, ValueId};

use super::super::super::cluster::{ClusterMap, RemoteError};
use super::super::super::error::{Fault, InterpError};
use super::super::super::explore::{Access, Object};
use super::super::super::inflight::InFlightCopy;
use super::super::super::linear_index;
use super::super::super::schedule::ProgramShared;
use super::super::super::value::{Data, Handle};
use super::super::Executor;
use super::{barrier, BufferView, PrimResult, Stop};

impl<'k> Executor<'k> {
    /// This program's rank in its cluster (x fastest, as `cluster_cta_rank()`).
    pub(super) fn cluster_rank(&self) -> usize {
        let cluster = self.kernel.options.cluster.map(|d| d.max(1));
        let local = [0, 1, 2].map(|a| self.task.program[a] % cluster[a]);
        linear_index(cluster, local)
    }

    fn cluster_size(&self) -> usize {
        self.kernel.options.cluster_size().max(1) as usize
    }

    fn remote_error(&self, op: &Op, error: RemoteError) -> Stop {
        Stop::error(InterpError::Remote {
            at: self.site(Some(op)),
            task: self.task.name.clone(),
            error: Box::new(error),
        })
    }

    /// Cluster-barrier generations completed so far.
    fn completed_generations(shared: &ProgramShared) -> u64 {
        shared.footprint.touch(Object::ClusterBarrier, Access::Read);
        shared.cluster_barrier.generation()
    }

    /// Records a new allocation of this program (for peers' remote views).
    pub(super) fn record_alloc(&self, shared: &mut ProgramShared, alloc: usize) {
        let generation = Self::completed_generations(shared);
        shared.footprint.touch(Object::ClusterMap, Access::Arrive);
        shared
            .cluster
            .record_alloc(self.cluster_rank(), alloc, generation);
    }

    /// Records new barriers `first..first + count` of this program.
    pub(super) fn record_barriers(&self, shared: &mut ProgramShared, first: usize, count: usize) {
        shared.footprint.touch(Object::ClusterMap, Access::Arrive);
        shared
            .cluster
            .record_barriers(self.cluster_rank(), first, count);
    }

    /// The barrier `v` names, in this program or (a remote view) in a peer
    /// that has made it visible to the cluster: what `barrier_arrive` arrives on.
    pub(super) fn arrival_barrier(
        &self,
        op: &Op,
        v: ValueId,
        shared: &ProgramShared,
    ) -> PrimResult<usize> {
        match self.get(v)?.handle()? {
            Handle::Remote { rank, local } => match **local {
                Handle::Barriers { first } => self.peer_barrier(op, shared, first, *rank),
                _ => Err(Fault::malformed(format!("{v} is not a remote barrier")).into()),
            },
            _ => Ok(self.barrier_of(v)?),
        }
    }

    fn peer_barrier(
        &self,
        op: &Op,
        shared: &ProgramShared,
        id: usize,
        rank: usize,
    ) -> PrimResult<usize> {
        let completed = Self::completed_generations(shared);
        shared.footprint.touch(Object::ClusterMap, Access::Read);
        shared
            .cluster
            .peer_barrier(id, rank, self.cluster_rank(), completed)
            .map_err(|e| self.remote_error(op, e))
    }

    fn peer_buffer(
        &self,
        op: &Op,
        shared: &ProgramShared,
        view: &BufferView,
        rank: usize,
    ) -> PrimResult<BufferView> {
        let completed = Self::completed_generations(shared);
        shared.footprint.touch(Object::ClusterMap, Access::Read);
        let alloc = shared
            .cluster
            .peer_alloc(view.alloc, rank, self.cluster_rank(), completed)
            .map_err(|e| self.remote_error(op, e))?;
        Ok(BufferView {
            alloc,
            buffer: view.buffer,
            window: view.window.clone(),
            elem: view.elem,
            numel: view.numel,
        })
    }

    /// `view` in program `rank` of the cluster: itself in this program, the
    /// peer's (made visible to the cluster) in another.
    pub(super) fn member_view(
        &self,
        op: &Op,
        shared: &ProgramShared,
        view: &BufferView,
        rank: usize,
    ) -> PrimResult<BufferView> {
        match rank == self.cluster_rank() {
            true => Ok(view.clone()),
            false => self.peer_buffer(op, shared, view, rank),
        }
    }

    /// Barrier `id` of this program as program `rank` of the cluster has it.
    pub(super) fn member_barrier(
        &self,
        op: &Op,
        shared: &ProgramShared,
        id: usize,
        rank: usize,
    ) -> PrimResult<usize> {
        match rank == self.cluster_rank() {
            true => Ok(id),
            false => self.peer_barrier(op, shared, id, rank),
        }
    }

    /// The remote view `v`: its peer's rank, and the local handle it maps.
    fn remote_of(&self, v: ValueId) -> PrimResult<(usize, Handle)> {
        match self.get(v)?.handle()? {
            Handle::Remote { rank, local } => Ok((*rank, (**local).clone())),
            _ => Err(Fault::malformed(format!("{v} is not a remote view")).into()),
        }
    }

    /// Runs one of the cluster's primitives.
    pub(super) fn cluster_prim(
        &mut self,
        op: &Op,
        named: Named<'_, ValueId>,
        task: usize,
        shared: &mut ProgramShared,
    ) -> PrimResult<()> {
        let arg =
            |name: &str| -> PrimResult<ValueId> { Ok(*named.get(name).map_err(Fault::malformed)?) };
        let prim = named.prim();
        match prim {
            Prim::RemoteView => {
                let rank = self.get(arg("remote_cta_rank")?)?.scalar_int()?;
                let rank = ClusterMap::check_rank(rank, self.cluster_size())
                    .map_err(|e| self.remote_error(op, e))?;
                let local = self.get(arg("buffer")?)?.handle()?.clone();
                if matches!(local, Handle::Remote { .. } | Handle::Desc(_)) {
                    return Err(Fault::malformed("a remote view of a remote view").into());
                }
                self.define_handle(
                    op,
                    Handle::Remote {
                        rank,
                        local: Box::new(local),
                    },
                )
            }
            Prim::RemoteShmemStore => {
                let (rank, local) = self.remote_of(arg("dst")?)?;
                let view = local_buffer(&local, self.type_of(arg("dst")?)?)?;
                let peer = self.peer_buffer(op, shared, &view, rank)?;
                let id = shared.smem.buffer_id(peer.alloc, peer.buffer);
                self.check_write(op, shared, id, task)?;
                // The peer's reads must be ordered after the store, as after
                // a copy: nothing but an arrival the reader waits for tells it.
                shared.clocks.store(task, &self.task.name, op.loc.line, id);
                if self.skeleton.is_some() {
                    return Ok(shared.smem.mark_written(peer.alloc, peer.buffer)?);
                }
                let data = self.get(arg("value")?)?.data.clone();
                peer.write(shared, data)?;
                Ok(())
            }
            Prim::AsyncRemoteShmemStore => {
                let (rank, local) = self.remote_of(arg("dst")?)?;
                let (bar_rank, bar) = self.remote_of(arg("barrier")?)?;
                if bar_rank != rank {
                    return Err(self.remote_error(
                        op,
                        RemoteError::PeersDiffer {
                            buffer_rank: rank,
                            barrier_rank: bar_rank,
                        },
                    ));
                }
                let Handle::Barriers { first } = bar else {
                    return Err(Fault::malformed("a remote store's barrier is not one").into());
                };
                let buffer = local_buffer(&local, self.type_of(arg("dst")?)?)?;
                let peer = self.peer_buffer(op, shared, &buffer, rank)?;
                let peer_bar = self.peer_barrier(op, shared, first, rank)?;
                let elem = peer.elem;
                let bytes = (self.type_of(arg("value")?)?.numel() * elem.size_bytes()) as u32;
                let data = match self.skeleton {
                    Some(_) => None,
                    None => Some(self.get(arg("value")?)?.data.clone()),
                };
                self.send(op, (task, shared), peer, data, peer_bar, bytes)
            }
            Prim::FenceMbarrierInitCluster => {
                let generation = Self::completed_generations(shared);
                shared.footprint.touch(Object::ClusterMap, Access::Arrive);
                shared.cluster.fence(self.cluster_rank(), generation);
                Ok(())
            }
            Prim::AsyncDescriptorLoadMulticast => {
                self.multicast_load(op, named.operands(), task, shared)
            }
            Prim::ClcTryCancel => self.clc_try_cancel(op, named, task, shared),
            Prim::ClcQuery => {
                let view = self.buffer_view(arg("response")?)?;
                self.check_read(op, shared, view.alloc, view.buffer, task)?;
                let dim = named.imm("dim").map_err(Fault::malformed)?;
                let answer = self.clc_answer(op, &view, shared, dim)?;
                Ok(self.define(op, 0, Data::Int(vec![answer]))?)
            }
            _ => Err(
                Fault::malformed(format!("`{}` is not a cluster primitive", prim.mnemonic()))
                    .into(),
            ),
        }
    }

    /// A TMA copy of one block into the same buffer of each program whose
    /// bit the mask sets, completing its bytes on each one's own barrier.
    fn multicast_load(
        &mut self,
        op: &Op,
        args: &[ValueId],
        task: usize,
        shared: &mut ProgramShared,
    ) -> PrimResult<()> {
        let [desc, buffer, bar, mask, offsets @ ..] = args else {
            return Err(Fault::malformed("a multicast copy lacks an operand").into());
        };
        let view = self.buffer_view(*buffer)?;
        let bar_id = self.barrier_of(*bar)?;
        let mask = self.get(*mask)?.scalar_int()?;
        let size = self.cluster_size();
        let targets: Vec<usize> = (0..64).filter(|r| mask >> r & 1 == 1).collect();
        if let Some(&outside) = targets.iter().find(|&&r| r >= size) {
            let error = RemoteError::BadRank {
                rank: outside as i64,
                size,
            };
            return Err(self.remote_error(op, error));
        }
        let elem = view.elem;
        let block = self.type_of(*desc)?.shape().to_vec();
        // Each target's barrier counts the whole box, clipped or not.
        let bytes = (block.iter().product::<usize>() * elem.size_bytes()) as u32;
        let data = match self.skeleton {
            Some(_) => None,
            None => Some(self.read_tma_box(*desc, elem, offsets, false)?),
        };
        self.send_to_each(op, (task, shared), (&view, bar_id), &targets, data, bytes)
    }

    /// Starts one asynchronous write of `data` into `view` of each program
    /// `ranks` names, its `bytes` completing on barrier `bar` of each (same
    /// places there): every target is resolved first, so a bad one sends
    /// nothing.
    fn send_to_each(
        &self,
        op: &Op,
        (task, shared): (usize, &mut ProgramShared),
        (view, bar): (&BufferView, usize),
        ranks: &[usize],
        data: Option<Data>,
        bytes: u32,
    ) -> PrimResult<()> {
        let mut sends = Vec::with_capacity(ranks.len());
        for &rank in ranks {
            let to = self.peer_buffer(op, shared, view, rank)?;
            let to_bar = self.peer_barrier(op, shared, bar, rank)?;
            sends.push((to, to_bar));
        }
        for (to, to_bar) in sends {
            self.send(op, (task, shared), to, data.clone(), to_bar, bytes)?;
        }
        Ok(())
    }

    /// Starts an asynchronous write by `task` of `data` (none in a skeleton
    /// run) into `to` whose `bytes` complete on barrier `bar`: ordered after
    /// the buffer's readers, recorded for race reports, landed later by the
    /// scheduler (see `inflight`).
    fn send(
        &self,
        op: &Op,
        (task, shared): (usize, &mut ProgramShared),
        to: BufferView,
        data: Option<Data>,
        bar: usize,
        bytes: u32,
    ) -> PrimResult<()> {
        let phase = barrier(shared, bar, Access::Read)?.phase();
        let buffer_id = shared.smem.buffer_id(to.alloc, to.buffer);
        self.check_write(op, shared, buffer_id, task)?;
        shared.async_writes.record_write(
            buffer_id,
            &self.task.name,
            (op.kind.code().source_name(), op.loc.line),
            bar,
            phase,
        );
        let seq = shared.next_copy();
        shared.in_flight.push(InFlightCopy {
            seq,
            alloc: to.alloc,
            buffer: to.buffer,
            window: to.window,
            data,
            elem: to.elem,
            barrier: bar,
            bytes,
            clock: shared.clocks.snapshot(task),
            at: self.site(Some(op)),
            task: self.task.name.clone(),
        });
        Ok(())
    }
}

impl<'k> Executor<'k> {
    /// `clc_try_cancel`: takes a cluster of the launch that has not
    /// started (so it never will) and sends the answer, as a copy of 16
    /// bytes, to `response` and `bar` of this program or, multicast, of
    /// every program of the cluster. A skeleton run sends it too: whether
    /// a persistent loop goes on depends on it.
    pub(super) fn clc_try_cancel(
        &mut self,
        op: &Op,
        named: Named<'_, ValueId>,
        task: usize,
        shared: &mut ProgramShared,
    ) -> PrimResult<()> {
        let arg = |name: &str| named.get(name).copied().map_err(Fault::malformed);
        if !self.predicate(arg("pred")?)? {
            return Ok(());
        }
        if let Some(failed_line) = shared.observations.clc_failure(self.cluster_rank()) {
            return Err(Stop::error(InterpError::ClcAfterFailure {
                at: self.site(Some(op)),
                task: self.task.name.clone(),
                failed_line,
            }));
        }
        let view = self.buffer_view(arg("response")?)?;
        let bar = self.barrier_of(arg("bar")?)?;
        let answer = match self.pending.and_then(|p| p.cancel()) {
            Some(first) => std::iter::once(1).chain(first.map(i64::from)).collect(),
            None => vec![0; 4],
        };
        let data = Data::Int(answer);
        if named.imm("multicast").map_err(Fault::malformed)? == 0 {
            return self.send(op, (task, shared), view, Some(data), bar, CLC_ANSWER_BYTES);
        }
        let everyone: Vec<usize> = (0..self.cluster_size()).collect();
        let to = (&view, bar);
        self.send_to_each(
            op,
            (task, shared),
            to,
            &everyone,
            Some(data),
            CLC_ANSWER_BYTES,
        )
    }

    /// `clc_query`: the cancelled cluster's first program id along `dim`
    /// from the answer in `response` (`[cancelled, x, y, z]` here), or -1,
    /// which the program's later requests are checked against.
    pub(super) fn clc_answer(
        &self,
        op: &Op,
        response: &BufferView,
        shared: &mut ProgramShared,
        dim: i64,
    ) -> PrimResult<i64> {
        let Data::Int(words) = response.read(shared)? else {
            return Err(Fault::malformed("a cluster-launch-control answer is not integers").into());
        };
        let coordinate = usize::try_from(dim).ok().and_then(|d| words.get(1 + d));
        match (words.first(), coordinate) {
            (Some(0), _) => {
                let rank = self.cluster_rank();
                shared.observations.clc_failed(rank, op.loc.line);
                Ok(-1)
            }
            (Some(_), Some(&c)) => Ok(c),
            _ => Err(Fault::malformed(format!("`clc_query` of dimension {dim}")).into()),
        }
    }
}

/// What `clusterlaunchcontrol.try_cancel` writes and completes on its barrier.
const CLC_ANSWER_BYTES: u32 = 16;

/// The buffer a local handle names, seen as its remote view's type `ty`.
fn local_buffer(handle: &Handle, ty: &Type) -> Result<BufferView, Stop> {
    let Type::SharedMemory(m) = ty else {
        return Err(Fault::malformed("a remote store into something that is not a buffer").into());
    };
    match handle {
        Handle::Shared {
            alloc,
            first,
            window,
        } => Ok(BufferView {
            alloc: *alloc,
            buffer: *first,
            window: window.clone(),
            elem: m.elem(),
            numel: m.shape().iter().product(),
        }),
        _ => Err(Fault::malformed("a remote store into something that is not a buffer").into()),
    }
}

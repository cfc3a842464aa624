//! Distributed shared memory between the programs of a cluster: each
//! program has its own shared buffers and mbarriers (in the state the
//! cluster's programs share, `ProgramShared`), and a `remote_view` names the
//! counterpart of one of them in a peer. This map knows which program made
//! each allocation and barrier, in which order, so the counterpart is the
//! peer's allocation of the same place in its program order (every program
//! allocates the same things at the top of the kernel body).
//!
//! It also knows when a peer may touch them. On the GPU a remote arrival on
//! a barrier whose `mbarrier.init` is not yet visible to the cluster is
//! undefined; TLX's protocol is `alloc_barriers`, then
//! `fence_mbarrier_init_cluster()`, then `cluster_barrier()` in every
//! program, and only then remote arrivals. So a barrier becomes usable by
//! peers once its owner fenced it and a cluster-barrier generation that the
//! owner entered after the fence has completed; a buffer, once a generation
//! entered after its allocation has completed (the peer has started and
//! made it). Anything earlier is reported, and so is anything later than
//! the peer's end: a program that has exited has no shared memory left, so
//! a remote store, arrival or multicast landing there is undefined on the
//! GPU (TLX kernels end with a `cluster_barrier()` to prevent it).

use std::collections::HashMap;

/// Why a peer's buffer or barrier could not be reached.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RemoteError {
    #[error("CTA rank {rank} is not a program of this cluster of {size}")]
    BadRank { rank: i64, size: usize },
    #[error(
        "the {what} is remote (CTA rank {rank}), but that program has not made it yet: peers \
         may touch each other's shared memory only after a `cluster_barrier()` that follows \
         the allocation in every program"
    )]
    NotMade { what: &'static str, rank: usize },
    #[error(
        "arrival on mbarrier #{barrier} of CTA rank {rank} before that program made its \
         initialization visible to the cluster: call `fence_mbarrier_init_cluster()` after \
         `alloc_barriers` and then `cluster_barrier()`, in every program, before any remote \
         arrival or multicast copy completes on it"
    )]
    BarrierNotPublished { barrier: usize, rank: usize },
    #[error(
        "write into shared buffer #{buffer} of CTA rank {rank} before a `cluster_barrier()` \
         that both programs passed after it was allocated (the peer may not have started)"
    )]
    BufferNotPublished { buffer: usize, rank: usize },
    #[error(
        "the {what} is remote (CTA rank {rank}), but that program has already exited: end the \
         kernel with a `cluster_barrier()`, or have it wait for what peers send it, so that no \
         program leaves while another may still write into it or arrive on its barriers"
    )]
    PeerExited { what: &'static str, rank: usize },
    #[error(
        "`async_remote_shmem_store`'s buffer is in CTA rank {buffer_rank} and its barrier in \
         CTA rank {barrier_rank}: both must be the same peer's"
    )]
    PeersDiffer {
        buffer_rank: usize,
        barrier_rank: usize,
    },
}

/// A `local_alloc` and the cluster-barrier generation it was made in.
#[derive(Copy, Clone, Debug)]
struct Allocation {
    id: usize,
    generation: u64,
}

/// A group of barriers of one `alloc_barriers`.
#[derive(Copy, Clone, Debug)]
struct BarrierGroup {
    first: usize,
    count: usize,
}

/// Who made a barrier, and the generation of the fence that published it.
#[derive(Copy, Clone, Debug)]
struct BarrierOwner {
    rank: usize,
    fenced_in: Option<u64>,
}

/// The allocations and barriers of the programs of one cluster, by owner.
#[derive(Clone, Debug, Default)]
pub(crate) struct ClusterMap {
    /// Per rank, its allocations in program order.
    allocs: Vec<Vec<Allocation>>,
    /// Per allocation id: (owner rank, place in the owner's order).
    alloc_owner: HashMap<usize, (usize, usize)>,
    /// Per rank, its barrier groups in program order.
    groups: Vec<Vec<BarrierGroup>>,
    /// Per barrier id.
    barriers: HashMap<usize, BarrierOwner>,
    /// Ranks whose program has finished.
    exited: Vec<usize>,
}

impl ClusterMap {
    /// Forgets everything (a new cluster starts).
    pub(crate) fn clear(&mut self) {
        self.allocs.clear();
        self.alloc_owner.clear();
        self.groups.clear();
        self.barriers.clear();
        self.exited.clear();
    }

    /// Program `rank` finished: its shared memory is gone.
    pub(crate) fn exit(&mut self, rank: usize) {
        self.exited.push(rank);
    }

    fn check_alive(&self, what: &'static str, rank: usize, me: usize) -> Result<(), RemoteError> {
        if rank != me && self.exited.contains(&rank) {
            return Err(RemoteError::PeerExited { what, rank });
        }
        Ok(())
    }

    /// Fails if allocation `alloc` or barrier `barrier` (where a copy lands)
    /// belongs to a program that has exited.
    pub(crate) fn check_landing(&self, alloc: usize, barrier: usize) -> Result<(), RemoteError> {
        let owners = [
            self.alloc_owner
                .get(&alloc)
                .map(|&(rank, _)| ("buffer", rank)),
            self.barriers.get(&barrier).map(|o| ("barrier", o.rank)),
        ];
        for (what, rank) in owners.into_iter().flatten() {
            if self.exited.contains(&rank) {
                return Err(RemoteError::PeerExited { what, rank });
            }
        }
        Ok(())
    }

    fn slot<T>(table: &mut Vec<Vec<T>>, rank: usize) -> &mut Vec<T> {
        if table.len() <= rank {
            table.resize_with(rank + 1, Vec::new);
        }
        &mut table[rank]
    }

    /// Program `rank` made allocation `id` during cluster-barrier `generation`.
    pub(crate) fn record_alloc(&mut self, rank: usize, id: usize, generation: u64) {
        let own = Self::slot(&mut self.allocs, rank);
        self.alloc_owner.insert(id, (rank, own.len()));
        own.push(Allocation { id, generation });
    }

    /// Program `rank` initialized barriers `first..first + count`.
    pub(crate) fn record_barriers(&mut self, rank: usize, first: usize, count: usize) {
        Self::slot(&mut self.groups, rank).push(BarrierGroup { first, count });
        for id in first..first + count {
            self.barriers.insert(
                id,
                BarrierOwner {
                    rank,
                    fenced_in: None,
                },
            );
        }
    }

    /// `fence_mbarrier_init_cluster()` by program `rank` during cluster-barrier
    /// `generation`: its barriers initialized so far become visible once that
    /// generation completes.
    pub(crate) fn fence(&mut self, rank: usize, generation: u64) {
        for owner in self.barriers.values_mut() {
            if owner.rank == rank && owner.fenced_in.is_none() {
                owner.fenced_in = Some(generation);
            }
        }
    }

    /// Checks `rank` against a cluster of `size` programs.
    pub(crate) fn check_rank(rank: i64, size: usize) -> Result<usize, RemoteError> {
        usize::try_from(rank)
            .ok()
            .filter(|&r| r < size)
            .ok_or(RemoteError::BadRank { rank, size })
    }

    /// Allocation `id`'s counterpart in program `rank`, which must be usable
    /// by peers when `completed` cluster-barrier generations have completed
    /// (unless it is the caller's own: `me`).
    pub(crate) fn peer_alloc(
        &self,
        id: usize,
        rank: usize,
        me: usize,
        completed: u64,
    ) -> Result<usize, RemoteError> {
        self.check_alive("buffer", rank, me)?;
        let not_made = RemoteError::NotMade {
            what: "buffer",
            rank,
        };
        let &(_, place) = self.alloc_owner.get(&id).ok_or(not_made.clone())?;
        let peer = self
            .allocs
            .get(rank)
            .and_then(|own| own.get(place))
            .ok_or(not_made)?;
        if rank != me && peer.generation >= completed {
            return Err(RemoteError::BufferNotPublished {
                buffer: peer.id,
                rank,
            });
        }
        Ok(peer.id)
    }

    /// Barrier `id`'s counterpart in program `rank` (see [`Self::peer_alloc`]):
    /// usable by peers once fenced and a generation after the fence completed.
    pub(crate) fn peer_barrier(
        &self,
        id: usize,
        rank: usize,
        me: usize,
        completed: u64,
    ) -> Result<usize, RemoteError> {
        self.check_alive("barrier", rank, me)?;
        let not_made = RemoteError::NotMade {
            what: "barrier",
            rank,
        };
        let owner = self.barriers.get(&id).ok_or(not_made.clone())?;
        let own_groups = self.groups.get(owner.rank).ok_or(not_made.clone())?;
        let (place, offset) = own_groups
            .iter()
            .enumerate()
            .find(|(_, g)| (g.first..g.first + g.count).contains(&id))
            .map(|(place, g)| (place, id - g.first))
            .ok_or(not_made.clone())?;
        let peer = self
            .groups
            .get(rank)
            .and_then(|groups| groups.get(place))
            .filter(|g| offset < g.count)
            .map(|g| g.first + offset)
            .ok_or(not_made)?;
        let published = self
            .barriers
            .get(&peer)
            .and_then(|o| o.fenced_in)
            .is_some_and(|g| g < completed);
        if rank != me && !published {
            return Err(RemoteError::BarrierNotPublished {
                barrier: peer,
                rank,
            });
        }
        Ok(peer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_barrier_is_usable_after_its_fence_and_a_later_cluster_barrier() {
        let mut map = ClusterMap::default();
        // Ranks 0 and 1 each allocate two barriers, interleaved.
        map.record_barriers(0, 0, 2);
        map.record_barriers(1, 2, 2);
        // Before any fence: rank 0 may not arrive on rank 1's second barrier.
        assert_eq!(
            map.peer_barrier(1, 1, 0, 1),
            Err(RemoteError::BarrierNotPublished {
                barrier: 3,
                rank: 1
            })
        );
        // Its own counterpart needs nothing.
        assert_eq!(map.peer_barrier(3, 0, 0, 0), Ok(1));
        map.fence(1, 0);
        assert!(map.peer_barrier(1, 1, 0, 0).is_err(), "generation 0 runs");
        assert_eq!(map.peer_barrier(1, 1, 0, 1), Ok(3));
        assert_eq!(
            map.peer_barrier(0, 2, 0, 1),
            Err(RemoteError::NotMade {
                what: "barrier",
                rank: 2
            })
        );
    }

    #[test]
    fn a_peer_buffer_is_its_allocation_of_the_same_place() {
        let mut map = ClusterMap::default();
        map.record_alloc(0, 0, 0);
        map.record_alloc(1, 1, 0);
        map.record_alloc(0, 2, 0);
        assert_eq!(
            map.peer_alloc(2, 1, 0, 1),
            Err(RemoteError::NotMade {
                what: "buffer",
                rank: 1
            })
        );
        map.record_alloc(1, 3, 1);
        assert_eq!(
            map.peer_alloc(2, 1, 0, 1),
            Err(RemoteError::BufferNotPublished { buffer: 3, rank: 1 })
        );
        assert_eq!(map.peer_alloc(2, 1, 0, 2), Ok(3));
        assert_eq!(map.peer_alloc(0, 1, 0, 1), Ok(1));
        assert_eq!(map.check_landing(1, 7), Ok(()));
        map.exit(1);
        assert_eq!(
            map.peer_alloc(0, 1, 0, 2),
            Err(RemoteError::PeerExited {
                what: "buffer",
                rank: 1
            })
        );
        assert!(map.check_landing(1, 7).is_err(), "rank 1 made allocation 1");
        assert_eq!(
            ClusterMap::check_rank(2, 2),
            Err(RemoteError::BadRank { rank: 2, size: 2 })
        );
        assert_eq!(ClusterMap::check_rank(1, 2), Ok(1));
    }
}

//! The clusters of a launch that have not started: the workers running
//! programs take the next one from here, and Blackwell's cluster launch
//! control (`clc_try_cancel`) takes one too, so that the program asking
//! does that cluster's work and the cluster itself never starts. One
//! counter serves both, so every cluster is either started or cancelled,
//! exactly once, whatever the schedule and the number of OS threads.

use std::sync::atomic::{AtomicUsize, Ordering};

/// A launch's clusters in start order (x fastest), the next not yet taken.
#[derive(Debug)]
pub(crate) struct PendingClusters {
    next: AtomicUsize,
    /// The grid of clusters, and the programs of one cluster.
    cluster_grid: [u32; 3],
    cluster: [u32; 3],
}

impl PendingClusters {
    pub(crate) fn new(cluster_grid: [u32; 3], cluster: [u32; 3]) -> Self {
        PendingClusters {
            next: AtomicUsize::new(0),
            cluster_grid,
            cluster,
        }
    }

    fn len(&self) -> usize {
        self.cluster_grid.iter().map(|&d| d as usize).product()
    }

    /// The next cluster to start (its index in start order), or `None`
    /// when every one has started or been cancelled.
    pub(crate) fn take(&self) -> Option<usize> {
        let index = self.next.fetch_add(1, Ordering::Relaxed);
        (index < self.len()).then_some(index)
    }

    /// The first program (x fastest) of cluster `index`.
    pub(crate) fn first_program(&self, index: usize) -> [u32; 3] {
        let origin = super::program_at(self.cluster_grid, index);
        [0, 1, 2].map(|a| origin[a] * self.cluster[a])
    }

    /// `clusterlaunchcontrol.try_cancel`: the first program of a cluster
    /// that now never starts, or `None` when none is left to cancel.
    pub(crate) fn cancel(&self) -> Option<[u32; 3]> {
        self.take().map(|index| self.first_program(index))
    }
}

#[cfg(test)]
mod tests {
    use super::PendingClusters;

    #[test]
    fn every_cluster_is_taken_once_by_starts_and_cancels() {
        let queue = PendingClusters::new([3, 2, 1], [2, 1, 1]);
        assert_eq!(queue.take(), Some(0));
        assert_eq!(queue.cancel(), Some([2, 0, 0]));
        assert_eq!(queue.take(), Some(2));
        assert_eq!(queue.cancel(), Some([0, 1, 0]));
        assert_eq!(queue.cancel(), Some([2, 1, 0]));
        assert_eq!(queue.take(), Some(5));
        assert_eq!(queue.cancel(), None);
        assert_eq!(queue.take(), None);
    }
}

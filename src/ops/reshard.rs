//! TLE's `reshard` on a mesh of one axis (issue 53; docs/distributed.md):
//! a `[rows, cols]` tensor changes how its rows lie on the ranks, from one
//! [`Sharding`] to another, by one kernel per rank that reads its peers'
//! shards through `remote` between two `distributed_barrier`s (the first:
//! every rank's shard is complete, its earlier work being ordered before
//! its kernel; the second: no rank overwrites its shard while a peer still
//! reads it). The same kernels run on GPUs with peer access, on ranks
//! sharing a GPU and on the interpreter.
//!
//! | from | to | what moves |
//! | --- | --- | --- |
//! | `Split` | `Replicated` | all-gather |
//! | `Partial` | `Replicated` | all-reduce (sum) |
//! | `Partial` | `Split` | reduce-scatter (sum) |
//! | `Replicated` | `Split` | nothing: each rank keeps its rows |
//! | any | itself | nothing: a copy |
//! | `Replicated` or `Split` | `Partial` | refused, as TLE refuses it |

use crate::prelude::*;
use crate::{Element, SymBuffer};

/// How the rows of a `[rows, cols]` tensor lie on the ranks of a mesh.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sharding {
    /// Every rank holds all rows (TLE's broadcast, `B`).
    Replicated,
    /// Rank `r` holds rows `r * rows / ranks..(r + 1) * rows / ranks`
    /// (TLE's `S(0)`): `rows` must divide evenly.
    Split,
    /// Every rank holds all rows, and the tensor is their sum (TLE's `P`).
    Partial,
}

/// What the kernel does for one transition.
#[derive(Clone, Copy)]
enum Move {
    Gather = 0,
    Reduce = 1,
    ReduceScatter = 2,
    /// Rows `rank * split..` of this rank's own copy.
    Slice = 3,
    /// This rank's part as it is.
    Copy = 4,
}

macro_rules! reshard_kernel {
    ($name:ident, $t:ident) => {
        /// One rank's part of a transition (`MOVE` as [`Move`]): `split`
        /// elements per rank's shard of rows, `len` elements written (but
        /// by a gather); each program takes every `num_programs`-th block.
        #[tlx::kernel(configs = [
                    (BLOCK = 1024, MOVE = 0), (BLOCK = 1024, MOVE = 1), (BLOCK = 1024, MOVE = 2),
                    (BLOCK = 1024, MOVE = 3), (BLOCK = 1024, MOVE = 4),
                ])]
        fn $name<const BLOCK: usize, const MOVE: usize>(
            mesh: Mesh,
            x: SymPtr<$t>,
            out: Ptr<$t>,
            split: i32,
            len: i32,
        ) {
            let rank = shard_id(mesh, 0);
            let ranks = shard_count(mesh, 0);
            let pid = program_id(0);
            let programs = num_programs(0);
            let per_split = cdiv(split, BLOCK);
            let peers_read = MOVE < 3;
            if peers_read {
                distributed_barrier(mesh);
            }
            if MOVE == 0 {
                // Block b of peer p's shard, to shard p of the whole.
                for job in (pid..ranks * per_split).step_by(programs) {
                    let peer = job / per_split;
                    let offs = (job % per_split) * BLOCK + arange(0, BLOCK);
                    let mask = offs < split;
                    let v = load(remote(x, peer) + offs, mask = mask);
                    store(out + peer * split + offs, v, mask = mask);
                }
            } else {
                let mut from = 0;
                if MOVE == 2 || MOVE == 3 {
                    from = rank * split;
                }
                for block in (pid..cdiv(len, BLOCK)).step_by(programs) {
                    let offs = block * BLOCK + arange(0, BLOCK);
                    let mask = offs < len;
                    if peers_read {
                        // The sum over ranks of the whole, or of this rank's rows.
                        let mut sum = zeros([BLOCK], f32);
                        for peer in 0..ranks {
                            sum += load(remote(x, peer) + from + offs, mask = mask, other = 0.0)
                                .to(f32);
                        }
                        store(out + offs, sum.to($t), mask = mask);
                    } else {
                        store(out + offs, load(x + from + offs, mask = mask), mask = mask);
                    }
                }
            }
            if peers_read {
                distributed_barrier(mesh);
            }
        }
    };
}

reshard_kernel!(reshard_f32, f32);
reshard_kernel!(reshard_bf16, bf16);

/// Element types [`reshard`] moves: `f32` and `bf16` (sums in f32).
pub trait ReshardElement: Element + sealed::Sealed {}

impl ReshardElement for f32 {}
impl ReshardElement for bf16 {}

mod sealed {
    use crate::{Device, Error, MeshRank, SymRank};

    /// The kernels of one element type.
    pub trait Sealed: crate::Element {
        fn launch(
            device: &Device,
            grid: u32,
            rank: &MeshRank<'_>,
            operands: (&SymRank<'_, Self>, &crate::Buffer<Self>),
            sizes: (i32, i32),
            move_: usize,
        ) -> Result<(), Error>;
    }
}

macro_rules! sealed_launch {
    ($t:ident, $kernel:ident) => {
        impl sealed::Sealed for $t {
            fn launch(
                device: &Device,
                grid: u32,
                rank: &crate::MeshRank<'_>,
                (x, out): (&crate::SymRank<'_, Self>, &Buffer<Self>),
                (split, len): (i32, i32),
                move_: usize,
            ) -> Result<(), Error> {
                match move_ {
                    0 => $kernel::<1024, 0>::launch(device, grid, rank, x, out, split, len),
                    1 => $kernel::<1024, 1>::launch(device, grid, rank, x, out, split, len),
                    2 => $kernel::<1024, 2>::launch(device, grid, rank, x, out, split, len),
                    3 => $kernel::<1024, 3>::launch(device, grid, rank, x, out, split, len),
                    _ => $kernel::<1024, 4>::launch(device, grid, rank, x, out, split, len),
                }
            }
        }
    };
}

sealed_launch!(f32, reshard_f32);
sealed_launch!(bf16, reshard_bf16);

/// TLE's `reshard`: `x`, a `[rows, cols]` row-major tensor laid on `mesh`'s
/// ranks as `from` says (each rank's buffer of `x` holding its part: all
/// `rows * cols` elements, or its `rows / ranks` rows), written into `out`
/// (one buffer per rank, on its device) as `to` says. See the module for
/// what moves.
///
/// ```
/// use tlx::ops::dist::{reshard, Sharding};
/// use tlx::prelude::*;
///
/// let mut mesh = Mesh::interpreter(2)?;
/// // Rank r holds row r of a [2, 3] tensor.
/// let mut x = mesh.alloc::<f32>(3)?;
/// x.upload(0, &[1.0, 2.0, 3.0])?;
/// x.upload(1, &[4.0, 5.0, 6.0])?;
/// let full = mesh.alloc_each::<f32>(6)?;
/// reshard(&mut mesh, &x, Sharding::Split, &full, Sharding::Replicated, (2, 3))?;
/// assert_eq!(full[1].download()?, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
/// # Ok::<(), tlx::Error>(())
/// ```
pub fn reshard<T: ReshardElement>(
    mesh: &mut Mesh,
    x: &SymBuffer<T>,
    from: Sharding,
    out: &[Buffer<T>],
    to: Sharding,
    (rows, cols): (usize, usize),
) -> Result<(), Error> {
    const OP: &str = "reshard";
    let ranks = mesh.ranks();
    let whole = super::extents(OP, &[("rows", rows), ("cols", cols)])?;
    let refuse = |reason: String| Err(Error::InvalidShape { op: OP, reason });
    if rows % ranks != 0 && (from == Sharding::Split || to == Sharding::Split) {
        return refuse(format!(
            "{rows} rows do not split evenly over {ranks} ranks (pad the rows to a multiple of {ranks})"
        ));
    }
    let split = whole / ranks;
    let len = |s: Sharding| if s == Sharding::Split { split } else { whole };
    if x.len() < len(from) {
        return refuse(format!(
            "`x` holds {} elements per rank; {from:?} needs {}",
            x.len(),
            len(from)
        ));
    }
    super::dist::per_rank(OP, "out", mesh, out, len(to))?;
    let move_ = match (from, to) {
        (Sharding::Split, Sharding::Replicated) => Move::Gather,
        (Sharding::Partial, Sharding::Replicated) => Move::Reduce,
        (Sharding::Partial, Sharding::Split) => Move::ReduceScatter,
        (Sharding::Replicated, Sharding::Split) => Move::Slice,
        (from, to) if from == to => Move::Copy,
        (from, to) => {
            return refuse(format!(
                "{from:?} to {to:?}: no communication makes a partial sum from {from:?} data \
                 (TLE refuses it too); keep the data {from:?} or write the partial sums yourself"
            ))
        }
    };
    if whole == 0 {
        return Ok(());
    }
    let grid = (len(to).div_ceil(1024) as u32).clamp(1, mesh.programs_per_rank());
    let sizes = (split as i32, len(to) as i32);
    mesh.run(|rank, device| {
        let r = rank.index();
        T::launch(
            device,
            grid,
            rank,
            (&x.rank(r)?, &out[r]),
            sizes,
            move_ as usize,
        )
    })
}

//! The TMA family's lowering: `async_descriptor_load`/`_store` (one
//! `cp.async.bulk.tensor` per box of the block, from the first thread),
//! `async_descriptor_store_wait`, `async_descriptor_prefetch`, and the
//! descriptor forms whose code lives in `descriptor.rs`
//! (`load_tensor_descriptor`/`store_tensor_descriptor`) and
//! `device_descriptor.rs` (`make_tensor_descriptor`). [`Lowerer::tma_block`]
//! also serves the cluster's multicast loads and the pipelined loops' rings.

use super::{no_lowering, Operands};
use crate::error::{malformed, Result};
use crate::lower::Lowerer;
use tlx_core::ir::{Prim, SharedMemoryType, StoreReduce, TmaBox};

impl<'k> Lowerer<'k> {
    pub(super) fn lower_tma_prim(&mut self, named: &Operands<'k>) -> Result<()> {
        let arg = |name: &str| named.arg(name);
        let rest = |name: &str| named.rest(name);
        let imm = |name: &str| named.imm(name);
        let result = || named.result();
        match named.prim() {
            Prim::AsyncDescriptorLoad => {
                let desc = self.register(arg("desc")?)?;
                let m = self.buffer_type(arg("buffer")?)?;
                let dst = self.shared_address_of(arg("buffer")?)?;
                let bar = self.shared_address_of(arg("barrier")?)?;
                let coords = self.registers(rest("offsets")?)?;
                let load = TmaDirection::Load {
                    barrier: &bar,
                    multicast: None,
                };
                self.tma_block("true", &m, (&desc, &dst), load, &coords);
                Ok(())
            }
            Prim::AsyncDescriptorPrefetch => {
                let desc = self.register(arg("desc")?)?;
                let d = self.descriptor_type(arg("desc")?)?;
                let coords = self.registers(rest("offsets")?)?;
                self.tma_prefetch(&desc, &TmaBox::new(d.elem(), d.block_shape()), &coords);
                Ok(())
            }
            Prim::DescriptorLoad => {
                self.lower_descriptor_load(arg("desc")?, rest("offsets")?, result()?)
            }
            Prim::DescriptorStore => {
                self.lower_descriptor_store(arg("desc")?, arg("value")?, rest("offsets")?)
            }
            Prim::MakeTensorDescriptor => {
                self.lower_make_descriptor(arg("base")?, rest("dims")?, result()?)
            }
            Prim::AsyncDescriptorStore => {
                let desc = self.register(arg("desc")?)?;
                let m = self.buffer_type(arg("buffer")?)?;
                let src = self.shared_address_of(arg("buffer")?)?;
                let coords = self.registers(rest("offsets")?)?;
                // The tile's generic writes reach the async proxy, from every thread.
                self.shared_writes_reach_async_proxy();
                let reduce = StoreReduce::from_code(imm("store_reduce")?)
                    .ok_or_else(|| malformed("an unknown store reduction"))?;
                self.tma_block(
                    "true",
                    &m,
                    (&desc, &src),
                    TmaDirection::Store(reduce),
                    &coords,
                );
                Ok(())
            }
            Prim::AsyncDescriptorStoreWait => {
                // `.read`: the stores have read their shared buffers; without
                // it, their writes to global memory are done too (visible to
                // this thread, and to others after a release).
                let read = if imm("writes")? == 0 { ".read" } else { "" };
                let asm = format!("cp.async.bulk.wait_group{read} {};", imm("pendings")?);
                self.f.asm("void", &asm, "~{memory}", &[]);
                // Only the issuing thread tracked the stores: the others wait for it.
                self.barrier();
                Ok(())
            }
            other => Err(no_lowering(other)),
        }
    }

    /// Issues, from the first thread when `pred`, the TMA copies of one block between
    /// global memory (through `desc`) and the buffer at shared address
    /// `smem`: one per atom-wide box, the way `direction` says.
    pub(crate) fn tma_block(
        &mut self,
        pred: &str,
        m: &SharedMemoryType,
        (desc, smem): (&str, &str),
        direction: TmaDirection,
        coords: &[String],
    ) {
        let (barrier, multicast, reduce) = match direction {
            TmaDirection::Load { barrier, multicast } => (Some(barrier), multicast, None),
            TmaDirection::Store(reduce) => (None, None, reduce.atomic().map(|_| reduce.name())),
        };
        let tma = TmaBox::new(m.elem(), m.shape());
        let piece_bytes = tma.box_shape.iter().product::<usize>() * m.elem().size_bytes();
        self.on_first_thread(pred, |l| {
            for piece in 0..tma.pieces {
                let (at, coords) = l.tma_piece(smem, coords, &tma, piece, piece_bytes);
                // Operands: the buffer, the descriptor, the barrier of a
                // load, then the coordinates.
                let mut ops = vec![("i32", at.as_str()), ("i64", desc)];
                ops.extend(barrier.map(|b| ("i32", b)));
                let first = ops.len();
                ops.extend(coords.iter().map(|c| ("i32", c.as_str())));
                let (rank, at_coords) = (coords.len(), placeholders(first, coords.len()));
                let asm = match (barrier, multicast) {
                    (Some(_), None) => format!(
                        "cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1, {{{at_coords}}}], [$2];"
                    ),
                    (Some(_), Some(_)) => format!(
                        "cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [$0], [$1, {{{at_coords}}}], [$2], ${};",
                        first + coords.len()
                    ),
                    (None, _) => match reduce {
                        None => format!(
                            "cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group [$1, {{{at_coords}}}], [$0];"
                        ),
                        // The element type is the tensor map's.
                        Some(op) => format!(
                            "cp.reduce.async.bulk.tensor.{rank}d.global.shared::cta.{op}.tile.bulk_group [$1, {{{at_coords}}}], [$0];"
                        ),
                    },
                };
                let mut constraints = vec!["r", "l"];
                constraints.extend(std::iter::repeat_n("r", ops.len() - 2));
                if let (Some(_), Some(mask)) = (barrier, multicast) {
                    ops.push(("i16", mask));
                    constraints.push("h");
                }
                let constraints = constraints.join(",") + ",~{memory}";
                l.f.asm("void", &asm, &constraints, &ops);
            }
            if barrier.is_none() {
                l.f.asm("void", "cp.async.bulk.commit_group;", "~{memory}", &[]);
            }
        });
    }

    /// Asks TMA, from the first thread, to bring the block at `coords`
    /// into L2: one prefetch per box of the block, as its loads are cut.
    fn tma_prefetch(&mut self, desc: &str, tma: &TmaBox, coords: &[String]) {
        self.on_first_thread("true", |l| {
            for piece in 0..tma.pieces {
                let coords = l.tma_piece_coords(coords, tma, piece);
                let mut ops = vec![("i64", desc)];
                ops.extend(coords.iter().map(|c| ("i32", c.as_str())));
                let rank = coords.len();
                let at_coords = placeholders(1, rank);
                let asm = format!(
                    "cp.async.bulk.prefetch.tensor.{rank}d.L2.global.tile [$0, {{{at_coords}}}];"
                );
                let constraints = std::iter::once("l")
                    .chain(std::iter::repeat_n("r", rank))
                    .collect::<Vec<_>>()
                    .join(",");
                l.f.asm("void", &asm, &(constraints + ",~{memory}"), &ops);
            }
        });
    }

    /// Destination (or source) address and coordinates of TMA box `piece`
    /// of a block cut along its inner dimension; coordinates innermost
    /// first, as PTX takes them.
    fn tma_piece(
        &mut self,
        base: &str,
        coords: &[String],
        tma: &TmaBox,
        piece: usize,
        piece_bytes: usize,
    ) -> (String, Vec<String>) {
        let at = self
            .f
            .inst(format!("add i32 {base}, {}", piece * piece_bytes));
        (at, self.tma_piece_coords(coords, tma, piece))
    }

    /// The coordinates of TMA box `piece` of a block at `coords`, innermost
    /// first.
    fn tma_piece_coords(&mut self, coords: &[String], tma: &TmaBox, piece: usize) -> Vec<String> {
        let inner_step = tma.box_shape.last().copied().unwrap_or(0) * piece;
        let mut reversed: Vec<String> = coords.iter().rev().cloned().collect();
        if let Some(inner) = reversed.first_mut() {
            *inner = self.f.inst(format!("add i32 {inner}, {inner_step}"));
        }
        reversed
    }
}

/// Which way a TMA block moves.
pub(crate) enum TmaDirection<'a> {
    /// Into shared memory, completing on the mbarrier at `barrier`; with
    /// `multicast` (an i16 of cluster ranks), into the same buffer and
    /// barrier of each of those programs.
    Load {
        barrier: &'a str,
        multicast: Option<&'a str>,
    },
    /// Out of shared memory, committed as one bulk group; a reduction
    /// other than `None` combines each element with the one in memory.
    Store(StoreReduce),
}

/// `$first, $first+1, ...`: `count` asm operand references.
fn placeholders(first: usize, count: usize) -> String {
    (first..first + count)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

//! TLE's `extract_tile` and `insert_tile`, moved through shared memory: the
//! whole operand is written row-major, then each thread reads the elements
//! of the result's layout at their position in the operand.

use super::error::{malformed, Result};
use super::lower::{Lowerer, Tensor};
use super::scalar::mem_bytes;
use crate::layout::{dim_bits, LinearLayout};
use tlx_core::ir::{Op, OpKind};

impl<'k> Lowerer<'k> {
    /// Write `t` to shared memory at its flat indices (the caller synchronizes).
    fn write_all(&mut self, t: &Tensor, elem: tlx_core::ir::Elem) {
        for (r, v) in t.regs.iter().enumerate() {
            if t.layout.is_replica(r, 0, 0) {
                continue;
            }
            let flat = self.flat_index(&t.layout, r);
            self.smem_store(elem, 0, &flat, v);
        }
    }

    /// Flat index in `outer` of the element at flat index `flat` of a tile of
    /// `tile` shape placed at grid position `index`.
    fn tile_to_outer(
        &mut self,
        flat: &str,
        tile: &[usize],
        outer: &[usize],
        index: &[usize],
    ) -> Result<String> {
        let tile_bits = dim_bits(tile)?;
        let outer_bits = dim_bits(outer)?;
        let mut low_tile = 0;
        let mut low_outer = 0;
        let mut acc = "0".to_string();
        for d in (0..tile.len()).rev() {
            let shifted = self.f.inst(format!("lshr i32 {flat}, {low_tile}"));
            let coord = self.f.inst(format!("and i32 {shifted}, {}", tile[d] - 1));
            let placed = self
                .f
                .inst(format!("add i32 {coord}, {}", index[d] * tile[d]));
            let moved = self.f.inst(format!("shl i32 {placed}, {low_outer}"));
            acc = self.f.inst(format!("or i32 {acc}, {moved}"));
            low_tile += tile_bits[d];
            low_outer += outer_bits[d];
        }
        Ok(acc)
    }

    fn check_tile(&self, tile: &[usize], outer: &[usize], index: &[usize]) -> Result<()> {
        let fits = tile.len() == outer.len()
            && index.len() == outer.len()
            && (0..outer.len()).all(|d| {
                tile[d] > 0 && outer[d] % tile[d] == 0 && (index[d] + 1) * tile[d] <= outer[d]
            });
        if fits {
            Ok(())
        } else {
            Err(malformed(format!(
                "tile {tile:?} at {index:?} of {outer:?}"
            )))
        }
    }

    pub fn lower_tile(&mut self, op: &'k Op) -> Result<()> {
        let result = *op
            .results
            .first()
            .ok_or_else(|| malformed("tile op without result"))?;
        let rty = self.ty(result);
        let elem = rty.elem();
        match &op.kind {
            OpKind::ExtractTile { value, index } => {
                let src: Tensor = self.tensor(*value)?;
                let outer = self.ty(*value).shape().to_vec();
                self.check_tile(rty.shape(), &outer, index)?;
                let layout: LinearLayout = self.default_layout(rty.shape())?;
                self.use_shared(src.layout.numel() * mem_bytes(elem));
                self.barrier();
                self.write_all(&src, elem);
                self.barrier();
                let mut regs = Vec::with_capacity(layout.num_regs());
                for r in 0..layout.num_regs() {
                    let flat = self.flat_index(&layout, r);
                    let at = self.tile_to_outer(&flat, rty.shape(), &outer, index)?;
                    regs.push(self.smem_load(elem, 0, &at));
                }
                self.held.values.insert(result, Tensor { layout, regs });
            }
            OpKind::InsertTile { value, tile, index } => {
                let src: Tensor = self.tensor(*value)?;
                let piece: Tensor = self.tensor(*tile)?;
                let tile_shape = self.ty(*tile).shape().to_vec();
                self.check_tile(&tile_shape, rty.shape(), index)?;
                self.use_shared(src.layout.numel() * mem_bytes(elem));
                self.barrier();
                self.write_all(&src, elem);
                self.barrier();
                for (r, v) in piece.regs.iter().enumerate() {
                    if piece.layout.is_replica(r, 0, 0) {
                        continue;
                    }
                    let flat = self.flat_index(&piece.layout, r);
                    let at = self.tile_to_outer(&flat, &tile_shape, rty.shape(), index)?;
                    self.smem_store(elem, 0, &at, v);
                }
                self.barrier();
                let layout = src.layout.clone();
                let regs = (0..layout.num_regs())
                    .map(|r| {
                        let flat = self.flat_index(&layout, r);
                        self.smem_load(elem, 0, &flat)
                    })
                    .collect();
                self.held.values.insert(result, Tensor { layout, regs });
            }
            _ => return Err(malformed("not a tile op")),
        }
        Ok(())
    }
}

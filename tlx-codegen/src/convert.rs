//! Shared-memory element access and layout conversion through it: every
//! thread writes its elements, the CTA synchronizes, and every thread reads
//! the elements of the new layout. General and always correct; the barrier
//! before the writes makes the shared scratch safe to reuse between ops.
//!
//! Matrices wide enough for a swizzle are placed by one
//! ([`SharedLayout::nvmma`]): a 16-byte chunk's bank group then depends on
//! its row, so the columns of rows that one warp writes or reads together
//! (an MMA fragment's eight rows, say) fall in different banks, and every
//! thread moves the widest vectors both layouts keep contiguous. Other
//! tiles go element by element at their row-major index.

use super::emit::FuncText;
use super::error::Result;
use super::lower::{Lowerer, Tensor};
use super::region::{Placement, Region};
use super::scalar::{from_bits, mem_bytes, to_bits};
use crate::layout::{LinearLayout, SharedLayout, Swizzle};
use tlx_core::ir::Elem;

/// The LLVM integer type moving `bytes`-sized elements.
pub fn bits_llvm_type(bytes: usize) -> &'static str {
    match bytes {
        1 => "i8",
        2 => "i16",
        8 => "i64",
        _ => "i32",
    }
}

/// Which shared memory an address is in: this program's (a byte offset in
/// its shared array) or, through the cluster window, a peer's (an absolute
/// `shared::cluster` address).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SharedWindow {
    Cta,
    Cluster,
}

/// One contiguous run of a thread's elements of a tile in a shared buffer.
pub struct PlacedRun {
    /// Its first byte: the buffer's base plus its offset (i32 operand).
    pub at: String,
    /// Its elements packed into memory words (16-bit words for one byte).
    pub words: Vec<String>,
    pub word_bytes: usize,
    /// Its length in bytes.
    pub bytes: usize,
}

/// `store` of `value` (an `elem`) at shared pointer `p`.
fn store_at(f: &mut FuncText, elem: Elem, p: &str, value: &str) {
    let bytes = mem_bytes(elem);
    let bits = to_bits(f, elem, value);
    let ty = bits_llvm_type(bytes);
    f.stmt(format!(
        "store {ty} {bits}, ptr addrspace(3) {p}, align {bytes}"
    ));
}

/// `load` of an `elem` from shared pointer `p`.
fn load_at(f: &mut FuncText, elem: Elem, p: &str) -> String {
    let bytes = mem_bytes(elem);
    let ty = bits_llvm_type(bytes);
    let bits = f.inst(format!("load {ty}, ptr addrspace(3) {p}, align {bytes}"));
    from_bits(f, elem, &bits)
}

impl<'k> Lowerer<'k> {
    /// Store one element's bits at element index `flat` of the shared scratch
    /// region starting at byte `base`.
    pub fn smem_store(&mut self, elem: Elem, base: usize, flat: &str, value: &str) {
        let p = self.smem_elem_ptr(elem, base, flat);
        store_at(&mut self.f, elem, &p, value);
    }

    pub fn smem_load(&mut self, elem: Elem, base: usize, flat: &str) -> String {
        let p = self.smem_elem_ptr(elem, base, flat);
        load_at(&mut self.f, elem, &p)
    }

    fn smem_elem_ptr(&mut self, elem: Elem, base: usize, flat: &str) -> String {
        let base = self.scratch(base);
        let off = self.f.inst(format!("mul i32 {flat}, {}", mem_bytes(elem)));
        let off = self.f.inst(format!("add i32 {off}, {base}"));
        self.smem_ptr(&off)
    }

    /// Store register `reg` of a `layout` tile, `value`, into `region`.
    pub fn smem_store_reg(
        &mut self,
        elem: Elem,
        region: Region,
        layout: &LinearLayout,
        reg: usize,
        value: &str,
    ) {
        let p = self.smem_reg_ptr(region, layout, reg);
        store_at(&mut self.f, elem, &p, value);
    }

    /// Load register `reg` of a `layout` tile from `region`.
    pub fn smem_load_reg(
        &mut self,
        elem: Elem,
        region: Region,
        layout: &LinearLayout,
        reg: usize,
    ) -> String {
        let p = self.smem_reg_ptr(region, layout, reg);
        load_at(&mut self.f, elem, &p)
    }

    /// Pointer to the slot of register `reg` of a `layout` tile in `region`.
    ///
    /// When no register bit of the layout shares a flat-index bit with a lane
    /// or warp bit (blocked and MMA layouts), a register's flat index is the
    /// thread's part plus a constant, so its pointer is one per-thread pointer
    /// (built once, in the entry block) plus a constant byte offset. That keeps
    /// a tile's addresses from being one long index expression per element:
    /// LLVM's address analyses (GVN, strength reduction) then have little to
    /// walk, and the offset folds into the `ld`/`st` immediate.
    fn smem_reg_ptr(&mut self, region: Region, layout: &LinearLayout, reg: usize) -> String {
        let region = Region {
            base: self.scratch(region.base),
            ..region
        };
        let own = layout.reg_offset(reg);
        let thread_bits = layout
            .lanes
            .iter()
            .chain(&layout.warps)
            .fold(0, |acc, b| acc | b);
        let reg_bits = layout.regs.iter().fold(0, |acc, b| acc | b);
        if thread_bits & reg_bits != 0 {
            let flat = self.flat_index(layout, reg);
            let slot = region.placement.emit_slot(&flat, |rhs| self.f.inst(rhs));
            let off = self
                .f
                .inst(format!("mul i32 {slot}, {}", region.elem_bytes));
            let off = self.f.inst(format!("add i32 {off}, {}", region.base));
            return self.smem_ptr(&off);
        }
        let thread = self.smem_thread_ptr(region, layout);
        let offset = region.placement.slot(own) as usize * region.elem_bytes;
        self.smem_ptr_plus(&thread, offset)
    }

    /// This thread's pointer into `region` for `layout` (its register 0's slot),
    /// built once per region and layout in the entry block.
    fn smem_thread_ptr(&mut self, region: Region, layout: &LinearLayout) -> String {
        let key = (
            self.context.region,
            region,
            layout.lanes.clone(),
            layout.warps.clone(),
        );
        if let Some(p) = self.threads.smem_thread_ptrs.get(&key) {
            return p.clone();
        }
        let flat = self.thread_offset(layout);
        let slot = region
            .placement
            .emit_slot(&flat, |rhs| self.f.prologue_inst(rhs));
        let off = self
            .f
            .prologue_inst(format!("mul i32 {slot}, {}", region.elem_bytes));
        let off = self
            .f
            .prologue_inst(format!("add i32 {off}, {}", region.base));
        let p = self.f.prologue_inst(format!(
            "getelementptr i8, ptr addrspace(3) @global_smem, i32 {off}"
        ));
        self.threads.smem_thread_ptrs.insert(key, p.clone());
        p
    }

    /// Stores tile `t` (of `elem`s) into the scratch at byte `base` (an
    /// i32 operand) in placement `shared`, with the widest vector stores
    /// the placement keeps contiguous (at most 16 bytes).
    pub fn store_placed(
        &mut self,
        t: &Tensor,
        elem: Elem,
        shared: &SharedLayout,
        base: &str,
    ) -> Result<()> {
        let base = self.scratch_operand(base);
        self.store_placed_at(t, elem, shared, &base)
    }

    /// [`Lowerer::store_placed`] at byte `base` (an i32 operand) of the
    /// shared array itself, not of the scratch.
    pub fn store_placed_at(
        &mut self,
        t: &Tensor,
        elem: Elem,
        shared: &SharedLayout,
        base: &str,
    ) -> Result<()> {
        self.store_placed_in(t, elem, shared, base, SharedWindow::Cta)
    }

    /// [`Lowerer::store_placed_at`] into `window`: with
    /// [`SharedWindow::Cluster`], `base` is a `shared::cluster` address (a
    /// peer program's buffer, from `mapa`) and the stores are
    /// `st.shared::cluster`.
    pub fn store_placed_in(
        &mut self,
        t: &Tensor,
        elem: Elem,
        shared: &SharedLayout,
        base: &str,
        window: SharedWindow,
    ) -> Result<()> {
        self.for_each_placed_run(t, elem, shared, base, |l, run| {
            let p = match window {
                SharedWindow::Cta => l.smem_ptr(&run.at),
                SharedWindow::Cluster => {
                    l.f.inst(format!("inttoptr i32 {} to ptr addrspace(7)", run.at))
                }
            };
            let space = match window {
                SharedWindow::Cta => 3,
                SharedWindow::Cluster => 7,
            };
            let wty = super::memory::word_type(run.word_bytes);
            let (ty, value) = word_vector(&mut l.f, wty, &run.words);
            let (ty, value) = if run.bytes == 1 {
                let b = l.f.inst(format!("trunc i16 {value} to i8"));
                ("i8".to_string(), b)
            } else {
                (ty, value)
            };
            l.f.stmt(format!(
                "store {ty} {value}, ptr addrspace({space}) {p}, align {}",
                run.bytes.min(16)
            ));
            Ok(())
        })
    }

    /// Calls `emit` for each run of a thread's registers that a placement
    /// keeps contiguous (at most 16 bytes), skipping register replicas,
    /// with its byte address (`base` plus its offset) and its packed words.
    pub fn for_each_placed_run(
        &mut self,
        t: &Tensor,
        elem: Elem,
        shared: &SharedLayout,
        base: &str,
        mut emit: impl FnMut(&mut Self, PlacedRun) -> Result<()>,
    ) -> Result<()> {
        let bytes = mem_bytes(elem);
        let offsets = shared.compose(&t.layout)?;
        let per = shared.contiguous_run(&t.layout, bytes)?;
        let thread = self.thread_xor(&offsets.lanes, &offsets.warps);
        for first in (0..t.regs.len()).step_by(per) {
            if t.layout.is_replica(first, 0, 0) {
                continue;
            }
            let own = offsets.reg_offset(first);
            let at = self.f.inst(format!("xor i32 {thread}, {own}"));
            let at = self.f.inst(format!("add i32 {base}, {at}"));
            let bits: Vec<String> = t.regs[first..first + per]
                .iter()
                .map(|v| to_bits(&mut self.f, elem, v))
                .collect();
            let (word, _) = super::memory::words_of(per, bytes);
            let words = self.pack(&bits, bytes, word);
            emit(
                self,
                PlacedRun {
                    at,
                    words,
                    word_bytes: word,
                    bytes: per * bytes,
                },
            )?;
        }
        Ok(())
    }

    /// Scratch-relative byte offset `base` (an i32 operand) as an offset in
    /// the shared buffer.
    fn scratch_operand(&mut self, base: &str) -> String {
        let start = self.scratch(0);
        self.f.inst(format!("add i32 {base}, {start}"))
    }

    /// Loads a tile of `layout` (of `elem`s) from the scratch at byte
    /// `base` (an i32 operand) in placement `shared`, with the widest vector
    /// loads the placement keeps contiguous (at most 16 bytes).
    pub fn load_placed(
        &mut self,
        layout: &LinearLayout,
        elem: Elem,
        shared: &SharedLayout,
        base: &str,
    ) -> Result<Vec<String>> {
        let base = self.scratch_operand(base);
        self.load_placed_at(layout, elem, shared, &base)
    }

    /// [`Lowerer::load_placed`] from byte `base` (an i32 operand) of the
    /// shared array itself, not of the scratch.
    pub fn load_placed_at(
        &mut self,
        layout: &LinearLayout,
        elem: Elem,
        shared: &SharedLayout,
        base: &str,
    ) -> Result<Vec<String>> {
        let bytes = mem_bytes(elem);
        let offsets = shared.compose(layout)?;
        let per = shared.contiguous_run(layout, bytes)?;
        let thread = self.thread_xor(&offsets.lanes, &offsets.warps);
        let (word, words) = super::memory::words_of(per, bytes);
        let wty = super::memory::word_type(word);
        let vty = if words == 1 {
            wty.to_string()
        } else {
            format!("<{words} x {wty}>")
        };
        let mut regs = Vec::with_capacity(layout.num_regs());
        for first in (0..layout.num_regs()).step_by(per) {
            let own = offsets.reg_offset(first);
            let at = self.f.inst(format!("xor i32 {thread}, {own}"));
            let at = self.f.inst(format!("add i32 {base}, {at}"));
            let p = self.smem_ptr(&at);
            let (lty, align) = if bytes == 1 && per == 1 {
                ("i8".to_string(), 1)
            } else {
                (vty.clone(), per * bytes)
            };
            let v = self
                .f
                .inst(format!("load {lty}, ptr addrspace(3) {p}, align {align}"));
            let ws: Vec<String> = if bytes == 1 && per == 1 {
                vec![self.f.inst(format!("zext i8 {v} to i16"))]
            } else if words == 1 {
                vec![v]
            } else {
                (0..words)
                    .map(|i| self.f.inst(format!("extractelement {vty} {v}, i32 {i}")))
                    .collect()
            };
            for b in self.unpack(&ws, bytes, word) {
                regs.push(from_bits(&mut self.f, elem, &b));
            }
        }
        Ok(regs)
    }

    pub fn convert(&mut self, t: &Tensor, elem: Elem, dst: &LinearLayout) -> Result<Vec<String>> {
        let src = &t.layout;
        if let Some(placed) = swizzled_placement(&src.shape, mem_bytes(elem)) {
            self.use_shared(placed.bytes);
            self.barrier();
            self.store_placed(t, elem, &placed, "0")?;
            self.barrier();
            return self.load_placed(dst, elem, &placed, "0");
        }
        self.use_shared(src.numel() * mem_bytes(elem));
        let region = Region {
            base: 0,
            placement: Placement::FLAT,
            elem_bytes: mem_bytes(elem),
        };
        self.barrier();
        for (r, value) in t.regs.iter().enumerate() {
            // A register replica holds what a lower register of this thread writes.
            if src.is_replica(r, 0, 0) {
                continue;
            }
            self.smem_store_reg(elem, region, src, r, value);
        }
        self.barrier();
        Ok((0..dst.num_regs())
            .map(|r| self.smem_load_reg(elem, region, dst, r))
            .collect())
    }
}

/// The swizzled placement of a `shape` tile of `elem_bytes` elements, when
/// it is a matrix with rows of at least 32 bytes and at least 8 of them.
fn swizzled_placement(shape: &[usize], elem_bytes: usize) -> Option<SharedLayout> {
    let [_, cols] = shape else { return None };
    let swizzle = Swizzle::widest_for(cols * elem_bytes)?;
    SharedLayout::nvmma(shape, elem_bytes, swizzle).ok()
}

/// A run of `words` words of `wty` as one LLVM value (a vector when longer than one).
fn word_vector(f: &mut FuncText, wty: &str, words: &[String]) -> (String, String) {
    if let [one] = words {
        return (wty.to_string(), one.clone());
    }
    let vty = format!("<{} x {wty}>", words.len());
    let mut acc = "poison".to_string();
    for (i, w) in words.iter().enumerate() {
        acc = f.inst(format!("insertelement {vty} {acc}, {wty} {w}, i32 {i}"));
    }
    (vty, acc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_slots_add_over_disjoint_bits() {
        let padded = Placement {
            cols: 32,
            stride: 40,
            transpose: false,
        };
        let transposed = Placement {
            transpose: true,
            ..padded
        };
        for p in [padded, transposed, Placement::FLAT] {
            for (thread, own) in [(0b101_00000, 0b010_00111), (0b11100, 0b11_00000_00011)] {
                assert_eq!(thread & own, 0);
                assert_eq!(p.slot(thread | own), p.slot(thread) + p.slot(own));
            }
        }
        // Element (row 2, col 3) of a [.., 32] tile.
        assert_eq!(padded.slot(2 * 32 + 3), 2 * 40 + 3);
        assert_eq!(transposed.slot(2 * 32 + 3), 3 * 40 + 2);
        assert_eq!(Placement::FLAT.slot(77), 77);
    }

    #[test]
    fn flat_placement_emits_nothing() {
        let mut count = 0;
        let slot = Placement::FLAT.emit_slot("%x", |_| {
            count += 1;
            String::new()
        });
        assert_eq!((slot.as_str(), count), ("%x", 0));
    }
}

//! Narrow values that live across a cluster barrier stay packed.
//!
//! A kernel that splits a row over a cluster loads its slice (bf16, say),
//! reduces it before `cluster_barrier()` and normalizes it after. Converting
//! the slice to f32 again after the barrier is what keeps only the packed
//! words alive across it, half the registers. LLVM would merge the second
//! conversion with the first (the same pure op on the same operand) and keep
//! the f32 copies alive instead, so a conversion that widens a value held
//! since before a barrier first passes the value's packed 32-bit words
//! through an opaque `mov`: the two conversions then have different operands.

use super::lower::Lowerer;
use super::scalar::{from_bits, mem_bytes, to_bits};
use tlx_core::ir::{Elem, OpKind};

impl Lowerer<'_> {
    /// True when `kind` widens a value (of fewer than 4 bytes per element)
    /// that was held in registers when a cluster barrier was emitted.
    pub(super) fn widens_across_barrier(&self, kind: &OpKind, out: Elem) -> bool {
        let OpKind::Cast(src) = kind else {
            return false;
        };
        let from = self.ty(*src);
        let narrow = mem_bytes(from.elem()) < 4 && mem_bytes(from.elem()) < mem_bytes(out);
        narrow && !from.is_scalar() && self.sync.crossed_barrier.contains(src)
    }

    /// `regs` (elements of type `elem`, narrower than 4 bytes) passed, a
    /// 32-bit word at a time, through an opaque copy the optimizers cannot
    /// see through.
    pub(super) fn opaque_copy(&mut self, regs: &[String], elem: Elem) -> Vec<String> {
        let bytes = mem_bytes(elem);
        // A register count is a power of two: a partial word only occurs for
        // a tensor smaller than one, whose few registers do not matter.
        if regs.len() % (4 / bytes) != 0 {
            return regs.to_vec();
        }
        let bits: Vec<String> = regs.iter().map(|r| to_bits(&mut self.f, elem, r)).collect();
        let copied: Vec<String> = self
            .pack(&bits, bytes, 4)
            .iter()
            .map(|w| self.f.asm("i32", "mov.b32 $0, $1;", "=r,r", &[("i32", w)]))
            .collect();
        self.unpack(&copied, bytes, 4)
            .iter()
            .map(|b| from_bits(&mut self.f, elem, b))
            .collect()
    }

    /// Marks every value held now as living across the barrier being emitted.
    pub(super) fn note_barrier(&mut self) {
        self.sync
            .crossed_barrier
            .extend(self.held.values.keys().copied());
    }
}

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

use super::emit::llvm_type;
use super::lower::Lowerer;
use super::scalar::mem_bytes;
use crate::ir::{Elem, OpKind, ValueId};

impl Lowerer<'_> {
    /// True when `kind` widens a value (of fewer than 4 bytes per element)
    /// that was held in registers when a cluster barrier was emitted.
    pub(super) fn widens_across_barrier(&self, kind: &OpKind, out: Elem) -> bool {
        let OpKind::Cast(src) = kind else {
            return false;
        };
        let from = self.ty(*src);
        let narrow = mem_bytes(from.elem) < 4 && mem_bytes(from.elem) < mem_bytes(out);
        narrow && !from.is_scalar() && self.crossed_barrier.contains(src)
    }

    /// `regs` (elements of type `elem`) passed, a 32-bit word at a time,
    /// through an opaque copy the optimizers cannot see through.
    pub(super) fn opaque_copy(&mut self, regs: &[String], elem: Elem) -> Vec<String> {
        let ety = llvm_type(elem);
        let per_word = (4 / mem_bytes(elem)).max(1);
        let mut out = Vec::with_capacity(regs.len());
        for chunk in regs.chunks(per_word) {
            let k = chunk.len();
            // A register count is a power of two: a partial word only occurs
            // for a tensor smaller than one, whose few registers do not matter.
            if k * mem_bytes(elem) != 4 {
                out.extend(chunk.iter().cloned());
                continue;
            }
            let vty = format!("<{k} x {ety}>");
            let mut acc = "poison".to_string();
            for (i, e) in chunk.iter().enumerate() {
                acc = self
                    .f
                    .inst(format!("insertelement {vty} {acc}, {ety} {e}, i32 {i}"));
            }
            let word = self.f.inst(format!("bitcast {vty} {acc} to i32"));
            let copied = self
                .f
                .asm("i32", "mov.b32 $0, $1;", "=r,r", &[("i32", &word)]);
            let back = self.f.inst(format!("bitcast i32 {copied} to {vty}"));
            for i in 0..k {
                out.push(self.f.inst(format!("extractelement {vty} {back}, i32 {i}")));
            }
        }
        out
    }

    /// Marks every value held now as living across the barrier being emitted.
    pub(super) fn note_barrier(&mut self) {
        let held: Vec<ValueId> = self.values.keys().copied().collect();
        self.crossed_barrier.extend(held);
    }
}

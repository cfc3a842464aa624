//! Layout conversion through shared memory: every thread writes its elements
//! at their row-major index, the CTA synchronizes, and every thread reads the
//! elements of the new layout. General and always correct; the barrier before
//! the writes makes the shared scratch safe to reuse between ops.

use super::lower::{Lowerer, Result, Tensor};
use super::scalar::{from_bits, mem_bytes, to_bits};
use crate::ir::Elem;
use crate::layout::LinearLayout;

/// The LLVM integer type moving `bytes`-sized elements.
pub fn bits_llvm_type(bytes: usize) -> &'static str {
    match bytes {
        1 => "i8",
        2 => "i16",
        8 => "i64",
        _ => "i32",
    }
}

impl<'k> Lowerer<'k> {
    /// Store one element's bits at element index `flat` of the shared scratch
    /// region starting at byte `base`.
    pub fn smem_store(&mut self, elem: Elem, base: usize, flat: &str, value: &str) {
        let bytes = mem_bytes(elem);
        let off = self.f.inst(format!("mul i32 {flat}, {bytes}"));
        let off = self.f.inst(format!("add i32 {off}, {base}"));
        let p = self.smem_ptr(&off);
        let bits = to_bits(&mut self.f, elem, value);
        let ty = bits_llvm_type(bytes);
        self.f.stmt(format!(
            "store {ty} {bits}, ptr addrspace(3) {p}, align {bytes}"
        ));
    }

    pub fn smem_load(&mut self, elem: Elem, base: usize, flat: &str) -> String {
        let bytes = mem_bytes(elem);
        let off = self.f.inst(format!("mul i32 {flat}, {bytes}"));
        let off = self.f.inst(format!("add i32 {off}, {base}"));
        let p = self.smem_ptr(&off);
        let ty = bits_llvm_type(bytes);
        let bits = self
            .f
            .inst(format!("load {ty}, ptr addrspace(3) {p}, align {bytes}"));
        from_bits(&mut self.f, elem, &bits)
    }

    pub fn convert(&mut self, t: &Tensor, elem: Elem, dst: &LinearLayout) -> Result<Vec<String>> {
        let src = &t.layout;
        self.use_shared(src.numel() * mem_bytes(elem));
        self.barrier();
        for (r, value) in t.regs.iter().enumerate() {
            // A register replica holds what a lower register of this thread writes.
            if src.is_replica(r, 0, 0) {
                continue;
            }
            let flat = self.flat_index(src, r);
            self.smem_store(elem, 0, &flat, value);
        }
        self.barrier();
        Ok((0..dst.num_regs())
            .map(|r| {
                let flat = self.flat_index(dst, r);
                self.smem_load(elem, 0, &flat)
            })
            .collect())
    }
}

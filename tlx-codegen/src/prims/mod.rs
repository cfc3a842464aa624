//! TLX primitives in LLVM IR: [`Lowerer::lower_prim`] emits a primitive
//! whose definition is one instruction (`Lowering::Asm`) generically and
//! hands every other one to its family's file, which mirrors the family
//! files of `tlx_core::ir::prims` (`memory`, `mbarrier`, `tma`, `wgmma`,
//! `async_copy`, `cluster`, `tcgen05`, `timeline`, `grid`; `fence` is all `Asm`).
//! Where `local_alloc` and `alloc_barriers` live and where device-made
//! descriptors go is decided before emission, in `analysis::storage`.
//!
//! A buffer, barrier or descriptor value is one register: the byte offset
//! of the buffer or barrier in the shared array, or the generic address of
//! the descriptor parameter. Single-thread operations (barrier arrivals,
//! TMA issues) run on the first thread of the context, so a task (or the
//! program) counts as one arrival, as the interpreter counts it.

mod async_copy;
mod cluster;
mod grid;
mod mbarrier;
mod memory;
mod tcgen05;
mod timeline;
pub(super) mod tma;
mod wgmma;

use super::emit::llvm_type;
use super::error::{malformed, Result};
use super::lower::{Lowerer, Tensor};
use super::CodegenError;
use tlx_core::ir::{Family, Lowering, Named, Op, OpKind, Prim, SharedMemoryType, Type, ValueId};

/// Where a spinning wait (`Lowerer::spin_or_trap`) says it hung: the op,
/// its name, a printf format of why (its `%` directives filled by `args`),
/// and the deadline in nanoseconds.
pub(crate) struct Deadline<'k> {
    pub(crate) timeout: u64,
    pub(crate) op: &'k Op,
    pub(crate) what: &'static str,
    pub(crate) why: String,
    pub(crate) args: Vec<(&'static str, String)>,
}

/// A custom primitive's operands and immediates, reached by name through
/// [`Named`], and its result; a missing one is malformed IR.
struct Operands<'k> {
    named: Named<'k, ValueId>,
    results: &'k [ValueId],
}

impl<'k> Operands<'k> {
    fn prim(&self) -> Prim {
        self.named.prim()
    }

    /// The operand called `name`.
    fn arg(&self, name: &str) -> Result<ValueId> {
        self.named.get(name).copied().map_err(malformed)
    }

    /// The operand called `name` and all after it.
    fn rest(&self, name: &str) -> Result<&'k [ValueId]> {
        self.named.rest(name).map_err(malformed)
    }

    /// The immediate called `name`.
    fn imm(&self, name: &str) -> Result<i64> {
        self.named.imm(name).map_err(malformed)
    }

    fn result(&self) -> Result<ValueId> {
        self.results
            .first()
            .copied()
            .ok_or_else(|| malformed("op without result"))
    }
}

/// A primitive with no code of its own in the family it was handed to.
fn no_lowering(prim: Prim) -> CodegenError {
    malformed(format!("`{}` has no lowering of its own", prim.mnemonic()))
}

impl<'k> Lowerer<'k> {
    pub fn lower_prim(&mut self, op: &'k Op) -> Result<()> {
        let OpKind::Prim { prim, args, imms } = &op.kind else {
            return Err(malformed("not a primitive"));
        };
        if let Lowering::Asm {
            asm,
            result,
            constraints,
        } = prim.def().lowering
        {
            return self.lower_asm_prim(op, asm, result, constraints);
        }
        let named = Operands {
            named: Named::new(*prim, args, imms),
            results: &op.results,
        };
        match prim.family() {
            Family::Memory => self.lower_memory_prim(op, &named),
            Family::Mbarrier => self.lower_mbarrier_prim(op, &named),
            Family::Tma => self.lower_tma_prim(&named),
            Family::Wgmma => self.lower_wgmma_prim(op, &named),
            Family::AsyncCopy => self.lower_async_copy_prim(op, &named),
            Family::Cluster => self.lower_cluster_prim(op, &named),
            Family::Tcgen05 => self.lower_tcgen05_prim(op, &named),
            Family::Timeline => self.lower_timeline_prim(&named),
            Family::Grid => self.lower_grid_prim(op, &named),
            // All `Lowering::Asm`, returned above.
            Family::Fence => Err(no_lowering(*prim)),
        }
    }

    /// A primitive whose definition is one instruction: scalar operands in
    /// order, one scalar result or none.
    fn lower_asm_prim(
        &mut self,
        op: &'k Op,
        asm: &str,
        result: &str,
        constraints: &str,
    ) -> Result<()> {
        let mut operands = Vec::with_capacity(op.kind.operands().len());
        for v in op.kind.operands() {
            let reg = self.register(v)?;
            operands.push((llvm_type(self.ty(v).elem()), reg));
        }
        let operands: Vec<(&str, &str)> = operands.iter().map(|(t, r)| (*t, r.as_str())).collect();
        let mut asm = asm.to_string();
        if let OpKind::Prim { prim, args, imms } = &op.kind {
            let named = Named::new(*prim, args, imms);
            for choice in prim.signature().choices {
                let code = named.imm(choice.immediate).map_err(malformed)?;
                let ptx = usize::try_from(code)
                    .ok()
                    .and_then(|c| choice.options.get(c))
                    .ok_or_else(|| malformed(format!("`{}` code {code}", choice.immediate)))?
                    .1;
                asm = asm.replace(&format!("{{{}}}", choice.immediate), ptx);
            }
        }
        let out = self.f.asm(result, &asm, constraints, &operands);
        match op.results.first() {
            Some(&r) => self.define_register(r, out),
            None => Ok(()),
        }
    }

    /// Emits `body` for the context's first thread only, when `pred` holds.
    pub(super) fn on_first_thread(&mut self, pred: &str, body: impl FnOnce(&mut Self)) {
        let first = self.f.inst(format!("icmp eq i32 {}, 0", self.thread_id()));
        let go = self.f.inst(format!("and i1 {first}, {pred}"));
        self.when(&go, body);
    }

    /// Runs `body` in the threads where `cond` (an i1) holds.
    pub(super) fn when(&mut self, cond: &str, body: impl FnOnce(&mut Self)) {
        let then = self.f.fresh("when");
        let after = self.f.fresh("when_done");
        self.f
            .stmt(format!("br i1 {cond}, label %{then}, label %{after}"));
        self.enter_block(&then);
        body(self);
        self.f.stmt(format!("br label %{after}"));
        self.enter_block(&after);
    }

    fn buffer_type(&self, v: ValueId) -> Result<SharedMemoryType> {
        match self.ty(v) {
            Type::SharedMemory(m) => Ok(m.clone()),
            other => Err(malformed(format!("{v} is {other}, not a buffer"))),
        }
    }

    /// The one register of a scalar, buffer, barrier or descriptor value.
    pub(super) fn register(&mut self, v: ValueId) -> Result<String> {
        let t = self.tensor(v)?;
        t.regs
            .first()
            .cloned()
            .ok_or_else(|| malformed(format!("{v} has no register")))
    }

    pub(super) fn registers(&mut self, vs: &[ValueId]) -> Result<Vec<String>> {
        vs.iter().map(|&v| self.register(v)).collect()
    }

    /// The shared-window address of a buffer or barrier value.
    pub(crate) fn shared_address_of(&mut self, v: ValueId) -> Result<String> {
        let offset = self.register(v)?;
        Ok(self.shared_address(&offset))
    }

    pub(super) fn define_register(&mut self, v: ValueId, reg: String) -> Result<()> {
        let layout = self.scalar_layout()?;
        self.define_value(
            v,
            Tensor {
                layout,
                regs: vec![reg],
            },
        );
        Ok(())
    }
}

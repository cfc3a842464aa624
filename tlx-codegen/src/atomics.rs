//! Global atomics (`AtomicRmw`, `AtomicCas`) as predicated PTX `atom`. Only
//! the primary copy of a replicated element performs the atomic; when a layout
//! replicates elements across threads, the old values reach the other copies
//! through shared memory. An update whose old values nothing reads is a
//! `red`: no result register, no sharing (a counter bumped inside a hot loop
//! costs a store, not a round trip and a barrier). A releasing atomic that
//! only some threads perform follows a barrier, so that it publishes what
//! every thread of the program wrote before it.

use super::error::{malformed, refused_upstream, Result};
use super::lower::{Lowerer, Tensor};
use super::scalar::{from_bits, mem_bytes, to_bits};
use crate::layout::LinearLayout;
use tlx_core::ir::{cas_takes, AtomicOp, Elem, MemScope, MemSem, Op, OpKind, ScalarType};

/// `.sem.scope.global` of an `atom` or `red`.
fn qualifiers(sem: MemSem, scope: MemScope) -> String {
    let sem = match sem {
        MemSem::Relaxed => "relaxed",
        MemSem::Acquire => "acquire",
        MemSem::Release => "release",
        MemSem::AcqRel => "acq_rel",
    };
    let scope = match scope {
        MemScope::Cta => "cta",
        MemScope::Gpu => "gpu",
        MemScope::System => "sys",
    };
    format!("{sem}.{scope}.global")
}

/// Whether an update of `op` with `sem` can be a `red`: PTX has no
/// exchange and no acquire among the reductions.
fn reduces(op: AtomicOp, sem: MemSem) -> bool {
    op != AtomicOp::Exchange && matches!(sem, MemSem::Relaxed | MemSem::Release)
}

/// The `.op.type` suffix of an `atom` on `s` (the front end refuses what
/// [`AtomicOp::takes`] does not).
fn op_suffix(op: AtomicOp, s: ScalarType) -> Result<String> {
    if !op.takes(s) {
        return Err(refused_upstream(format!("atomic {op:?} on {s}")));
    }
    let bits = s.size_bytes() * 8;
    let typed = match s {
        ScalarType::I32 | ScalarType::I64 => format!("s{bits}"),
        ScalarType::U32 => "u32".into(),
        _ => s.to_string(),
    };
    Ok(match op {
        AtomicOp::Add if s.is_float() && bits == 16 => format!("add.noftz.{typed}"),
        AtomicOp::Add if s == ScalarType::I64 => "add.u64".into(),
        AtomicOp::Add if s == ScalarType::I32 => "add.u32".into(),
        AtomicOp::Add => format!("add.{typed}"),
        AtomicOp::Max => format!("max.{typed}"),
        AtomicOp::Min => format!("min.{typed}"),
        AtomicOp::And => format!("and.b{bits}"),
        AtomicOp::Or => format!("or.b{bits}"),
        AtomicOp::Xor => format!("xor.b{bits}"),
        AtomicOp::Exchange => format!("exch.b{bits}"),
    })
}

fn register(bytes: usize) -> (&'static str, &'static str) {
    match bytes {
        2 => ("h", "i16"),
        8 => ("l", "i64"),
        _ => ("r", "i32"),
    }
}

impl<'k> Lowerer<'k> {
    fn replicated_across_threads(layout: &LinearLayout) -> bool {
        layout.lanes.iter().chain(&layout.warps).any(|&b| b == 0)
    }

    pub fn lower_atomic(&mut self, op: &'k Op) -> Result<()> {
        let result = *op
            .results
            .first()
            .ok_or_else(|| malformed("atomic without result"))?;
        let elem = self.ty(result).elem();
        let s = elem.scalar().ok_or_else(|| {
            malformed("atomic result of pointer type (pointers point at scalars)")
        })?;
        let (ptr, mask, sem, scope) = match &op.kind {
            OpKind::AtomicRmw {
                ptr,
                mask,
                sem,
                scope,
                ..
            } => (*ptr, *mask, *sem, *scope),
            OpKind::AtomicCas {
                ptr, sem, scope, ..
            } => (*ptr, None, *sem, *scope),
            _ => return Err(malformed("not an atomic")),
        };
        let ptrs: Tensor = self.tensor(ptr)?;
        let layout = ptrs.layout.clone();
        let masks = mask.map(|m| self.get(m, &layout)).transpose()?;
        let primary = self.thread_is_primary(&layout);
        if matches!(sem, MemSem::Release | MemSem::AcqRel)
            && Self::replicated_across_threads(&layout)
        {
            // Fewer threads than the program's perform it: what the others
            // wrote before is theirs to publish only once a barrier has
            // ordered it before the release (which is cumulative).
            self.barrier();
        }
        let bytes = mem_bytes(elem);
        let (con, lty) = register(bytes);
        let head = qualifiers(sem, scope);
        if let OpKind::AtomicRmw { op: aop, value, .. } = &op.kind {
            if !self.is_used(result) && reduces(*aop, sem) {
                let instr = format!("red.{head}.{}", op_suffix(*aop, s)?);
                let value = self.get(*value, &layout)?;
                return self.lower_reduction(&instr, elem, (&ptrs, &value), masks, &primary);
            }
        }
        let (instr, operands) = match &op.kind {
            OpKind::AtomicRmw { op: aop, value, .. } => (
                format!("atom.{head}.{}", op_suffix(*aop, s)?),
                vec![self.get(*value, &layout)?],
            ),
            OpKind::AtomicCas { cmp, value, .. } => {
                if !cas_takes(s) {
                    return Err(refused_upstream(format!("atomic_cas on {s}")));
                }
                let operands = vec![self.get(*cmp, &layout)?, self.get(*value, &layout)?];
                (format!("atom.{head}.cas.b{}", bytes * 8), operands)
            }
            _ => return Err(malformed("not an atomic")),
        };
        let n_ops = operands.len();
        let srcs: Vec<String> = (0..n_ops).map(|i| format!("${}", i + 2)).collect();
        let asm = format!(
            "mov.b{bits} $0, 0;\\0A\\09@${p} {instr} $0, [$1], {};",
            srcs.join(", "),
            bits = bytes * 8,
            p = n_ops + 2
        );
        // An ordered atomic (acquire, release) keeps LLVM's loads and
        // stores on their side of it.
        let clobber = (sem != MemSem::Relaxed).then(|| "~{memory}".to_string());
        let constraints = [format!("={con}"), "l".into()]
            .into_iter()
            .chain((0..n_ops).map(|_| con.to_string()))
            .chain(["b".to_string()])
            .chain(clobber)
            .collect::<Vec<_>>()
            .join(",");
        let mut regs = Vec::with_capacity(layout.num_regs());
        for r in 0..layout.num_regs() {
            let bits: Vec<String> = operands
                .iter()
                .map(|o| to_bits(&mut self.f, elem, &o[r]))
                .collect();
            // A register replica repeats an element this thread already updated.
            let base = if layout.is_replica(r, 0, 0) {
                "false"
            } else {
                &primary
            };
            let pred = self.masked(base, masks.as_ref().map(|m| m[r].as_str()));
            let mut args: Vec<(&str, &str)> = vec![("ptr addrspace(1)", ptrs.regs[r].as_str())];
            args.extend(bits.iter().map(|b| (lty, b.as_str())));
            args.push(("i1", pred.as_str()));
            let old = self.f.asm(lty, &asm, &constraints, &args);
            regs.push(from_bits(&mut self.f, elem, &old));
        }
        let primary_regs = Tensor {
            layout: layout.clone(),
            regs,
        };
        let regs = if Self::replicated_across_threads(&layout) || layout.regs.contains(&0) {
            self.share_primaries(&primary_regs, elem)?
        } else {
            primary_regs.regs
        };
        self.held.values.insert(result, Tensor { layout, regs });
        Ok(())
    }

    /// A `red` per primary element of `ptrs` (masked by `masks`): the update
    /// of an atomic whose old values nothing reads.
    fn lower_reduction(
        &mut self,
        instr: &str,
        elem: Elem,
        (ptrs, value): (&Tensor, &[String]),
        masks: Option<Vec<String>>,
        primary: &str,
    ) -> Result<()> {
        let (con, lty) = register(mem_bytes(elem));
        let asm = format!("@$2 {instr} [$0], $1;");
        let constraints = format!("l,{con},b,~{{memory}}");
        for r in 0..ptrs.layout.num_regs() {
            if ptrs.layout.is_replica(r, 0, 0) {
                continue;
            }
            let bits = to_bits(&mut self.f, elem, &value[r]);
            let pred = self.masked(primary, masks.as_ref().map(|m| m[r].as_str()));
            let args = [
                ("ptr addrspace(1)", ptrs.regs[r].as_str()),
                (lty, bits.as_str()),
                ("i1", pred.as_str()),
            ];
            self.f.asm("void", &asm, &constraints, &args);
        }
        Ok(())
    }

    /// The predicate of one element's update: `base`, and its mask if any.
    fn masked(&mut self, base: &str, mask: Option<&str>) -> String {
        match mask {
            Some(m) => self.f.inst(format!("and i1 {base}, {m}")),
            None => base.to_string(),
        }
    }

    /// Every copy of each element takes the primary copy's value (through shared memory).
    fn share_primaries(&mut self, t: &Tensor, elem: Elem) -> Result<Vec<String>> {
        let layout = t.layout.clone();
        let primary = self.thread_is_primary(&layout);
        let skip = self.f.fresh("share_skip");
        let write = self.f.fresh("share_write");
        self.use_shared(layout.numel() * mem_bytes(elem));
        self.barrier();
        self.f
            .stmt(format!("br i1 {primary}, label %{write}, label %{skip}"));
        self.f.start_block(&write);
        for (r, v) in t.regs.iter().enumerate() {
            if layout.is_replica(r, 0, 0) {
                continue;
            }
            let flat = self.flat_index(&layout, r);
            self.smem_store(elem, 0, &flat, v);
        }
        self.f.stmt(format!("br label %{skip}"));
        self.f.start_block(&skip);
        self.current_block = skip;
        self.barrier();
        Ok((0..layout.num_regs())
            .map(|r| {
                let flat = self.flat_index(&layout, r);
                self.smem_load(elem, 0, &flat)
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atom_suffixes() {
        assert_eq!(
            op_suffix(AtomicOp::Add, ScalarType::F32).unwrap(),
            "add.f32"
        );
        assert_eq!(
            op_suffix(AtomicOp::Add, ScalarType::F16).unwrap(),
            "add.noftz.f16"
        );
        assert_eq!(
            op_suffix(AtomicOp::Max, ScalarType::I32).unwrap(),
            "max.s32"
        );
        assert_eq!(
            op_suffix(AtomicOp::Exchange, ScalarType::F32).unwrap(),
            "exch.b32"
        );
        assert!(op_suffix(AtomicOp::Max, ScalarType::F32).is_err());
        assert_eq!(
            qualifiers(MemSem::AcqRel, MemScope::Gpu),
            "acq_rel.gpu.global"
        );
        assert!(reduces(AtomicOp::Add, MemSem::Release));
        assert!(!reduces(AtomicOp::Add, MemSem::Acquire));
        assert!(!reduces(AtomicOp::Exchange, MemSem::Relaxed));
    }
}

//! The grid family's lowering beyond its one-instruction primitives:
//! `signal_wait_until`, a polling loop of system-scope acquire loads with
//! a back-off, and a deadline under `mbar_timeout_ns` as the mbarrier
//! waits have.

use super::{no_lowering, Deadline, Operands};
use crate::error::{malformed, Result};
use crate::lower::Lowerer;
use tlx_core::ir::{FlagComparison, Op, Prim};

/// The LLVM `icmp` predicate of a flag comparison (signed).
fn icmp(cmp: FlagComparison) -> &'static str {
    match cmp {
        FlagComparison::Eq => "eq",
        FlagComparison::Ne => "ne",
        FlagComparison::Ge => "sge",
        FlagComparison::Gt => "sgt",
        FlagComparison::Le => "sle",
        FlagComparison::Lt => "slt",
    }
}

impl<'k> Lowerer<'k> {
    pub(super) fn lower_grid_prim(&mut self, op: &'k Op, named: &Operands<'k>) -> Result<()> {
        match named.prim() {
            Prim::SignalWaitUntil => {
                let flag = self.register(named.arg("flag")?)?;
                let value = self.register(named.arg("value")?)?;
                let code = named.imm("cmp")?;
                let cmp = FlagComparison::from_code(code)
                    .ok_or_else(|| malformed(format!("comparison code {code}")))?;
                let (word, icmp) = (cmp.word(), icmp(cmp));
                let deadline = self.kernel.options.mbar_timeout_ns.map(|timeout| Deadline {
                    timeout,
                    op,
                    what: "signal_wait_until",
                    why: format!("no program set the flag so that it is `{word}` %d"),
                    args: vec![("i32", value.clone())],
                });
                self.spin_until("true", deadline, true, |l| {
                    let now = l.f.asm(
                        "i32",
                        "ld.acquire.sys.global.s32 $0, [$1];",
                        "=r,l,~{memory}",
                        &[("ptr addrspace(1)", flag.as_str())],
                    );
                    l.f.inst(format!("icmp {icmp} i32 {now}, {value}"))
                });
                Ok(())
            }
            other => Err(no_lowering(other)),
        }
    }
}

//! The tcgen05 family's lowering (`tcgen05_mma`, `async_dot_scaled`,
//! `tcgen05_commit`, `tmem_copy`), whose
//! code, with tensor memory's `local_*` forms, is `crate::tcgen05`'s.

use super::{no_lowering, Operands};
use crate::error::Result;
use crate::lower::Lowerer;
use tlx_core::ir::{Op, Prim};

impl<'k> Lowerer<'k> {
    pub(super) fn lower_tcgen05_prim(&mut self, op: &'k Op, named: &Operands<'k>) -> Result<()> {
        let arg = |name: &str| named.arg(name);
        let rest = |name: &str| named.rest(name);
        match named.prim() {
            Prim::Tcgen05Mma => {
                let operands = [arg("a")?, arg("b")?, arg("acc")?, arg("use_acc")?];
                self.tcgen05_mma(op, operands, rest("mbarriers")?)
            }
            Prim::Tcgen05MmaScaled => {
                let operands = [
                    arg("a")?,
                    arg("b")?,
                    arg("acc")?,
                    arg("a_scale")?,
                    arg("b_scale")?,
                    arg("use_acc")?,
                ];
                self.tcgen05_mma_scaled(op, operands, rest("mbarriers")?)
            }
            Prim::Tcgen05Commit => self.tcgen05_commit(op, arg("bar")?),
            Prim::TmemCopy => self.tmem_copy(op, arg("src")?, arg("dst")?),
            other => Err(no_lowering(other)),
        }
    }
}

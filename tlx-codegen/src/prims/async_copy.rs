//! The async-copy family's lowering (`async_load`, `cp.async` into a
//! shared buffer in its element placement; `async_load_commit_group`;
//! `async_load_wait_group`, which also makes the copies visible to the
//! async proxy and the other threads).

use super::{no_lowering, Operands};
use crate::analysis::storage::buffer_layout;
use crate::error::Result;
use crate::lower::Lowerer;
use tlx_core::ir::{Op, Prim};

impl<'k> Lowerer<'k> {
    pub(super) fn lower_async_copy_prim(&mut self, op: &'k Op, named: &Operands<'k>) -> Result<()> {
        let arg = |name: &str| named.arg(name);
        let imm = |name: &str| named.imm(name);
        match named.prim() {
            Prim::AsyncLoad => {
                let m = self.buffer_type(arg("buffer")?)?;
                let placement = buffer_layout(&m)?;
                let base = self.register(arg("buffer")?)?;
                self.async_copy_into(arg("ptrs")?, arg("mask")?, &placement, &base, op.loc)
            }
            Prim::AsyncLoadCommitGroup => {
                self.f
                    .asm("void", "cp.async.commit_group;", "~{memory}", &[]);
                Ok(())
            }
            Prim::AsyncLoadWaitGroup => {
                let asm = format!("cp.async.wait_group {};", imm("pendings")?);
                self.f.asm("void", &asm, "~{memory}", &[]);
                // Each thread waited for its own copies: make them visible to
                // the async proxy (wgmma) and to the task's other threads.
                self.fence_async_shared();
                self.barrier();
                Ok(())
            }
            other => Err(no_lowering(other)),
        }
    }
}

//! The cluster family's lowering: `remote_view`, `remote_shmem_store`,
//! `async_remote_shmem_store` (their code in `crate::cluster`) and
//! `async_descriptor_load_multicast` (a TMA load into each program of a
//! cluster mask). `fence_mbarrier_init_cluster` is `Asm`.

use super::tma::TmaDirection;
use super::{no_lowering, Operands};
use crate::error::Result;
use crate::lower::Lowerer;
use tlx_core::ir::{Op, Prim};

impl<'k> Lowerer<'k> {
    pub(super) fn lower_cluster_prim(&mut self, op: &'k Op, named: &Operands<'k>) -> Result<()> {
        let arg = |name: &str| named.arg(name);
        let rest = |name: &str| named.rest(name);
        let result = || named.result();
        match named.prim() {
            Prim::AsyncDescriptorLoadMulticast => {
                let desc = self.register(arg("desc")?)?;
                let m = self.buffer_type(arg("buffer")?)?;
                let dst = self.shared_address_of(arg("buffer")?)?;
                let bar = self.shared_address_of(arg("barrier")?)?;
                let mask = self.register(arg("cta_mask")?)?;
                let mask = self.f.inst(format!("trunc i32 {mask} to i16"));
                let coords = self.registers(rest("offsets")?)?;
                let load = TmaDirection::Load {
                    barrier: &bar,
                    multicast: Some(&mask),
                };
                self.tma_block("true", &m, (&desc, &dst), load, &coords);
                Ok(())
            }
            Prim::RemoteView => {
                let local = self.shared_address_of(arg("buffer")?)?;
                let rank = self.register(arg("remote_cta_rank")?)?;
                let remote = self.map_to_peer(&local, &rank);
                self.define_register(result()?, remote)
            }
            Prim::RemoteShmemStore => self.remote_store(op, arg("dst")?, arg("value")?),
            Prim::AsyncRemoteShmemStore => {
                self.async_remote_store(op, arg("dst")?, arg("value")?, arg("barrier")?)
            }
            other => Err(no_lowering(other)),
        }
    }
}

//! The cluster family's lowering: `remote_view`, `remote_shmem_store`,
//! `async_remote_shmem_store` (their code in `crate::cluster`) and
//! `async_descriptor_load_multicast` (a TMA load into each program of a
//! cluster mask), and cluster launch control (`clc_try_cancel` from one
//! thread, `clc_query` decoding the 128-bit answer in registers).
//! `fence_mbarrier_init_cluster` is `Asm`.

use super::tma::TmaDirection;
use super::{no_lowering, Operands};
use crate::error::{malformed, Result};
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
            Prim::ClcTryCancel => {
                self.require_sm100(op, "cluster launch control", CLC_ON_HOPPER)?;
                let response = self.shared_address_of(arg("response")?)?;
                let bar = self.shared_address_of(arg("bar")?)?;
                let pred = self.register(arg("pred")?)?;
                let multicast = match named.imm("multicast")? {
                    0 => "",
                    _ => ".multicast::cluster::all",
                };
                let asm = format!(
                    "clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes{multicast}.b128 [$0], [$1];"
                );
                self.on_first_thread(&pred, |l| {
                    l.f.asm(
                        "void",
                        &asm,
                        "r,r,~{memory}",
                        &[("i32", &response), ("i32", &bar)],
                    );
                });
                Ok(())
            }
            Prim::ClcQuery => {
                self.require_sm100(op, "cluster launch control", CLC_ON_HOPPER)?;
                let response = self.shared_address_of(arg("response")?)?;
                let dim = ["x", "y", "z"]
                    .get(named.imm("dim")? as usize)
                    .ok_or_else(|| malformed("`clc_query` of no dimension"))?;
                // The answer is 128 opaque bits: loaded and decoded in
                // registers the asm block declares.
                let asm = format!(
                    "{{ .reg .b128 clc_answer; .reg .pred clc_cancelled; \
                     ld.shared.b128 clc_answer, [$1]; \
                     clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 clc_cancelled, clc_answer; \
                     @clc_cancelled clusterlaunchcontrol.query_cancel.get_first_ctaid::{dim}.b32.b128 $0, clc_answer; \
                     @!clc_cancelled mov.b32 $0, -1; }}"
                );
                let out = self
                    .f
                    .asm("i32", &asm, "=r,r,~{memory}", &[("i32", &response)]);
                self.define_register(named.result()?, out)
            }
            other => Err(no_lowering(other)),
        }
    }
}

/// What Hopper does instead of cluster launch control.
const CLC_ON_HOPPER: &str = "on Hopper a persistent kernel takes its tiles by a fixed stride \
                             (`for tile in (program_id(0)..tiles).step_by(num_programs(0))`) \
                             or from an atomic counter";

//! The cluster's primitives in PTX for sm_90a: a `remote_view` is `mapa`
//! of this program's buffer or barrier to a peer's `shared::cluster`
//! address (a remote value's register holds that address, where a local
//! one holds an offset in the shared array); stores into it are
//! `st.shared::cluster` or `st.async` completing bytes on the peer's
//! mbarrier; `fence_mbarrier_init_cluster` is the PTX fence of that name.
//! Remote arrivals and multicast copies are the arrive and TMA of
//! `prims::mbarrier` and `prims::tma` with cluster operands; the cluster
//! family's dispatch is `prims::cluster`.

use super::analysis::storage::buffer_layout;
use super::convert::SharedWindow;
use super::error::{malformed, Result};
use super::lower::Lowerer;
use super::CodegenError;
use tlx_core::ir::{Elem, Op, Type, ValueId};

impl<'k> Lowerer<'k> {
    /// `mapa`: the `shared::cluster` address of shared address `local` in
    /// the program of cluster rank `rank`.
    pub(super) fn map_to_peer(&mut self, local: &str, rank: &str) -> String {
        self.f.asm(
            "i32",
            "mapa.shared::cluster.u32 $0, $1, $2;",
            "=r,r,r",
            &[("i32", local), ("i32", rank)],
        )
    }

    /// `remote_shmem_store`: every thread stores its elements of `value`
    /// into the peer's buffer `dst`, then the context syncs, so that one
    /// thread's remote arrival afterwards (release, cluster scope) covers
    /// every thread's stores.
    pub(super) fn remote_store(&mut self, op: &Op, dst: ValueId, value: ValueId) -> Result<()> {
        let (m, base) = self.remote_buffer(op, dst)?;
        let placement = buffer_layout(&m)?;
        let value = self.tensor(value)?;
        let elem = Elem::Scalar(m.elem());
        self.store_placed_in(&value, elem, &placement, &base, SharedWindow::Cluster)?;
        self.barrier();
        Ok(())
    }

    /// `async_remote_shmem_store`: `st.async` of each element, once (by
    /// the thread holding its primary copy), into the peer's buffer `dst`,
    /// whose bytes complete on the peer's barrier `bar`, so the peer's
    /// expected bytes are exactly the tile's.
    pub(super) fn async_remote_store(
        &mut self,
        op: &Op,
        dst: ValueId,
        value: ValueId,
        bar: ValueId,
    ) -> Result<()> {
        let (m, base) = self.remote_buffer(op, dst)?;
        let bar = self.register(bar)?;
        let placement = buffer_layout(&m)?;
        let value = self.tensor(value)?;
        let elem = Elem::Scalar(m.elem());
        let primary = self.thread_is_primary(&value.layout);
        let store = self.f.fresh("st_async");
        let done = self.f.fresh("st_async_done");
        self.f
            .stmt(format!("br i1 {primary}, label %{store}, label %{done}"));
        self.enter_block(&store);
        let mut narrow = None;
        self.for_each_placed_run(&value, elem, &placement, &base, |l, run| {
            // `st.async` moves 32- or 64-bit words, up to 16 bytes.
            let kind = match (run.word_bytes, run.words.len()) {
                (4, 1) => ".b32",
                (4, 2) => ".v2.b32",
                (4, 4) => ".v4.b32",
                (8, 1) => ".b64",
                (8, 2) => ".v2.b64",
                _ => {
                    narrow = Some(run.bytes);
                    return Ok(());
                }
            };
            let (ty, con) = if run.word_bytes == 8 {
                ("i64", "l")
            } else {
                ("i32", "r")
            };
            let n = run.words.len();
            let values = (1..=n)
                .map(|i| format!("${i}"))
                .collect::<Vec<_>>()
                .join(", ");
            let values = if n == 1 {
                values
            } else {
                format!("{{{values}}}")
            };
            let asm = format!(
                "st.async.shared::cluster.mbarrier::complete_tx::bytes{kind} [$0], {values}, [${}];",
                n + 1
            );
            let constraints = std::iter::once("r")
                .chain(std::iter::repeat_n(con, n))
                .chain(std::iter::once("r"))
                .collect::<Vec<_>>()
                .join(",")
                + ",~{memory}";
            let mut ops: Vec<(&str, &str)> = vec![("i32", run.at.as_str())];
            ops.extend(run.words.iter().map(|w| (ty, w.as_str())));
            ops.push(("i32", bar.as_str()));
            l.f.asm("void", &asm, &constraints, &ops);
            Ok(())
        })?;
        if let Some(bytes) = narrow {
            return Err(CodegenError::Misuse {
                message: format!(
                    "`async_remote_shmem_store` of a {} tile whose threads hold runs of {bytes} byte(s)",
                    m.elem()
                ),
                hint: "`st.async` moves 4-, 8- or 16-byte runs: store a tile whose threads each \
                       hold at least 4 contiguous bytes of a row (a wider tile, or 32-bit elements)"
                    .into(),
                at: Some(op.loc),
            });
        }
        self.f.stmt(format!("br label %{done}"));
        self.enter_block(&done);
        Ok(())
    }

    /// A remote buffer's type and `shared::cluster` base address.
    fn remote_buffer(
        &mut self,
        op: &Op,
        v: ValueId,
    ) -> Result<(tlx_core::ir::SharedMemoryType, String)> {
        let m = match self.ty(v) {
            Type::SharedMemory(m) if m.remote() => m.clone(),
            other => {
                return Err(malformed(format!(
                    "`{}` of {other}, not a remote buffer",
                    op.kind.code().source_name()
                )))
            }
        };
        Ok((m, self.register(v)?))
    }
}

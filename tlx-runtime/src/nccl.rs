//! NCCL for a mesh on GPUs ([`Collectives`]): the library found first (cudarc
//! loads it at run time and panics when it is missing, and it looks for
//! `libnccl.so`, not NCCL's soname `libnccl.so.2`), then one communicator
//! per rank (`ncclCommInitAll`, one process driving every GPU) on the ranks'
//! own streams, so collectives queue in order with the ranks' kernels:
//! the baselines the distributed kernels are measured against, and the
//! host's collectives. NVLink multicast (NCCL's NVLS) is always off.

use std::sync::Arc;

use cudarc::driver::CudaStream;
use cudarc::nccl::{group_end, group_start, Comm, NcclType, ReduceOp};

use crate::mesh::Placement;
use crate::{Buffer, Element, Error, Mesh};

/// `Ok` when cudarc can load NCCL; else why not and what to do.
fn library() -> Result<(), Error> {
    // SAFETY: only tries to open the library by the names cudarc uses.
    if unsafe { cudarc::nccl::sys::is_culib_present() } {
        return Ok(());
    }
    // SAFETY: opening NCCL's soname only to say it is there; dropped at once.
    let soname = unsafe { libloading::Library::new("libnccl.so.2") }.is_ok();
    Err(Error::NoNccl(if soname {
        "libnccl.so.2 is installed but not libnccl.so, the name the CUDA bindings load: \
         link it (`ln -s <dir>/libnccl.so.2 <dir>/libnccl.so`) in a directory on \
         LD_LIBRARY_PATH"
            .to_string()
    } else {
        "libnccl.so was not found: install NCCL (e.g. `pip install nvidia-nccl-cu12`, or \
         Debian's libnccl2 and libnccl-dev) and put its lib directory on LD_LIBRARY_PATH"
            .to_string()
    }))
}

fn nccl_error(call: &'static str, e: cudarc::nccl::result::NcclError) -> Error {
    Error::Nccl {
        call,
        message: format!("{e:?}"),
    }
}

/// NCCL communicators for the ranks of a mesh on GPUs, one per rank, each
/// on its rank's stream. Every collective takes one buffer per rank (on its
/// device) and queues on every rank at once (a group), asynchronously.
pub struct Collectives {
    comms: Vec<Comm>,
}

impl Collectives {
    /// Communicators for `mesh`, which must have one GPU per rank
    /// ([`Placement::Gpus`]: NCCL refuses a GPU twice in a communicator).
    pub fn new(mesh: &Mesh) -> Result<Collectives, Error> {
        if mesh.placement() != Placement::Gpus {
            return Err(Error::InvalidMesh {
                ranks: mesh.ranks(),
                reason: format!(
                    "NCCL needs one GPU per rank, and this mesh's ranks are on {:?}",
                    mesh.placement()
                ),
            });
        }
        library()?;
        // Never NVLink multicast (docs/distributed.md).
        std::env::set_var("NCCL_NVLS_ENABLE", "0");
        let streams: Vec<Arc<CudaStream>> = mesh
            .devices()
            .iter()
            .map(|d| d.cuda_stream().cloned())
            .collect::<Result<_, _>>()?;
        let comms = Comm::from_devices(streams).map_err(|e| nccl_error("ncclCommInitAll", e))?;
        Ok(Collectives { comms })
    }

    fn check<T: Element>(
        &self,
        what: &'static str,
        buffers: &[Buffer<T>],
        len: usize,
    ) -> Result<(), Error> {
        if buffers.len() != self.comms.len() {
            return Err(Error::InvalidShape {
                op: what,
                reason: format!(
                    "{} buffers for {} ranks: give one per rank",
                    buffers.len(),
                    self.comms.len()
                ),
            });
        }
        match buffers.iter().position(|b| b.len() < len) {
            Some(rank) => Err(Error::InvalidShape {
                op: what,
                reason: format!(
                    "rank {rank}'s buffer holds {} elements; {len} are needed",
                    buffers[rank].len()
                ),
            }),
            None => Ok(()),
        }
    }

    /// Runs `call` for every rank inside one NCCL group.
    fn grouped(
        &self,
        name: &'static str,
        mut call: impl FnMut(usize, &Comm) -> Result<(), Error>,
    ) -> Result<(), Error> {
        group_start().map_err(|e| nccl_error("ncclGroupStart", e))?;
        let each = self
            .comms
            .iter()
            .enumerate()
            .try_for_each(|(rank, comm)| call(rank, comm));
        let ended = group_end().map_err(|e| nccl_error("ncclGroupEnd", e));
        each?;
        ended.map(|_| ()).map_err(|e| match e {
            Error::Nccl { message, .. } => Error::Nccl {
                call: name,
                message,
            },
            other => other,
        })
    }

    /// `recv[r]` = every rank's `send` (its first `len` elements), in rank
    /// order, on every rank `r`.
    pub fn all_gather<T: Element + NcclType>(
        &self,
        send: &[Buffer<T>],
        recv: &mut [Buffer<T>],
        len: usize,
    ) -> Result<(), Error> {
        self.check("all_gather", send, len)?;
        self.check("all_gather", recv, len * self.comms.len())?;
        self.grouped("ncclAllGather", |rank, comm| {
            let s = send[rank].cuda_slice()?.slice(..len);
            let mut r = recv[rank]
                .cuda_slice_mut()?
                .slice_mut(..len * self.comms.len());
            comm.all_gather(&s, &mut r)
                .map(|_| ())
                .map_err(|e| nccl_error("ncclAllGather", e))
        })
    }

    /// `recv[r]` = the sum over ranks of `send`'s block `r` (`len`
    /// elements each), on every rank `r`.
    pub fn reduce_scatter_sum<T: Element + NcclType>(
        &self,
        send: &[Buffer<T>],
        recv: &mut [Buffer<T>],
        len: usize,
    ) -> Result<(), Error> {
        self.check("reduce_scatter", send, len * self.comms.len())?;
        self.check("reduce_scatter", recv, len)?;
        self.grouped("ncclReduceScatter", |rank, comm| {
            let s = send[rank].cuda_slice()?.slice(..len * self.comms.len());
            let mut r = recv[rank].cuda_slice_mut()?.slice_mut(..len);
            comm.reduce_scatter(&s, &mut r, &ReduceOp::Sum)
                .map(|_| ())
                .map_err(|e| nccl_error("ncclReduceScatter", e))
        })
    }

    /// `recv[r]` = the sum over ranks of `send` (`len` elements), on every
    /// rank `r`.
    pub fn all_reduce_sum<T: Element + NcclType>(
        &self,
        send: &[Buffer<T>],
        recv: &mut [Buffer<T>],
        len: usize,
    ) -> Result<(), Error> {
        self.check("all_reduce", send, len)?;
        self.check("all_reduce", recv, len)?;
        self.grouped("ncclAllReduce", |rank, comm| {
            let s = send[rank].cuda_slice()?.slice(..len);
            let mut r = recv[rank].cuda_slice_mut()?.slice_mut(..len);
            comm.all_reduce(&s, &mut r, &ReduceOp::Sum)
                .map(|_| ())
                .map_err(|e| nccl_error("ncclAllReduce", e))
        })
    }
}

//! Meshes of devices for kernels that span GPUs (docs/distributed.md): a
//! [`Mesh`] of ranks (one GPU each with peer access, several ranks sharing
//! one GPU, or the CPU interpreter), [`SymBuffer`]s (a buffer of the same
//! length on every rank, with each rank's table of all ranks' addresses of
//! it), and the arguments a kernel's `Mesh` and `SymPtr<T>` parameters
//! take ([`MeshRank`], [`SymRank`]). A [`Mesh::run`] launches one kernel
//! on every rank and has them run at once.

use std::sync::Arc;

use cudarc::driver::{CudaEvent, CudaStream};

use crate::cpu::LaunchGroup;
use crate::cuda::HeldLaunches;
use crate::value::{ptr_arg, PtrTarget};
use crate::{Buffer, BufferView, Device, Element, Error, KernelArg, PtrValue, ScalarArg};

use tlx_core::ir::{mesh_words, MAX_MESH_AXES, MAX_MESH_RANKS as MAX_RANKS};

/// Where a mesh's ranks run.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Rank `r` on GPU `r`, each reaching the others' memory (peer access).
    Gpus,
    /// Every rank on GPU 0, each with its own stream: the protocol runs
    /// whole, with local memory as the transport (right for correctness,
    /// not for timing).
    SharedGpu,
    /// Every rank on the CPU interpreter, one memory, one schedule.
    Interpreter,
}

/// A mesh of ranks for kernels that communicate (one axis, or several after
/// [`Mesh::reshape`]): each rank
/// a [`Device`], symmetric buffers across them, and runs that launch a
/// kernel on every rank at once. Cheap to share by reference.
///
/// ```
/// use tlx_runtime::{Mesh, Placement};
/// let mesh = Mesh::interpreter(2)?;
/// assert_eq!((mesh.ranks(), mesh.placement()), (2, Placement::Interpreter));
/// let mut x = mesh.alloc::<f32>(4)?;
/// // A kernel taking `mesh: Mesh, x: SymPtr<f32>` launches with
/// // `mesh.run(|rank, dev| kernel::launch(dev, grid, rank, &x.rank(rank.index())?))`.
/// x.upload(1, &[1.0, 2.0, 3.0, 4.0])?;
/// assert_eq!(x.download(1)?, [1.0, 2.0, 3.0, 4.0]);
/// # Ok::<(), tlx_runtime::Error>(())
/// ```
pub struct Mesh {
    devices: Vec<Device>,
    placement: Placement,
    /// The extent of each axis (their product is the number of ranks).
    shape: Vec<usize>,
    /// Each rank's words for `distributed_barrier` and the mesh's extents
    /// (`tlx_core::ir::mesh_words`); rewritten before every run.
    sync: SymBuffer<i32>,
    /// How a run holds the ranks' launches until all are made.
    runner: Runner,
    /// Per rank on GPUs, the stream its copies from peers go to.
    copy_streams: Vec<Arc<CudaStream>>,
}

/// A copy [`Mesh::copy_async`] queued, for a rank's stream to wait for.
pub struct Copied(CudaEvent);

/// Where a mesh's runs hold their launches.
enum Runner {
    /// The interpreter's shared memory and held launches.
    Interpreter(Arc<LaunchGroup>),
    /// The GPUs' launches, ready to queue.
    Gpu(Arc<HeldLaunches>),
}

impl Mesh {
    /// `ranks` ranks where they can run best: one GPU each when the machine
    /// has that many (with peer access), else all on GPU 0 (saying on
    /// stderr that timings are then not multi-GPU ones), else the CPU
    /// interpreter. `TLX_INTERPRET=1` forces the interpreter.
    pub fn new(ranks: usize) -> Result<Mesh, Error> {
        check_ranks(ranks)?;
        if crate::env::env_flag("TLX_INTERPRET") {
            return Mesh::interpreter(ranks);
        }
        let gpus = Device::count();
        if gpus >= ranks && ranks > 1 {
            return Mesh::gpus(ranks);
        }
        if gpus >= 1 {
            if ranks > 1 {
                eprintln!(
                    "tlx: {ranks} ranks share CUDA device 0 (the machine has {gpus} GPU{}): \
                     right for correctness, not a multi-GPU timing",
                    if gpus == 1 { "" } else { "s" }
                );
            }
            return Mesh::shared_gpu(ranks);
        }
        eprintln!("tlx: no CUDA GPU; running the mesh's {ranks} ranks on the CPU interpreter");
        Mesh::interpreter(ranks)
    }

    /// Rank `r` on GPU `r`, with peer access between every pair:
    /// [`Error::NoSuchDevice`] when there are fewer GPUs,
    /// [`Error::NoPeerAccess`] when two cannot reach each other.
    pub fn gpus(ranks: usize) -> Result<Mesh, Error> {
        check_ranks(ranks)?;
        let count = Device::count();
        if count < ranks {
            return Err(Error::NoSuchDevice {
                index: ranks - 1,
                count,
            });
        }
        let hold = Arc::new(HeldLaunches::new());
        let devices = (0..ranks)
            .map(|ordinal| Device::cuda_rank(ordinal, None, &hold))
            .collect::<Result<Vec<_>, _>>()?;
        for from in &devices {
            for to in &devices {
                from.enable_peer_access(to)?;
            }
        }
        Mesh::with_devices(devices, Placement::Gpus, Runner::Gpu(hold))
    }

    /// Every rank on GPU 0, each with a stream of its own.
    pub fn shared_gpu(ranks: usize) -> Result<Mesh, Error> {
        check_ranks(ranks)?;
        let hold = Arc::new(HeldLaunches::new());
        let devices = (0..ranks)
            .map(|rank| Device::cuda_rank(0, Some(rank), &hold))
            .collect::<Result<Vec<_>, _>>()?;
        Mesh::with_devices(devices, Placement::SharedGpu, Runner::Gpu(hold))
    }

    /// Every rank on the CPU interpreter: one memory (each rank's buffers
    /// its own), and each run's launches as one schedule, so a rank's wait
    /// on a peer's signal is met, or reported as a deadlock naming it.
    pub fn interpreter(ranks: usize) -> Result<Mesh, Error> {
        check_ranks(ranks)?;
        let group = LaunchGroup::new();
        let devices = (0..ranks)
            .map(|rank| Device::cpu_rank(&group, rank))
            .collect();
        Mesh::with_devices(devices, Placement::Interpreter, Runner::Interpreter(group))
    }

    fn with_devices(
        devices: Vec<Device>,
        placement: Placement,
        runner: Runner,
    ) -> Result<Mesh, Error> {
        let sync = SymBuffer::new(&devices, mesh_words::LEN)?;
        let copy_streams = match placement {
            Placement::Interpreter => Vec::new(),
            Placement::Gpus | Placement::SharedGpu => devices
                .iter()
                .map(|d| {
                    d.cuda_stream()?
                        .fork()
                        .map_err(|e| Error::cuda("cuStreamCreate", e))
                })
                .collect::<Result<_, _>>()?,
        };
        Ok(Mesh {
            shape: vec![devices.len()],
            devices,
            placement,
            sync,
            runner,
            copy_streams,
        })
    }

    /// How many ranks the mesh has.
    pub fn ranks(&self) -> usize {
        self.devices.len()
    }

    /// The same ranks seen as a mesh of several axes (TLE's
    /// `device_mesh` shape, e.g. `[2, 4]`: 2 groups of 4), the last axis
    /// varying fastest: rank `r` has coordinate `(r / stride) % extent` on
    /// each axis. Kernels read the axes as `shard_id(mesh, axis)` of a
    /// `mesh: Mesh<N>` parameter and synchronize along one with
    /// `distributed_barrier(mesh, axis)`. At most 3 axes, whose extents
    /// multiply to the number of ranks.
    ///
    /// ```
    /// let mesh = tlx_runtime::Mesh::interpreter(4)?.reshape(&[2, 2])?;
    /// assert_eq!(mesh.shape(), [2, 2]);
    /// # Ok::<(), tlx_runtime::Error>(())
    /// ```
    pub fn reshape(mut self, shape: &[usize]) -> Result<Mesh, Error> {
        let product: usize = shape.iter().product();
        if shape.is_empty() || shape.len() > MAX_MESH_AXES || product != self.ranks() {
            return Err(Error::InvalidMesh {
                ranks: self.ranks(),
                reason: format!(
                    "shape {shape:?}: give 1 to {MAX_MESH_AXES} extents whose product is the \
                     number of ranks"
                ),
            });
        }
        self.shape = shape.to_vec();
        Ok(self)
    }

    /// The extent of each axis (`[ranks]` until [`Mesh::reshape`]).
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Where the ranks run.
    pub fn placement(&self) -> Placement {
        self.placement
    }

    /// The device of rank `rank`.
    pub fn device(&self, rank: usize) -> Result<&Device, Error> {
        self.devices.get(rank).ok_or(Error::NoSuchRank {
            rank,
            ranks: self.ranks(),
        })
    }

    /// The devices, in rank order.
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// How many programs each rank may launch so that every program of
    /// every rank is resident at once, as a kernel that waits on its peers
    /// (`signal_wait_until`, `distributed_barrier`) needs: the GPU's SMs
    /// shared among the ranks on it (one program per SM), or the
    /// interpreter's threads.
    pub fn programs_per_rank(&self) -> u32 {
        let sms = self.devices[0].multiprocessor_count();
        match self.placement {
            Placement::SharedGpu => (sms / self.ranks() as u32).max(1),
            Placement::Gpus | Placement::Interpreter => sms,
        }
    }

    /// A symmetric buffer of `len` elements (contents unspecified) on
    /// every rank.
    pub fn alloc<T: Element>(&self, len: usize) -> Result<SymBuffer<T>, Error> {
        SymBuffer::new(&self.devices, len)
    }

    /// A symmetric buffer of `len` zeros on every rank.
    pub fn alloc_zeros<T: Element>(&self, len: usize) -> Result<SymBuffer<T>, Error> {
        let mut buffer = self.alloc(len)?;
        let zeros = vec![T::default(); len];
        for rank in 0..self.ranks() {
            buffer.upload(rank, &zeros)?;
        }
        Ok(buffer)
    }

    /// Queues a copy of `src` (on rank `from`) into `dst` (on rank `to`, as
    /// long as `src`) on rank `to`'s copy stream, after the work queued so
    /// far on both ranks' streams: the copy engine moves it (over peer
    /// memory between GPUs) while the ranks' streams go on. Rank `to`'s
    /// work that needs it waits for the returned [`Copied`]
    /// ([`Mesh::wait_for`]). GPUs only ([`Error::NeedsGpu`] on the
    /// interpreter, which has no copy engine).
    pub fn copy_async<T: Element>(
        &self,
        from: usize,
        src: &BufferView<'_, T>,
        to: usize,
        dst: &BufferView<'_, T>,
    ) -> Result<Copied, Error> {
        let copy = self
            .copy_streams
            .get(to)
            .ok_or(Error::NeedsGpu("a copy engine"))?;
        let (from_stream, to_stream) = (
            self.device(from)?.cuda_stream()?,
            self.device(to)?.cuda_stream()?,
        );
        let address = |arg: KernelArg<'_>| match arg {
            KernelArg::Ptr(PtrValue {
                target: PtrTarget::Cuda { address, .. },
                ..
            }) => Ok(address),
            _ => Err(Error::NeedsGpu("a copy engine")),
        };
        if src.len() != dst.len() {
            return Err(Error::InvalidShape {
                op: "copy_async",
                reason: format!(
                    "the source has {} elements and the destination {}: copy views of one length",
                    src.len(),
                    dst.len()
                ),
            });
        }
        let (at, from_address) = (address(dst.kernel_arg())?, address(src.kernel_arg())?);
        let join = |other: &CudaStream| {
            copy.join(other)
                .map_err(|e| Error::cuda("cuStreamWaitEvent", e))
        };
        join(to_stream)?;
        join(from_stream)?;
        let bytes = src.len() * std::mem::size_of::<T>();
        // SAFETY: both ranges are `bytes` long inside live allocations (the
        // views checked their ranges), ordered on `copy` after the work
        // queued on both ranks' streams.
        unsafe {
            cudarc::driver::result::memcpy_dtod_async(at, from_address, bytes, copy.cu_stream())
        }
        .map_err(|e| Error::cuda("cuMemcpyDtoDAsync", e))?;
        let done = copy
            .record_event(None)
            .map_err(|e| Error::cuda("cuEventRecord", e))?;
        Ok(Copied(done))
    }

    /// Rank `rank`'s later work waits for `copied`.
    pub fn wait_for(&self, rank: usize, copied: &Copied) -> Result<(), Error> {
        self.device(rank)?
            .cuda_stream()?
            .wait(&copied.0)
            .map_err(|e| Error::cuda("cuStreamWaitEvent", e))
    }

    /// One buffer per rank, rank `r`'s holding `data[r]` on its device: the
    /// per-rank operands the mesh's kernels take. `data` has one entry per
    /// rank.
    pub fn upload_each<T: Element>(&self, data: &[Vec<T>]) -> Result<Vec<Buffer<T>>, Error> {
        if data.len() != self.ranks() {
            return Err(Error::InvalidMesh {
                ranks: self.ranks(),
                reason: format!("{} vectors were given, one per rank is needed", data.len()),
            });
        }
        self.devices
            .iter()
            .zip(data)
            .map(|(device, data)| device.upload(data))
            .collect()
    }

    /// One buffer of `len` elements (contents unspecified) per rank, on its
    /// device (not symmetric: no table of addresses; see [`Mesh::alloc`]).
    pub fn alloc_each<T: Element>(&self, len: usize) -> Result<Vec<Buffer<T>>, Error> {
        self.devices.iter().map(|d| d.alloc(len)).collect()
    }

    /// One buffer of `len` zeros per rank, on its device.
    pub fn alloc_zeros_each<T: Element>(&self, len: usize) -> Result<Vec<Buffer<T>>, Error> {
        self.devices.iter().map(|d| d.alloc_zeros(len)).collect()
    }

    /// The argument of a kernel's `Mesh` parameter in rank `rank`'s launch.
    pub fn rank(&self, rank: usize) -> Result<MeshRank<'_>, Error> {
        Ok(MeshRank {
            rank: rank as i32,
            ranks: self.ranks() as i32,
            sync: self.sync.rank(rank)?,
        })
    }

    /// One step of the mesh: zeroes the barrier words, calls `launch` once
    /// per rank with the argument of the kernel's `Mesh` parameter (whose
    /// [`MeshRank::index`] is the rank) and the rank's device, and returns
    /// when every rank's kernel has finished. `launch` launches the rank's
    /// kernel with that rank's buffers. On GPUs the launches are queued on
    /// every rank before any is waited for, so they run at once; on the
    /// interpreter they are held and then run as one schedule, and every
    /// rank must launch exactly one kernel ([`Error::MeshLaunches`]).
    pub fn run(
        &mut self,
        mut launch: impl FnMut(&MeshRank<'_>, &Device) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let mut words = [0i32; mesh_words::LEN];
        for axis in 0..MAX_MESH_AXES {
            words[mesh_words::DIMS + axis] = self.shape.get(axis).map_or(1, |&d| d as i32);
        }
        for rank in 0..self.ranks() {
            self.sync.upload(rank, &words)?;
        }
        for device in &self.devices {
            device.synchronize()?;
        }
        let devices = &self.devices;
        let ranks = (0..devices.len())
            .map(|r| self.rank(r))
            .collect::<Result<Vec<_>, _>>()?;
        let launch_all = || {
            for (rank, device) in ranks.iter().zip(devices) {
                launch(rank, device)?;
            }
            Ok(())
        };
        match &self.runner {
            Runner::Interpreter(group) => group.run(devices.len(), launch_all),
            Runner::Gpu(hold) => {
                let launched = hold.run(launch_all);
                // Wait for every rank even when one failed to launch: the
                // others may be waiting on it, and stop at their deadline.
                let finished: Vec<_> = devices.iter().map(Device::synchronize).collect();
                launched?;
                finished.into_iter().collect()
            }
        }
    }
}

impl std::fmt::Debug for Mesh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mesh({:?} ranks, {:?})", self.shape, self.placement)
    }
}

fn check_ranks(ranks: usize) -> Result<(), Error> {
    if (1..=MAX_RANKS).contains(&ranks) {
        return Ok(());
    }
    Err(Error::InvalidMesh {
        ranks,
        reason: format!("a mesh has 1 to {MAX_RANKS} ranks (the GPUs of one host)"),
    })
}

/// A buffer of `len` elements on every rank of a mesh (the same length, so
/// a rank's offsets mean the same on its peers), with each rank's table of
/// every rank's address of it, which `remote(x, rank)` reads in a kernel.
pub struct SymBuffer<T: Element> {
    parts: Vec<Buffer<T>>,
    tables: Vec<Buffer<i64>>,
}

impl<T: Element> SymBuffer<T> {
    fn new(devices: &[Device], len: usize) -> Result<SymBuffer<T>, Error> {
        let parts = devices
            .iter()
            .map(|d| d.alloc::<T>(len))
            .collect::<Result<Vec<_>, _>>()?;
        let addresses: Vec<i64> = parts.iter().map(Buffer::kernel_address).collect();
        let tables = devices
            .iter()
            .map(|d| d.upload(&addresses))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SymBuffer { parts, tables })
    }

    /// Elements per rank.
    pub fn len(&self) -> usize {
        self.parts[0].len()
    }

    /// Whether it holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The ranks it spans.
    pub fn ranks(&self) -> usize {
        self.parts.len()
    }

    /// Every rank's buffer, in rank order (what a collective takes).
    pub fn buffers(&self) -> &[Buffer<T>] {
        &self.parts
    }

    /// Rank `rank`'s buffer.
    pub fn on(&self, rank: usize) -> Result<&Buffer<T>, Error> {
        self.parts.get(rank).ok_or(Error::NoSuchRank {
            rank,
            ranks: self.ranks(),
        })
    }

    /// Overwrites the start of rank `rank`'s buffer with `data`.
    pub fn upload(&mut self, rank: usize, data: &[T]) -> Result<(), Error> {
        let ranks = self.ranks();
        self.parts
            .get_mut(rank)
            .ok_or(Error::NoSuchRank { rank, ranks })?
            .copy_from(data)
    }

    /// Rank `rank`'s buffer, after the work queued on its device.
    pub fn download(&self, rank: usize) -> Result<Vec<T>, Error> {
        self.on(rank)?.download()
    }

    /// The argument of a kernel's `SymPtr<T>` parameter in rank `rank`'s
    /// launch: its buffer and its table of the ranks' addresses.
    pub fn rank(&self, rank: usize) -> Result<SymRank<'_, T>, Error> {
        Ok(SymRank {
            local: self.on(rank)?,
            table: &self.tables[rank],
        })
    }
}

/// The argument of a kernel's `SymPtr<T>` parameter for one rank
/// ([`SymBuffer::rank`]).
pub struct SymRank<'a, T: Element> {
    local: &'a Buffer<T>,
    table: &'a Buffer<i64>,
}

impl<'a, T: Element> SymRank<'a, T> {
    /// Kernel parameter `index` of the two it becomes: the rank's pointer,
    /// then its table of addresses. (The launcher calls it.)
    pub fn kernel_arg(&self, index: usize) -> KernelArg<'a> {
        let (buffer_target, len, elem) = if index == 0 {
            (self.local.target(0), self.local.len(), T::SCALAR)
        } else {
            (self.table.target(0), self.table.len(), i64::SCALAR)
        };
        ptr_arg(elem, buffer_target, len)
    }
}

/// The argument of a kernel's `Mesh` parameter for one rank ([`Mesh::rank`]).
pub struct MeshRank<'a> {
    rank: i32,
    ranks: i32,
    sync: SymRank<'a, i32>,
}

impl<'a> MeshRank<'a> {
    /// Which rank this is (0-based).
    pub fn index(&self) -> usize {
        self.rank as usize
    }

    /// How many ranks the mesh has.
    pub fn ranks(&self) -> usize {
        self.ranks as usize
    }

    /// Kernel parameter `index` of the four it becomes: the rank, the
    /// number of ranks, the rank's barrier words and their table of
    /// addresses. (The launcher calls it.)
    pub fn kernel_arg(&self, index: usize) -> KernelArg<'a> {
        match index {
            0 => self.rank.kernel_arg(),
            1 => self.ranks.kernel_arg(),
            2 => self.sync.kernel_arg(0),
            _ => self.sync.kernel_arg(1),
        }
    }
}

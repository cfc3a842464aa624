//! The [`Backend`] trait: what a device does, which the CUDA GPU (cuda/) and
//! the CPU interpreter (cpu/) each implement; and what they are handed: a
//! [`Launch`] with its [`Arg`]s, which check.rs made and checked, and
//! [`Mark`]s of their work; and [`HeldDuringRun`], how either holds the
//! launches of a mesh's ranks until all are made.

use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use cudarc::driver::CudaEvent;
use tlx_core::ir::DescriptorBlock;

use crate::spec::{ConfigSpec, KernelSpec};
use crate::value::{DeviceId, PtrTarget, ScalarValue, TensorDescValue};
use crate::{Element, Error, Grid};

/// What a device does: its identity, memory for buffers, launches,
/// synchronizing and timing.
///
/// A backend trusts what it is given. Every launch was checked against the
/// kernel's spec and the device by check.rs (configuration, grid, argument
/// count, types, owning device, descriptors), and every buffer operation by
/// buffer.rs (sizes, ranges, lengths, owning device), before the backend is
/// called; a backend checks only what only it can know (e.g. the GPU's
/// shared memory, or the PTX it has for the GPU).
///
/// Not in the trait, because only a GPU has them: the cudarc context,
/// stream and slices, encoding TMA tensor maps, and saving and restoring
/// outputs while autotuning (the interpreter never times). Those reach the
/// CUDA backend through the device's enum (device.rs), whose doc says why
/// the trait is not used as `dyn Backend`.
pub(crate) trait Backend: Send + Sync {
    /// A buffer of `T`s in this backend's memory (what a `Buffer` holds).
    type Memory<T: Element>: Send + Sync;
    /// A pointer argument as this backend passes it to a kernel.
    type Ptr: Copy;
    /// Runs a configuration's PTX (a GPU), not its IR (the interpreter):
    /// what a kernel built with timelines records, and takes arguments for.
    const RUNS_PTX: bool;

    /// Which device this is; pointers remember it.
    fn id(&self) -> DeviceId;
    /// The GPU's name with its architecture, or `CPU interpreter`.
    fn name(&self) -> String;
    /// The GPU's compute capability; `None` on the CPU interpreter.
    fn compute_capability(&self) -> Option<(u32, u32)>;
    /// How many programs run at once at full width.
    fn multiprocessor_count(&self) -> u32;

    /// `len` elements with unspecified contents; `len` elements' bytes fit
    /// in `usize`.
    fn alloc<T: Element>(&self, len: usize) -> Result<Self::Memory<T>, Error>;
    /// Releases `memory` when its buffer is dropped.
    fn free<T: Element>(&self, memory: &Self::Memory<T>);
    /// Sets every element to zero.
    fn fill_zeros<T: Element>(&self, memory: &mut Self::Memory<T>) -> Result<(), Error>;
    /// Overwrites the first `data.len()` elements with `data`.
    fn upload<T: Element>(&self, memory: &mut Self::Memory<T>, data: &[T]) -> Result<(), Error>;
    /// Overwrites `to` with `from`; both hold `len` elements on this device.
    fn copy<T: Element>(
        &self,
        to: &mut Self::Memory<T>,
        from: &Self::Memory<T>,
        len: usize,
    ) -> Result<(), Error>;
    /// Elements `offset..offset + out.len()` of a buffer of `len` elements
    /// into `out`, after the queued work that writes them.
    fn download<T: Element>(
        &self,
        memory: &Self::Memory<T>,
        len: usize,
        offset: usize,
        out: &mut [T],
    ) -> Result<(), Error>;
    /// Where element `offset` of `memory` lives, as a kernel argument sees it.
    fn target<T: Element>(&self, memory: &Self::Memory<T>, offset: usize) -> PtrTarget;
    /// A pointer into this kind of device's memory, as its launches pass it;
    /// `None` for the other kind's. Only check.rs calls it, with the
    /// device check.
    fn pointer(target: PtrTarget) -> Option<Self::Ptr>;

    /// Runs `launch` with `args` (asynchronous on a GPU, synchronous on the
    /// CPU interpreter).
    fn launch(&self, launch: &Launch, args: &[Arg<'_, Self::Ptr>]) -> Result<(), Error>;
    /// Waits for every queued launch and copy; reports errors they met.
    fn synchronize(&self) -> Result<(), Error>;
    /// The point this device's queued work has reached.
    fn mark(&self) -> Result<Mark, Error>;
    /// Milliseconds from `start` to the later `end`, waiting for `end`'s
    /// work; by default the wall time between them.
    fn elapsed_ms(&self, start: &Mark, end: &Mark) -> Result<f32, Error> {
        Ok(start.wall_ms(end))
    }
    /// Flushes the L2 cache before a timed launch.
    fn flush_l2(&self) -> Result<(), Error>;
}

/// The kernel configuration and grid of a launch that check.rs accepted.
pub(crate) struct Launch {
    pub(crate) spec: &'static KernelSpec,
    /// The configuration's index in `spec.configs`.
    pub(crate) config: usize,
    /// `spec.configs[config]`.
    pub(crate) config_spec: &'static ConfigSpec,
    pub(crate) grid: Grid,
}

/// A launch argument that check.rs accepted: of its parameter's kind and
/// type, and in the launching device's memory (`P`, the backend's
/// [`Backend::Ptr`]).
pub(crate) enum Arg<'a, P> {
    Scalar(ScalarValue),
    Ptr(P),
    TensorDesc {
        at: P,
        desc: TensorDescValue<'a>,
        /// The block the configuration moves through the descriptor.
        block: DescriptorBlock,
    },
}

/// A point in a device's work: a CUDA event recorded on its stream, or on
/// the CPU, where launches finish before they return, the wall clock.
pub(crate) struct Mark {
    pub(crate) event: Option<CudaEvent>,
    at: Instant,
}

impl Mark {
    /// Now, with the event that marks it on a GPU.
    pub(crate) fn now(event: Option<CudaEvent>) -> Mark {
        Mark {
            event,
            at: Instant::now(),
        }
    }

    /// Wall-clock milliseconds from this mark to `end`.
    pub(crate) fn wall_ms(&self, end: &Mark) -> f32 {
        end.at.duration_since(self.at).as_secs_f32() * 1000.0
    }
}

/// The launches the ranks of a mesh make during a run of it (`L`: what a
/// backend needs to start one later), held until every rank has made its
/// own, so that they start together: the interpreter runs them as one
/// schedule, the GPUs queue them only once every module is loaded.
pub(crate) struct HeldDuringRun<L> {
    /// `Some` while a run collects.
    held: Mutex<Option<Vec<L>>>,
}

impl<L> HeldDuringRun<L> {
    pub(crate) fn new() -> HeldDuringRun<L> {
        HeldDuringRun {
            held: Mutex::new(None),
        }
    }

    /// Keeps `launch` for the run collecting now; gives it back when none
    /// is (the rank then launches alone).
    pub(crate) fn try_hold(&self, launch: L) -> Result<(), L> {
        match self
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
        {
            Some(held) => {
                held.push(launch);
                Ok(())
            }
            None => Err(launch),
        }
    }

    /// Calls `launch_all`, which launches on the ranks, and returns what
    /// they launched, in order.
    pub(crate) fn collect(
        &self,
        launch_all: impl FnOnce() -> Result<(), Error>,
    ) -> Result<Vec<L>, Error> {
        *self.held.lock().unwrap_or_else(PoisonError::into_inner) = Some(Vec::new());
        let launched = launch_all();
        let held = self
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .unwrap_or_default();
        launched.map(|()| held)
    }
}

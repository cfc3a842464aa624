//! Stand-in for `tlx_core::interp` until the interpreter branch is merged:
//! the same names and signatures, with real host memory (so buffers work)
//! and a `run_kernel` that reports the interpreter missing. At the merge,
//! `cpu/mod.rs` switches its `use` to `tlx_core::interp` and this file goes.

use std::collections::HashMap;
use std::sync::Mutex;

use tlx_core::ir::{Kernel, ScalarType};

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct BufferId(pub u32);

#[derive(Debug, thiserror::Error)]
pub enum InterpError {
    #[error("no buffer {0:?}")]
    NoBuffer(BufferId),
    #[error("access of {len} bytes at offset {offset} is outside a buffer of {size} bytes")]
    OutOfBounds {
        offset: usize,
        len: usize,
        size: usize,
    },
    #[error(
        "the CPU interpreter is not part of this build yet \
         (asked for {threads} threads, uninit checks {check_uninit})"
    )]
    Unavailable { threads: usize, check_uninit: bool },
}

/// Byte buffers keyed by id, shared by every program of a launch.
#[derive(Debug, Default)]
pub struct HostMemory {
    buffers: Mutex<(u32, HashMap<u32, Vec<u8>>)>,
}

impl HostMemory {
    pub fn new() -> HostMemory {
        HostMemory::default()
    }

    fn with<R>(&self, f: impl FnOnce(&mut (u32, HashMap<u32, Vec<u8>>)) -> R) -> R {
        let mut guard = self
            .buffers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut guard)
    }

    pub fn alloc(&self, bytes: usize) -> BufferId {
        self.with(|(next, map)| {
            *next += 1;
            map.insert(*next, vec![0; bytes]);
            BufferId(*next)
        })
    }

    pub fn free(&self, id: BufferId) {
        self.with(|(_, map)| map.remove(&id.0));
    }

    fn range(
        map: &mut HashMap<u32, Vec<u8>>,
        id: BufferId,
        offset: usize,
        len: usize,
    ) -> Result<&mut [u8], InterpError> {
        let buffer = map.get_mut(&id.0).ok_or(InterpError::NoBuffer(id))?;
        let size = buffer.len();
        let out_of_bounds = InterpError::OutOfBounds { offset, len, size };
        let end = offset
            .checked_add(len)
            .ok_or(InterpError::OutOfBounds { offset, len, size })?;
        buffer.get_mut(offset..end).ok_or(out_of_bounds)
    }

    pub fn write(&self, id: BufferId, offset_bytes: usize, data: &[u8]) -> Result<(), InterpError> {
        self.with(|(_, map)| {
            Self::range(map, id, offset_bytes, data.len())?.copy_from_slice(data);
            Ok(())
        })
    }

    pub fn read(
        &self,
        id: BufferId,
        offset_bytes: usize,
        out: &mut [u8],
    ) -> Result<(), InterpError> {
        self.with(|(_, map)| {
            out.copy_from_slice(Self::range(map, id, offset_bytes, out.len())?);
            Ok(())
        })
    }

    pub fn fill(&self, id: BufferId, byte: u8) -> Result<(), InterpError> {
        self.with(|(_, map)| {
            map.get_mut(&id.0)
                .ok_or(InterpError::NoBuffer(id))?
                .fill(byte);
            Ok(())
        })
    }
}

pub type ScalarBits = u64;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ArgValue {
    Ptr { buffer: BufferId, offset_elems: i64 },
    Scalar(ScalarType, ScalarBits),
}

#[derive(Clone, Debug)]
pub struct InterpOptions {
    pub threads: usize,
    pub check_uninit: bool,
}

pub fn run_kernel(
    _kernel: &Kernel,
    _grid: [u32; 3],
    _args: &[ArgValue],
    _mem: &HostMemory,
    opts: &InterpOptions,
) -> Result<(), InterpError> {
    Err(InterpError::Unavailable {
        threads: opts.threads,
        check_uninit: opts.check_uninit,
    })
}

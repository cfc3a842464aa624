//! Host memory standing in for GPU global memory: numbered byte buffers with
//! a shadow "initialized" flag per byte, safe to share between the OS threads
//! that run programs concurrently.
//!
//! Bytes are `AtomicU8` accessed with relaxed ordering: a racy user kernel
//! gets racy values (as on the GPU), never Rust undefined behaviour. Atomic
//! read-modify-write ops take one global lock, which makes each of them
//! atomic with respect to every other.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use super::error::InterpError;

/// A buffer handle; stays invalid once freed.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct BufferId(pub u32);

impl std::fmt::Display for BufferId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "buffer#{}", self.0)
    }
}

/// One allocation: its bytes and, per byte, whether it was ever written.
pub(crate) struct Buffer {
    bytes: Box<[AtomicU8]>,
    initialized: Box<[AtomicU8]>,
}

fn zeroed_atomics(len: usize) -> Box<[AtomicU8]> {
    std::iter::repeat_with(|| AtomicU8::new(0))
        .take(len)
        .collect()
}

impl Buffer {
    fn new(len: usize) -> Buffer {
        Buffer {
            bytes: zeroed_atomics(len),
            initialized: zeroed_atomics(len),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Little-endian value of `size` (<= 8) bytes at `offset`; the caller checked bounds.
    #[inline]
    pub(crate) fn read_bits(&self, offset: usize, size: usize) -> u64 {
        let mut bits = 0u64;
        for (i, byte) in self.bytes[offset..offset + size].iter().enumerate() {
            bits |= u64::from(byte.load(Ordering::Relaxed)) << (8 * i);
        }
        bits
    }

    /// Stores the low `size` bytes of `bits` at `offset` and marks them initialized.
    #[inline]
    pub(crate) fn write_bits(&self, offset: usize, size: usize, bits: u64) {
        for i in 0..size {
            self.bytes[offset + i].store((bits >> (8 * i)) as u8, Ordering::Relaxed);
            self.initialized[offset + i].store(1, Ordering::Relaxed);
        }
    }

    /// Copies `data` in at `offset` (checked by the caller) and marks it initialized.
    fn write_bytes(&self, offset: usize, data: &[u8]) {
        let end = offset + data.len();
        for (dst, &src) in self.bytes[offset..end].iter().zip(data) {
            dst.store(src, Ordering::Relaxed);
        }
        for init in &self.initialized[offset..end] {
            init.store(1, Ordering::Relaxed);
        }
    }

    /// Whether every byte of `offset..offset + size` was written at least once.
    #[inline]
    pub(crate) fn is_initialized(&self, offset: usize, size: usize) -> bool {
        self.initialized[offset..offset + size]
            .iter()
            .all(|b| b.load(Ordering::Relaxed) != 0)
    }
}

/// Host memory standing in for GPU global memory. `Send + Sync`.
pub struct HostMemory {
    /// Indexed by `BufferId`; `None` once freed. Ids are never reused.
    buffers: RwLock<Vec<Option<Arc<Buffer>>>>,
    atomics: Mutex<()>,
}

impl Default for HostMemory {
    fn default() -> Self {
        HostMemory::new()
    }
}

impl HostMemory {
    pub fn new() -> Self {
        HostMemory {
            buffers: RwLock::new(Vec::new()),
            atomics: Mutex::new(()),
        }
    }

    /// A new buffer of `bytes` bytes whose contents count as uninitialized.
    pub fn alloc(&self, bytes: usize) -> BufferId {
        let mut buffers = self.buffers.write().unwrap_or_else(|e| e.into_inner());
        let id = BufferId(buffers.len() as u32);
        buffers.push(Some(Arc::new(Buffer::new(bytes))));
        id
    }

    /// Releases the buffer; later use of `id` is an error. Freeing twice is a no-op.
    pub fn free(&self, id: BufferId) {
        let mut buffers = self.buffers.write().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = buffers.get_mut(id.0 as usize) {
            *slot = None;
        }
    }

    pub(crate) fn buffer(&self, id: BufferId) -> Option<Arc<Buffer>> {
        let buffers = self.buffers.read().unwrap_or_else(|e| e.into_inner());
        buffers.get(id.0 as usize).and_then(|b| b.clone())
    }

    fn live(&self, id: BufferId) -> Result<Arc<Buffer>, InterpError> {
        self.buffer(id)
            .ok_or(InterpError::UnknownBuffer { buffer: id })
    }

    fn checked_range(
        buffer: &Buffer,
        id: BufferId,
        offset: usize,
        len: usize,
    ) -> Result<(), InterpError> {
        match offset.checked_add(len) {
            Some(end) if end <= buffer.len() => Ok(()),
            _ => Err(InterpError::HostAccessOutOfBounds {
                buffer: id,
                offset,
                len,
                buffer_len: buffer.len(),
            }),
        }
    }

    pub fn len(&self, id: BufferId) -> Result<usize, InterpError> {
        Ok(self.live(id)?.len())
    }

    /// Copies `data` in at `offset_bytes` and marks those bytes initialized.
    pub fn write(&self, id: BufferId, offset_bytes: usize, data: &[u8]) -> Result<(), InterpError> {
        let buffer = self.live(id)?;
        Self::checked_range(&buffer, id, offset_bytes, data.len())?;
        buffer.write_bytes(offset_bytes, data);
        Ok(())
    }

    /// Copies `out.len()` bytes out from `offset_bytes` (uninitialized bytes read as they are).
    pub fn read(
        &self,
        id: BufferId,
        offset_bytes: usize,
        out: &mut [u8],
    ) -> Result<(), InterpError> {
        let buffer = self.live(id)?;
        Self::checked_range(&buffer, id, offset_bytes, out.len())?;
        for (dst, src) in out.iter_mut().zip(&buffer.bytes[offset_bytes..]) {
            *dst = src.load(Ordering::Relaxed);
        }
        Ok(())
    }

    /// The first byte in `offset_bytes..offset_bytes + len` that nothing has
    /// written (relative to `offset_bytes`), if any: checked mode uses it to
    /// report a host download of memory no kernel or upload wrote.
    pub fn first_unwritten(
        &self,
        id: BufferId,
        offset_bytes: usize,
        len: usize,
    ) -> Result<Option<usize>, InterpError> {
        let buffer = self.live(id)?;
        Self::checked_range(&buffer, id, offset_bytes, len)?;
        Ok(buffer.initialized[offset_bytes..offset_bytes + len]
            .iter()
            .position(|init| init.load(Ordering::Relaxed) == 0))
    }

    /// Sets every byte to `byte` and marks the whole buffer initialized.
    pub fn fill(&self, id: BufferId, byte: u8) -> Result<(), InterpError> {
        let buffer = self.live(id)?;
        for (b, init) in buffer.bytes.iter().zip(buffer.initialized.iter()) {
            b.store(byte, Ordering::Relaxed);
            init.store(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Held for the whole of one atomic op so it is atomic against all others.
    pub(crate) fn lock_atomics(&self) -> MutexGuard<'_, ()> {
        self.atomics.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_read_round_trip_and_bounds() {
        let mem = HostMemory::new();
        let id = mem.alloc(8);
        assert_eq!(mem.len(id).ok(), Some(8));
        mem.write(id, 2, &[1, 2, 3]).expect("in bounds");
        let mut out = [0u8; 3];
        mem.read(id, 2, &mut out).expect("in bounds");
        assert_eq!(out, [1, 2, 3]);
        let err = mem.write(id, 6, &[0; 3]);
        assert!(matches!(
            err,
            Err(InterpError::HostAccessOutOfBounds { buffer_len: 8, .. })
        ));
    }

    #[test]
    fn freed_buffers_are_rejected() {
        let mem = HostMemory::new();
        let id = mem.alloc(4);
        mem.free(id);
        assert!(matches!(
            mem.len(id),
            Err(InterpError::UnknownBuffer { .. })
        ));
        assert!(mem.fill(id, 0).is_err());
        assert!(mem.len(BufferId(99)).is_err());
    }

    #[test]
    fn initialized_flags_follow_writes() {
        let mem = HostMemory::new();
        let id = mem.alloc(8);
        let buffer = mem.buffer(id).expect("live");
        assert!(!buffer.is_initialized(0, 4));
        mem.write(id, 0, &[9, 9]).expect("in bounds");
        assert!(buffer.is_initialized(0, 2));
        assert!(!buffer.is_initialized(0, 4));
        mem.fill(id, 0xab).expect("live");
        assert!(buffer.is_initialized(0, 8));
        assert_eq!(buffer.read_bits(4, 4), 0xabab_abab);
    }
}

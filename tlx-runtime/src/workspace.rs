//! Workspaces: buffers a library keeps on a device from one call to the
//! next, so that a kernel needing scratch (zeroed counters, say) pays for
//! allocating and clearing it once, not at every launch.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::{Buffer, Device, Element, Error};

/// The workspaces of a device (and its clones), by name and element type.
#[derive(Default)]
pub(crate) struct Workspaces {
    buffers: Mutex<HashMap<(&'static str, TypeId), Box<dyn Any + Send>>>,
}

impl Device {
    /// Runs `f` with the device's workspace `name`: at least `len` elements
    /// of `T`, all zero when made (and when grown to a larger `len`; the
    /// old contents are dropped then). Between those, each call finds what
    /// the last one left: a kernel whose counters must start at zero sets
    /// them back before it ends. The workspace is `f`'s alone while it
    /// runs: a call made meanwhile (from another thread, or a workspace of
    /// another name inside `f`) gets a fresh one. Launches `f` queues may
    /// still be running when it returns; the device's later launches queue
    /// behind them.
    pub fn with_workspace<T: Element, R>(
        &self,
        name: &'static str,
        len: usize,
        f: impl FnOnce(&mut Buffer<T>) -> Result<R, Error>,
    ) -> Result<R, Error> {
        let key = (name, TypeId::of::<T>());
        let held = self.workspaces().take(key);
        let mut buffer = match held.and_then(|b| b.downcast::<Buffer<T>>().ok()) {
            Some(buffer) if buffer.len() >= len => *buffer,
            _ => self.alloc_zeros::<T>(len)?,
        };
        let result = f(&mut buffer);
        // After a failure the contents are unknown: the next call starts
        // from zeros.
        if result.is_ok() {
            self.workspaces().put(key, Box::new(buffer));
        }
        result
    }
}

impl Workspaces {
    fn take(&self, key: (&'static str, TypeId)) -> Option<Box<dyn Any + Send>> {
        let mut buffers = self.buffers.lock().unwrap_or_else(PoisonError::into_inner);
        buffers.remove(&key)
    }

    fn put(&self, key: (&'static str, TypeId), buffer: Box<dyn Any + Send>) {
        let mut buffers = self.buffers.lock().unwrap_or_else(PoisonError::into_inner);
        buffers.insert(key, buffer);
    }
}

#[cfg(test)]
mod tests {
    use crate::Device;

    #[test]
    fn a_workspace_keeps_its_contents_until_it_grows() -> Result<(), crate::Error> {
        let dev = Device::cpu();
        dev.with_workspace::<i32, _>("counts", 4, |b| {
            assert_eq!(b.download()?, vec![0; 4]);
            b.copy_from(&[1, 2, 3, 4])
        })?;
        let kept = dev.with_workspace::<i32, _>("counts", 2, |b| b.download())?;
        assert_eq!(kept, vec![1, 2, 3, 4]);
        // Another name or element type is another buffer.
        let other = dev.with_workspace::<f32, _>("counts", 4, |b| b.download())?;
        assert_eq!(other, vec![0.0; 4]);
        let grown = dev.with_workspace::<i32, _>("counts", 8, |b| b.download())?;
        assert_eq!(grown, vec![0; 8]);
        // One the call failed with is dropped.
        let failed = dev.with_workspace::<i32, _>("counts", 8, |b| {
            b.copy_from(&[7; 8])?;
            Err::<(), _>(crate::Error::HostMemory("no".into()))
        });
        assert!(failed.is_err());
        let fresh = dev.with_workspace::<i32, _>("counts", 8, |b| b.download())?;
        assert_eq!(fresh, vec![0; 8]);
        Ok(())
    }
}

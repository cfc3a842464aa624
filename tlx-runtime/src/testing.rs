//! Helpers for tests that need a GPU: they skip, saying so, where there is none.

use crate::Device;

/// CUDA device 0, or `None` after printing why the calling test is skipped.
pub fn gpu_or_skip() -> Option<Device> {
    match Device::cuda(0) {
        Ok(device) => Some(device),
        Err(e) => {
            eprintln!("skipping GPU test: {e}");
            None
        }
    }
}

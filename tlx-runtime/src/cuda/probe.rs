//! Finding the CUDA driver library before cudarc does: cudarc panics when
//! `libcuda` is missing (or lacks a function it calls), so the runtime looks
//! first, the same way and in the same order cudarc will.

use std::sync::OnceLock;

/// Driver functions the runtime reaches through cudarc; a driver without
/// them is too old for the CUDA 13 bindings.
const REQUIRED_SYMBOLS: [&str; 12] = [
    "cuInit",
    "cuDeviceGetCount",
    "cuDevicePrimaryCtxRetain",
    "cuCtxSetCurrent",
    "cuModuleLoadData",
    "cuModuleGetFunction",
    "cuFuncSetAttribute",
    "cuLaunchKernelEx",
    "cuMemAllocAsync",
    "cuMemcpyHtoDAsync_v2",
    "cuStreamSynchronize",
    "cuEventElapsedTime_v2",
];

/// `Ok` when the library cudarc will load exists and has what the runtime
/// calls; otherwise the reason, for the fallback notice. Probed once.
pub(crate) fn driver_library() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE.get_or_init(probe).clone()
}

fn probe() -> Result<(), String> {
    let candidates = ["cuda", "nvcuda"]
        .iter()
        .flat_map(|name| cudarc::get_lib_name_candidates(name));
    for candidate in candidates {
        // SAFETY: loading the driver runs its initializers, exactly as cudarc
        // will when it loads the same file.
        let Ok(library) = (unsafe { libloading::Library::new(&candidate) }) else {
            continue;
        };
        for symbol in REQUIRED_SYMBOLS {
            // SAFETY: the symbol is only looked up, never called.
            let found = unsafe { library.get::<unsafe extern "C" fn()>(symbol.as_bytes()) };
            if found.is_err() {
                return Err(format!(
                    "the CUDA driver ({candidate}) lacks {symbol}: it is older than CUDA 13"
                ));
            }
        }
        return Ok(());
    }
    Err("no CUDA driver found (libcuda.so.1)".to_string())
}

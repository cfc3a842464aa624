//! The runtime's error type: every failure a launch, an allocation or a copy
//! can meet, with a message that says what to do about it.

use tlx_core::ir::ParseError;

use crate::cuda::tensor_map::TensorMapError;

/// Everything that can go wrong in the runtime. Nothing here panics instead.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kernel failed to compile (its `compile_error!`s stop the build, so
    /// this is only reachable from code that ignored them, e.g. in an IDE).
    #[error("kernel `{kernel}` did not compile; see the errors at its definition")]
    NotCompiled { kernel: &'static str },

    /// No usable CUDA driver or GPU (the reason says which).
    #[error("no CUDA GPU available: {0}")]
    NoGpu(String),

    /// A CUDA driver call failed.
    #[error("CUDA error in {call}: {name}{hint}")]
    Cuda {
        call: &'static str,
        /// The driver's name for the error, e.g. `CUDA_ERROR_ILLEGAL_ADDRESS`.
        name: String,
        /// Advice for the common errors (empty or starting with `: `).
        hint: &'static str,
    },

    #[error("kernel `{kernel}` takes {expected} arguments, but {got} were given")]
    ArgCount {
        kernel: &'static str,
        expected: usize,
        got: usize,
    },

    #[error("kernel `{kernel}`, argument `{param}`: expected {expected}, got {got}")]
    ArgType {
        kernel: &'static str,
        param: &'static str,
        expected: String,
        got: String,
    },

    #[error(
        "kernel `{kernel}`, argument `{param}`: the buffer belongs to {buffer_device}, \
         but the kernel runs on {device}"
    )]
    WrongDevice {
        kernel: &'static str,
        param: &'static str,
        buffer_device: String,
        device: String,
    },

    #[error("environment variable {var} is not valid: {message}")]
    InvalidEnv { var: &'static str, message: String },

    /// Checked mode (`TLX_CHECK_UNINIT=1`, CPU interpreter): a download
    /// reached memory that no kernel, upload or copy ever wrote.
    #[error(
        "downloading element {element} of a buffer of {len} elements that nothing wrote \
         (allocated uninitialized and never stored to): is a kernel's mask or grid too small?"
    )]
    UnwrittenDownload { element: usize, len: usize },

    /// A kernel compiled with `check_bounds` (or `TLX_CHECK_BOUNDS=1`)
    /// reached outside a pointer argument's memory. The out-of-bounds lanes
    /// were suppressed: no memory was touched, and the launch finished.
    #[error("{0}")]
    KernelOutOfBounds(Box<OutOfBoundsReport>),

    #[error("cannot copy between buffers: {0}")]
    DeviceCopy(String),

    #[error("invalid grid {grid:?}: {reason}")]
    InvalidGrid { grid: [u64; 3], reason: String },

    #[error("kernel `{kernel}` has {count} configurations; configuration {index} does not exist")]
    ConfigIndex {
        kernel: &'static str,
        index: usize,
        count: usize,
    },

    #[error("invalid tensor descriptor: {reason}")]
    InvalidDescriptor { reason: String },

    #[error("kernel `{kernel}`: {reason}")]
    InvalidConfig {
        kernel: &'static str,
        reason: String,
    },

    #[error(
        "kernel `{kernel}` needs {needed} bytes of shared memory, \
         but {device} allows at most {limit} per block"
    )]
    SharedMemory {
        kernel: &'static str,
        needed: u32,
        limit: u32,
        device: String,
    },

    #[error("kernel `{kernel}` has PTX for {available} only; this device is {device_arch}")]
    NoMatchingPtx {
        kernel: &'static str,
        available: String,
        device_arch: String,
    },

    #[error("range {start}..{end} is out of bounds for a buffer of {len} elements")]
    OutOfBounds {
        start: usize,
        end: usize,
        len: usize,
    },

    #[error("length mismatch: the buffer has {buffer} elements, the host data {host}")]
    LengthMismatch { buffer: usize, host: usize },

    #[error("{what} of {count} elements of {elem_bytes} bytes overflows the address space")]
    TooLarge {
        what: &'static str,
        count: usize,
        elem_bytes: usize,
    },

    /// The IR text embedded for the CPU interpreter does not parse (a build problem).
    #[error("kernel `{kernel}`: its embedded IR does not parse ({source}); rebuild the crate")]
    BadIr {
        kernel: &'static str,
        source: ParseError,
    },

    /// The CPU interpreter stopped the kernel (out-of-bounds access, failed assert, ...).
    #[error("kernel `{kernel}` failed in the CPU interpreter: {message}")]
    Interpreter {
        kernel: &'static str,
        message: String,
    },

    /// The CPU device's memory refused an access (a bug in the runtime).
    #[error("CPU device memory: {0}")]
    HostMemory(String),

    /// Operations only a CUDA device has (e.g. borrowing cudarc slices).
    #[error("{0} needs a CUDA device, but this one is the CPU interpreter")]
    NeedsGpu(&'static str),

    /// A TMA tensor map that fails the driver's limits, or that the driver
    /// could not encode.
    #[error("cannot encode the TMA tensor map: {0}")]
    TensorMap(#[from] TensorMapError),
}

/// Where a checked kernel first reached outside a buffer, and how far.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "kernel `{kernel}`, program ({}, {}, {}): {access} of {param} at {file}:{line}:{column} \
     is out of bounds: element {element} of the tile reaches byte offset {byte_offset}, \
     but the argument holds {len_bytes} bytes ({count} out-of-bounds element(s) in this \
     launch; none touched memory). Mask the access, or pass a larger buffer",
    program[0], program[1], program[2]
)]
pub struct OutOfBoundsReport {
    pub kernel: &'static str,
    pub program: [u32; 3],
    /// `load`, `store`, `atomic` or `async_load`.
    pub access: &'static str,
    /// The parameter, as "`x`" (or "`a`/`b`" when the pointer may come
    /// from either).
    pub param: String,
    pub file: &'static str,
    pub line: u32,
    pub column: u32,
    /// Row-major index of the element in the accessed tile.
    pub element: usize,
    /// From the start of the (first) parameter's argument.
    pub byte_offset: i64,
    /// What the argument holds from its pointer on.
    pub len_bytes: u64,
    /// Out-of-bounds elements in the whole launch.
    pub count: i64,
}

impl Error {
    /// A failed driver call, named the way the driver names it, with advice.
    pub(crate) fn cuda(call: &'static str, err: cudarc::driver::DriverError) -> Error {
        // The enum's Debug form is the driver's own error name; asking the
        // driver (cuGetErrorName) would need the library we may be missing.
        let name = format!("{:?}", err.0);
        let hint = hint_for(&name);
        Error::Cuda { call, name, hint }
    }
}

fn hint_for(name: &str) -> &'static str {
    match name {
        "CUDA_ERROR_ILLEGAL_ADDRESS" | "CUDA_ERROR_MISALIGNED_ADDRESS" => {
            ": an out-of-bounds access in a kernel: run with TLX_INTERPRET=1 to find it"
        }
        "CUDA_ERROR_ASSERT" => {
            ": a device_assert failed in a kernel: run with TLX_INTERPRET=1 to see which"
        }
        // tlx lowers a failed device_assert, and a barrier_wait past its
        // mbar_timeout_ns, to a printed message and `trap`.
        "CUDA_ERROR_ILLEGAL_INSTRUCTION" | "CUDA_ERROR_LAUNCH_FAILED" => {
            ": a kernel trapped, as a failed device_assert or a barrier_wait past its \
             mbar_timeout_ns does (the message printed above names the line): run with \
             TLX_INTERPRET=1 to see the program, or the deadlocked tasks"
        }
        "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES" => {
            ": too many registers or threads per block: lower num_warps"
        }
        "CUDA_ERROR_INVALID_CLUSTER_SIZE" => {
            ": the GPU cannot run clusters of this shape: clusters of more than 8 programs \
             (ctas_per_cga) are non-portable, and resources per program limit them further"
        }
        "CUDA_ERROR_OUT_OF_MEMORY" => ": the GPU is out of memory",
        "CUDA_ERROR_INVALID_PTX" | "CUDA_ERROR_UNSUPPORTED_PTX_VERSION" => {
            ": the driver cannot compile this PTX: it may be older than the PTX ISA the kernel uses"
        }
        "CUDA_ERROR_NO_BINARY_FOR_GPU" => ": the kernel was not compiled for this GPU",
        "CUDA_ERROR_LAUNCH_TIMEOUT" => ": the kernel ran too long (display watchdog)",
        "CUDA_ERROR_NO_DEVICE" => ": the driver sees no GPU",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cudarc::driver::sys::cudaError_enum;

    #[test]
    fn cuda_errors_carry_the_driver_name_and_a_hint() {
        let err = cudarc::driver::DriverError(cudaError_enum::CUDA_ERROR_ILLEGAL_ADDRESS);
        let message = Error::cuda("cuStreamSynchronize", err).to_string();
        assert!(message.contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{message}");
        assert!(message.contains("TLX_INTERPRET=1"), "{message}");
        let err = cudarc::driver::DriverError(cudaError_enum::CUDA_ERROR_INVALID_CLUSTER_SIZE);
        let message = Error::cuda("cuLaunchKernel", err).to_string();
        assert!(message.contains("more than 8 programs"), "{message}");
        let err = cudarc::driver::DriverError(cudaError_enum::CUDA_ERROR_INVALID_VALUE);
        let message = Error::cuda("cuLaunchKernel", err).to_string();
        assert_eq!(
            message,
            "CUDA error in cuLaunchKernel: CUDA_ERROR_INVALID_VALUE"
        );
    }
}

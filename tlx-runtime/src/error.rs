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
    NotCompiled {
        /// The kernel's name.
        kernel: &'static str,
    },

    /// No usable CUDA driver or GPU (the reason says which).
    #[error("no CUDA GPU available: {0}")]
    NoGpu(String),

    /// A GPU asked for by index that the machine does not have.
    #[error(
        "CUDA device {index} was asked for, but the driver sees {count} (indices 0..{count}; `Device::count()` says how many)"
    )]
    NoSuchDevice {
        /// The index asked for.
        index: usize,
        /// The GPUs the driver sees.
        count: usize,
    },

    /// A mesh of a number of ranks the runtime cannot make.
    #[error("a mesh of {ranks} ranks cannot be made: {reason}")]
    InvalidMesh {
        /// The ranks asked for.
        ranks: usize,
        /// Why not, and what to do.
        reason: String,
    },

    /// A rank a mesh (or a symmetric buffer) does not have.
    #[error("rank {rank} was asked for, but the mesh has {ranks} (ranks 0..{ranks})")]
    NoSuchRank {
        /// The rank asked for.
        rank: usize,
        /// The ranks of the mesh.
        ranks: usize,
    },

    /// Two GPUs of a mesh that cannot reach each other's memory.
    #[error(
        "CUDA device {from} cannot access the memory of CUDA device {to} (no peer access between them): a mesh needs every pair of its GPUs connected; pick GPUs that are (`nvidia-smi topo -m`), or use `Mesh::shared_gpu` for a correctness run on one"
    )]
    NoPeerAccess {
        /// The GPU that would read and write.
        from: usize,
        /// The GPU whose memory it cannot reach.
        to: usize,
    },

    /// A run of a mesh in which a rank did not launch exactly one kernel.
    #[error(
        "in a mesh run, rank {rank} launched {launched} kernels: a run launches one kernel on every rank (call `run` again for the next)"
    )]
    MeshLaunches {
        /// The rank.
        rank: usize,
        /// The kernels it launched.
        launched: usize,
    },

    /// NCCL is not installed where the CUDA bindings look (the reason
    /// says what to do).
    #[error("NCCL is not available: {0}")]
    NoNccl(String),

    /// An NCCL call failed.
    #[error("NCCL error in {call}: {message}")]
    Nccl {
        /// The NCCL function that failed, e.g. `ncclAllGather`.
        call: &'static str,
        /// NCCL's error.
        message: String,
    },

    /// A CUDA driver call failed.
    #[error("CUDA error in {call}: {name}{hint}")]
    Cuda {
        /// The driver function that failed, e.g. `cuLaunchKernel`.
        call: &'static str,
        /// The driver's name for the error, e.g. `CUDA_ERROR_ILLEGAL_ADDRESS`.
        name: String,
        /// Advice for the common errors (empty or starting with `: `).
        hint: &'static str,
    },

    /// A launch passed more or fewer arguments than the kernel has parameters.
    #[error("kernel `{kernel}` takes {expected} arguments, but {got} were given")]
    ArgCount {
        /// The kernel's name.
        kernel: &'static str,
        /// Parameters the kernel declares.
        expected: usize,
        /// Arguments the launch passed.
        got: usize,
    },

    /// An argument of another kind, element type or rank than its parameter.
    #[error("kernel `{kernel}`, argument `{param}`: expected {expected}, got {got}")]
    ArgType {
        /// The kernel's name.
        kernel: &'static str,
        /// The parameter's name.
        param: &'static str,
        /// What the parameter takes, as messages write it, e.g. `a pointer to f32`.
        expected: String,
        /// What the argument is, in the same form.
        got: String,
    },

    /// A pointer or descriptor argument in another device's memory than the
    /// device the launch runs on.
    #[error(
        "kernel `{kernel}`, argument `{param}`: the buffer belongs to {buffer_device}, \
         but the kernel runs on {device}"
    )]
    WrongDevice {
        /// The kernel's name.
        kernel: &'static str,
        /// The parameter's name.
        param: &'static str,
        /// The device whose memory the argument is in, e.g. `CUDA device 1`.
        buffer_device: String,
        /// The device the launch runs on.
        device: String,
    },

    /// A `TLX_*` environment variable holds a value the runtime does not accept.
    #[error("environment variable {var} is not valid: {message}")]
    InvalidEnv {
        /// The variable's name, e.g. `TLX_AUTOTUNE`.
        var: &'static str,
        /// What is wrong with its value.
        message: String,
    },

    /// Checked mode (`TLX_CHECK_UNINIT=1`, CPU interpreter): a download
    /// reached memory that no kernel, upload or copy ever wrote.
    #[error(
        "downloading element {element} of a buffer of {len} elements that nothing wrote \
         (allocated uninitialized and never stored to){}: is a kernel's mask or grid too small?",
        match last_use {
            Some((kernel, param)) => format!("; it was last passed to kernel `{kernel}` as `{param}`"),
            None => "; no kernel was given it".to_string(),
        }
    )]
    UnwrittenDownload {
        /// Index in the buffer (not the view) of the first unwritten element.
        element: usize,
        /// Elements in the buffer.
        len: usize,
        /// The last kernel the buffer was passed to, and the parameter.
        last_use: Option<(&'static str, &'static str)>,
    },

    /// A kernel compiled with `check_bounds` (or `TLX_CHECK_BOUNDS=1`)
    /// reached outside a pointer argument's memory. The out-of-bounds lanes
    /// were suppressed: no memory was touched, and the launch finished.
    #[error("{0}")]
    KernelOutOfBounds(Box<OutOfBoundsReport>),

    /// [`Buffer::copy_from_device`](crate::Buffer::copy_from_device) between
    /// buffers of different lengths or on different devices (the message
    /// says which).
    #[error("cannot copy between buffers: {0}")]
    DeviceCopy(String),

    /// A launch grid with an empty axis, an axis beyond
    /// [`MAX_GRID`](crate::MAX_GRID), or that is not a whole number of
    /// clusters.
    #[error("invalid grid {grid:?}: {reason}")]
    InvalidGrid {
        /// Programs along x, y and z, as asked for (wider than `u32` so that
        /// counts too large for an axis can be shown).
        grid: [u64; 3],
        /// Which axis is wrong, and why.
        reason: String,
    },

    /// A launch asked for a configuration the kernel does not have.
    #[error("kernel `{kernel}` has {count} configurations; configuration {index} does not exist")]
    ConfigIndex {
        /// The kernel's name.
        kernel: &'static str,
        /// The configuration asked for.
        index: usize,
        /// How many configurations the kernel has.
        count: usize,
    },

    /// [`TensorDesc::new`](crate::TensorDesc::new) was given a shape or
    /// strides that TMA cannot use or that reach past the buffer.
    #[error("invalid tensor descriptor: {reason}")]
    InvalidDescriptor {
        /// What is wrong with them.
        reason: String,
    },

    /// [`Strided::new`](crate::Strided::new) was given extents or strides
    /// beyond the kernels' `i32`, or a view that reaches past the buffer.
    #[error("invalid strided tensor: {reason}")]
    InvalidStrided {
        /// What is wrong with them.
        reason: String,
    },

    /// Arguments of a ready-made op (`tlx::ops`) that do not describe its
    /// operands: a size of zero or beyond a kernel's i32 indexing, or a
    /// buffer too short for the shape.
    #[error("tlx::ops::{op}: {reason}")]
    InvalidShape {
        /// The op, e.g. `gemm`.
        op: &'static str,
        /// What is wrong, and what the op expects.
        reason: String,
    },

    /// A kernel configuration that cannot run, e.g. with `num_warps` or the
    /// cluster shape out of range; also autotuning with no candidates.
    #[error("kernel `{kernel}`: {reason}")]
    InvalidConfig {
        /// The kernel's name (`autotune` for an empty list of candidates).
        kernel: &'static str,
        /// What is wrong.
        reason: String,
    },

    /// A configuration needs more shared memory per block than the GPU has.
    #[error(
        "kernel `{kernel}` needs {needed} bytes of shared memory, \
         but {device} allows at most {limit} per block"
    )]
    SharedMemory {
        /// The kernel's name.
        kernel: &'static str,
        /// Bytes of dynamic shared memory the configuration needs.
        needed: u32,
        /// Bytes the GPU allows a block to opt in to.
        limit: u32,
        /// The GPU's name and architecture.
        device: String,
    },

    /// The kernel carries no PTX for the GPU's compute capability.
    #[error("kernel `{kernel}` has PTX for {available} only; this device is {device_arch}")]
    NoMatchingPtx {
        /// The kernel's name.
        kernel: &'static str,
        /// The architectures it has PTX for, comma-separated.
        available: String,
        /// The GPU's compute capability, as `sm_90`.
        device_arch: String,
    },

    /// A slice range that is reversed or reaches past the end of the buffer
    /// or view it slices.
    #[error("range {start}..{end} is out of bounds for a buffer of {len} elements")]
    OutOfBounds {
        /// The range's first element.
        start: usize,
        /// One past the range's last element.
        end: usize,
        /// Elements in the buffer or view.
        len: usize,
    },

    /// An upload into a buffer from host data of another length.
    #[error("length mismatch: the buffer has {buffer} elements, the host data {host}")]
    LengthMismatch {
        /// Elements in the buffer.
        buffer: usize,
        /// Elements in the host data.
        host: usize,
    },

    /// A size in bytes that does not fit a `usize`.
    #[error("{what} of {count} elements of {elem_bytes} bytes overflows the address space")]
    TooLarge {
        /// What was being sized, e.g. `a buffer`.
        what: &'static str,
        /// Its length in elements.
        count: usize,
        /// The size of one element in bytes.
        elem_bytes: usize,
    },

    /// The IR text embedded for the CPU interpreter does not parse (a build problem).
    #[error("kernel `{kernel}`: its embedded IR does not parse ({source}); rebuild the crate")]
    BadIr {
        /// The kernel's name.
        kernel: &'static str,
        /// The parser's error.
        source: ParseError,
    },

    /// The CPU interpreter stopped the kernel (out-of-bounds access, failed assert, ...).
    #[error("kernel `{kernel}` failed in the CPU interpreter: {message}")]
    Interpreter {
        /// The kernel's name.
        kernel: &'static str,
        /// The interpreter's error.
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
    /// The kernel's name.
    pub kernel: &'static str,
    /// The program (CTA) that reached out, by its index along x, y and z.
    pub program: [u32; 3],
    /// `load`, `store`, `atomic` or `async_load`.
    pub access: &'static str,
    /// The parameter, as "`x`" (or "`a`/`b`" when the pointer may come
    /// from either).
    pub param: String,
    /// The kernel's source file (empty when the access is not known).
    pub file: &'static str,
    /// The access's 1-based line (0 when not known).
    pub line: u32,
    /// The access's 1-based column (0 when not known).
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
    use crate::cuda::tensor_map::TiledTensorMap;
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

    #[test]
    fn tensor_map_errors_convert_into_the_runtime_error() {
        fn validate_in_runtime(map: &TiledTensorMap) -> Result<(), Error> {
            map.validate()?;
            Ok(())
        }
        // A bf16 GEMM operand tile, at an address TMA cannot use.
        let map = TiledTensorMap {
            global_address: 8,
            ..crate::cuda::tensor_map::gemm_operand()
        };
        let message = match validate_in_runtime(&map) {
            Err(err @ Error::TensorMap(_)) => err.to_string(),
            other => panic!("{other:?}"),
        };
        assert!(message.contains("16-byte aligned"), "{message}");
    }
}

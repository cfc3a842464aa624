//! TMA tensor maps: the 128-byte descriptor (`CUtensorMap`) that
//! `cp.async.bulk.tensor` reads to copy a box of a global tensor to or from
//! shared memory. This module owns checking a tiled description against the
//! limits the driver documents, turning the kernel language's outermost-first
//! shapes into the driver's innermost-first arrays, and the call to
//! `cuTensorMapEncodeTiled`. Passing the descriptor to a kernel is elsewhere,
//! and so is [`TiledTensorMap::encode`], which takes a `Device` (device.rs):
//! this file imports nothing else of the crate, so that the argument types
//! and the error type, which name its types, sit above it.
//!
//! Every limit below comes from the CUDA Driver API reference for
//! `cuTensorMapEncodeTiled` (section "Tensor Map Object Management",
//! <https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TENSOR__MEMORY.html>);
//! each check names the requirement it mirrors.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

use cudarc::driver::sys::{
    self, CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapInterleave,
    CUtensorMapL2promotion, CUtensorMapSwizzle,
};
use cudarc::driver::CudaContext;
use tlx_core::ir::ScalarType;

/// "tensorRank must be non-zero and less than or equal to the maximum
/// supported dimensionality of 5."
const MAX_RANK: usize = 5;
/// "globalAddress ... must be 16 byte aligned" (32 only with
/// `CU_TENSOR_MAP_INTERLEAVE_32B` or packed types, neither used here).
const ADDRESS_ALIGN: u64 = 16;
/// "globalDim array ... must be non-zero and less than or equal to 2^32."
const MAX_DIM: u64 = 1 << 32;
/// "globalStrides array ... in bytes, must be a multiple of 16 and less than 2^40."
const STRIDE_ALIGN: u64 = 16;
const STRIDE_LIMIT: u64 = 1 << 40;
/// "boxDim array ... must be non-zero and less than or equal to 256."
const MAX_BOX_DIM: u32 = 256;
/// "When interleave is CU_TENSOR_MAP_INTERLEAVE_NONE, { boxDim[0] *
/// elementSizeInBytes(tensorDataType) } must be a multiple of 16 bytes."
const BOX_INNER_ALIGN: u64 = 16;

/// Swizzle of the shared-memory destination box: the PTX/TMA modes that
/// permute 16-byte chunks within a 32-, 64- or 128-byte span to avoid bank
/// conflicts. The kernel must read shared memory with the same swizzle (and,
/// per the PTX ISA, place swizzled boxes at suitably aligned addresses).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum TmaSwizzle {
    /// Rows land in shared memory as they are in global memory.
    #[default]
    None,
    /// 16-byte chunks permuted within each 32 bytes (`CU_TENSOR_MAP_SWIZZLE_32B`).
    Bytes32,
    /// 16-byte chunks permuted within each 64 bytes (`CU_TENSOR_MAP_SWIZZLE_64B`).
    Bytes64,
    /// 16-byte chunks permuted within each 128 bytes (`CU_TENSOR_MAP_SWIZZLE_128B`).
    Bytes128,
}

impl TmaSwizzle {
    /// The span in bytes whose 16-byte chunks the swizzle permutes; `None`
    /// when unswizzled.
    pub fn span_bytes(self) -> Option<u32> {
        match self {
            TmaSwizzle::None => None,
            TmaSwizzle::Bytes32 => Some(32),
            TmaSwizzle::Bytes64 => Some(64),
            TmaSwizzle::Bytes128 => Some(128),
        }
    }

    fn to_driver(self) -> CUtensorMapSwizzle {
        match self {
            TmaSwizzle::None => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
            TmaSwizzle::Bytes32 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_32B,
            TmaSwizzle::Bytes64 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B,
            TmaSwizzle::Bytes128 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
        }
    }
}

/// A tiled view of a global tensor for TMA: the tensor's layout and the box
/// one `cp.async.bulk.tensor` copies. Shapes, strides and the box are given
/// outermost first, as the kernel language writes them (`[M, K]` for a
/// row-major matrix).
///
/// The descriptor is encoded with no interleave, element strides of 1, L2
/// promotion of 256 bytes and `CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE`, which
/// means box elements outside the tensor are read as zero (and not written
/// on stores): a box may hang over the tensor's edge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TiledTensorMap {
    /// Element type of the global tensor.
    pub elem: ScalarType,
    /// Device address of element `[0, 0, ...]`.
    pub global_address: u64,
    /// Size of each dimension in elements, outermost first.
    pub shape: Vec<u64>,
    /// Stride of each dimension in elements, outermost first; the innermost
    /// must be 1 (TMA reads rows contiguously).
    pub strides_elems: Vec<u64>,
    /// Size of the copied box in elements, outermost first.
    pub box_shape: Vec<u32>,
    /// How the box is laid out in shared memory; the kernel must read it
    /// with the same swizzle.
    pub swizzle: TmaSwizzle,
}

/// An encoded tensor map: opaque bytes the driver wrote, to pass to a kernel
/// (as a `__grid_constant__`-style parameter) or copy to device memory. The
/// encoder's reference asks for 64-byte alignment (CUDA 13's header declares
/// its `CUtensorMap` 128-byte aligned; encoding writes into one of those).
#[repr(C, align(64))]
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct EncodedTensorMap(pub [u8; 128]);

// The bytes are copied out of the bindings' own `CUtensorMap`, so the sizes
// must agree.
const _: () = assert!(size_of::<EncodedTensorMap>() == size_of::<sys::CUtensorMap>());

/// Why a tensor map cannot be encoded. Dimension numbers count outermost
/// first, as in [`TiledTensorMap`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TensorMapError {
    /// The tensor has no dimensions, or more than 5.
    #[error(
        "the tensor has rank {rank}, but TMA copies tensors of rank 1 to 5: \
         merge contiguous dimensions or slice off outer ones"
    )]
    Rank {
        /// Entries in `shape`.
        rank: usize,
    },

    /// `strides_elems` or `box_shape` has another length than `shape`.
    #[error(
        "`{field}` has {len} entries, but the tensor has rank {rank} (the length of `shape`): \
         give one entry per dimension, outermost first"
    )]
    LengthMismatch {
        /// The field's name.
        field: &'static str,
        /// Entries it has.
        len: usize,
        /// Entries in `shape`.
        rank: usize,
    },

    /// An element type TMA does not copy (`bool`, kept out so that viewing
    /// it as `u8` is explicit).
    #[error("TMA cannot copy elements of type {elem}: store the tensor as u8 instead")]
    UnsupportedElem {
        /// The tensor's element type.
        elem: ScalarType,
    },

    /// `global_address` is 0.
    #[error("the global address is null: pass the device address of the tensor's first element")]
    NullAddress,

    /// `global_address` is not aligned as TMA needs.
    #[error(
        "the global address {address:#x} is not {align}-byte aligned: TMA needs the tensor to \
         start on a {align}-byte boundary (allocations are; offset into them by multiples of \
         {align} bytes)"
    )]
    MisalignedAddress {
        /// The address given.
        address: u64,
        /// The alignment TMA needs, in bytes.
        align: u64,
    },

    /// A dimension of the tensor is empty or holds more than 2^32 elements.
    #[error(
        "dimension {dim} has size {size}, but TMA dimensions hold 1 to 2^32 elements: \
         drop empty tensors before encoding, split larger ones"
    )]
    DimSize {
        /// The dimension, counting from 0 outermost first.
        dim: usize,
        /// Its size in elements.
        size: u64,
    },

    /// The innermost stride is not 1.
    #[error(
        "the innermost stride is {stride} elements, but TMA reads the innermost dimension \
         contiguously: make it stride 1 (copy or transpose the tensor first)"
    )]
    InnerStride {
        /// The innermost stride given, in elements.
        stride: u64,
    },

    /// An outer dimension's stride is not a multiple of 16 bytes.
    #[error(
        "the stride of dimension {dim} is {bytes} bytes, not a multiple of 16: \
         pad each row (leading dimension) so that rows start 16-byte aligned"
    )]
    StrideAlignment {
        /// The dimension, counting from 0 outermost first.
        dim: usize,
        /// Its stride in bytes.
        bytes: u64,
    },

    /// An outer dimension's stride is 2^40 bytes or more.
    #[error(
        "the stride of dimension {dim} is {stride_elems} elements of {elem_bytes} bytes, \
         2^40 bytes or more, beyond what TMA addresses: split the tensor"
    )]
    StrideTooLarge {
        /// The dimension, counting from 0 outermost first.
        dim: usize,
        /// Its stride in elements.
        stride_elems: u64,
        /// The size of one element in bytes.
        elem_bytes: u64,
    },

    /// A dimension of the box is empty or holds more than 256 elements.
    #[error(
        "box dimension {dim} is {size} elements, but TMA boxes hold 1 to 256 elements \
         per dimension: copy a larger tile as several boxes"
    )]
    BoxDim {
        /// The dimension, counting from 0 outermost first.
        dim: usize,
        /// Its size in elements.
        size: u32,
    },

    /// The box's innermost dimension is not a multiple of 16 bytes.
    #[error(
        "the box's innermost dimension is {bytes} bytes ({elems} elements of {elem}), \
         not a multiple of 16: make it a multiple of {multiple} elements"
    )]
    BoxInnerBytes {
        /// The box's innermost size in elements.
        elems: u32,
        /// The tensor's element type.
        elem: ScalarType,
        /// The box's innermost size in bytes.
        bytes: u64,
        /// The number of elements it must be a multiple of (16 bytes' worth).
        multiple: u64,
    },

    /// The box's innermost dimension is wider than the swizzle's span.
    #[error(
        "the box's innermost dimension is {bytes} bytes, wider than the {span}-byte span of \
         the {swizzle:?} swizzle: narrow it to at most {max_elems} elements or use a wider swizzle"
    )]
    SwizzleSpan {
        /// The box's innermost size in bytes.
        bytes: u64,
        /// The swizzle's span in bytes.
        span: u32,
        /// The swizzle asked for.
        swizzle: TmaSwizzle,
        /// The most elements the span holds.
        max_elems: u64,
    },

    /// [`TiledTensorMap::encode`] was asked to encode for the CPU interpreter.
    #[error(
        "TMA tensor maps describe GPU memory, but the device is the CPU interpreter, \
         which has no TMA: encode for a CUDA device"
    )]
    NotCuda,

    /// The driver library lacks what encoding needs (the bindings panicked).
    #[error("the CUDA driver cannot encode tensor maps: {0}")]
    NoDriver(String),

    /// The driver refused a call; `name` is its error name, e.g.
    /// `CUDA_ERROR_INVALID_VALUE`. The encoder has limits its reference does
    /// not list: on an H100 (driver 580) it refused boxes of more than 228 KiB,
    /// the SM's shared memory, which depends on the GPU and is left to it.
    #[error(
        "{call} failed: {name} (if the box is larger than the GPU's shared memory, \
         copy it as several boxes; otherwise the GPU or driver lacks TMA)"
    )]
    Driver {
        /// The driver function that failed, e.g. `cuTensorMapEncodeTiled`.
        call: &'static str,
        /// The driver's name for the error.
        name: String,
    },
}

/// The description in the driver's terms: innermost first, strides in bytes.
#[derive(Debug, PartialEq, Eq)]
struct DriverArgs {
    data_type: CUtensorMapDataType,
    rank: usize,
    global_address: u64,
    global_dim: [u64; MAX_RANK],
    /// Byte strides of dimensions 1..rank; dimension 0's is the element size.
    global_strides: [u64; MAX_RANK - 1],
    box_dim: [u32; MAX_RANK],
    swizzle: CUtensorMapSwizzle,
}

impl TiledTensorMap {
    /// Checks the description against the driver's documented limits, so
    /// that mistakes get a message here instead of `CUDA_ERROR_INVALID_VALUE`.
    pub fn validate(&self) -> Result<(), TensorMapError> {
        self.driver_args().map(|_| ())
    }

    /// [`TiledTensorMap::encode`] with the context of an opened CUDA device.
    pub(crate) fn encode_on(&self, ctx: &CudaContext) -> Result<EncodedTensorMap, TensorMapError> {
        let args = self.driver_args()?;
        // Opening the device probed the driver library, so cudarc cannot
        // panic for want of it; the guard covers a driver lacking the encoder.
        catch_unwind(AssertUnwindSafe(|| encode_in(ctx, &args))).unwrap_or_else(|_| {
            Err(TensorMapError::NoDriver(
                "the CUDA bindings could not call cuTensorMapEncodeTiled".to_string(),
            ))
        })
    }

    fn driver_args(&self) -> Result<DriverArgs, TensorMapError> {
        let rank = self.shape.len();
        if !(1..=MAX_RANK).contains(&rank) {
            return Err(TensorMapError::Rank { rank });
        }
        for (field, len) in [
            ("strides_elems", self.strides_elems.len()),
            ("box_shape", self.box_shape.len()),
        ] {
            if len != rank {
                return Err(TensorMapError::LengthMismatch { field, len, rank });
            }
        }
        let data_type = data_type(self.elem)?;
        let elem_bytes = self.elem.size_bytes() as u64;

        if self.global_address == 0 {
            return Err(TensorMapError::NullAddress);
        }
        if self.global_address % ADDRESS_ALIGN != 0 {
            return Err(TensorMapError::MisalignedAddress {
                address: self.global_address,
                align: ADDRESS_ALIGN,
            });
        }
        for (dim, &size) in self.shape.iter().enumerate() {
            if !(1..=MAX_DIM).contains(&size) {
                return Err(TensorMapError::DimSize { dim, size });
            }
        }

        // The driver has no stride for its dimension 0 (our innermost): TMA
        // assumes it contiguous, so anything else must be refused here.
        let inner = rank - 1;
        if self.strides_elems[inner] != 1 {
            return Err(TensorMapError::InnerStride {
                stride: self.strides_elems[inner],
            });
        }
        let mut global_strides = [0; MAX_RANK - 1];
        for (dim, &stride_elems) in self.strides_elems[..inner].iter().enumerate() {
            // A product that overflows u64 is over the limit too.
            let bytes = stride_elems
                .checked_mul(elem_bytes)
                .filter(|&bytes| bytes < STRIDE_LIMIT)
                .ok_or(TensorMapError::StrideTooLarge {
                    dim,
                    stride_elems,
                    elem_bytes,
                })?;
            if bytes % STRIDE_ALIGN != 0 {
                return Err(TensorMapError::StrideAlignment { dim, bytes });
            }
            // Outermost-first dimension `dim` is the driver's dimension
            // `inner - dim`, whose stride sits one slot lower.
            global_strides[inner - dim - 1] = bytes;
        }

        for (dim, &size) in self.box_shape.iter().enumerate() {
            if !(1..=MAX_BOX_DIM).contains(&size) {
                return Err(TensorMapError::BoxDim { dim, size });
            }
        }
        let inner_box = self.box_shape[inner];
        let inner_bytes = u64::from(inner_box) * elem_bytes;
        if inner_bytes % BOX_INNER_ALIGN != 0 {
            return Err(TensorMapError::BoxInnerBytes {
                elems: inner_box,
                elem: self.elem,
                bytes: inner_bytes,
                multiple: BOX_INNER_ALIGN / elem_bytes,
            });
        }
        // "When interleave is CU_TENSOR_MAP_INTERLEAVE_NONE and swizzle is not
        // CU_TENSOR_MAP_SWIZZLE_NONE, the bounding box inner dimension ... must
        // be less than or equal to the swizzle size."
        if let Some(span) = self.swizzle.span_bytes() {
            if inner_bytes > u64::from(span) {
                return Err(TensorMapError::SwizzleSpan {
                    bytes: inner_bytes,
                    span,
                    swizzle: self.swizzle,
                    max_elems: u64::from(span) / elem_bytes,
                });
            }
        }

        let mut global_dim = [0; MAX_RANK];
        let mut box_dim = [0; MAX_RANK];
        for (i, (&size, &box_size)) in self.shape.iter().zip(&self.box_shape).rev().enumerate() {
            global_dim[i] = size;
            box_dim[i] = box_size;
        }
        Ok(DriverArgs {
            data_type,
            rank,
            global_address: self.global_address,
            global_dim,
            global_strides,
            box_dim,
            swizzle: self.swizzle.to_driver(),
        })
    }
}

/// The driver's element type for a tensor of `elem`. TMA only moves bytes,
/// so types it has no name for travel as unsigned integers of their size.
fn data_type(elem: ScalarType) -> Result<CUtensorMapDataType, TensorMapError> {
    use CUtensorMapDataType::*;
    Ok(match elem {
        // A bool's byte holds 0 or 1, which the kernel language's loads
        // assume; refused so that a u8 view makes the reinterpretation explicit.
        ScalarType::Bool => return Err(TensorMapError::UnsupportedElem { elem }),
        ScalarType::I8 | ScalarType::U8 | ScalarType::F8E4M3 | ScalarType::F8E5M2 => {
            CU_TENSOR_MAP_DATA_TYPE_UINT8
        }
        ScalarType::I32 => CU_TENSOR_MAP_DATA_TYPE_INT32,
        ScalarType::U32 => CU_TENSOR_MAP_DATA_TYPE_UINT32,
        ScalarType::I64 => CU_TENSOR_MAP_DATA_TYPE_INT64,
        ScalarType::F16 => CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        ScalarType::BF16 => CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        ScalarType::F32 => CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
        ScalarType::F64 => CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
    })
}

/// The driver call, in `ctx`.
fn encode_in(ctx: &CudaContext, args: &DriverArgs) -> Result<EncodedTensorMap, TensorMapError> {
    let failed = |call| {
        move |e: cudarc::driver::DriverError| TensorMapError::Driver {
            call,
            // The enum's Debug form is the driver's own error name.
            name: format!("{:?}", e.0),
        }
    };
    ctx.bind_to_thread().map_err(failed("cuCtxSetCurrent"))?;
    // The bindings' type carries the alignment the driver wants (64 bytes;
    // CUDA 13's header asks for 128), which a byte array would not.
    let mut map = sys::CUtensorMap { opaque: [0; 16] };
    // Strides inside the box; 1 copies every element.
    let element_strides = [1u32; MAX_RANK];
    // SAFETY: `map` is a writable, aligned CUtensorMap; the arrays hold at
    // least `rank` (strides: `rank - 1`) entries and outlive the call; the
    // address is only recorded, never dereferenced, by the encoder.
    let status = unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            args.data_type,
            args.rank as u32,
            args.global_address as usize as *mut c_void,
            args.global_dim.as_ptr(),
            args.global_strides.as_ptr(),
            args.box_dim.as_ptr(),
            element_strides.as_ptr(),
            CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            args.swizzle,
            // 256-byte L2 fetches suit the large, row-contiguous boxes TMA moves.
            CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            // NONE fills out-of-bounds box elements with zeros; the other mode
            // fills NaN, which is not what a padded tile wants.
            CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    status.result().map_err(failed("cuTensorMapEncodeTiled"))?;
    let mut bytes = [0u8; 128];
    for (chunk, word) in bytes.chunks_exact_mut(8).zip(map.opaque) {
        chunk.copy_from_slice(&word.to_ne_bytes());
    }
    Ok(EncodedTensorMap(bytes))
}

/// A row-major bf16 [M, K] matrix, copied in [128, 64] boxes with the
/// 128-byte swizzle: the operand tile of a Hopper GEMM (the runtime's tests
/// share it).
#[cfg(test)]
pub(crate) fn gemm_operand() -> TiledTensorMap {
    TiledTensorMap {
        elem: ScalarType::BF16,
        global_address: 0x7f00_0000_0000,
        shape: vec![4096, 8192],
        strides_elems: vec![8192, 1],
        box_shape: vec![128, 64],
        swizzle: TmaSwizzle::Bytes128,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(map: &TiledTensorMap) -> TensorMapError {
        match map.validate() {
            Ok(()) => panic!("{map:?} was accepted"),
            Err(err) => err,
        }
    }

    #[test]
    fn a_gemm_operand_tile_is_valid() {
        assert_eq!(gemm_operand().validate(), Ok(()));
    }

    #[test]
    fn the_driver_sees_dimensions_innermost_first_and_strides_in_bytes() {
        let args = gemm_operand().driver_args().expect("valid");
        assert_eq!(args.rank, 2);
        assert_eq!(args.global_dim[..2], [8192, 4096]);
        assert_eq!(args.global_strides[..1], [8192 * 2]);
        assert_eq!(args.box_dim[..2], [64, 128]);
        assert_eq!(
            args.data_type,
            CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
        );
        assert_eq!(args.swizzle, CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B);

        // A padded [B, M, K] f32 batch: each stride maps to its own slot.
        let batch = TiledTensorMap {
            elem: ScalarType::F32,
            global_address: 0x1000,
            shape: vec![3, 100, 60],
            strides_elems: vec![100 * 64, 64, 1],
            box_shape: vec![1, 32, 16],
            swizzle: TmaSwizzle::Bytes64,
        };
        let args = batch.driver_args().expect("valid");
        assert_eq!(args.global_dim[..3], [60, 100, 3]);
        assert_eq!(args.global_strides[..2], [64 * 4, 100 * 64 * 4]);
        assert_eq!(args.box_dim[..3], [16, 32, 1]);
    }

    #[test]
    fn every_element_type_but_bool_has_a_driver_type() {
        for elem in ScalarType::ALL {
            let result = data_type(elem);
            if elem == ScalarType::Bool {
                assert_eq!(result, Err(TensorMapError::UnsupportedElem { elem }));
            } else {
                assert!(result.is_ok(), "{elem}");
            }
        }
        let mut map = gemm_operand();
        map.elem = ScalarType::Bool;
        assert!(matches!(
            rejected(&map),
            TensorMapError::UnsupportedElem {
                elem: ScalarType::Bool
            }
        ));
    }

    #[test]
    fn rank_and_lengths_are_checked() {
        let mut map = gemm_operand();
        map.shape = vec![];
        assert_eq!(rejected(&map), TensorMapError::Rank { rank: 0 });
        map.shape = vec![2; 6];
        assert_eq!(rejected(&map), TensorMapError::Rank { rank: 6 });

        let mut map = gemm_operand();
        map.strides_elems = vec![1];
        assert_eq!(
            rejected(&map),
            TensorMapError::LengthMismatch {
                field: "strides_elems",
                len: 1,
                rank: 2
            }
        );
        let mut map = gemm_operand();
        map.box_shape = vec![1, 128, 64];
        assert_eq!(
            rejected(&map),
            TensorMapError::LengthMismatch {
                field: "box_shape",
                len: 3,
                rank: 2
            }
        );
    }

    #[test]
    fn the_address_must_be_non_null_and_16_byte_aligned() {
        let mut map = gemm_operand();
        map.global_address = 0;
        assert_eq!(rejected(&map), TensorMapError::NullAddress);
        map.global_address = 0x7f00_0000_0008;
        assert_eq!(
            rejected(&map),
            TensorMapError::MisalignedAddress {
                address: 0x7f00_0000_0008,
                align: 16
            }
        );
    }

    #[test]
    fn dimensions_hold_1_to_2_pow_32_elements() {
        let mut map = gemm_operand();
        map.shape[0] = 0;
        assert_eq!(rejected(&map), TensorMapError::DimSize { dim: 0, size: 0 });
        map.shape[0] = 1 << 32;
        map.strides_elems[0] = 64;
        map.shape[1] = 64;
        assert_eq!(map.validate(), Ok(()));
        map.shape[0] = (1 << 32) + 1;
        assert_eq!(
            rejected(&map),
            TensorMapError::DimSize {
                dim: 0,
                size: (1 << 32) + 1
            }
        );
    }

    #[test]
    fn strides_must_be_contiguous_inside_16_byte_multiples_outside_and_below_2_pow_40() {
        let mut map = gemm_operand();
        map.strides_elems = vec![1, 4096];
        assert_eq!(rejected(&map), TensorMapError::InnerStride { stride: 4096 });

        // 8190 bf16 = 16380 bytes: rows would start 4 bytes off 16.
        let mut map = gemm_operand();
        map.strides_elems[0] = 8190;
        assert_eq!(
            rejected(&map),
            TensorMapError::StrideAlignment {
                dim: 0,
                bytes: 16380
            }
        );

        let mut map = gemm_operand();
        map.strides_elems[0] = 1 << 39;
        assert_eq!(
            rejected(&map),
            TensorMapError::StrideTooLarge {
                dim: 0,
                stride_elems: 1 << 39,
                elem_bytes: 2
            }
        );
        // Overflowing u64 is the same mistake, not a panic.
        map.strides_elems[0] = u64::MAX;
        assert!(matches!(
            rejected(&map),
            TensorMapError::StrideTooLarge { dim: 0, .. }
        ));
        // Just under the limit is fine.
        map.strides_elems[0] = (1 << 39) - 8;
        assert_eq!(map.validate(), Ok(()));
    }

    #[test]
    fn box_dimensions_hold_1_to_256_elements_and_16_byte_rows() {
        let mut map = gemm_operand();
        map.box_shape[0] = 0;
        assert_eq!(rejected(&map), TensorMapError::BoxDim { dim: 0, size: 0 });
        map.box_shape[0] = 257;
        assert_eq!(rejected(&map), TensorMapError::BoxDim { dim: 0, size: 257 });
        map.box_shape[0] = 256;
        assert_eq!(map.validate(), Ok(()));

        // 36 bf16 = 72 bytes.
        let mut map = gemm_operand();
        map.box_shape[1] = 36;
        assert_eq!(
            rejected(&map),
            TensorMapError::BoxInnerBytes {
                elems: 36,
                elem: ScalarType::BF16,
                bytes: 72,
                multiple: 8
            }
        );
    }

    #[test]
    fn a_swizzled_box_row_fits_the_swizzle_span() {
        let mut map = gemm_operand();
        map.box_shape[1] = 128; // 256 bytes
        assert_eq!(
            rejected(&map),
            TensorMapError::SwizzleSpan {
                bytes: 256,
                span: 128,
                swizzle: TmaSwizzle::Bytes128,
                max_elems: 64
            }
        );
        map.swizzle = TmaSwizzle::Bytes32;
        map.box_shape[1] = 32; // 64 bytes
        assert!(matches!(
            rejected(&map),
            TensorMapError::SwizzleSpan {
                span: 32,
                max_elems: 16,
                ..
            }
        ));
        map.box_shape[1] = 16;
        assert_eq!(map.validate(), Ok(()));
        // Unswizzled boxes have no row limit beyond 256 elements.
        map.swizzle = TmaSwizzle::None;
        map.box_shape[1] = 256;
        assert_eq!(map.validate(), Ok(()));
    }
}

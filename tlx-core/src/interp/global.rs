//! Global memory ops: pointer arithmetic, masked loads and stores, atomic
//! read-modify-write and compare-and-swap. Every unmasked lane is checked
//! against its buffer (live, in bounds and, on request, initialized) before
//! it touches memory.

use std::sync::Arc;

use crate::ir::{AtomicOp, BinaryOp, ScalarType};
use crate::numeric::{float_from_bits, float_to_bits, int_from_bits, round_f32, wrap_int};

use super::elementwise::{float_combine, int_combine};
use super::error::{Fault, FaultResult};
use super::memory::{Buffer, BufferId, HostMemory};
use super::value::{check_lanes, Data, Ptr, Repr};

/// Finds the buffer of each lane's pointer, remembering the last one since
/// the lanes of a tile nearly always share it.
struct Resolver<'m> {
    mem: &'m HostMemory,
    check_uninit: bool,
    last: Option<(BufferId, Arc<Buffer>)>,
}

impl<'m> Resolver<'m> {
    fn new(mem: &'m HostMemory, check_uninit: bool) -> Self {
        Resolver {
            mem,
            check_uninit,
            last: None,
        }
    }

    /// The buffer and byte offset of an access of `size` bytes by lane `element`.
    fn locate(
        &mut self,
        ptr: Ptr,
        size: usize,
        element: usize,
        reads: bool,
    ) -> FaultResult<(&Buffer, usize)> {
        let freed = Fault::FreedBuffer {
            element,
            buffer: ptr.buffer,
        };
        let hit = matches!(&self.last, Some((id, _)) if *id == ptr.buffer);
        if !hit {
            let buffer = self.mem.buffer(ptr.buffer).ok_or_else(|| freed.clone())?;
            self.last = Some((ptr.buffer, buffer));
        }
        let Some((_, buffer)) = &self.last else {
            return Err(freed);
        };
        let out_of_bounds = Fault::OutOfBounds {
            element,
            byte_offset: ptr.byte_offset,
            buffer: ptr.buffer,
            buffer_len: buffer.len(),
        };
        let offset = usize::try_from(ptr.byte_offset).map_err(|_| out_of_bounds.clone())?;
        if offset
            .checked_add(size)
            .is_none_or(|end| end > buffer.len())
        {
            return Err(out_of_bounds);
        }
        // The GPU faults on accesses not aligned to their size.
        if offset % size != 0 {
            return Err(Fault::Misaligned {
                element,
                byte_offset: ptr.byte_offset,
                buffer: ptr.buffer,
                align: size,
            });
        }
        if reads && self.check_uninit && !buffer.is_initialized(offset, size) {
            return Err(Fault::UninitRead {
                element,
                byte_offset: ptr.byte_offset,
                buffer: ptr.buffer,
                buffer_len: buffer.len(),
            });
        }
        Ok((buffer, offset))
    }
}

/// Pointers advanced by `offsets` elements of `pointee` (either side may be a single element).
pub(crate) fn add_ptr(ptrs: &[Ptr], offsets: &[i64], pointee: ScalarType) -> FaultResult<Data> {
    let n = ptrs.len().max(offsets.len());
    check_lanes(ptrs.len(), n, "pointer operand")?;
    check_lanes(offsets.len(), n, "offset operand")?;
    let size = pointee.size_bytes() as i64;
    Ok(Data::Ptr(
        (0..n)
            .map(|i| {
                let p = ptrs[if ptrs.len() == 1 { 0 } else { i }];
                let o = offsets[if offsets.len() == 1 { 0 } else { i }];
                Ptr {
                    buffer: p.buffer,
                    byte_offset: p.byte_offset.wrapping_add(o.wrapping_mul(size)),
                }
            })
            .collect(),
    ))
}

fn lane<T: Copy>(v: &[T], i: usize) -> T {
    v[if v.len() == 1 { 0 } else { i }]
}

/// Per-lane masked read of `pointee` values decoded by `decode`.
fn load_lanes<T: Copy>(
    resolver: &mut Resolver<'_>,
    ptrs: &[Ptr],
    pointee: ScalarType,
    mask: Option<&[bool]>,
    other: Option<&[T]>,
    zero: T,
    decode: impl Fn(u64) -> T,
) -> FaultResult<Vec<T>> {
    let size = pointee.size_bytes();
    let mut out = Vec::with_capacity(ptrs.len());
    for (element, &ptr) in ptrs.iter().enumerate() {
        if mask.is_some_and(|m| !lane(m, element)) {
            out.push(other.map_or(zero, |o| lane(o, element)));
            continue;
        }
        let (buffer, offset) = resolver.locate(ptr, size, element, true)?;
        out.push(decode(buffer.read_bits(offset, size)));
    }
    Ok(out)
}

/// A global load of `pointee` values; masked-off lanes give `other` or zero.
pub(crate) fn load(
    mem: &HostMemory,
    check_uninit: bool,
    pointee: ScalarType,
    ptrs: &[Ptr],
    mask: Option<&[bool]>,
    other: Option<&Data>,
) -> FaultResult<Data> {
    let n = ptrs.len();
    if let Some(m) = mask {
        check_lanes(m.len(), n, "load mask")?;
    }
    if let Some(o) = other {
        check_lanes(o.len(), n, "load `other`")?;
    }
    let mut r = Resolver::new(mem, check_uninit);
    let bad_other = || Fault::malformed("load `other` of another element type");
    Ok(match Repr::of_scalar(pointee) {
        Repr::Float => {
            let other = match other {
                None => None,
                Some(Data::Float(o)) => Some(o.as_slice()),
                Some(_) => return Err(bad_other()),
            };
            Data::Float(if pointee == ScalarType::F32 {
                load_lanes(&mut r, ptrs, pointee, mask, other, 0.0, |b| {
                    f32::from_bits(b as u32)
                })?
            } else {
                load_lanes(&mut r, ptrs, pointee, mask, other, 0.0, |b| {
                    float_from_bits(pointee, b)
                })?
            })
        }
        Repr::F64 => {
            let other = match other {
                None => None,
                Some(Data::F64(o)) => Some(o.as_slice()),
                Some(_) => return Err(bad_other()),
            };
            Data::F64(load_lanes(
                &mut r,
                ptrs,
                pointee,
                mask,
                other,
                0.0,
                f64::from_bits,
            )?)
        }
        Repr::Int => {
            let other = match other {
                None => None,
                Some(Data::Int(o)) => Some(o.as_slice()),
                Some(_) => return Err(bad_other()),
            };
            Data::Int(load_lanes(&mut r, ptrs, pointee, mask, other, 0, |b| {
                int_from_bits(pointee, b)
            })?)
        }
        Repr::Bool => {
            let other = match other {
                None => None,
                Some(Data::Bool(o)) => Some(o.as_slice()),
                Some(_) => return Err(bad_other()),
            };
            Data::Bool(load_lanes(
                &mut r,
                ptrs,
                pointee,
                mask,
                other,
                false,
                |b| b != 0,
            )?)
        }
    })
}

fn store_lanes<T: Copy>(
    resolver: &mut Resolver<'_>,
    ptrs: &[Ptr],
    pointee: ScalarType,
    values: &[T],
    mask: Option<&[bool]>,
    encode: impl Fn(T) -> u64,
) -> FaultResult<()> {
    let size = pointee.size_bytes();
    for (element, &ptr) in ptrs.iter().enumerate() {
        if mask.is_some_and(|m| !lane(m, element)) {
            continue;
        }
        let (buffer, offset) = resolver.locate(ptr, size, element, false)?;
        buffer.write_bits(offset, size, encode(lane(values, element)));
    }
    Ok(())
}

/// A global store; masked-off lanes touch nothing.
pub(crate) fn store(
    mem: &HostMemory,
    pointee: ScalarType,
    ptrs: &[Ptr],
    values: &Data,
    mask: Option<&[bool]>,
) -> FaultResult<()> {
    let n = ptrs.len();
    check_lanes(values.len(), n, "stored value")?;
    if let Some(m) = mask {
        check_lanes(m.len(), n, "store mask")?;
    }
    let mut r = Resolver::new(mem, false);
    match (values, Repr::of_scalar(pointee)) {
        (Data::Float(v), Repr::Float) => {
            if pointee == ScalarType::F32 {
                store_lanes(&mut r, ptrs, pointee, v, mask, |x: f32| {
                    u64::from(x.to_bits())
                })
            } else {
                store_lanes(&mut r, ptrs, pointee, v, mask, |x| {
                    float_to_bits(pointee, x)
                })
            }
        }
        (Data::F64(v), Repr::F64) => store_lanes(&mut r, ptrs, pointee, v, mask, f64::to_bits),
        (Data::Int(v), Repr::Int) => store_lanes(&mut r, ptrs, pointee, v, mask, |x: i64| x as u64),
        (Data::Bool(v), Repr::Bool) => store_lanes(&mut r, ptrs, pointee, v, mask, u64::from),
        _ => Err(Fault::malformed(
            "stored value does not match the pointee type",
        )),
    }
}

/// How one element type is read from and written to memory, for atomics.
struct Codec<T> {
    decode: Box<dyn Fn(u64) -> T>,
    encode: Box<dyn Fn(T) -> u64>,
}

/// Per-lane atomic update: `update(old, operand)` gives the new value; returns the olds.
fn atomic_lanes<T: Copy>(
    r: &mut Resolver<'_>,
    pointee: ScalarType,
    ptrs: &[Ptr],
    mask: Option<&[bool]>,
    zero: T,
    codec: Codec<T>,
    update: impl Fn(T, usize) -> FaultResult<Option<T>>,
) -> FaultResult<Vec<T>> {
    let size = pointee.size_bytes();
    let _exclusive = r.mem.lock_atomics();
    let mut olds = Vec::with_capacity(ptrs.len());
    for (element, &ptr) in ptrs.iter().enumerate() {
        if mask.is_some_and(|m| !lane(m, element)) {
            olds.push(zero);
            continue;
        }
        let (buffer, offset) = r.locate(ptr, size, element, true)?;
        let old = (codec.decode)(buffer.read_bits(offset, size));
        if let Some(new) = update(old, element)? {
            buffer.write_bits(offset, size, (codec.encode)(new));
        }
        olds.push(old);
    }
    Ok(olds)
}

fn float_codec(ty: ScalarType) -> Codec<f32> {
    Codec {
        decode: Box::new(move |b| float_from_bits(ty, b)),
        encode: Box::new(move |x| float_to_bits(ty, x)),
    }
}

fn f64_codec() -> Codec<f64> {
    Codec {
        decode: Box::new(f64::from_bits),
        encode: Box::new(f64::to_bits),
    }
}

fn int_codec(ty: ScalarType) -> Codec<i64> {
    Codec {
        decode: Box::new(move |b| int_from_bits(ty, b)),
        encode: Box::new(|x| x as u64),
    }
}

fn bool_codec() -> Codec<bool> {
    Codec {
        decode: Box::new(|b| b != 0),
        encode: Box::new(u64::from),
    }
}

fn as_binary(op: AtomicOp) -> Option<BinaryOp> {
    Some(match op {
        AtomicOp::Add => BinaryOp::Add,
        AtomicOp::Max => BinaryOp::Max,
        AtomicOp::Min => BinaryOp::Min,
        AtomicOp::And => BinaryOp::And,
        AtomicOp::Or => BinaryOp::Or,
        AtomicOp::Xor => BinaryOp::Xor,
        AtomicOp::Exchange => return None,
    })
}

/// Atomic read-modify-write per unmasked lane; the result holds the old values
/// (zero in masked-off lanes).
pub(crate) fn atomic_rmw(
    mem: &HostMemory,
    check_uninit: bool,
    op: AtomicOp,
    pointee: ScalarType,
    ptrs: &[Ptr],
    values: &Data,
    mask: Option<&[bool]>,
) -> FaultResult<Data> {
    let n = ptrs.len();
    check_lanes(values.len(), n, "atomic operand")?;
    if let Some(m) = mask {
        check_lanes(m.len(), n, "atomic mask")?;
    }
    let binary = as_binary(op);
    let mut r = Resolver::new(mem, check_uninit);
    let unsupported = || Fault::malformed(format!("atomic {op:?} on {pointee}"));
    match (values, Repr::of_scalar(pointee)) {
        (Data::Float(v), Repr::Float) => {
            let combine = match binary {
                None => None,
                Some(b) => Some(float_combine(b).ok_or_else(unsupported)?),
            };
            let olds = atomic_lanes(
                &mut r,
                pointee,
                ptrs,
                mask,
                0.0,
                float_codec(pointee),
                |old, i| {
                    let x = lane(v, i);
                    Ok(Some(combine.map_or(x, |f| round_f32(pointee, f(old, x)))))
                },
            )?;
            Ok(Data::Float(olds))
        }
        // PTX has f64 atomics for add and exchange only.
        (Data::F64(v), Repr::F64) if op.takes(pointee) => {
            let olds = atomic_lanes(&mut r, pointee, ptrs, mask, 0.0, f64_codec(), |old, i| {
                let x = lane(v, i);
                Ok(Some(if op == AtomicOp::Add { old + x } else { x }))
            })?;
            Ok(Data::F64(olds))
        }
        (Data::Int(v), Repr::Int) => {
            let olds = atomic_lanes(
                &mut r,
                pointee,
                ptrs,
                mask,
                0,
                int_codec(pointee),
                |old, i| {
                    let x = lane(v, i);
                    let new = match binary {
                        None => x,
                        Some(b) => int_combine(b, pointee, old, x).ok_or_else(unsupported)?,
                    };
                    Ok(Some(wrap_int(pointee, new)))
                },
            )?;
            Ok(Data::Int(olds))
        }
        (Data::Bool(v), Repr::Bool) => {
            let olds = atomic_lanes(
                &mut r,
                pointee,
                ptrs,
                mask,
                false,
                bool_codec(),
                |old, i| {
                    let x = lane(v, i);
                    Ok(Some(match op {
                        AtomicOp::Exchange => x,
                        AtomicOp::And | AtomicOp::Min => old && x,
                        AtomicOp::Or | AtomicOp::Max => old || x,
                        AtomicOp::Xor => old != x,
                        AtomicOp::Add => return Err(unsupported()),
                    }))
                },
            )?;
            Ok(Data::Bool(olds))
        }
        _ => Err(unsupported()),
    }
}

/// Atomic compare-and-swap per lane (bitwise comparison); the result holds the old values.
pub(crate) fn atomic_cas(
    mem: &HostMemory,
    check_uninit: bool,
    pointee: ScalarType,
    ptrs: &[Ptr],
    cmp: &Data,
    values: &Data,
) -> FaultResult<Data> {
    let n = ptrs.len();
    check_lanes(values.len(), n, "cas value")?;
    check_lanes(cmp.len(), n, "cas comparand")?;
    let mut r = Resolver::new(mem, check_uninit);
    match (cmp, values, Repr::of_scalar(pointee)) {
        (Data::Float(c), Data::Float(v), Repr::Float) => {
            let bits = |x| float_to_bits(pointee, x);
            let olds = atomic_lanes(
                &mut r,
                pointee,
                ptrs,
                None,
                0.0,
                float_codec(pointee),
                |old, i| Ok((bits(old) == bits(lane(c, i))).then(|| lane(v, i))),
            )?;
            Ok(Data::Float(olds))
        }
        (Data::F64(c), Data::F64(v), Repr::F64) => {
            let olds = atomic_lanes(&mut r, pointee, ptrs, None, 0.0, f64_codec(), |old, i| {
                Ok((old.to_bits() == lane(c, i).to_bits()).then(|| lane(v, i)))
            })?;
            Ok(Data::F64(olds))
        }
        (Data::Int(c), Data::Int(v), Repr::Int) => {
            let olds = atomic_lanes(
                &mut r,
                pointee,
                ptrs,
                None,
                0,
                int_codec(pointee),
                |old, i| Ok((old == lane(c, i)).then(|| lane(v, i))),
            )?;
            Ok(Data::Int(olds))
        }
        (Data::Bool(c), Data::Bool(v), Repr::Bool) => {
            let olds = atomic_lanes(
                &mut r,
                pointee,
                ptrs,
                None,
                false,
                bool_codec(),
                |old, i| Ok((old == lane(c, i)).then(|| lane(v, i))),
            )?;
            Ok(Data::Bool(olds))
        }
        _ => Err(Fault::malformed(format!(
            "atomic_cas on {pointee} with mismatched operands"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ptrs(buffer: BufferId, offsets: &[i64]) -> Vec<Ptr> {
        offsets
            .iter()
            .map(|&byte_offset| Ptr {
                buffer,
                byte_offset,
            })
            .collect()
    }

    #[test]
    fn load_store_round_trip_with_mask() {
        let mem = HostMemory::new();
        let id = mem.alloc(16);
        let p = ptrs(id, &[0, 4, 8, 12]);
        store(
            &mem,
            ScalarType::F32,
            &p,
            &Data::Float(vec![1.0, 2.0, 3.0, 4.0]),
            Some(&[true, true, false, true]),
        )
        .expect("in bounds");
        let got = load(
            &mem,
            true,
            ScalarType::F32,
            &p,
            Some(&[true, true, false, true]),
            Some(&Data::Float(vec![-1.0])),
        );
        assert_eq!(got, Ok(Data::Float(vec![1.0, 2.0, -1.0, 4.0])));
        // The masked-off lane was never written: reading it is an uninit read.
        let err = load(&mem, true, ScalarType::F32, &p, None, None);
        assert!(matches!(
            err,
            Err(Fault::UninitRead {
                element: 2,
                byte_offset: 8,
                ..
            })
        ));
    }

    #[test]
    fn out_of_bounds_and_freed_buffers_are_reported() {
        let mem = HostMemory::new();
        let id = mem.alloc(8);
        let p = ptrs(id, &[0, 8]);
        let err = store(
            &mem,
            ScalarType::F32,
            &p,
            &Data::Float(vec![0.0, 0.0]),
            None,
        );
        assert_eq!(
            err,
            Err(Fault::OutOfBounds {
                element: 1,
                byte_offset: 8,
                buffer: id,
                buffer_len: 8
            })
        );
        let neg = ptrs(id, &[-4]);
        assert!(matches!(
            load(&mem, false, ScalarType::F32, &neg, None, None),
            Err(Fault::OutOfBounds { .. })
        ));
        // A masked-off out-of-bounds lane is fine.
        assert!(store(
            &mem,
            ScalarType::F32,
            &p,
            &Data::Float(vec![0.0, 0.0]),
            Some(&[true, false])
        )
        .is_ok());
        mem.free(id);
        assert_eq!(
            load(&mem, false, ScalarType::F32, &p, None, None),
            Err(Fault::FreedBuffer {
                element: 0,
                buffer: id
            })
        );
    }

    #[test]
    fn narrow_types_are_encoded() {
        let mem = HostMemory::new();
        let id = mem.alloc(4);
        let p = ptrs(id, &[0, 2]);
        store(
            &mem,
            ScalarType::F16,
            &p,
            &Data::Float(vec![1.5, -2.0]),
            None,
        )
        .expect("in bounds");
        let mut raw = [0u8; 4];
        mem.read(id, 0, &mut raw).expect("live");
        assert_eq!(
            u16::from_le_bytes([raw[0], raw[1]]),
            half::f16::from_f32(1.5).to_bits()
        );
        let bytes = ptrs(id, &[0, 1]);
        store(&mem, ScalarType::I8, &bytes, &Data::Int(vec![-1, 5]), None).expect("in bounds");
        assert_eq!(
            load(&mem, true, ScalarType::I8, &bytes, None, None),
            Ok(Data::Int(vec![-1, 5]))
        );
        assert_eq!(
            load(&mem, true, ScalarType::U8, &bytes, None, None),
            Ok(Data::Int(vec![255, 5]))
        );
    }

    #[test]
    fn atomics_return_old_values() {
        let mem = HostMemory::new();
        let id = mem.alloc(8);
        mem.fill(id, 0).expect("live");
        let p = ptrs(id, &[0, 0, 4]);
        let olds = atomic_rmw(
            &mem,
            true,
            AtomicOp::Add,
            ScalarType::I32,
            &p,
            &Data::Int(vec![1, 2, 5]),
            None,
        );
        assert_eq!(olds, Ok(Data::Int(vec![0, 1, 0])));
        let olds = atomic_rmw(
            &mem,
            true,
            AtomicOp::Max,
            ScalarType::I32,
            &p[..1],
            &Data::Int(vec![-9]),
            None,
        );
        assert_eq!(olds, Ok(Data::Int(vec![3])));
        let olds = atomic_cas(
            &mem,
            true,
            ScalarType::I32,
            &p[2..],
            &Data::Int(vec![5]),
            &Data::Int(vec![7]),
        );
        assert_eq!(olds, Ok(Data::Int(vec![5])));
        let olds = atomic_rmw(
            &mem,
            true,
            AtomicOp::Exchange,
            ScalarType::I32,
            &p[2..],
            &Data::Int(vec![0]),
            None,
        );
        assert_eq!(olds, Ok(Data::Int(vec![7])));
        let f = mem.alloc(4);
        mem.fill(f, 0).expect("live");
        let fp = ptrs(f, &[0, 0]);
        let olds = atomic_rmw(
            &mem,
            true,
            AtomicOp::Add,
            ScalarType::F32,
            &fp,
            &Data::Float(vec![0.5, 0.25]),
            None,
        );
        assert_eq!(olds, Ok(Data::Float(vec![0.0, 0.5])));
        assert!(atomic_rmw(
            &mem,
            true,
            AtomicOp::Xor,
            ScalarType::F32,
            &fp,
            &Data::Float(vec![1.0, 1.0]),
            None
        )
        .is_err());
    }

    #[test]
    fn misaligned_accesses_are_reported() {
        let mem = HostMemory::new();
        let id = mem.alloc(8);
        mem.fill(id, 0).expect("live");
        let err = load(&mem, true, ScalarType::F32, &ptrs(id, &[0, 2]), None, None);
        assert_eq!(
            err,
            Err(Fault::Misaligned {
                element: 1,
                byte_offset: 2,
                buffer: id,
                align: 4
            })
        );
    }

    #[test]
    fn add_ptr_counts_elements() {
        let id = BufferId(0);
        let p = ptrs(id, &[8]);
        let r = add_ptr(&p, &[0, 1, 3], ScalarType::F16);
        assert_eq!(r, Ok(Data::Ptr(ptrs(id, &[8, 10, 14]))));
        assert!(add_ptr(&ptrs(id, &[0, 0]), &[0, 1, 2], ScalarType::F16).is_err());
    }
}

//! Checked mode's tracking of undefined elements. A `load` with a mask and
//! no `other` leaves its masked-off lanes unspecified (garbage on the GPU,
//! zero here); a kernel that lets such a value reach memory, control flow or
//! output works on the interpreter by luck. A value may carry [`Flags`]
//! naming its undefined elements and the line of the load they came from;
//! this module computes the flags of an op's results from its operands' and
//! finds the first undefined element a use observes. `None` means every
//! element is defined, so kernels without such loads pay a branch per op.

use std::rc::Rc;

use crate::ir::{BinaryOp, ReduceKind, ScalarType};

use super::error::{Fault, FaultResult};
use super::value::{Data, Tensor};
use super::{reduce, shape};

/// The undefined elements of one value.
#[derive(Debug, PartialEq)]
pub(crate) struct Undef {
    /// One flag per element, row-major; at least one is set.
    lanes: Vec<bool>,
    /// The line of the load the first undefined element came from.
    origin_line: u32,
}

/// A value's undefined elements; `None` when all are defined.
pub(crate) type Flags = Option<Rc<Undef>>;

/// The flags of a value no op has marked.
pub(crate) const ALL_DEFINED: &Flags = &None;

/// `v[i]`, or `v[0]` for a single element serving every lane; false past the end
/// (malformed lengths are the op's own error to report).
fn lane(v: &[bool], i: usize) -> bool {
    let at = if v.len() == 1 { 0 } else { i };
    v.get(at).copied().unwrap_or(false)
}

/// The origin line if element `i` of `flags` is undefined.
fn undefined_at(flags: &Flags, i: usize) -> Option<u32> {
    let undef = flags.as_deref()?;
    lane(&undef.lanes, i).then_some(undef.origin_line)
}

/// Flags built lane by lane; allocates only once a lane is marked.
struct Marks {
    numel: usize,
    lanes: Vec<bool>,
    origin: Option<u32>,
}

impl Marks {
    fn new(numel: usize) -> Self {
        Marks {
            numel,
            lanes: Vec::new(),
            origin: None,
        }
    }

    fn mark(&mut self, i: usize, origin: u32) {
        if self.lanes.is_empty() {
            self.lanes = vec![false; self.numel];
        }
        if let Some(flag) = self.lanes.get_mut(i) {
            *flag = true;
            self.origin.get_or_insert(origin);
        }
    }

    fn mark_if(&mut self, i: usize, origin: Option<u32>) {
        if let Some(origin) = origin {
            self.mark(i, origin);
        }
    }

    fn finish(self) -> Flags {
        let origin_line = self.origin?;
        Some(Rc::new(Undef {
            lanes: self.lanes,
            origin_line,
        }))
    }
}

/// Flags from per-element bools, `None` when none is set.
fn from_lanes(lanes: Vec<bool>, origin_line: u32) -> Flags {
    lanes
        .contains(&true)
        .then(|| Rc::new(Undef { lanes, origin_line }))
}

/// A lane of the result is undefined when that lane of any operand is (an
/// operand of one element serves every lane).
pub(crate) fn elementwise(operands: &[&Flags], numel: usize) -> Flags {
    if operands.iter().all(|f| f.is_none()) {
        return None;
    }
    let mut marks = Marks::new(numel);
    for i in 0..numel {
        marks.mark_if(i, operands.iter().find_map(|f| undefined_at(f, i)));
    }
    marks.finish()
}

/// A binary op: as [`elementwise`], except that a defined `false` in a
/// logical `and` (a defined `true` in an `or`) decides the lane on its own,
/// as on the GPU, so `mask & (x > 0)` is defined wherever `mask` is off.
pub(crate) fn binary(
    op: BinaryOp,
    (lhs, lhs_flags): (&Data, &Flags),
    (rhs, rhs_flags): (&Data, &Flags),
    numel: usize,
) -> Flags {
    let absorbing = match op {
        BinaryOp::And => false,
        BinaryOp::Or => true,
        _ => return elementwise(&[lhs_flags, rhs_flags], numel),
    };
    let (Data::Bool(l), Data::Bool(r)) = (lhs, rhs) else {
        return elementwise(&[lhs_flags, rhs_flags], numel);
    };
    if lhs_flags.is_none() && rhs_flags.is_none() {
        return None;
    }
    let mut marks = Marks::new(numel);
    for i in 0..numel {
        let (lu, ru) = (undefined_at(lhs_flags, i), undefined_at(rhs_flags, i));
        let decided =
            (lu.is_none() && lane(l, i) == absorbing) || (ru.is_none() && lane(r, i) == absorbing);
        if !decided {
            marks.mark_if(i, lu.or(ru));
        }
    }
    marks.finish()
}

/// `where`: a lane takes the flag of the operand its condition picks, and is
/// undefined whatever it picks when the condition lane is.
pub(crate) fn select(
    (cond, cond_flags): (&[bool], &Flags),
    on_true: &Flags,
    on_false: &Flags,
    numel: usize,
) -> Flags {
    if cond_flags.is_none() && on_true.is_none() && on_false.is_none() {
        return None;
    }
    let mut marks = Marks::new(numel);
    for i in 0..numel {
        let picked = if lane(cond, i) { on_true } else { on_false };
        marks.mark_if(i, undefined_at(cond_flags, i).or(undefined_at(picked, i)));
    }
    marks.finish()
}

/// A load's result: masked-off lanes are undefined without `other` and take
/// `other`'s flags with it; unmasked lanes read memory and are defined.
pub(crate) fn loaded(
    numel: usize,
    mask: Option<&[bool]>,
    other: Option<&Flags>,
    line: u32,
) -> Flags {
    let mask = mask?;
    let mut marks = Marks::new(numel);
    for i in (0..numel).filter(|&i| !lane(mask, i)) {
        match other {
            None => marks.mark(i, line),
            Some(other) => marks.mark_if(i, undefined_at(other, i)),
        }
    }
    marks.finish()
}

/// The flags of a value of `shape` moved as `move_elements` moves its
/// elements (splat, broadcast, trans, extract_tile, reductions as "any").
pub(crate) fn moved(
    flags: &Flags,
    shape: &[usize],
    move_elements: impl FnOnce(&Tensor) -> FaultResult<Data>,
) -> FaultResult<Flags> {
    let Some(undef) = flags else {
        return Ok(None);
    };
    let tile = Tensor::new(shape.to_vec(), Data::Bool(undef.lanes.clone()))?;
    match move_elements(&tile)? {
        Data::Bool(lanes) => Ok(from_lanes(lanes, undef.origin_line)),
        _ => Err(Fault::malformed("flags moved into a non-bool tile")),
    }
}

/// A reduction (sum, max, argmax, ...) along `axis`: a result is undefined
/// when any element of its line is.
pub(crate) fn reduced(flags: &Flags, shape: &[usize], axis: usize) -> FaultResult<Flags> {
    moved(flags, shape, |tile| {
        reduce::reduce(tile, ScalarType::Bool, axis, ReduceKind::Max)
    })
}

/// A scan's (prefix, total): an exclusive prefix is undefined once an earlier
/// element of its line (in scan order) is; a total when any element is.
pub(crate) fn scanned(
    flags: &Flags,
    shape: &[usize],
    axis: usize,
    reverse: bool,
) -> FaultResult<(Flags, Flags)> {
    let Some(undef) = flags else {
        return Ok((None, None));
    };
    // Counting undefined elements with the scan itself keeps the axis walk in one place.
    let counts = Data::Int(undef.lanes.iter().map(|&u| i64::from(u)).collect());
    let tile = Tensor::new(shape.to_vec(), counts)?;
    let (prefix, totals) = reduce::scan_exclusive(
        &tile,
        ScalarType::I64,
        axis,
        reverse,
        crate::ir::BinaryOp::Add,
    )?;
    let positive = |d: Data| match d {
        Data::Int(v) => Ok(from_lanes(
            v.into_iter().map(|c| c > 0).collect(),
            undef.origin_line,
        )),
        _ => Err(Fault::malformed("cumsum of counts is not an integer tile")),
    };
    Ok((positive(prefix)?, positive(totals)?))
}

/// `insert_tile`: the value's flags with the tile's flags written over the slot.
/// `join`'s flags: the operands' interleaved.
pub(crate) fn joined(a: &Flags, b: &Flags, numel: usize) -> FaultResult<Flags> {
    if a.is_none() && b.is_none() {
        return Ok(None);
    }
    let half = numel / 2;
    let lanes_of = |f: &Flags| f.as_ref().map_or(vec![false; half], |u| u.lanes.clone());
    let origin = a.as_ref().or(b.as_ref()).map_or(0, |u| u.origin_line);
    match super::shape::join(&Data::Bool(lanes_of(a)), &Data::Bool(lanes_of(b)))? {
        Data::Bool(lanes) => Ok(from_lanes(lanes, origin)),
        _ => Err(Fault::malformed("flags joined into a non-bool tile")),
    }
}

pub(crate) fn inserted(
    (value, value_shape): (&Flags, &[usize]),
    (tile, tile_shape): (&Flags, &[usize]),
    index: &[usize],
) -> FaultResult<Flags> {
    if value.is_none() && tile.is_none() {
        return Ok(None);
    }
    let as_tile = |flags: &Flags, shape: &[usize]| {
        let numel = shape.iter().product();
        let lanes = flags
            .as_ref()
            .map_or(vec![false; numel], |u| u.lanes.clone());
        Tensor::new(shape.to_vec(), Data::Bool(lanes))
    };
    let origin_line = value
        .as_ref()
        .or(tile.as_ref())
        .map_or(0, |u| u.origin_line);
    let whole = as_tile(value, value_shape)?;
    let patch = as_tile(tile, tile_shape)?;
    match shape::insert_tile(&whole, &patch, index)? {
        Data::Bool(lanes) => Ok(from_lanes(lanes, origin_line)),
        _ => Err(Fault::malformed("flags inserted into a non-bool tile")),
    }
}

/// `acc + a @ b` with `a: [m, k]`, `b: [k, n]`: `c[i][j]` is undefined when
/// `acc[i][j]`, any element of row `i` of `a` or of column `j` of `b` is.
pub(crate) fn dot(
    (a, a_shape): (&Flags, &[usize]),
    (b, b_shape): (&Flags, &[usize]),
    acc: &Flags,
) -> FaultResult<Flags> {
    if a.is_none() && b.is_none() && acc.is_none() {
        return Ok(None);
    }
    let (&[m, k], &[_, n]) = (a_shape, b_shape) else {
        return Err(Fault::malformed("dot of tiles that are not rank 2"));
    };
    let rows: Vec<Option<u32>> = (0..m)
        .map(|i| (0..k).find_map(|kk| undefined_at(a, i * k + kk)))
        .collect();
    let cols: Vec<Option<u32>> = (0..n)
        .map(|j| (0..k).find_map(|kk| undefined_at(b, kk * n + j)))
        .collect();
    let mut marks = Marks::new(m * n);
    for (i, row) in rows.iter().enumerate() {
        for (j, col) in cols.iter().enumerate() {
            marks.mark_if(i * n + j, undefined_at(acc, i * n + j).or(*row).or(*col));
        }
    }
    Ok(marks.finish())
}

/// Reports the first element of `0..numel` that is active (no mask, or its
/// mask lane set) and undefined; `what` names the operand in the message.
pub(crate) fn check_active(
    flags: &Flags,
    numel: usize,
    mask: Option<&[bool]>,
    what: &'static str,
) -> FaultResult<()> {
    if flags.is_none() {
        return Ok(());
    }
    let active = |i: &usize| mask.is_none_or(|m| lane(m, *i));
    match (0..numel)
        .filter(active)
        .find_map(|i| undefined_at(flags, i).map(|origin| (i, origin)))
    {
        Some((element, origin_line)) => Err(Fault::UndefinedUse {
            element,
            what,
            origin_line,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(lanes: &[bool], line: u32) -> Flags {
        from_lanes(lanes.to_vec(), line)
    }

    fn lanes_of(f: &Flags) -> Vec<bool> {
        f.as_ref().map_or(Vec::new(), |u| u.lanes.clone())
    }

    #[test]
    fn loads_without_other_mark_masked_off_lanes() {
        let mask = [true, false, true, false];
        let f = loaded(4, Some(&mask), None, 9);
        assert_eq!(lanes_of(&f), vec![false, true, false, true]);
        assert_eq!(f.as_ref().map(|u| u.origin_line), Some(9));
        assert_eq!(loaded(4, Some(&mask), Some(ALL_DEFINED), 9), None);
        assert_eq!(loaded(4, None, None, 9), None);
        assert_eq!(loaded(4, Some(&[true; 4]), None, 9), None);
        // An undefined `other` shows through the masked-off lanes only.
        let other = flags(&[true, true, false, false], 3);
        let f = loaded(4, Some(&mask), Some(&other), 9);
        assert_eq!(lanes_of(&f), vec![false, true, false, false]);
        assert_eq!(f.as_ref().map(|u| u.origin_line), Some(3));
    }

    #[test]
    fn logical_ops_are_decided_by_a_defined_absorbing_operand() {
        let undef = flags(&[true, true], 4);
        let x = Data::Bool(vec![true, true]);
        let mask = Data::Bool(vec![true, false]);
        let and = binary(BinaryOp::And, (&mask, ALL_DEFINED), (&x, &undef), 2);
        assert_eq!(lanes_of(&and), vec![true, false]);
        let or = binary(BinaryOp::Or, (&mask, ALL_DEFINED), (&x, &undef), 2);
        assert_eq!(lanes_of(&or), vec![false, true]);
        let ints = Data::Int(vec![0, 0]);
        let add = binary(BinaryOp::Add, (&ints, ALL_DEFINED), (&ints, &undef), 2);
        assert_eq!(lanes_of(&add), vec![true, true]);
    }

    #[test]
    fn select_takes_the_picked_operand_or_an_undefined_condition() {
        let t = flags(&[true, false, false], 1);
        let c = flags(&[false, false, true], 2);
        let f = select((&[true, true, false], &c), &t, ALL_DEFINED, 3);
        assert_eq!(lanes_of(&f), vec![true, false, true]);
        assert_eq!(select((&[false], ALL_DEFINED), &t, ALL_DEFINED, 3), None);
    }

    #[test]
    fn reductions_scans_and_dots_spread_over_their_groups() {
        // [[u, d, d], [d, d, d]]
        let f = flags(&[true, false, false, false, false, false], 5);
        let rows = reduced(&f, &[2, 3], 1).expect("well formed");
        assert_eq!(lanes_of(&rows), vec![true, false]);
        let cols = reduced(&f, &[2, 3], 0).expect("well formed");
        assert_eq!(lanes_of(&cols), vec![true, false, false]);
        let (prefix, total) = scanned(&f, &[2, 3], 1, false).expect("well formed");
        assert_eq!(
            lanes_of(&prefix),
            vec![false, true, true, false, false, false]
        );
        assert_eq!(lanes_of(&total), vec![true, false]);
        let (prefix, _) = scanned(&f, &[2, 3], 1, true).expect("well formed");
        assert_eq!(prefix, None);
        // a: [2, 3] with a[0][0] undefined; b: [3, 2] defined.
        let c = dot((&f, &[2, 3]), (ALL_DEFINED, &[3, 2]), ALL_DEFINED).expect("rank 2");
        assert_eq!(lanes_of(&c), vec![true, true, false, false]);
    }

    #[test]
    fn shape_moves_carry_flags_with_their_elements() {
        let col = flags(&[false, true], 7);
        let wide = moved(&col, &[2, 1], |t| shape::broadcast(t, &[2, 3])).expect("fits");
        assert_eq!(lanes_of(&wide), vec![false, false, false, true, true, true]);
        let top =
            moved(&wide, &[2, 3], |t| shape::extract_tile(t, &[1, 3], &[0, 0])).expect("fits");
        assert_eq!(top, None);
        let patch = flags(&[true], 8);
        let f = inserted((ALL_DEFINED, &[2, 2]), (&patch, &[1, 1]), &[0, 1]).expect("fits");
        assert_eq!(lanes_of(&f), vec![false, true, false, false]);
        assert_eq!(f.as_ref().map(|u| u.origin_line), Some(8));
    }

    #[test]
    fn only_active_undefined_elements_are_reported() {
        let f = flags(&[false, true, true], 6);
        assert_eq!(
            check_active(&f, 3, None, "stored value"),
            Err(Fault::UndefinedUse {
                element: 1,
                what: "stored value",
                origin_line: 6
            })
        );
        assert!(check_active(&f, 3, Some(&[true, false, false]), "stored value").is_ok());
        assert!(matches!(
            check_active(&f, 3, Some(&[false, false, true]), "pointer"),
            Err(Fault::UndefinedUse { element: 2, .. })
        ));
        assert!(check_active(ALL_DEFINED, 3, None, "pointer").is_ok());
    }
}

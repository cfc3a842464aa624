//! Ops that move elements without computing on them: splat, broadcast,
//! expand_dims, reshape, trans, and TLE's extract_tile / insert_tile. Each
//! builds an index map once and gathers or scatters with it.

use super::error::{Fault, FaultResult};
use super::value::{strided_indices, strides_of, Data, Tensor};

fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// A one-element tile repeated to `shape`.
pub(crate) fn splat(value: &Tensor, shape: &[usize]) -> FaultResult<Data> {
    if value.numel() != 1 {
        return Err(Fault::malformed("splat of a tile that is not a scalar"));
    }
    Ok(value.data.gather(&vec![0; numel(shape)]))
}

/// Size-1 dimensions of `value` repeated to `shape` (same rank).
pub(crate) fn broadcast(value: &Tensor, shape: &[usize]) -> FaultResult<Data> {
    if value.shape.len() != shape.len() {
        return Err(Fault::malformed("broadcast changes the rank"));
    }
    let src_strides = strides_of(&value.shape);
    let mut strides = Vec::with_capacity(shape.len());
    for (d, (&from, &to)) in value.shape.iter().zip(shape).enumerate() {
        if from == to {
            strides.push(src_strides[d]);
        } else if from == 1 {
            strides.push(0);
        } else {
            return Err(Fault::malformed(format!(
                "broadcast of dimension {d} from {from} to {to}"
            )));
        }
    }
    Ok(value.data.gather(&strided_indices(shape, &strides, 0)))
}

/// The same elements under a new shape of the same size (reshape, expand_dims).
pub(crate) fn reshape(value: &Tensor, shape: &[usize]) -> FaultResult<Data> {
    if numel(shape) != value.numel() {
        return Err(Fault::malformed(format!(
            "reshape of {:?} to {shape:?}",
            value.shape
        )));
    }
    Ok(value.data.clone())
}

/// Dimensions permuted: result dim `i` is operand dim `perm[i]`.
pub(crate) fn trans(value: &Tensor, perm: &[usize]) -> FaultResult<Data> {
    let rank = value.shape.len();
    let mut seen = vec![false; rank];
    for &p in perm {
        if p >= rank || std::mem::replace(&mut seen[p], true) {
            return Err(Fault::malformed(format!("{perm:?} is not a permutation")));
        }
    }
    if perm.len() != rank {
        return Err(Fault::malformed(format!("{perm:?} is not a permutation")));
    }
    let src_strides = strides_of(&value.shape);
    let out_shape: Vec<usize> = perm.iter().map(|&p| value.shape[p]).collect();
    let strides: Vec<usize> = perm.iter().map(|&p| src_strides[p]).collect();
    Ok(value.data.gather(&strided_indices(&out_shape, &strides, 0)))
}

/// Indices (into `whole`) of the tile of shape `tile` at grid coordinates `index`.
fn tile_indices(whole: &[usize], tile: &[usize], index: &[usize]) -> FaultResult<Vec<usize>> {
    if whole.len() != tile.len() || index.len() != tile.len() {
        return Err(Fault::malformed("tile rank differs from the tensor's"));
    }
    let strides = strides_of(whole);
    let mut base = 0;
    for d in 0..whole.len() {
        let fits = tile[d] > 0 && whole[d] % tile[d] == 0 && index[d] < whole[d] / tile[d];
        if !fits {
            return Err(Fault::malformed(format!(
                "tile {tile:?} at {index:?} does not fit in {whole:?}"
            )));
        }
        base += index[d] * tile[d] * strides[d];
    }
    Ok(strided_indices(tile, &strides, base))
}

/// `a` and `b` (same length) interleaved: Triton's `join` along a new last
/// dimension of size 2.
pub(crate) fn join(a: &Data, b: &Data) -> FaultResult<Data> {
    let n = a.len();
    if b.len() != n {
        return Err(Fault::malformed("join of tensors of different sizes"));
    }
    let mut out = a.gather(&(0..2 * n).map(|k| k / 2).collect::<Vec<_>>());
    let odd: Vec<usize> = (0..n).map(|k| 2 * k + 1).collect();
    out.scatter(&odd, b)?;
    Ok(out)
}

/// Half `which` (0 or 1) of a tensor whose last dimension has size 2.
pub(crate) fn split_half(value: &Tensor, which: usize) -> FaultResult<Data> {
    if value.shape.last() != Some(&2) {
        return Err(Fault::malformed(
            "split of a tensor whose last dimension is not 2",
        ));
    }
    let n = value.data.len() / 2;
    Ok(value
        .data
        .gather(&(0..n).map(|k| 2 * k + which).collect::<Vec<_>>()))
}

/// The tile of shape `tile_shape` at grid coordinates `index`.
pub(crate) fn extract_tile(
    value: &Tensor,
    tile_shape: &[usize],
    index: &[usize],
) -> FaultResult<Data> {
    let indices = tile_indices(&value.shape, tile_shape, index)?;
    Ok(value.data.gather(&indices))
}

/// `value` with the tile at grid coordinates `index` replaced by `tile`.
pub(crate) fn insert_tile(value: &Tensor, tile: &Tensor, index: &[usize]) -> FaultResult<Data> {
    let indices = tile_indices(&value.shape, &tile.shape, index)?;
    let mut out = value.data.clone();
    out.scatter(&indices, &tile.data)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tile(shape: Vec<usize>) -> Tensor {
        let n = shape.iter().product::<usize>() as i64;
        Tensor {
            shape,
            data: Data::Int((0..n).collect()),
        }
    }

    #[test]
    fn broadcast_repeats_size_one_dims() {
        let row = tile(vec![1, 3]);
        assert_eq!(
            broadcast(&row, &[2, 3]),
            Ok(Data::Int(vec![0, 1, 2, 0, 1, 2]))
        );
        let col = tile(vec![2, 1]);
        assert_eq!(
            broadcast(&col, &[2, 3]),
            Ok(Data::Int(vec![0, 0, 0, 1, 1, 1]))
        );
        assert!(broadcast(&tile(vec![2, 2]), &[2, 3]).is_err());
        let s = Tensor {
            shape: vec![],
            data: Data::Int(vec![7]),
        };
        assert_eq!(splat(&s, &[2, 2]), Ok(Data::Int(vec![7; 4])));
    }

    #[test]
    fn trans_permutes_dims() {
        let t = tile(vec![2, 3]);
        assert_eq!(trans(&t, &[1, 0]), Ok(Data::Int(vec![0, 3, 1, 4, 2, 5])));
        let c = tile(vec![2, 3, 4]);
        let Ok(Data::Int(v)) = trans(&c, &[2, 0, 1]) else {
            panic!("trans failed")
        };
        // out[k][i][j] = in[i][j][k]; out[1][1][2] is at 6 + 3 + 2, in[1][2][1] at 12 + 8 + 1.
        assert_eq!(v[6 + 3 + 2], 12 + 8 + 1);
        assert!(trans(&t, &[0, 0]).is_err());
        assert!(reshape(&t, &[3, 2]).is_ok() && reshape(&t, &[4]).is_err());
    }

    #[test]
    fn tiles_extract_and_insert() {
        let t = tile(vec![4, 4]);
        assert_eq!(
            extract_tile(&t, &[2, 2], &[1, 0]),
            Ok(Data::Int(vec![8, 9, 12, 13]))
        );
        let patch = Tensor {
            shape: vec![2, 2],
            data: Data::Int(vec![-1; 4]),
        };
        let Ok(Data::Int(v)) = insert_tile(&t, &patch, &[0, 1]) else {
            panic!("insert failed")
        };
        assert_eq!(&v[0..8], &[0, 1, -1, -1, 4, 5, -1, -1]);
        assert!(extract_tile(&t, &[2, 2], &[2, 0]).is_err());
        assert!(extract_tile(&t, &[3, 2], &[0, 0]).is_err());
    }
}

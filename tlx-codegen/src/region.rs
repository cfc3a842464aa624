//! Where a tile sits in a shared region: its first byte, how its elements
//! are placed there and their size. `convert.rs` stores and loads through
//! it; the `Lowerer` keys its per-thread shared pointers by it. A leaf.

/// Where a tile's elements sit in a shared region: the tile's rows of `cols`
/// elements are stored `stride` elements apart, or, when `transpose`, its
/// columns are (column `c` becomes stored row `c`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Placement {
    pub cols: usize,
    pub stride: usize,
    pub transpose: bool,
}

impl Placement {
    /// Dense and row-major: an element's slot is its flat index.
    pub const FLAT: Placement = Placement {
        cols: 1,
        stride: 1,
        transpose: false,
    };

    /// The slot of the element at flat index `flat`. Additive over flat
    /// indices with disjoint bits (shifts and masks split such indices into
    /// disjoint parts, and the rest is linear), which is what lets a register's
    /// slot be a thread's slot plus a constant.
    pub fn slot(self, flat: u32) -> u32 {
        let row = flat >> self.cols.trailing_zeros();
        let col = flat & (self.cols as u32 - 1);
        let (outer, inner) = if self.transpose {
            (col, row)
        } else {
            (row, col)
        };
        outer * self.stride as u32 + inner
    }

    /// [`Placement::slot`] of the run-time flat index `flat`, each instruction
    /// built by `inst`.
    pub fn emit_slot(self, flat: &str, mut inst: impl FnMut(String) -> String) -> String {
        if self == Placement::FLAT {
            return flat.to_string();
        }
        let row = inst(format!("lshr i32 {flat}, {}", self.cols.trailing_zeros()));
        let col = inst(format!("and i32 {flat}, {}", self.cols - 1));
        let (outer, inner) = if self.transpose {
            (col, row)
        } else {
            (row, col)
        };
        let start = inst(format!("mul i32 {outer}, {}", self.stride));
        inst(format!("add i32 {start}, {inner}"))
    }
}

/// The shared region a tile is stored in: its first byte, how its elements
/// are placed, and their size.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Region {
    pub base: usize,
    pub placement: Placement,
    pub elem_bytes: usize,
}

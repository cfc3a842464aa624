//! The launch grid: how many programs (CTAs) run, along up to three axes.

use crate::Error;

/// Programs along x, y and z. Build it from `n`, `(x, y)` or `(x, y, z)`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Grid {
    /// Programs along x.
    pub x: u32,
    /// Programs along y.
    pub y: u32,
    /// Programs along z.
    pub z: u32,
}

/// The largest grid every GPU since compute capability 3.0 accepts; the CPU
/// interpreter enforces the same so that code behaves the same on both.
pub const MAX_GRID: [u32; 3] = [i32::MAX as u32, 65535, 65535];

impl Grid {
    /// `x` by `y` by `z` programs.
    pub fn new(x: u32, y: u32, z: u32) -> Grid {
        Grid { x, y, z }
    }

    /// Programs along x, y and z.
    pub fn dims(&self) -> [u32; 3] {
        [self.x, self.y, self.z]
    }

    /// Total number of programs.
    pub fn programs(&self) -> u64 {
        self.dims().iter().map(|&d| u64::from(d)).product()
    }

    /// Every axis at least 1 and within [`MAX_GRID`].
    pub fn validate(&self) -> Result<(), Error> {
        let dims = self.dims();
        let invalid = |reason: String| Error::InvalidGrid {
            grid: dims.map(u64::from),
            reason,
        };
        for (axis, (&d, &max)) in ["x", "y", "z"].iter().zip(dims.iter().zip(&MAX_GRID)) {
            if d == 0 {
                return Err(invalid(format!(
                    "{axis} is 0; every axis needs at least one program"
                )));
            }
            if d > max {
                return Err(invalid(format!("{axis} is {d}, beyond the limit {max}")));
            }
        }
        Ok(())
    }
}

impl From<u32> for Grid {
    fn from(x: u32) -> Grid {
        Grid::new(x, 1, 1)
    }
}

impl From<(u32, u32)> for Grid {
    fn from((x, y): (u32, u32)) -> Grid {
        Grid::new(x, y, 1)
    }
}

impl From<(u32, u32, u32)> for Grid {
    fn from((x, y, z): (u32, u32, u32)) -> Grid {
        Grid::new(x, y, z)
    }
}

fn one_axis(x: i128) -> Result<Grid, Error> {
    match u32::try_from(x) {
        Ok(x) => Ok(Grid::from(x)),
        Err(_) => Err(Error::InvalidGrid {
            grid: [x.clamp(0, i128::from(u64::MAX)) as u64, 1, 1],
            reason: format!("{x} programs do not fit a grid axis"),
        }),
    }
}

impl TryFrom<usize> for Grid {
    type Error = Error;
    fn try_from(x: usize) -> Result<Grid, Error> {
        one_axis(x as i128)
    }
}

impl TryFrom<i32> for Grid {
    type Error = Error;
    fn try_from(x: i32) -> Result<Grid, Error> {
        one_axis(i128::from(x))
    }
}

impl TryFrom<i64> for Grid {
    type Error = Error;
    fn try_from(x: i64) -> Result<Grid, Error> {
        one_axis(i128::from(x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions() {
        assert_eq!(Grid::from(7u32), Grid::new(7, 1, 1));
        assert_eq!(Grid::from((7u32, 3u32)), Grid::new(7, 3, 1));
        assert_eq!(Grid::from((7u32, 3u32, 2u32)).programs(), 42);
        assert_eq!(
            Grid::try_from(5usize).map(|g| g.dims()).ok(),
            Some([5, 1, 1])
        );
        assert_eq!(Grid::try_from(5i32).map(|g| g.x).ok(), Some(5));
        assert!(matches!(
            Grid::try_from(-1i32),
            Err(Error::InvalidGrid { .. })
        ));
        assert!(matches!(
            Grid::try_from(1i64 << 40),
            Err(Error::InvalidGrid { .. })
        ));
        assert!(Grid::try_from(usize::MAX).is_err());
    }

    #[test]
    fn validation_rejects_empty_and_oversized_grids() {
        assert!(Grid::new(1, 1, 1).validate().is_ok());
        assert!(Grid::new(MAX_GRID[0], 65535, 65535).validate().is_ok());
        let zero = Grid::new(4, 0, 1).validate().map_err(|e| e.to_string());
        assert!(
            zero.as_ref().is_err_and(|m| m.contains("y is 0")),
            "{zero:?}"
        );
        assert!(Grid::new(1 << 31, 1, 1).validate().is_err());
        assert!(Grid::new(1, 1, 65536).validate().is_err());
    }
}

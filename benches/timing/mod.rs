//! What the benches share to time a launch: the median of repeated runs,
//! measured with the device's events.

use tlx::prelude::*;

/// Median milliseconds of `f` over `reps` runs after two warm-up runs.
pub fn median_ms(
    dev: &Device,
    reps: usize,
    mut f: impl FnMut() -> Result<(), Error>,
) -> Result<f64, Error> {
    f()?;
    f()?;
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        times.push(dev.time(&mut f)? as f64);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[reps / 2])
}

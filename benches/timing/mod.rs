//! How the benches time a launch: as the reference scripts time theirs
//! (`scripts/attention_anchors.py`, `scripts/triton_gemm_anchor.py`:
//! `do_bench(fn, warmup=25, rep=200)`), so that a ratio compares kernels
//! rather than timing procedures (docs/bench-log/2026-11.md, session 30).

use tlx::prelude::*;
use tlx::BenchSpec;

/// `do_bench`'s 25 ms of warm-up and 200 ms of timed runs.
const TIMING: BenchSpec = BenchSpec {
    warmup_ms: 25.0,
    rep_ms: 200.0,
};

/// Median milliseconds of the work `f` queues, timed by [`Device::bench`].
pub fn median_ms(dev: &Device, f: impl FnMut() -> Result<(), Error>) -> Result<f64, Error> {
    dev.bench(TIMING, f).map(f64::from)
}

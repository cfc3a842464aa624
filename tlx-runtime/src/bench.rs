//! Timing a launch the way the reference numbers are timed: the procedure
//! of Triton's `triton.testing.do_bench`, which the anchors' cuDNN, cuBLAS
//! and torch numbers come from, so that a ratio compares kernels rather
//! than timing procedures (under the power cap the two procedures differ by
//! several percent: docs/bench-log/2026-11.md, session 29).

use crate::{Device, Error};

/// Runs that estimate a function's time before the warm-up.
const ESTIMATE_RUNS: usize = 5;

/// The most timed (or warm-up) runs, whatever the estimate: a bound on the
/// events held at once for functions far shorter than the budget.
const MAX_RUNS: usize = 10_000;

/// How long [`Device::bench`] warms up and then times, in milliseconds of
/// the function's estimated run time (`do_bench`'s `warmup` and `rep`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BenchSpec {
    /// Milliseconds of untimed runs after the estimate.
    pub warmup_ms: f32,
    /// Milliseconds of timed runs.
    pub rep_ms: f32,
}

impl Default for BenchSpec {
    /// `do_bench`'s defaults: 25 ms of warm-up, 100 ms of timed runs.
    fn default() -> Self {
        BenchSpec {
            warmup_ms: 25.0,
            rep_ms: 100.0,
        }
    }
}

impl BenchSpec {
    /// Warm-up and timed runs for a function estimated at `estimate_ms` a
    /// run: each budget over the estimate, rounded down, at least one.
    fn runs(&self, estimate_ms: f32) -> (usize, usize) {
        // `as` saturates: an estimate of 0 gives the most runs.
        let runs = |budget: f32| ((budget / estimate_ms) as usize).clamp(1, MAX_RUNS);
        (runs(self.warmup_ms), runs(self.rep_ms))
    }
}

impl Device {
    /// The median time in milliseconds of the work `f` queues, timed as
    /// `do_bench` times a function: one run, then five with the L2 cache
    /// flushed before each to estimate a run's time, warm-up runs for
    /// `spec.warmup_ms`, then runs for `spec.rep_ms`, each after an L2
    /// flush and between two events of its own; the timed runs are queued
    /// back to back and read once at the end. Of an even count, the lower
    /// middle time (as `torch.median` takes it). On the CPU interpreter:
    /// wall time, the same runs.
    pub fn bench(
        &self,
        spec: BenchSpec,
        f: impl FnMut() -> Result<(), Error>,
    ) -> Result<f32, Error> {
        self.bench_with_setup(spec, || Ok(()), f)
    }

    /// [`Device::bench`] with `setup` queued before every run of `f`,
    /// outside the timed events (and, in the estimate, before its L2
    /// flush): for work that must be undone between runs, such as a kernel
    /// that accumulates into its output. The estimate then includes the
    /// setup's time, which only shortens the warm-up and the timed runs.
    pub fn bench_with_setup(
        &self,
        spec: BenchSpec,
        mut setup: impl FnMut() -> Result<(), Error>,
        mut f: impl FnMut() -> Result<(), Error>,
    ) -> Result<f32, Error> {
        setup()?;
        f()?;
        self.synchronize()?;
        let start = self.mark()?;
        for _ in 0..ESTIMATE_RUNS {
            setup()?;
            self.flush_l2()?;
            f()?;
        }
        let end = self.mark()?;
        let estimate = self.elapsed_ms(&start, &end)? / ESTIMATE_RUNS as f32;
        let (warmup, repeat) = spec.runs(estimate);
        for _ in 0..warmup {
            setup()?;
            f()?;
        }
        let mut marks = Vec::with_capacity(repeat);
        for _ in 0..repeat {
            setup()?;
            self.flush_l2()?;
            let start = self.mark()?;
            f()?;
            marks.push((start, self.mark()?));
        }
        self.synchronize()?;
        let mut times = marks
            .iter()
            .map(|(start, end)| self.elapsed_ms(start, end))
            .collect::<Result<Vec<f32>, Error>>()?;
        times.sort_by(f32::total_cmp);
        Ok(times[(times.len() - 1) / 2])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Budgets for the tests' 2 ms functions on the CPU device.
    const SHORT: BenchSpec = BenchSpec {
        warmup_ms: 4.0,
        rep_ms: 10.0,
    };

    #[test]
    fn runs_follow_the_budgets_over_the_estimate() {
        let spec = BenchSpec {
            warmup_ms: 25.0,
            rep_ms: 200.0,
        };
        assert_eq!(spec.runs(10.0), (2, 20));
        assert_eq!(spec.runs(30.0), (1, 6));
        // Longer than either budget: one of each.
        assert_eq!(spec.runs(500.0), (1, 1));
        // Shorter than measurable: bounded.
        assert_eq!(spec.runs(0.0), (MAX_RUNS, MAX_RUNS));
        assert_eq!(spec.runs(1e-9), (MAX_RUNS, MAX_RUNS));
    }

    #[test]
    fn bench_runs_the_function_as_do_bench_does_and_returns_its_median() {
        let device = Device::cpu();
        let mut calls = 0;
        let ms = device
            .bench(SHORT, || {
                calls += 1;
                std::thread::sleep(std::time::Duration::from_millis(2));
                Ok(())
            })
            .expect("the CPU device times");
        assert!((2.0..50.0).contains(&ms), "{ms} ms");
        // One first run, five to estimate, then at least one warm-up run and
        // at most five timed ones (the estimate is 2 ms or more).
        assert!((8..=12).contains(&calls), "{calls} calls");
    }

    #[test]
    fn setup_runs_once_before_every_run_of_the_function() {
        use std::cell::Cell;
        let device = Device::cpu();
        let (set_up, runs, out_of_order) = (Cell::new(false), Cell::new(0), Cell::new(0));
        device
            .bench_with_setup(
                SHORT,
                || {
                    // A second setup without a run between.
                    if set_up.replace(true) {
                        out_of_order.set(out_of_order.get() + 1);
                    }
                    Ok(())
                },
                || {
                    // A run without its setup.
                    if !set_up.replace(false) {
                        out_of_order.set(out_of_order.get() + 1);
                    }
                    runs.set(runs.get() + 1);
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    Ok(())
                },
            )
            .expect("the CPU device times");
        assert_eq!(out_of_order.get(), 0);
        assert!((8..=12).contains(&runs.get()), "{} runs", runs.get());
    }

    #[test]
    fn a_failing_function_fails_the_bench() {
        let device = Device::cpu();
        let mut calls = 0;
        let result = device.bench(BenchSpec::default(), || {
            calls += 1;
            if calls > 3 {
                Err(Error::NeedsGpu("a test"))
            } else {
                Ok(())
            }
        });
        assert!(matches!(result, Err(Error::NeedsGpu(_))));
    }
}
